"""Print per benchmark group the medians and the ratios cattn vs torch and
vs NumPy from a pytest-benchmark JSON file (bench_attention.py).

    python3 benchmarks/attention_report.py /tmp/attn.json

Ratios are other / cattn median time: > 1 means cattn is faster. The
"min" ratios use each library's fastest round, less sensitive to another
process taking a core for a while on a shared machine; iqr/med is the
largest interquartile range / median of the group (> 0.1: noisy).
"""
import json
import sys
from collections import OrderedDict


def load(path):
    with open(path) as f:
        data = json.load(f)
    groups = OrderedDict()
    for b in data["benchmarks"]:
        lib = b.get("extra_info", {}).get("lib") or b["name"]
        groups.setdefault(b["group"], {})[lib] = b
    return data, groups


def ms(b):
    return b["stats"]["median"] * 1e3


def main(path):
    data, groups = load(path)
    m = data.get("machine_info", {})
    print(f"# {m.get('cpu', {}).get('brand_raw', '?')}, {data.get('datetime', '')}")
    bw = groups.get("read bandwidth", {}).get("numpy.dot")
    hdr = (f"{'group':42s} {'cattn ms':>9s} {'torch ms':>9s} {'numpy ms':>9s} "
           f"{'torch/cattn':>11s} {'numpy/cattn':>11s} {'min t/c':>7s} {'min n/c':>7s} "
           f"{'cattn':>13s} {'torch':>13s} {'iqr/med':>7s}")
    print(hdr)
    print("-" * len(hdr))
    for group, libs in groups.items():
        if group.startswith("peak memory") or group == "read bandwidth":
            continue
        c, t, n = libs.get("cattn"), libs.get("torch"), libs.get("numpy")
        cell = lambda b: f"{ms(b):9.3f}" if b else f"{'-':>9s}"              # noqa: E731
        ratio = lambda b: f"{ms(b) / ms(c):11.2f}" if b and c else f"{'-':>11s}"  # noqa: E731
        mn = lambda b: (f"{b['stats']['min'] / c['stats']['min']:7.2f}"            # noqa: E731
                        if b and c else f"{'-':>7s}")

        def rate(b):
            if not b:
                return f"{'-':>13s}"
            ei = b["extra_info"]
            if "GBps" in ei:
                return f"{ei['GBps']:7.1f} GB/s"
            return f"{ei.get('gflops', 0):6.1f} GF/s"
        noise = max((b["stats"]["iqr"] / b["stats"]["median"] for b in (c, t, n) if b), default=0)
        print(f"{group:42s} {cell(c)} {cell(t)} {cell(n)} {ratio(t)} {ratio(n)} {mn(t)} {mn(n)} "
              f"{rate(c)} {rate(t)} {noise:7.2f}")
    if bw:
        print(f"\nmachine read bandwidth (numpy.dot, 2 x 256 MiB): {bw['extra_info']['GBps']:.1f} GB/s")
    for group, libs in groups.items():
        if group.startswith("peak memory"):
            print(f"\n{group}: RSS growth beyond inputs and output")
            for lib, b in libs.items():
                print(f"  {lib:8s} {b['extra_info'].get('peak_growth_MiB', float('nan')):8.1f} MiB")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
