"""`cattn info`: version, compiler, OpenMP, kernel path, block sizes and threads
(cattn.show_config)."""


def add_command(sub):
    p = sub.add_parser("info", help="print version, compiler, OpenMP, kernel path, "
                                    "block sizes and threads")
    p.set_defaults(func=command)


def command(args):
    import cattn
    cattn.show_config()
    return 0
