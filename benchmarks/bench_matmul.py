"""cattn.matmul vs numpy.matmul vs torch.matmul, same process, same inputs.

    pytest benchmarks/ --benchmark-json=bench.json
    python benchmarks/report.py bench.json        # per-group ratios

One pytest-benchmark group per (shape, dtype, threads); the three libraries
run one after another inside it. Each library's calls are timed as a block
after ~0.3 s of untimed warm-up: OpenBLAS threads keep spinning for >0.1 s
after a call and slow an OpenMP kernel that runs right after (RESEARCH.md).
Threads: numpy via threadpoolctl (user_api="blas"), torch via
torch.set_num_threads, cattn via cattn.num_threads.

On a shared machine, CATTN_BENCH_PASSES=2 (or more) runs every group's
cattn/numpy/torch sequence again; report.py keeps each library's best pass.
"""
import contextlib
import os
import time

import numpy as np
import pytest

import cattn

try:
    import torch
except ImportError:
    torch = None
try:
    from threadpoolctl import threadpool_limits
except ImportError:
    threadpool_limits = None

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


@contextlib.contextmanager
def thread_limit(lib, n):
    if lib == "cattn":
        with cattn.num_threads(n):
            yield
    elif lib == "numpy":
        if threadpool_limits is None:
            pytest.skip("threadpoolctl is needed to set NumPy's BLAS threads")
        with threadpool_limits(n, user_api="blas"):
            yield
    else:
        prev = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(prev)


def warm_up(fn, seconds=0.3):
    """Run fn for `seconds` (at least twice); return the seconds per call."""
    t0 = time.perf_counter()
    calls = 0
    while calls < 2 or time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    return (time.perf_counter() - t0) / calls


@pytest.fixture(scope="session", autouse=True)
def _openblas_cold_start():
    """OpenBLAS can stay slow if a process's first GEMM is small: one large one first."""
    a = np.ones((1024, 1024), np.float32)
    np.matmul(a, a)


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
def test_matmul(benchmark, shape, dtype, threads, lib, pass_):
    nb, M, K, N = shape
    flops = 2.0 * nb * M * N * K
    a, b, fn = _make(shape, dtype, lib)
    benchmark.group = _label(shape, dtype, threads)
    with thread_limit(lib, threads):
        t = warm_up(fn)
        iterations = max(1, int(0.002 / t))              # rounds of >= ~2 ms
        rounds = int(min(200, max(5, 0.6 / (t * iterations))))
        result = benchmark.pedantic(fn, rounds=rounds, iterations=iterations, warmup_rounds=1)
    median = benchmark.stats.stats.median
    benchmark.extra_info.update(lib=lib, dtype=dtype, threads=threads, flops=flops, pass_=pass_,
                                gflops=round(flops / median / 1e9, 2))
    # not timed: the result must be right (vs numpy in the same dtype)
    want = np.matmul(a, b)
    scale = np.sqrt(K) * float(np.abs(want).max())
    assert np.allclose(result, want, rtol=0, atol=1e-4 * scale if dtype == "float32" else 1e-12 * scale)
