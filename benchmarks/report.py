"""Per-group summary of the benchmark suites' JSON: for each group, each
library's median time, its GFLOP/s, GB/s or items/s where the benchmark
recorded `flops`, `bytes` or `items` (conftest.py's extra_info schema), and
the ratio of every peer to cattn measured in the same run (peer's median /
cattn's median: > 1 = cattn faster). "IQR %" is that library's interquartile
range / median: a large value means the machine was busy, distrust the row.
Peak-memory rows show the growth in MiB instead of a time. With
CATTN_BENCH_PASSES > 1 each library's best pass is kept.

Where a group holds a read-bandwidth row (extra_info read_bw, bench_matmul's
weights-from-memory groups), every row's GB/s is also shown as a percentage
of that row's ("% read BW"). Rows recording min_cosine / median_cosine
(bench_formats.py) show them. Suites whose rows record a weight `format`
(bench_matmul's linear groups, bench_formats.py) get a second table: each
cattn row's ratio to every other row of its group (column's time / row's
time; > 1: that cattn row is faster), e.g. cattn (int8) against torch (int8)
and against NumPy float32 side by side.

    pytest benchmarks/ --benchmark-json=bench.json
    python benchmarks/report.py bench.json [more.json ...] [--markdown] [--stat min]

Reads every suite's pytest-benchmark JSON (bench_matmul, bench_rows,
bench_attention, bench_nn, bench_models, bench_formats, bench_llm), the
`bench_models.py --json` and `bench_formats.py --json` files,
and the results/ files written before the schema was shared (extra_info
`library`, `gflops`, `GFLOP/s`, `GBps`, `GB/s`, `peak_growth_MiB`).
"""
import argparse
import json
import os
import sys

# library labels of files written before conftest.py's schema -> (lib, variant)
LEGACY_LIBS = {"cattn fused": ("cattn", None), "cattn linear, then gelu": ("cattn", "unfused"),
               "torch linear, then gelu": ("torch", None), "numpy.dot": ("numpy", None)}
RATES = (("flops", ("gflops", "GFLOP/s"), "GFLOP/s", 1e9),   # key, legacy rate keys, column, unit
         ("bytes", ("GBps", "GB/s"), "GB/s", 1e9),
         ("items", (), "items/s", 1.0))


def _entry(b, stat):
    """One benchmark of the JSON -> a row of the report (None values: not recorded)."""
    info = b.get("extra_info", {})
    st = b["stats"]
    lib = info.get("lib") or info.get("library") or (b.get("params") or {}).get("lib") or b["name"]
    lib, variant = LEGACY_LIBS.get(lib, (lib, info.get("variant")))
    row = {"group": b.get("group") or b["name"], "lib": lib, "variant": variant,
           "label": f"{lib} ({variant})" if variant else lib,
           "suite": b.get("fullname", b.get("suite", "")).split("::")[0].rsplit("/", 1)[-1],
           "time": st[stat], "iqr": st["iqr"] / st["median"] if st.get("median") else None,
           "peak": info.get("peak_MiB", info.get("peak_growth_MiB")),
           "format": info.get("format"), "read_bw": bool(info.get("read_bw")),
           "min_cos": info.get("min_cosine"), "median_cos": info.get("median_cosine")}
    for key, legacy, _, _ in RATES:
        amount = info.get(key)
        for old in legacy:                      # a rate at the file's median time
            if amount is None and info.get(old) is not None:
                amount = info[old] * 1e9 * st["median"]
        row[key] = amount
    return row


def load(path, stat="median"):
    """(file's JSON, rows): per (group, label), the pass with the smallest stat."""
    with open(path) as f:
        data = json.load(f)
    benchmarks = data.get("benchmarks")
    if benchmarks is None and "libs" in data:   # bench_models.py --json before it wrote them
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from bench_models import as_benchmarks
        benchmarks = as_benchmarks(data)
    if not any("fullname" in b for b in benchmarks) and "libs" in data:
        for b in benchmarks:
            b.setdefault("suite", "bench_models.py (script)")
    best = {}
    for b in benchmarks:
        row = _entry(b, stat)
        key = (row["group"], row["label"])
        if key not in best or row["time"] < best[key]["time"]:
            best[key] = row
    return data, list(best.values())


def _groups(rows):
    """[(suite, group, rows)] in the order of first appearance; cattn's row first."""
    out = {}
    for r in rows:
        out.setdefault((r["suite"], r["group"]), []).append(r)
    return [(s, g, sorted(rs, key=lambda r: r["label"] != "cattn")) for (s, g), rs in out.items()]


def _fmt(v, prec=None):
    if v is None:
        return "-"
    if prec is None:                              # times in ms
        prec = 3 if v < 100 else 1
    return f"{v:.{prec}f}"


