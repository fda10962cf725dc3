"""Row-kernel benchmarks: cattn vs its peers, side by side in one run.

    PYTHONPATH=. python3 -m pytest benchmarks/bench_rows.py \
        --benchmark-columns=median --benchmark-group-by=group

Groups (one per shape; float32, 2 threads for cattn and torch):
  softmax (4096, 1024) and (64, 12, 128, 128), last axis: vs scipy.special.softmax, torch.softmax
  layer_norm (8192, 768) with weight and bias: vs a NumPy two-pass, torch.nn.functional.layer_norm
  gelu over 8M floats: vs NumPy + scipy.special.erf, torch.nn.functional.gelu
  linear + gelu (4096, 768) -> 3072: fused epilogue vs linear then gelu
Each benchmark warms its library up for ~0.3 s first (OpenBLAS / OpenMP
threads keep spinning after a call and slow the next library down; see
RESEARCH.md), and records GB/s (bytes read + written) or GFLOP/s in
extra_info. The last test prints the median ratios of the run.
torch is optional: its benchmarks are skipped when it is not installed.
"""
import math
import time

import numpy as np
import pytest
import scipy.special as sp

import cattn

try:
    import torch
    torch.set_num_threads(2)
except ImportError:  # pragma: no cover
    torch = None

THREADS = 2
WARMUP_S = 0.3
_medians = {}     # (group, library) -> median seconds


