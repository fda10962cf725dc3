"""`cattn demo`: the textbook self-attention example, step by step
(cattn/demo.py computes and prints it)."""
import sys


def add_command(sub):
    p = sub.add_parser("demo", help="the textbook self-attention example, step by step")
    p.set_defaults(func=command)


def command(args):
    from .. import demo
    demo.run(file=sys.stdout)
    return 0
