"""cattn.matmul vs numpy.matmul vs torch.matmul, same process, same inputs.

    pytest benchmarks/bench_matmul.py --benchmark-json=bench.json
    python benchmarks/report.py bench.json        # per-group ratios

One pytest-benchmark group per (shape, dtype, threads); the three libraries
run one after another inside it, each timed as a block by conftest's `bench`
(warm-up, threads for every library, extra_info: lib, dtype, threads, shape
= (batch, M, K, N), flops, pass_).

On a shared machine, CATTN_BENCH_PASSES=2 (or more) runs every group's
cattn/numpy/torch sequence again; report.py keeps each library's best pass.

`linear` by row count and weight format (issue 12; the section below says
what each row is): cattn on the plain float32 weight and on weights packed
once in float32, bfloat16 and int8, vs NumPy float32, torch float32 and
torch's dynamic int8 Linear, at 1, 8 and 4096 rows; then the 8-row calls with
their weights coming from memory beside the read bandwidth of the same run:

    pytest benchmarks/bench_matmul.py -k "linear" --benchmark-json=linear.json
    python benchmarks/report.py linear.json    # + ratios within each group, % read BW

The torch rows skip (reason: torch) where torch is not installed.
"""
import itertools
import math
import os

import numpy as np
import pytest

import cattn
from cattn.cli.bench import torch_int8_linear   # quantize_dynamic on an nn.Linear

try:
    import torch
except ImportError:
    torch = None

LIBS = ["cattn", "numpy"] + (["torch"] if torch is not None else [])

SQUARE = [(1, n, n, n) for n in (128, 256, 512, 1024, 2048)]     # (batch, M, K, N)
LINEAR = [(1, 1024, 384, 1536), (1, 1024, 1536, 384), (1, 1024, 768, 2304)]
ATTENTION = [(96, 128, 64, 128), (96, 128, 128, 64)]             # B*H x (QK^T), (PV)

CONFIGS = ([(s, "float32", t) for t in (1, 2) for s in SQUARE + LINEAR + ATTENTION]
           + [((1, 1024, 1024, 1024), "float64", 2)])


def _label(shape, dtype, threads):
    nb, M, K, N = shape
    lead = f"{nb}x " if nb > 1 else ""
    return f"{lead}{M}x{K}@{K}x{N} {dtype} {threads}T"


def _id(shape, dtype, threads, lib, p):  # -k friendly: "b96-128x64x128-float32-2T-cattn"
    nb, M, K, N = shape
    return f"b{nb}-{M}x{K}x{N}-{dtype}-{threads}T-{lib}" + (f"-pass{p}" if p else "")


PASSES = int(os.environ.get("CATTN_BENCH_PASSES", "1"))
PARAMS = [pytest.param(shape, dtype, threads, lib, p, id=_id(shape, dtype, threads, lib, p))
          for shape, dtype, threads in CONFIGS for p in range(PASSES) for lib in LIBS]