def _run(benchmark, group, lib, fn, nbytes=None, flops=None):
    """Warm up, time fn, record throughput and the median for the report."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < WARMUP_S:
        fn()
    benchmark.group = group
    benchmark.extra_info["library"] = lib
    result = benchmark(fn)
    if benchmark.stats is None:          # --benchmark-disable: ran once, nothing timed
        return result
    med = benchmark.stats.stats.median
    _medians[(group, lib)] = med
    if nbytes:
        benchmark.extra_info["GB/s"] = round(nbytes / med / 1e9, 2)
    if flops:
        benchmark.extra_info["GFLOP/s"] = round(flops / med / 1e9, 2)
    return result


@pytest.fixture(autouse=True)
def _two_threads():
    with cattn.num_threads(THREADS):
        yield


def _need_torch():
    if torch is None:
        pytest.skip("torch not installed")


# ---------------------------------------------------------------- softmax

SOFTMAX_SHAPES = [(4096, 1024), (64, 12, 128, 128)]


def _softmax_input(shape):
    return np.random.default_rng(0).standard_normal(shape, dtype=np.float32)


def _group_softmax(shape):
    return f"softmax {shape} f32"


@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
def test_softmax_scipy(benchmark, shape):
    x = _softmax_input(shape)
    _run(benchmark, _group_softmax(shape), "scipy", lambda: sp.softmax(x, axis=-1), 2 * x.nbytes)


@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
def test_softmax_torch(benchmark, shape):
    _need_torch()
    t = torch.from_numpy(_softmax_input(shape))
    _run(benchmark, _group_softmax(shape), "torch", lambda: torch.softmax(t, -1), 2 * t.numel() * 4)


@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
def test_softmax_cattn(benchmark, shape):
    x = _softmax_input(shape)
    y = _run(benchmark, _group_softmax(shape), "cattn", lambda: cattn.softmax(x), 2 * x.nbytes)
    np.testing.assert_allclose(y[:4], sp.softmax(x[:4].astype(np.float64), axis=-1), rtol=1e-5, atol=1e-8)


# ---------------------------------------------------------------- layer norm

LN_SHAPE = (8192, 768)
LN_GROUP = f"layer_norm {LN_SHAPE} f32"


def _ln_inputs():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(LN_SHAPE, dtype=np.float32)
    w = rng.standard_normal(LN_SHAPE[-1], dtype=np.float32)
    b = rng.standard_normal(LN_SHAPE[-1], dtype=np.float32)
    return x, w, b


def _ln_numpy(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    d = x - mu
    var = np.mean(d * d, axis=-1, keepdims=True)
    return d / np.sqrt(var + eps) * w + b


def test_layer_norm_numpy(benchmark):
    x, w, b = _ln_inputs()
    _run(benchmark, LN_GROUP, "numpy", lambda: _ln_numpy(x, w, b), 2 * x.nbytes)


def test_layer_norm_torch(benchmark):
    _need_torch()
    x, w, b = map(torch.from_numpy, _ln_inputs())
    F = torch.nn.functional
    _run(benchmark, LN_GROUP, "torch", lambda: F.layer_norm(x, (LN_SHAPE[-1],), w, b), 2 * x.numel() * 4)


def test_layer_norm_cattn(benchmark):
    x, w, b = _ln_inputs()
    y = _run(benchmark, LN_GROUP, "cattn", lambda: cattn.layer_norm(x, w, b), 2 * x.nbytes)
    np.testing.assert_allclose(y[:8], _ln_numpy(x[:8].astype(np.float64), w, b), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- gelu

GELU_N = 8 << 20
GELU_GROUP = "gelu 8M f32"


def _gelu_input():
    return np.random.default_rng(2).standard_normal(GELU_N, dtype=np.float32) * 3


def _gelu_numpy_scipy(x):
    return 0.5 * x * (1.0 + sp.erf(x * np.float32(1 / math.sqrt(2))))


def test_gelu_numpy_scipy(benchmark):
    x = _gelu_input()
    _run(benchmark, GELU_GROUP, "numpy+scipy", lambda: _gelu_numpy_scipy(x), 2 * x.nbytes)


def test_gelu_torch(benchmark):
    _need_torch()
    t = torch.from_numpy(_gelu_input())
    F = torch.nn.functional
    _run(benchmark, GELU_GROUP, "torch", lambda: F.gelu(t), 2 * t.numel() * 4)


def test_gelu_cattn(benchmark):
    x = _gelu_input()
    y = _run(benchmark, GELU_GROUP, "cattn", lambda: cattn.gelu(x), 2 * x.nbytes)
    np.testing.assert_allclose(y[:1000], _gelu_numpy_scipy(x[:1000].astype(np.float64)),
                               rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- linear + gelu

LIN = (4096, 768, 3072)        # M, K (in_features), N (out_features): a BERT-base FFN
LIN_GROUP = f"linear+gelu {LIN[0]}x{LIN[1]} -> {LIN[2]} f32"
LIN_FLOPS = 2.0 * LIN[0] * LIN[1] * LIN[2]


def _lin_inputs():
    rng = np.random.default_rng(3)
    M, K, N = LIN
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = (rng.standard_normal((N, K), dtype=np.float32) / np.sqrt(K)).astype(np.float32)
    b = rng.standard_normal(N, dtype=np.float32)
    return x, w, b


def test_linear_then_gelu_cattn(benchmark):
    x, w, b = _lin_inputs()
    _run(benchmark, LIN_GROUP, "cattn linear, then gelu",
         lambda: cattn.gelu(cattn.linear(x, w, b)), flops=LIN_FLOPS)


def test_linear_gelu_torch(benchmark):
    _need_torch()
    x, w, b = map(torch.from_numpy, _lin_inputs())
    F = torch.nn.functional
    _run(benchmark, LIN_GROUP, "torch linear, then gelu", lambda: F.gelu(F.linear(x, w, b)),
         flops=LIN_FLOPS)


def test_linear_gelu_fused_cattn(benchmark):
    x, w, b = _lin_inputs()
    y = _run(benchmark, LIN_GROUP, "cattn fused", lambda: cattn.linear(x, w, b, activation="gelu"),
             flops=LIN_FLOPS)
    np.testing.assert_array_equal(y[:64], cattn.gelu(cattn.linear(x[:64], w, b)))


# ---------------------------------------------------------------- report

def test_zz_ratios(capsys):
    """Print median ratios of this run (peer median / cattn median)."""
    pairs = [(_group_softmax(s), "cattn", p) for s in SOFTMAX_SHAPES for p in ("scipy", "torch")]
    pairs += [(LN_GROUP, "cattn", p) for p in ("numpy", "torch")]
    pairs += [(GELU_GROUP, "cattn", p) for p in ("numpy+scipy", "torch")]
    pairs += [(LIN_GROUP, "cattn fused", p) for p in ("cattn linear, then gelu", "torch linear, then gelu")]
    lines = ["", "median speed-up of cattn (peer median / cattn median), this run:"]
    for group, ours, peer in pairs:
        if (group, ours) in _medians and (group, peer) in _medians:
            a, b = _medians[(group, ours)], _medians[(group, peer)]
            lines.append(f"  {group:<40} {ours} {a * 1e3:8.2f} ms   {peer} {b * 1e3:8.2f} ms"
                         f"   x{b / a:5.2f}")
    with capsys.disabled():
        print("\n".join(lines))
