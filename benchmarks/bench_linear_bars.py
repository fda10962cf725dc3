"""Issue 12's `linear` bars in alternating rounds (a script, not a pytest suite).

    python benchmarks/bench_linear_bars.py [--rounds 7] [--json PATH]

bench_matmul.py's linear suites time each library as one block after the
other's; on a shared host a slow phase then lands on one side of a ratio
(the seventh session saw the same call take 79 ms and 137 ms within the
hour). Here every round times each case's rows back to back, in alternating
order, and a bar is the median over rounds of the per-round ratio (min and
max printed beside it):

- int8 at 4096 and 8 rows: torch's dynamic int8 Linear time / cattn int8
  time (bars 0.9 and 1.0; needs torch);
- float32 8 rows with the weights from memory: cattn (packed) GB/s as a
  percentage of the read bandwidth measured in the same round (numpy.dot of
  two 256 MiB vectors; bar 80%).

Rows, inputs and weight rotation are bench_matmul.py's (`_linear_fn`), and
results are checked the same way (not timed). Legend: M rows, K inputs, N
outputs; shapes (K, N) = 384->1536, 1536->384, 768->3072.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_matmul import (LINEAR_SHAPES, ROTATE_BYTES, _check_linear,  # noqa: E402
                          _linear_fn, _linear_inputs)
from conftest import THREADS, machine_summary, thread_limit, time_block, warm_up  # noqa: E402

BARS = {"int8 4096 rows": 0.9, "int8 8 rows": 1.0, "float32 8 rows from memory": 80.0}


def cases(have_torch):
    """(bar group, label, {row name: (fn, bytes)}) for every case."""
    out = []
    if have_torch:
        for M in (4096, 8):
            for K, N in LINEAR_SHAPES:
                x, w, b = _linear_inputs(M, K, N)
                rows = {}
                for lib, variant in (("cattn", "int8"), ("torch", "int8")):
                    fn, fmt, _ = _linear_fn(lib, variant, x, w, b)
                    _check_linear(fn(), x, w, b, fmt)
                    rows[lib] = (fn, None)
                out.append((f"int8 {M} rows", f"{K}->{N}", rows))
    for K, N in LINEAR_SHAPES:
        x, w, b = _linear_inputs(8, K, N)
        fn, fmt, wbytes = _linear_fn("cattn", "packed", x, w, b, rotate_bytes=ROTATE_BYTES)
        _check_linear(fn(), x, w, b, fmt)
        out.append(("float32 8 rows from memory", f"{K}->{N}",
                    {"cattn (packed)": (fn, wbytes + 4.0 * 8 * (K + N))}))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--block", type=float, default=0.4, help="seconds per row per round")
    ap.add_argument("--threads", type=int, default=THREADS)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
        print("torch is not installed: the int8 bars are not run")
    machine = machine_summary()
    print(f"{machine['cpu_model']}; {args.threads} threads; {args.rounds} rounds; "
          f"load average {os.getloadavg()}", flush=True)
    vec = np.ones(64 << 20, np.float32), np.ones(64 << 20, np.float32)
    ratios = {}
    with thread_limit(args.threads):
        todo = cases(have_torch)
        for r in range(args.rounds):
            bw_t = time_block(lambda: np.dot(*vec), 0.2, 3)
            bw = 2 * vec[0].nbytes / bw_t / 1e9
            for group, label, rows in todo:
                names = list(rows) if r % 2 == 0 else list(rows)[::-1]
                t = {}
                for name in names:
                    fn = rows[name][0]
                    warm_up(fn)
                    t[name] = time_block(fn, args.block, 5)
                if group.startswith("int8"):
                    v = t["torch"] / t["cattn"]
                else:
                    v = 100.0 * rows["cattn (packed)"][1] / t["cattn (packed)"] / 1e9 / bw
                ratios.setdefault((group, label), []).append(v)
            print(f"  round {r + 1}: read bandwidth {bw:.1f} GB/s; " + ", ".join(
                f"{g} {lab} {v[-1]:.2f}" for (g, lab), v in ratios.items()), flush=True)
    print(f"\n{machine['cpu_model']}, {args.threads} threads, {time.strftime('%Y-%m-%d %H:%M')}, "
          f"{args.rounds} alternating rounds; load average at the end {os.getloadavg()}\n")
    print("| bar | case | median of rounds | min - max | bar | |")
    print("|---|---|---|---|---|---|")
    res = []
    for (group, label), v in ratios.items():
        med, bar = statistics.median(v), BARS[group]
        unit = "%" if group.startswith("float32") else "x"
        what = ("% of read BW" if unit == "%" else "torch int8 time / cattn int8 time")
        print(f"| {group} ({what}) | {label} | {med:.2f}{unit} | {min(v):.2f} - {max(v):.2f} | "
              f"{bar:g}{unit} | {'ok' if med >= bar else 'MISSED'} |")
        res.append(dict(group=group, case=label, rounds=v, median=med, bar=bar))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(machine_info=machine, threads=args.threads, results=res), f, indent=1)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
