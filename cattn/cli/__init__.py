"""cattn's command line (`cattn ...` and `python -m cattn ...`): `main`, the
subcommand table and the one `--threads` option. One module per concern:

    info.py     cattn info        version, compiler, OpenMP, kernel path, block sizes
    bench.py    cattn bench       cattn vs NumPy (and torch) side by side
    demo.py     cattn demo        the textbook self-attention example (cattn/demo.py)
    models.py   cattn embed | similarity | attention   the sentence encoder
    generate.py cattn generate    a decoder LLM continues a prompt (streamed)
    chat.py     cattn chat        an interactive chat with a decoder LLM (streamed)
    serve.py    cattn serve       the OpenAI-compatible HTTP server (cattn.server)
    distributed.py   cattn embed --workers N | --scheduler ADDR   (cattn.distributed, Dask)

Each module has `add_command(sub)` (models.py: `add_commands`) that
registers its subcommand(s) on argparse's subparsers.
"""
import argparse
import os
import sys

# the subcommands in the order `cattn --help` lists them
COMMANDS = ("info", "bench", "demo", "embed", "similarity", "attention", "generate", "chat", "serve")


def threads_arg(s):
    """argparse type of every --threads option: an int in 1..MAX_THREADS."""
    from .._threads import MAX_THREADS
    try:
        n = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"threads must be an integer, got {s!r}") from None
    if not 1 <= n <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"threads must be in 1..{MAX_THREADS}, got {n}")
    return n


def add_threads_option(p, default_help="cattn.get_num_threads()", what="cattn threads"):
    p.add_argument("--threads", type=threads_arg, default=None,
                   help=f"{what} (default: {default_help})")


def build_parser():
    from . import bench, chat, demo, generate, info, models, serve
    p = argparse.ArgumentParser(prog="cattn", description="cattn: a CPU attention engine")
    sub = p.add_subparsers(dest="command", metavar="{" + ",".join(COMMANDS) + "}")
    sub.required = True
    info.add_command(sub)
    bench.add_command(sub)
    demo.add_command(sub)
    models.add_commands(sub)
    generate.add_command(sub)
    chat.add_command(sub)
    serve.add_command(sub)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:     # `cattn info | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
