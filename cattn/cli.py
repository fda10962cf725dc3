"""cattn's command line: `cattn info`, `cattn bench`, `cattn demo`, and the sentence-encoder
commands `cattn embed | similarity | attention` (cattn/models/cli_models.py); also
`python -m cattn ...`."""
import argparse
import os
import sys

import numpy as np


def _info(args):
    import cattn
    cattn.show_config()
    return 0


def _bench(args):
    import cattn
    from . import _bench

    threads = args.threads if args.threads is not None else cattn.get_num_threads()
    if args.quick:
        timing = dict(warmup=0.15, runs=3, min_run=0.01)
    else:
        timing = dict(warmup=0.3, runs=9, min_run=0.05)
    if args.tiny:
        timing = dict(warmup=0.0, runs=1, min_run=0.0)
    print(f"cattn {cattn.__version__} bench: {args.dtype}, {threads} thread(s), "
          f"kernel path {cattn._ext.kernel_path()}; GFLOP/s, median of {timing['runs']} "
          f"run(s) after {timing['warmup']} s warm-up per library; ratio > 1: cattn faster")
    note = _bench.openblas_env_note()
    if note:
        print(note)
    rows = _bench.run(threads, np.dtype(args.dtype), tiny=args.tiny,
                      use_torch=not args.no_torch, **timing)
    _bench.format_table(rows)
    return 0 if all(r["agree"] for r in rows) else 1


def _demo(args):
    from . import demo
    demo.run(file=sys.stdout)
    return 0


def _threads_arg(s):
    from ._threads import MAX_THREADS
    n = int(s)
    if not 1 <= n <= MAX_THREADS:
        raise argparse.ArgumentTypeError(f"threads must be in 1..{MAX_THREADS}, got {n}")
    return n


def build_parser():
    p = argparse.ArgumentParser(prog="cattn", description="cattn: a CPU attention engine")
    sub = p.add_subparsers(dest="command",
                           metavar="{info,bench,demo,embed,similarity,attention}")
    sub.required = True
    pi = sub.add_parser("info", help="print version, compiler, OpenMP, kernel path, "
                                     "block sizes and threads")
    pi.set_defaults(func=_info)
    pb = sub.add_parser("bench", help="time cattn against NumPy (and torch) side by side")
    pb.add_argument("--threads", type=_threads_arg, default=None,
                    help="threads for every library (default: cattn.get_num_threads())")
    pb.add_argument("--quick", action="store_true",
                    help="shorter warm-up and fewer runs (a few seconds; noisier)")
    pb.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    pb.add_argument("--no-torch", action="store_true", help="skip torch even if installed")
    pb.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests only
    pb.set_defaults(func=_bench)
    pd = sub.add_parser("demo", help="the textbook self-attention example, step by step")
    pd.set_defaults(func=_demo)
    from .models.cli_models import add_commands
    add_commands(sub)
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
