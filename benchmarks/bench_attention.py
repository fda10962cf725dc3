"""Attention benchmarks: cattn vs torch vs a plain NumPy softmax(Q K^T) V,
float32, 2 threads, side by side in one run (ratios are what to read on a
shared machine; absolute times drift).

    PYTHONPATH=. python3 -m pytest benchmarks/bench_attention.py --benchmark-json /tmp/attn.json
    python3 benchmarks/attention_report.py /tmp/attn.json

Not collected by a plain `pytest` run (pyproject: testpaths = ["tests"]).

Method (see /work/shared/RESEARCH.md): each library's calls are timed as a
block after ~0.3 s of untimed warm-up (OpenBLAS / OpenMP threads keep
spinning after a call and slow whoever runs next); one large GEMM warms
OpenBLAS up first. `benchmark.pedantic` with a round count sized to ~1 s
per block (3 rounds at least) keeps the suite to a few minutes.

extra_info: GFLOP/s = 4 B H L S E / time (halved for causal); decode:
GB/s of K and V read (2 B H S E * 4 bytes / time), beside the machine's
read bandwidth measured in the same run (test_read_bandwidth). Decode rounds
start from a cold cache (a 64 MiB buffer is swept before each round, not
timed), as in a real model where all layers' K/V do not fit in L3 (32 MiB).
Peak memory: test_peak_memory runs (1, 8, 8192, 8192, 64) in a fresh
process and reports the growth of VmHWM beyond inputs and output.
"""
import math
import os
import subprocess
import sys
import time

import numpy as np
import pytest

import cattn

THREADS = 2
WARMUP_S = 0.3
TARGET_S = 1.0          # timed seconds per block (at least MIN_ROUNDS rounds)
MIN_ROUNDS, MAX_ROUNDS = 3, 500

PREFILL = [(1, 12, 128, 128, 64), (8, 12, 128, 128, 64), (1, 8, 512, 512, 64),
           (1, 8, 2048, 2048, 64), (1, 8, 4096, 4096, 64)]
DECODE = {"decode": (1, 32, 32, 1, 4096, 128),          # B, Hq, H, L, S, E
          "gqa-decode": (1, 32, 8, 1, 4096, 128)}
LIBS = ["cattn", "torch", "numpy"]


@pytest.fixture(scope="module", autouse=True)
def _setup_threads():
    cattn.set_num_threads(THREADS)
    a = np.ones((2048, 2048), np.float32)
    a @ a                                   # OpenBLAS cold-start quirk: one big GEMM first
    yield


def _torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(THREADS)
    return torch


# ---- the NumPy baseline ------------------------------------------------------------

def numpy_attention(q, k, v, scale, bias=None):
    """softmax(Q K^T * scale + bias) V with np.matmul and a stable softmax,
    in place on the one (B, H, L, S) score array."""
    s = np.matmul(q, np.swapaxes(k, -1, -2))
    s *= scale
    if bias is not None:
        s += bias
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return np.matmul(s, v)


def numpy_gqa_decode(q, k, v, scale):
    """Decode with a GQA group's query rows stacked, so K and V are read once."""
    B, Hq, L, E = q.shape
    H = k.shape[1]
    qg = q.reshape(B, H, (Hq // H) * L, E)
    return numpy_attention(qg, k, v, scale).reshape(B, Hq, L, v.shape[-1])


# ---- timing helpers -------------------------------------------------------------------

def _warm(fn, seconds=WARMUP_S):
    """Untimed warm-up for ~seconds (at least one call); returns seconds per call."""
    t0 = time.perf_counter()
    n = 0
    while True:
        fn()
        n += 1
        el = time.perf_counter() - t0
        if el >= seconds:
            return el / n


_SWEEP = None


def _cold_cache():
    global _SWEEP
    if _SWEEP is None:
        _SWEEP = np.ones(16 << 20, np.float32)     # 64 MiB, twice the L3
    _SWEEP += 1.0


def _run(benchmark, fn, cold=False):
    per_call = _warm(fn)
    rounds = int(min(MAX_ROUNDS, max(MIN_ROUNDS, math.ceil(TARGET_S / per_call))))
    if cold:
        rounds = min(rounds, 40)
        return benchmark.pedantic(fn, setup=_cold_cache, rounds=rounds, iterations=1)
    return benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=0)


def _median(benchmark):
    return benchmark.stats.stats.median


def _inputs(B, Hq, H, L, S, E, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, Hq, L, E), dtype=np.float32),
            rng.standard_normal((B, H, S, E), dtype=np.float32),
            rng.standard_normal((B, H, S, E), dtype=np.float32))


# ---- prefill ------------------------------------------------------------------------------

def _prefill_cases():
    for shape in PREFILL:
        for causal in (False, True):
            for lib in LIBS:
                yield pytest.param(shape, causal, lib,
                                   id=f"{'x'.join(map(str, shape))}-{'causal' if causal else 'full'}-{lib}")


