"""cattn.matmul vs numpy.matmul vs torch.matmul, same process, same inputs.

    pytest benchmarks/bench_matmul.py --benchmark-json=bench.json
    python benchmarks/report.py bench.json        # per-group ratios

One pytest-benchmark group per (shape, dtype, threads); the three libraries
run one after another inside it, each timed as a block by conftest's `bench`
(warm-up, threads for every library, extra_info: lib, dtype, threads, shape
= (batch, M, K, N), flops, pass_).

On a shared machine, CATTN_BENCH_PASSES=2 (or more) runs every group's
cattn/numpy/torch sequence again; report.py keeps each library's best pass.
"""
import os

import numpy as np
import pytest

import cattn

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


# ---- linear layers by row count: plain weight vs packed once ------------------------------
# (M rows) x (K -> N): 1 row (token-by-token decoding), 8 rows (a short sentence),
# 4096 rows (a batch); cattn on the plain weight and on cattn.pack_weight's
# panels (the same bits), NumPy's x @ W.T and torch's linear, 2 threads.
ROWS_CASES = [(M, K, N) for M in (1, 8, 4096) for K, N in ((384, 1536), (1536, 384), (768, 3072))]
ROWS_LIBS = ["cattn", "cattn-packed", "numpy"] + (["torch"] if torch is not None else [])


@pytest.mark.parametrize("lib", ROWS_LIBS)
@pytest.mark.parametrize("M,K,N", ROWS_CASES, ids=[f"{M}rows-{K}to{N}" for M, K, N in ROWS_CASES])
def test_linear_rows(bench, M, K, N, lib):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = rng.standard_normal((N, K), dtype=np.float32)
    b = rng.standard_normal(N, dtype=np.float32)
    if lib == "cattn":
        fn = lambda: cattn.linear(x, w, b)                    # noqa: E731
    elif lib == "cattn-packed":
        p = cattn.pack_weight(w)
        fn = lambda: cattn.linear(x, p, b)                    # noqa: E731
    elif lib == "numpy":
        fn = lambda: x @ w.T + b                              # noqa: E731
    else:
        tx, tw, tb = (torch.from_numpy(a) for a in (x, w, b))
        fn = lambda: torch.nn.functional.linear(tx, tw, tb).numpy()  # noqa: E731
    result = bench(fn, group=f"linear {M} rows {K}->{N} float32 2T", lib=lib, threads=2,
                   dtype="float32", shape=[M, K, N], flops=2.0 * M * N * K,
                   bytes=4.0 * (N * K + M * (K + N)))
    want = x.astype(np.float64) @ w.T.astype(np.float64) + b
    assert np.allclose(result, want, rtol=0, atol=1e-5 * np.sqrt(K) * float(np.abs(want).max()))
