"""cattn's kernel paths against each other on this CPU (issue 11's AVX-512
bar: the avx512 path >= 1.1x the avx2 path on large float32 GEMMs and on
attention at L >= 512; the goal 1.3x).

    python benchmarks/bench_paths.py [--rounds 5] [--threads 2] [--quick]

The kernel table is chosen once per process, so each path runs in its own
worker process (CATTN_ISA=<path>), started once; the script sends every
worker the same case in turn, round after round (the paths alternate, so a
noisy neighbour hits both), and prints per case the median seconds of each
path and the ratio of each path to avx2 (> 1: faster than avx2). Paths this
CPU lacks are listed as skipped: on an AVX2-only CPU the table compares avx2
with portable. Each worker checks that its results have the avx2 worker's
bits where the paths promise it (GEMM, attention, int8: same order), and
says so.

Cases (2 threads unless --threads): GEMM float32 2048^3 and 1024 x 3072 x 768
(an encoder layer's FF1), float64 1024^3; linear int8 4096 rows 768 -> 3072;
linear bfloat16 and bfloat16dot 896 -> 4864, 1 row (decode) and 128 rows;
attention float32 (1, 8, 512, 512, 64), (1, 8, 2048, 2048, 64) and causal
(1, 12, 1024, 1024, 64); attention float64 (1, 4, 512, 512, 64); the
group-wise formats (issue 47) on GGUF-like weights: Q4_0-like int4, Q4_K-like
int4 (two-level scales), Q5_0-like int5g, Q6_K-like int6g (sub-scales),
Q8_0-like int8g at 1, 4 and 128 rows of Qwen2.5-0.5B's 896 -> 4864 and
4864 -> 896 (Q4_K: Qwen3-0.6B's 1024 -> 3072, 3072 -> 1024), and their
activation quantization. --only TEXT: the cases whose name contains TEXT.
--quick: smaller shapes, for checking the script.
"""
import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time

WORKER = r"""
import hashlib, json, sys, time
import numpy as np
import cattn
cattn.set_num_threads(int(sys.argv[1]))
rng = np.random.default_rng(0)
cache = {}

def inputs(case):
    if case["name"] not in cache:
        k, s = case["kind"], case["shape"]
        dt = np.float64 if case.get("f64") else np.float32
        if k == "gemm":
            M, K, N = s
            args = (rng.standard_normal((M, K)).astype(dt), rng.standard_normal((K, N)).astype(dt))
            fn = lambda a=args: cattn.matmul(*a)
        elif k == "row":                  # row kernels on a (rows, n) array
            x = (rng.standard_normal(s) * 3).astype(dt)
            op = {"gelu": cattn.gelu, "softmax": cattn.softmax, "silu": cattn.silu,
                  "exp": cattn._ext.vexp}[case["op"]]
            fn = lambda: op(x)
        elif k == "group":                # GGUF-like group weights (formats.*_arrays)
            M, K, N = s
            x = rng.standard_normal((M, K)).astype(np.float32)
            fn = lambda p=group_weight(case["fmt"], N, K): cattn.linear(x, p)
        elif k == "quant":                # the group formats' activation quantization
            x = rng.standard_normal(s).astype(np.float32)
            fn = lambda: cattn._ext.quantize_q8_blocks(x)[0]
        elif k in ("int8", "linear"):
            M, K, N = s
            x = rng.standard_normal((M, K)).astype(np.float32)
            w = (rng.standard_normal((N, K)) * 0.02).astype(np.float32)
            p = cattn.pack_weight(w, case.get("fmt", "int8"))
            out = np.empty((M, N), np.float32)
            fn = lambda: cattn.linear(x, p, out=out)
        else:
            B, H, L, S, E = s
            q, kk, v = (rng.standard_normal((B, H, n, E)).astype(dt) for n in (L, S, S))
            fn = lambda: cattn.scaled_dot_product_attention(q, kk, v, is_causal=case.get("causal", False))
        cache[case["name"]] = fn
    return cache[case["name"]]

def group_weight(fmt, N, K):
    from cattn.ops import formats
    from cattn import PackedWeight
    G = -(-K // 32)
    d16 = lambda: (rng.random((N, G)) * 0.01).astype(np.float16)
    u = lambda top: rng.integers(0, top, (N, K)).astype(np.uint8)
    if fmt == "q4_0":                     # int4, float16 d, z = 8
        a = formats.int4_arrays(u(16), d16(), None, 8)
    elif fmt == "q4_k":                   # int4, two-level scales (K a multiple of 256)
        D, Dm = ((rng.random((N, K // 256)) * 0.01).astype(np.float16) for _ in range(2))
        a = formats.int4_k_arrays(u(16), D, Dm, rng.integers(0, 64, (N, G)).astype(np.uint8),
                                  rng.integers(0, 64, (N, G)).astype(np.uint8))
    elif fmt == "q5_0":                   # int5g, float16 d, z = 16
        a = formats.int5g_arrays(u(32), d16(), None, None, 16)
    elif fmt == "q6_k":                   # int6g, int8 sub-scales per 16, z = 32
        a = formats.int6g_arrays(u(64), d16(), None,
                                 rng.integers(-128, 128, (N, 2 * G)).astype(np.int8), 32)
    else:                                 # q8_0: int8g, z = 128
        a = formats.int8g_arrays(u(256), d16(), None, None, 128)
    return PackedWeight.from_arrays(a)

print(json.dumps({"path": cattn._ext.kernel_path()}), flush=True)
for line in sys.stdin:
    case = json.loads(line)
    fn = inputs(case)
    out = fn()                                   # warm-up, and the result's digest
    digest = hashlib.sha256(np.ascontiguousarray(out).tobytes()).hexdigest()[:16]
    t, n, t0 = [], 0, time.perf_counter()
    while n < case["min_calls"] or time.perf_counter() - t0 < case["min_time"]:
        s = time.perf_counter(); fn(); t.append(time.perf_counter() - s); n += 1
    print(json.dumps({"median": sorted(t)[len(t) // 2], "calls": n, "digest": digest}), flush=True)
"""