@pytest.mark.parametrize("shape,causal,lib", list(_prefill_cases()))
def test_prefill(benchmark, shape, causal, lib):
    B, H, L, S, E = shape
    benchmark.group = f"prefill {B}x{H}x{L}x{S}x{E}" + (" causal" if causal else "")
    benchmark.extra_info.update(lib=lib, shape=list(shape), causal=causal)
    q, k, v = _inputs(B, H, H, L, S, E)
    scale = 1.0 / math.sqrt(E)
    if lib == "cattn":
        def fn():
            return cattn.scaled_dot_product_attention(q, k, v, is_causal=causal)
        out = _run(benchmark, fn)
    elif lib == "torch":
        torch = _torch()
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        with torch.inference_mode():
            def fn():
                return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=causal)
            out = _run(benchmark, fn).numpy()
    else:
        bias = np.where(np.tri(L, S, dtype=bool), 0.0, -np.inf).astype(np.float32) if causal else None

        def fn():
            return numpy_attention(q, k, v, scale, bias)
        out = _run(benchmark, fn)
    assert out.shape == (B, H, L, E) and np.isfinite(out).all()
    flops = 4.0 * B * H * L * S * E / (2 if causal else 1)
    benchmark.extra_info["gflops"] = flops / _median(benchmark) / 1e9


# ---- decode -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,lib", [(kind, lib) for kind in DECODE for lib in LIBS],
                         ids=lambda x: x)
def test_decode(benchmark, kind, lib):
    B, Hq, H, L, S, E = DECODE[kind]
    benchmark.group = f"{kind} {B}x{Hq}q{H}kv x{L}x{S}x{E}"
    benchmark.extra_info.update(lib=lib, shape=[B, Hq, H, L, S, E])
    q, k, v = _inputs(B, Hq, H, L, S, E, seed=1)
    gqa = Hq != H
    if lib == "cattn":
        def fn():
            return cattn.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
        out = _run(benchmark, fn, cold=True)
    elif lib == "torch":
        torch = _torch()
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        with torch.inference_mode():
            def fn():
                return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, enable_gqa=gqa)
            out = _run(benchmark, fn, cold=True).numpy()
    else:
        def fn():
            return numpy_gqa_decode(q, k, v, 1.0 / math.sqrt(E))
        out = _run(benchmark, fn, cold=True)
    assert out.shape == (B, Hq, L, E) and np.isfinite(out).all()
    kv_bytes = k.nbytes + v.nbytes
    benchmark.extra_info["kv_MiB"] = kv_bytes / 2**20
    benchmark.extra_info["GBps"] = kv_bytes / _median(benchmark) / 1e9
    benchmark.extra_info["gflops"] = 4.0 * B * Hq * L * S * E / _median(benchmark) / 1e9


def test_read_bandwidth(benchmark):
    """The machine's read bandwidth: numpy.dot of two 256 MiB float32 vectors."""
    benchmark.group = "read bandwidth"
    benchmark.extra_info["lib"] = "numpy.dot"
    a = np.ones(64 << 20, np.float32)
    b = np.ones(64 << 20, np.float32)
    benchmark.pedantic(np.dot, args=(a, b), rounds=5, iterations=1, warmup_rounds=1)
    benchmark.extra_info["GBps"] = (a.nbytes + b.nbytes) / _median(benchmark) / 1e9


# ---- peak memory --------------------------------------------------------------------------

PEAK_SCRIPT = r"""
import sys, numpy as np
lib = sys.argv[1]
B, H, L, S, E = 1, 8, 8192, 8192, 64

def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) * 1024

rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((B, H, n, E), dtype=np.float32) for n in (L, S, S))
if lib == "cattn":
    import cattn
    cattn.set_num_threads(2)
    f = lambda a, b, c: cattn.scaled_dot_product_attention(a, b, c)
else:
    import torch
    torch.set_num_threads(2)
    torch.inference_mode().__enter__()
    f = lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(x) for x in (a, b, c))).numpy()
f(q[:, :, :256], k[:, :, :256], v[:, :, :256])     # threads, scratch, lazy imports
with open("/proc/self/clear_refs", "w") as fh:      # reset VmHWM to the current RSS
    fh.write("5")
base = hwm()
out = f(q, k, v)
growth = hwm() - base - out.nbytes                  # beyond inputs (already resident) and output
print(growth)
"""


@pytest.mark.parametrize("lib", ["cattn", "torch"])
def test_peak_memory(benchmark, lib):
    """RSS growth of one (1, 8, 8192, 8192, 64) call beyond inputs and output,
    in a fresh process (the time is the whole subprocess: ignore it)."""
    if lib == "torch":
        _torch()
    benchmark.group = "peak memory 1x8x8192x8192x64"
    benchmark.extra_info["lib"] = lib
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(cattn.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])

    def run():
        r = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, lib], env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        return int(r.stdout.split()[-1])

    growth = benchmark.pedantic(run, rounds=1, iterations=1)
    benchmark.extra_info["peak_growth_MiB"] = growth / 2**20
    # a (B, H, L, S) float32 score tensor would be 2 GiB
    assert growth < 256 * 2**20
