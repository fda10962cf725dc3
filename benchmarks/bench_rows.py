"""Row-kernel benchmarks: cattn vs its peers, side by side in one run.

    pytest benchmarks/bench_rows.py --benchmark-json=rows.json
    python benchmarks/report.py rows.json

Groups (one per shape; float32, 2 threads for every library):
  softmax (4096, 1024) and (64, 12, 128, 128), last axis: vs scipy.special.softmax, torch.softmax
  layer_norm (8192, 768) with weight and bias: vs a NumPy two-pass, torch.nn.functional.layer_norm
  gelu over 8M floats: vs NumPy + scipy.special.erf, torch.nn.functional.gelu
  linear + gelu (4096, 768) -> 3072: cattn's fused epilogue vs cattn linear then gelu
    (lib cattn, variant "unfused") and torch linear then gelu
Each library is timed as a block by conftest's `bench`; extra_info has
`bytes` (read + written) for the row ops and `flops` for linear + gelu.
torch is optional: its benchmarks are skipped when it is not installed.
"""
import numpy as np
import pytest

import baselines
import cattn

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

F32 = dict(dtype="float32")


def _need_torch():
    if torch is None:
        pytest.skip("torch not installed")


# ---------------------------------------------------------------- softmax

SOFTMAX_SHAPES = [(4096, 1024), (64, 12, 128, 128)]


def _softmax_input(shape):
    return np.random.default_rng(0).standard_normal(shape, dtype=np.float32)


def _softmax(bench, shape, lib, fn, x):
    return bench(fn, group=f"softmax {shape} f32", lib=lib, shape=list(shape), bytes=2 * x.nbytes,
                 **F32)


@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
def test_softmax_scipy(bench, shape):
    x = _softmax_input(shape)
    _softmax(bench, shape, "scipy", lambda: baselines.scipy_softmax(x), x)


@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
def test_softmax_torch(bench, shape):
    _need_torch()
    x = _softmax_input(shape)
    t = torch.from_numpy(x)
    _softmax(bench, shape, "torch", lambda: torch.softmax(t, -1), x)


@pytest.mark.parametrize("shape", SOFTMAX_SHAPES, ids=str)
def test_softmax_cattn(bench, shape):
    x = _softmax_input(shape)
    y = _softmax(bench, shape, "cattn", lambda: cattn.softmax(x), x)
    np.testing.assert_allclose(y[:4], baselines.scipy_softmax(x[:4].astype(np.float64)),
                               rtol=1e-5, atol=1e-8)


# ---------------------------------------------------------------- layer norm

LN_SHAPE = (8192, 768)


def _ln_inputs():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(LN_SHAPE, dtype=np.float32)
    w = rng.standard_normal(LN_SHAPE[-1], dtype=np.float32)
    b = rng.standard_normal(LN_SHAPE[-1], dtype=np.float32)
    return x, w, b


def _layer_norm(bench, lib, fn):
    return bench(fn, group=f"layer_norm {LN_SHAPE} f32", lib=lib, shape=list(LN_SHAPE),
                 bytes=2 * 4 * LN_SHAPE[0] * LN_SHAPE[1], **F32)


def test_layer_norm_numpy(bench):
    x, w, b = _ln_inputs()
    _layer_norm(bench, "numpy", lambda: baselines.layer_norm(x, w, b))


def test_layer_norm_torch(bench):
    _need_torch()
    x, w, b = map(torch.from_numpy, _ln_inputs())
    F = torch.nn.functional
    _layer_norm(bench, "torch", lambda: F.layer_norm(x, (LN_SHAPE[-1],), w, b))


def test_layer_norm_cattn(bench):
    x, w, b = _ln_inputs()
    y = _layer_norm(bench, "cattn", lambda: cattn.layer_norm(x, w, b))
    np.testing.assert_allclose(y[:8], baselines.layer_norm(x[:8].astype(np.float64), w, b),
                               rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- gelu

GELU_N = 8 << 20


def _gelu_input():
    return np.random.default_rng(2).standard_normal(GELU_N, dtype=np.float32) * 3


def _gelu(bench, lib, fn):
    return bench(fn, group="gelu 8M f32", lib=lib, shape=[GELU_N], bytes=2 * 4 * GELU_N, **F32)


def test_gelu_numpy_scipy(bench):
    x = _gelu_input()
    _gelu(bench, "numpy+scipy", lambda: baselines.gelu_erf(x))


def test_gelu_torch(bench):
    _need_torch()
    t = torch.from_numpy(_gelu_input())
    _gelu(bench, "torch", lambda: torch.nn.functional.gelu(t))


def test_gelu_cattn(bench):
    x = _gelu_input()
    y = _gelu(bench, "cattn", lambda: cattn.gelu(x))
    np.testing.assert_allclose(y[:1000], baselines.gelu_erf(x[:1000].astype(np.float64)),
                               rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- linear + gelu

LIN = (4096, 768, 3072)        # M, K (in_features), N (out_features): a BERT-base FFN


def _lin_inputs():
    rng = np.random.default_rng(3)
    M, K, N = LIN
    x = rng.standard_normal((M, K), dtype=np.float32)
    w = (rng.standard_normal((N, K), dtype=np.float32) / np.sqrt(K)).astype(np.float32)
    b = rng.standard_normal(N, dtype=np.float32)
    return x, w, b


def _linear_gelu(bench, lib, fn, variant=None):
    M, K, N = LIN
    return bench(fn, group=f"linear+gelu {M}x{K} -> {N} f32", lib=lib, variant=variant,
                 shape=list(LIN), flops=2.0 * M * K * N, **F32)


def test_linear_then_gelu_cattn(bench):
    x, w, b = _lin_inputs()
    _linear_gelu(bench, "cattn", lambda: cattn.gelu(cattn.linear(x, w, b)), variant="unfused")


def test_linear_gelu_torch(bench):
    _need_torch()
    x, w, b = map(torch.from_numpy, _lin_inputs())
    F = torch.nn.functional
    _linear_gelu(bench, "torch", lambda: F.gelu(F.linear(x, w, b)))


def test_linear_gelu_fused_cattn(bench):
    x, w, b = _lin_inputs()
    y = _linear_gelu(bench, "cattn", lambda: cattn.linear(x, w, b, activation="gelu"))
    np.testing.assert_array_equal(y[:64], cattn.gelu(cattn.linear(x[:64], w, b)))