def _make(shape, dtype, lib):
    nb, M, K, N = shape
    rng = np.random.default_rng(0)
    lead = (nb,) if nb > 1 else ()
    a = rng.standard_normal(lead + (M, K)).astype(dtype)
    b = rng.standard_normal(lead + (K, N)).astype(dtype)
    if lib == "cattn":
        return a, b, lambda: cattn.matmul(a, b)
    if lib == "numpy":
        return a, b, lambda: np.matmul(a, b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    return a, b, lambda: torch.matmul(ta, tb).numpy()


@pytest.mark.parametrize("shape,dtype,threads,lib,pass_", PARAMS)
def test_matmul(bench, shape, dtype, threads, lib, pass_):
    nb, M, K, N = shape
    a, b, fn = _make(shape, dtype, lib)
    result = bench(fn, group=_label(shape, dtype, threads), lib=lib, threads=threads, dtype=dtype,
                   shape=list(shape), flops=2.0 * nb * M * N * K, pass_=pass_)
    # not timed: the result must be right (vs numpy in the same dtype)
    want = np.matmul(a, b)
    scale = np.sqrt(K) * float(np.abs(want).max())
    assert np.allclose(result, want, rtol=0, atol=1e-4 * scale if dtype == "float32" else 1e-12 * scale)


# ---- linear layers by row count and weight format -----------------------------------------
# (M rows) x (K -> N), the weight W (N, K) in torch's layout (out x in): 1 row
# (token-by-token decoding), 8 rows (a short sentence), 4096 rows (a batch);
# 2 threads. Every row of a group computes x @ W.T + b on the same x, W, b:
#   cattn            cattn.linear on the plain float32 W (packed on each call)
#   cattn (packed)   on cattn.pack_weight(W): float32 panels packed once (same bits)
#   cattn (bfloat16) on pack_weight(W, "bfloat16"): bfloat16 weights, float32 arithmetic
#   cattn (int8)     on pack_weight(W, "int8"): int8 weights per output channel,
#                    activations quantized per row at call time, int32 sums
#   numpy            x @ W.T + b (OpenBLAS sgemm), float32
#   torch            torch.nn.functional.linear, float32
#   torch (int8)     torch's dynamic int8 Linear: quantize_dynamic on an nn.Linear with
#                    its defaults (per-tensor weights, 7-bit activations; fbgemm)
# extra_info adds format (the weight format the row reads: float32, bfloat16, int8)
# and bytes = the weights as stored + x + y per call (-> GB/s). report.py prints,
# below each suite's table, every cattn row's ratio to every other row of its group.
#
# test_linear_from_memory: the 8-row calls with the weights coming from memory,
# not cache: each call takes the next of enough distinct copies of W (in the
# row's format) to fill ROTATE_BYTES, more than twice the L3, so a copy is
# evicted before its next turn. The group's "numpy (read bandwidth)" row
# measures the machine's read bandwidth in the same run (numpy.dot of two
# 256 MiB float32 vectors, 2 threads), and report.py shows every row's GB/s as
# a percentage of it ("% read BW"; issue 12's bar: cattn (packed) >= 80%).

LINEAR_SHAPES = [(384, 1536), (1536, 384), (768, 3072)]   # (K, N): MiniLM's FFN, BERT-base's
ROWS_CASES = [(M, K, N) for M in (1, 8, 4096) for K, N in LINEAR_SHAPES]
ROWS_LIBS = [("cattn", None), ("cattn", "packed"), ("cattn", "bfloat16"), ("cattn", "int8"),
             ("numpy", None), ("torch", None), ("torch", "int8")]
CATTN_FORMATS = {None: None, "packed": "float32", "bfloat16": "bfloat16", "int8": "int8"}


def _l3_bytes(default=32 << 20):
    """The largest cache's size (Linux sysfs), else 32 MiB (Zen 3 and Zen 4 here)."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    best = 0
    try:
        for d in os.listdir(base):
            with open(os.path.join(base, d, "size")) as f:
                v = f.read().strip()
            mult = {"K": 1 << 10, "M": 1 << 20}.get(v[-1:], 1)
            best = max(best, int(v.rstrip("KM")) * mult)
    except (OSError, ValueError):
        pass
    return best or default


ROTATE_BYTES = 5 * _l3_bytes() // 2          # > 2x the L3: 80 MiB on this machine's 32 MiB


def _lib_ids(libs):
    return [f"{lib}-{variant.replace(' ', '-')}" if variant else lib for lib, variant in libs]


def _linear_inputs(M, K, N):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((M, K), dtype=np.float32),
            rng.standard_normal((N, K), dtype=np.float32),
            rng.standard_normal(N, dtype=np.float32))


def _linear_fn(lib, variant, x, w, b, rotate_bytes=0):
    """(fn, format, weight bytes per call): fn() -> x @ w.T + b the lib/variant way.
    rotate_bytes > 0: each call reads the next of enough distinct copies of the
    weight (as that row stores it) to fill rotate_bytes."""
    N, K = w.shape
    if lib == "cattn" and variant is not None:
        fmt = CATTN_FORMATS[variant]
        make = lambda: cattn.pack_weight(w, dtype=fmt)          # noqa: E731
        nbytes = make().nbytes
    elif lib == "torch":
        torch = pytest.importorskip("torch", reason="torch is needed for the torch rows")
        tx = torch.from_numpy(x)
        if variant == "int8":
            fmt, nbytes = "int8", N * K + 8 * N              # + column offsets, bias
            make = lambda: torch_int8_linear(torch, w, b)     # noqa: E731
        else:
            fmt, nbytes = "float32", 4 * N * K
            make = lambda: torch.from_numpy(w.copy())         # noqa: E731
    else:                                                     # cattn / numpy, plain float32
        fmt, nbytes, make = "float32", 4 * N * K, w.copy
    copies = max(1, math.ceil(rotate_bytes / nbytes))
    nxt = itertools.cycle([make() for _ in range(copies)]).__next__
    if lib == "cattn":
        fn = lambda: cattn.linear(x, nxt(), b)                                    # noqa: E731
    elif lib == "numpy":
        fn = lambda: x @ nxt().T + b                                              # noqa: E731
    elif variant == "int8":
        fn = lambda: nxt()(tx).numpy()                                            # noqa: E731
    else:
        tb = torch.from_numpy(b)
        fn = lambda: torch.nn.functional.linear(tx, nxt(), tb).numpy()          # noqa: E731
    return fn, fmt, float(nbytes)


def _bfloat16(w):
    """w rounded to bfloat16 (nearest, ties to even; finite inputs), as float32."""
    u = w.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32).view(np.float32)


def _check_linear(result, x, w, b, fmt):
    """Not timed: the row computed x @ w.T + b (in its format's precision)."""
    K = w.shape[1]
    wr = _bfloat16(w) if fmt == "bfloat16" else w
    want = x.astype(np.float64) @ wr.T.astype(np.float64) + b
    assert result.shape == want.shape
    if fmt == "int8":   # quantized weights and activations: ~1-3% relative error on random data
        err = np.linalg.norm(result - want) / np.linalg.norm(want)
        assert err < 0.05, f"int8 relative error {err:.3f}"
    else:
        assert np.allclose(result, want, rtol=0,
                           atol=1e-5 * np.sqrt(K) * float(np.abs(want).max()))


@pytest.mark.parametrize("lib,variant", ROWS_LIBS, ids=_lib_ids(ROWS_LIBS))
@pytest.mark.parametrize("M,K,N", ROWS_CASES, ids=[f"{M}rows-{K}to{N}" for M, K, N in ROWS_CASES])
def test_linear_rows(bench, M, K, N, lib, variant):
    x, w, b = _linear_inputs(M, K, N)
    fn, fmt, wbytes = _linear_fn(lib, variant, x, w, b)
    result = bench(fn, group=f"linear {M} rows {K}->{N} 2T", lib=lib, variant=variant, threads=2,
                   dtype="float32", format=fmt, shape=[M, K, N], flops=2.0 * M * N * K,
                   bytes=wbytes + 4.0 * M * (K + N))
    _check_linear(result, x, w, b, fmt)


@pytest.fixture(scope="module")
def read_vectors():
    """Two 256 MiB float32 vectors (bench_attention.py's read-bandwidth measurement)."""
    return np.ones(64 << 20, np.float32), np.ones(64 << 20, np.float32)


FROM_MEMORY_LIBS = ROWS_LIBS + [("numpy", "read bandwidth")]


@pytest.mark.parametrize("lib,variant", FROM_MEMORY_LIBS, ids=_lib_ids(FROM_MEMORY_LIBS))
@pytest.mark.parametrize("K,N", LINEAR_SHAPES, ids=[f"8rows-{K}to{N}" for K, N in LINEAR_SHAPES])
def test_linear_from_memory(bench, request, K, N, lib, variant):
    M = 8
    group = f"linear {M} rows {K}->{N} weights from memory 2T"
    if variant == "read bandwidth":
        a, c = request.getfixturevalue("read_vectors")
        bench(lambda: np.dot(a, c), group=group, lib=lib, variant=variant, threads=2,
              dtype="float32", shape=[a.size], bytes=float(a.nbytes + c.nbytes), read_bw=True)
        return
    x, w, b = _linear_inputs(M, K, N)
    fn, fmt, wbytes = _linear_fn(lib, variant, x, w, b, rotate_bytes=ROTATE_BYTES)
    result = bench(fn, group=group, lib=lib, variant=variant, threads=2, dtype="float32",
                   format=fmt, shape=[M, K, N], flops=2.0 * M * N * K,
                   bytes=wbytes + 4.0 * M * (K + N), rotate_MiB=ROTATE_BYTES / 2**20)
    _check_linear(result, x, w, b, fmt)