def table(rows, stat):
    """Header and rows of one suite's table (strings); rate columns only where recorded."""
    rates = [(k, col, unit) for k, _, col, unit in RATES if any(r[k] for r in rows)]
    peak = any(r["peak"] is not None for r in rows)
    read_bw = any(r["read_bw"] for r in rows)
    cos = any(r["min_cos"] is not None for r in rows)
    head = ["group", "lib", f"{stat} ms"] + [col for _, col, _ in rates] \
        + (["% read BW"] if read_bw else []) + (["min cos", "median cos"] if cos else []) \
        + (["peak MiB"] if peak else []) + ["ratio", "IQR %"]
    body = []
    for _, group, rs in _groups(rows):
        ref = next((r for r in rs if r["label"] == "cattn" and r["peak"] is None), None)
        bw = next((r for r in rs if r["read_bw"] and r["bytes"] and r["time"]), None)
        for i, r in enumerate(rs):
            timed = r["peak"] is None
            cells = [group if i == 0 else "", r["label"], _fmt(r["time"] * 1e3 if timed else None)]
            cells += [_fmt(r[k] / r["time"] / unit if timed and r[k] and r["time"] else None, 1)
                      for k, _, unit in rates]
            if read_bw:
                cells.append(_fmt(100 * r["bytes"] / r["time"] / (bw["bytes"] / bw["time"])
                                  if bw and timed and r["bytes"] and r["time"] else None, 0))
            if cos:
                cells += [_fmt(r["min_cos"], 6), _fmt(r["median_cos"], 6)]
            if peak:
                cells.append(_fmt(r["peak"], 1))
            ratio = r["time"] / ref["time"] if timed and ref and r is not ref and ref["time"] \
                and not r["read_bw"] else None
            cells += [_fmt(ratio, 2), _fmt(100 * r["iqr"] if timed and r["iqr"] is not None
                                           else None, 0)]
            body.append(cells)
    return head, body


def cross_table(rows, stat):
    """Header and rows of the within-group ratios: one line per cattn row of a
    group, one column per row of the group (read-bandwidth and peak-memory rows
    left out): column's stat / the line's stat, > 1 where the line's row is faster."""
    groups = [(g, [r for r in rs if r["peak"] is None and not r["read_bw"] and r["time"]])
              for _, g, rs in _groups(rows)]
    labels = list(dict.fromkeys(r["label"] for _, rs in groups for r in rs))
    head = ["group", "cattn row"] + labels
    body = []
    for group, rs in groups:
        by_label = {r["label"]: r for r in rs}
        mine = [r for r in rs if r["lib"] == "cattn"]
        for i, r in enumerate(mine):
            cells = [group if i == 0 else "", r["label"]]
            cells += [_fmt(by_label[c]["time"] / r["time"], 2)
                      if c in by_label and c != r["label"] else "-" for c in labels]
            body.append(cells)
    return head, body


def describe(data, stat):
    m = data.get("machine_info") or {}
    cpu = m.get("cpu_model") or m.get("cpu", {})
    if isinstance(cpu, dict):
        cpu = cpu.get("brand_raw", "?")
    cattn = m.get("cattn") or {}
    parts = [cpu, f"kernel path {cattn.get('kernel_path', '?')}"]
    if cattn.get("version"):
        parts.append(f"cattn {cattn['version']}")
    if data.get("datetime"):
        parts.append(data["datetime"][:19])
    commit = (data.get("commit_info") or {}).get("id") or ""
    if commit and all(c in "0123456789abcdef" for c in commit):   # not "unversioned"
        parts.append(f"commit {commit[:10]}")
    if m.get("load_average"):
        parts.append(f"load {m['load_average']}")
    return (f"# {'; '.join(str(p) for p in parts)}\n# {stat}s; ratio = the row's {stat} / "
            f"cattn's {stat} in the same group (> 1: cattn faster)")


def render(head, body, markdown):
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return lines + ["| " + " | ".join(r) + " |" for r in body]
    w = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(head)]
    just = [str.ljust if i < 2 else str.rjust for i in range(len(head))]
    return ["  ".join(just[i](v, w[i]) for i, v in enumerate(r)).rstrip() for r in [head] + body]


def report(path, stat="median", markdown=False):
    data, rows = load(path, stat)
    out = [describe(data, stat)]
    for suite in dict.fromkeys(r["suite"] for r in rows):
        head, body = table([r for r in rows if r["suite"] == suite], stat)
        if suite:
            out += ["", f"### {suite}" if markdown else f"== {suite}"]
        out += [""] * markdown + render(head, body, markdown)
        suite_rows = [r for r in rows if r["suite"] == suite]
        if any(r["format"] for r in suite_rows):
            head, body = cross_table([r for r in suite_rows if any(
                x["format"] for x in suite_rows if x["group"] == r["group"])], stat)
            if body:
                title = (f"{suite}: ratios within each group ({stat} of the column / {stat} "
                         f"of the cattn row; > 1: the cattn row is faster)")
                out += ["", f"### {title}" if markdown else f"-- {title}"]
                out += [""] * markdown + render(head, body, markdown)
    if data.get("agreement"):
        a = data["agreement"]
        out += ["", f"agreement cattn vs sentence-transformers: min cosine {a['min_cosine']:.8f}, "
                    f"{a['below_bar']} below 0.99999, max |diff| {a['max_abs_diff']:.2e}"]
    if data.get("note"):
        out += ["", f"note: {data['note']}"]
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("json", nargs="+", help="pytest-benchmark --benchmark-json files")
    p.add_argument("--markdown", action="store_true")
    p.add_argument("--stat", choices=["median", "min", "mean"], default="median",
                   help="which per-library statistic to compare (default: median)")
    args = p.parse_args(argv)
    print("\n\n".join(report(path, args.stat, args.markdown) for path in args.json))
    return 0


if __name__ == "__main__":
    sys.exit(main())
