"""Per-group summary of a pytest-benchmark JSON file: each library's median
time and GFLOP/s, and cattn's speed relative to NumPy and torch measured in
the same run (ratio = other's median / cattn's median; > 1: cattn faster).
"IQR %" is the largest interquartile range / median among the group's
libraries: a large value means the machine was busy, distrust that row.
With CATTN_BENCH_PASSES > 1 each library's best pass is used.

    pytest benchmarks/ --benchmark-json=bench.json
    python benchmarks/report.py bench.json [--markdown]
"""
import argparse
import json
import sys

LIBS = ("cattn", "numpy", "torch")


def load(path, stat="median"):
    """{group: {"flops": f, lib: seconds, "spread": IQR/median}}; with several
    passes, each library's best pass (and that pass's spread) is kept."""
    with open(path) as f:
        data = json.load(f)
    best = {}
    for b in data["benchmarks"]:
        info = b.get("extra_info", {})
        lib = info.get("lib") or b.get("params", {}).get("lib")
        key = (b["group"], lib)
        if key not in best or b["stats"][stat] < best[key][1]["stats"][stat]:
            best[key] = (info.get("flops"), b)
    groups = {}
    for (group, lib), (flops, b) in best.items():
        g = groups.setdefault(group, {"flops": flops, "spread": 0.0})
        st = b["stats"]
        g[lib] = st[stat]
        g["spread"] = max(g["spread"], st["iqr"] / st["median"] if st["median"] else 0.0)
    return data.get("machine_info", {}), groups


def rows(groups):
    for name, g in groups.items():
        c = g.get("cattn")
        def gf(lib):
            return g["flops"] / g[lib] / 1e9 if g.get(lib) and g.get("flops") else None
        yield [name,
               *[g.get(lib) * 1e3 if g.get(lib) else None for lib in LIBS],
               *[gf(lib) for lib in LIBS],
               g["numpy"] / c if c and g.get("numpy") else None,
               g["torch"] / c if c and g.get("torch") else None,
               100 * g["spread"]]


HEAD = ["group", "cattn ms", "numpy ms", "torch ms", "cattn GF/s", "numpy GF/s",
        "torch GF/s", "vs numpy", "vs torch", "IQR %"]


def fmt(v, prec):
    return "-" if v is None else f"{v:.{prec}f}"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--stat", choices=["median", "min", "mean"], default="median",
                   help="which per-library statistic to compare (default: median)")
    args = p.parse_args(argv)
    machine, groups = load(args.json, args.stat)
    table = [[r[0]] + [fmt(v, 3) for v in r[1:4]] + [fmt(v, 1) for v in r[4:7]]
             + [fmt(v, 2) for v in r[7:9]] + [fmt(r[9], 0)] for r in rows(groups)]
    if machine:
        print(f"# {machine.get('cpu', {}).get('brand_raw', '')} "
              f"python {machine.get('python_version', '')}; {args.stat}s; "
              f"vs X = X's {args.stat} / cattn's {args.stat} (> 1: cattn faster)")
    if args.markdown:
        print("| " + " | ".join(HEAD) + " |")
        print("|" + "---|" * len(HEAD))
        for r in table:
            print("| " + " | ".join(r) + " |")
    else:
        w = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(HEAD)]
        print("  ".join(h.rjust(w[i]) if i else h.ljust(w[i]) for i, h in enumerate(HEAD)))
        for r in table:
            print("  ".join(v.rjust(w[i]) if i else v.ljust(w[i]) for i, v in enumerate(r)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