QWEN25 = ((896, 4864), (4864, 896))         # (K, N): gate/up, down
QWEN3 = ((1024, 3072), (3072, 1024))
CASES = [
    ("gemm f32 2048x2048x2048", "gemm", (2048, 2048, 2048), {}),
    ("gemm f32 1024x768x3072 (FF1)", "gemm", (1024, 768, 3072), {}),
    ("gemm f64 1024x1024x1024", "gemm", (1024, 1024, 1024), {"f64": True}),
    ("linear int8 4096 rows 768->3072", "int8", (4096, 768, 3072), {}),
    # Qwen2.5-0.5B's gate / up projection: decode (1 row; the 8.7 MB weight
    # stays in L3 here) and a 128-token prefill. bfloat16: the float32
    # linear's bits (widened panels); bfloat16dot: vdpbf16ps on avx512
    # with AVX512_BF16, the portable emulation on avx2 (same bits)
    ("linear bfloat16 1 row 896->4864", "linear", (1, 896, 4864), {"fmt": "bfloat16"}),
    ("linear bfloat16 128 rows 896->4864", "linear", (128, 896, 4864), {"fmt": "bfloat16"}),
    ("linear bfloat16dot 1 row 896->4864", "linear", (1, 896, 4864), {"fmt": "bfloat16dot"}),
    ("linear bfloat16dot 128 rows 896->4864", "linear", (128, 896, 4864),
     {"fmt": "bfloat16dot"}),
    ("sdpa f32 (1,8,512,512,64)", "attn", (1, 8, 512, 512, 64), {}),
    ("sdpa f32 (1,8,2048,2048,64)", "attn", (1, 8, 2048, 2048, 64), {}),
    ("sdpa f32 causal (1,12,1024,1024,64)", "attn", (1, 12, 1024, 1024, 64), {"causal": True}),
    ("sdpa f64 (1,4,512,512,64)", "attn", (1, 4, 512, 512, 64), {"f64": True}),
    ("gelu f32 (1024, 3072)", "row", (1024, 3072), {"op": "gelu"}),
    ("softmax f32 (4096, 1024)", "row", (4096, 1024), {"op": "softmax"}),
    ("silu f32 (1024, 3072)", "row", (1024, 3072), {"op": "silu"}),
    ("exp f32 (4096, 1024)", "row", (4096, 1024), {"op": "exp"}),
] + [
    # the group-wise formats (issue 47): GGUF-like weights, Qwen2.5-0.5B's MLP
    # shapes (Q4_K: Qwen3-0.6B's, K a multiple of 256), 1, 4 and 128 rows
    (f"{fmt} {M} rows {K}->{N}", "group", (M, K, N), {"fmt": fmt})
    for fmt, shapes in (("q4_0", QWEN25), ("q4_k", QWEN3), ("q5_0", QWEN25),
                        ("q6_k", QWEN25), ("q8_0", QWEN25))
    for K, N in shapes for M in (1, 4, 128)
] + [
    ("quantize q8 blocks (64, 4864)", "quant", (64, 4864), {}),
    ("quantize q8 blocks (128, 896)", "quant", (128, 896), {}),
]
QUICK = [
    ("gemm f32 256x256x256", "gemm", (256, 256, 256), {}),
    ("gemm f64 128x128x128", "gemm", (128, 128, 128), {"f64": True}),
    ("linear int8 256 rows 384->512", "int8", (256, 384, 512), {}),
    ("linear bfloat16 1 row 384->512", "linear", (1, 384, 512), {"fmt": "bfloat16"}),
    ("linear bfloat16dot 64 rows 384->512", "linear", (64, 384, 512), {"fmt": "bfloat16dot"}),
    ("sdpa f32 (1,2,128,128,64)", "attn", (1, 2, 128, 128, 64), {}),
    ("gelu f32 (64, 1000)", "row", (64, 1000), {"op": "gelu"}),
    ("q4_k 4 rows 512->80", "group", (4, 512, 80), {"fmt": "q4_k"}),
    ("q6_k 1 rows 96->40", "group", (1, 96, 40), {"fmt": "q6_k"}),
    ("quantize q8 blocks (4, 300)", "quant", (4, 300), {}),
]


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds per path per case per round")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="run only the cases whose name contains this text")
    ap.add_argument("--json", help="write the medians here")
    args = ap.parse_args()

    import cattn
    avail = cattn._ext.available_paths()
    paths = [p for p in ("avx512", "avx2", "portable") if p in avail]
    base = "avx2" if "avx2" in paths else paths[0]
    if "avx2" in paths and "avx512" in paths:
        paths = ["avx512", "avx2"]              # portable is not the question here
    skipped = [p for p in ("avx512", "avx2") if p not in avail]
    print(f"CPU: {cpu_name()}; cattn paths: built {', '.join(cattn._ext.built_paths())}, "
          f"this CPU runs {', '.join(avail)}; compared: {', '.join(paths)}"
          + (f"; skipped (CPU or build lacks): {', '.join(skipped)}" if skipped else ""))
    print(f"threads {args.threads}, rounds {args.rounds}, load average {os.getloadavg()[0]:.2f}")

    workers = {}
    for p in paths:
        env = dict(os.environ, CATTN_ISA=p)
        w = subprocess.Popen([sys.executable, "-c", WORKER, str(args.threads)], env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        got = json.loads(w.stdout.readline())["path"]
        assert got == p, (got, p)
        workers[p] = w

    def ask(p, case):
        w = workers[p]
        w.stdin.write(json.dumps(case) + "\n")
        w.stdin.flush()
        return json.loads(w.stdout.readline())

    cases = QUICK if args.quick else CASES
    if args.only:
        cases = [c for c in cases if args.only in c[0]]
    times = {c[0]: {p: [] for p in paths} for c in cases}
    digests = {c[0]: {} for c in cases}
    for r in range(args.rounds):
        for name, kind, shape, extra in cases:
            case = dict(name=name, kind=kind, shape=shape, min_time=args.min_time, min_calls=3, **extra)
            order = paths if r % 2 == 0 else paths[::-1]
            for p in order:
                res = ask(p, case)
                times[name][p].append(res["median"])
                digests[name][p] = res["digest"]
    for w in workers.values():
        w.stdin.close()
        w.wait()

    others = [p for p in paths if p != base]
    head = " | ".join(f"{p} ms" for p in paths)
    ratio_head = " | ".join(f"{p} / {base}" for p in others)
    print(f"\n| case | {head} | {ratio_head} | same bits as {base} |")
    print("|---|" + "---|" * (len(paths) + len(others) + 1))
    out = {"cpu": cpu_name(), "threads": args.threads, "rounds": args.rounds, "cases": {}}
    for name, *_ in cases:
        med = {p: statistics.median(times[name][p]) for p in paths}
        ratios = {p: med[base] / med[p] for p in others}
        same = all(digests[name][p] == digests[name][base] for p in others)
        cells = " | ".join(f"{med[p] * 1e3:.2f}" for p in paths)
        rcells = " | ".join(f"{ratios[p]:.2f}x" for p in others)
        print(f"| {name} | {cells} | {rcells} | {'yes' if same else 'no'} |")
        out["cases"][name] = {"median_s": med, "ratio_to_" + base: ratios, "same_bits": same}
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    if "avx512" in paths:
        print("issue 11 bar: avx512 >= 1.1x avx2 on the large float32 GEMMs and attention L >= 512")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
