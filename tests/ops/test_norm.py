"""cattn.layer_norm / cattn.rms_norm against a long-double two-pass
reference and cattn.reference (float64): shapes, weight/bias combinations,
rows with a large mean and a tiny variance, strided / read-only inputs,
out= and in place, dtype promotion, errors, thread-count determinism, torch
parity, and (last test) the portable kernel path.

Tolerances (e = eps of the result dtype, u = e/2; t = (x - mean) * rstd):
  the kernels get mean and variance to ~1e-16 relative (float32 rows sum
  in double; float64 rows use the corrected two-pass), then round rstd
  (u), form x - mean as (x - mu_hi) - mu_lo (<= 2u |t|), multiply (u) and
  fma with weight / bias (u): |y - ref| <= 3e (|t| |w| + |b|). The mean
  itself is known to ~u * std (float64: the corrected mean sums n centered
  terms each rounded by u |x - mean|), which shifts every t by ~u in
  absolute terms; so the test takes 4e ((|t| + 1) |w| + |b|) + tiny.
  RMS norm: three roundings, 4e |ref|.
The long-double reference (64-bit mantissa, corrected two-pass) is exact
enough for float64 even for rows like 1e4 + noise of 1e-2, where a plain
float64 two-pass loses ~10 bits to the rounding of the mean.
"""
import numpy as np
import pytest

import cattn
from cattn import reference
from cattn_testing.numerics import eps, threads_bitwise
from cattn_testing.rows import strided_variants

FLOATS = [np.float32, np.float64]


def ln_ref(x, w=None, b=None, eps_=1e-5):
    """(y, t) in long double: corrected two-pass mean / variance."""
    X = np.asarray(x).astype(np.longdouble)
    d = X - X.mean(-1, keepdims=True)
    d = d - d.mean(-1, keepdims=True)
    t = d / np.sqrt((d * d).mean(-1, keepdims=True) + np.longdouble(eps_))
    y = t
    if w is not None:
        y = y * np.asarray(w).astype(np.longdouble)
    if b is not None:
        y = y + np.asarray(b).astype(np.longdouble)
    return y, t


def rms_ref(x, w=None, eps_=1e-6):
    X = np.asarray(x).astype(np.longdouble)
    y = X / np.sqrt((X * X).mean(-1, keepdims=True) + np.longdouble(eps_))
    return y * np.asarray(w).astype(np.longdouble) if w is not None else y


def check_ln(got, x, w, b, eps_=1e-5):
    dtype = got.dtype.type
    ref, t = ln_ref(x, w, b, eps_)
    aw = 1 if w is None else np.abs(np.asarray(w, np.longdouble))
    ab = 0 if b is None else np.abs(np.asarray(b, np.longdouble))
    tol = 4 * eps(dtype) * ((np.abs(t) + 1) * aw + ab) + np.finfo(dtype).tiny
    err = np.abs(got.astype(np.longdouble) - ref)
    assert np.all(err <= tol), f"worst err/tol {float(np.max(err / tol)):.3g}"


def check_rms(got, x, w, eps_=1e-6):
    dtype = got.dtype.type
    ref = rms_ref(x, w, eps_)
    err = np.abs(got.astype(np.longdouble) - ref)
    tol = 4 * eps(dtype) * np.abs(ref) + np.finfo(dtype).tiny
    assert np.all(err <= tol), f"worst err/tol {float(np.max(err / tol)):.3g}"


SHAPES = [(768,), (5, 768), (3, 4, 33), (2, 3, 5, 7), (10, 1), (4, 1001), (3, 8), (2, 9)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("wb", ["none", "w", "b", "wb"])
def test_layer_norm(dtype, shape, wb):
    rng = np.random.default_rng(len(shape) * 100 + shape[-1])
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    n = shape[-1]
    w = rng.standard_normal(n).astype(dtype) if "w" in wb else None
    b = rng.standard_normal(n).astype(dtype) if "b" in wb else None
    y = cattn.layer_norm(x, w, b)
    assert y.dtype == dtype and y.shape == x.shape
    check_ln(y, x, w, b)
    np.testing.assert_allclose(y, reference.layer_norm(x, w, b), rtol=1e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_w", [False, True])
def test_rms_norm(dtype, shape, with_w):
    rng = np.random.default_rng(shape[-1])
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    w = rng.standard_normal(shape[-1]).astype(dtype) if with_w else None
    y = cattn.rms_norm(x, w)
    assert y.dtype == dtype and y.shape == x.shape
    check_rms(y, x, w)
    np.testing.assert_allclose(y, reference.rms_norm(x, w), rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
def test_large_mean_small_variance(dtype):
    # rows 1e4 + noise of 1e-2: E[x^2] - E[x]^2 would cancel completely in
    # float32, and a float32 mean would be off by ~ulp(1e4) = 1e-3 = 0.1 std
    rng = np.random.default_rng(11)
    x = (1e4 + 1e-2 * rng.standard_normal((16, 768))).astype(dtype)
    x[3] -= 2e4                                   # a row around -1e4 too
    w = rng.standard_normal(768).astype(dtype)
    b = rng.standard_normal(768).astype(dtype)
    for ww, bb in [(None, None), (w, b)]:
        y = cattn.layer_norm(x, ww, bb)
        check_ln(y, x, ww, bb)
        # against the float64 oracle: its own error here is ~1e-9, far
        # below float32's, so for float32 the plain oracle is enough
        if dtype == np.float32:
            np.testing.assert_allclose(y, reference.layer_norm(x, ww, bb), rtol=2e-6, atol=2e-6)
    y = cattn.layer_norm(x, eps=1e-12)          # var ~1e-4: eps=1e-5 would shrink std
    np.testing.assert_allclose(y.astype(np.float64).std(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-5)


@pytest.mark.parametrize("outlier", [1e3, 1e5, 1e8])
def test_outlier_rows(outlier):
    # a few huge entries per row (transformers' "massive activations"):
    # the float32 fast path sums blocks in float, then corrects the mean
    rng = np.random.default_rng(12)
    x = rng.standard_normal((32, 768)).astype(np.float32)
    for r in range(32):
        x[r, rng.integers(0, 768, 3)] = outlier * rng.choice([-1, 1], 3)
    w = rng.standard_normal(768).astype(np.float32)
    check_ln(cattn.layer_norm(x, w, w), x, w, w)
    check_rms(cattn.rms_norm(x, w), x, w)


@pytest.mark.parametrize("lead", [0.5, 50.0, 1e4])
def test_leading_values_far_from_the_mean(lead):
    # the float32 AVX2 kernel centers its sums on the mean of the first 16
    # values and re-centers when that guess is poor: exercise both
    rng = np.random.default_rng(14)
    x = rng.standard_normal((8, 300)).astype(np.float32)
    x[:, :16] += np.float32(lead)
    x[1, :16] = -x[1, :16]
    check_ln(cattn.layer_norm(x), x, None, None)
    x = (3e3 + rng.standard_normal((4, 768)) * 1e-2).astype(np.float32)
    x[:, :16] = np.float32(3e3 + lead * 1e-2)
    check_ln(cattn.layer_norm(x), x, None, None)


def test_constant_rows_and_extremes():
    x = np.full((3, 40), 7.0, np.float32)
    np.testing.assert_array_equal(cattn.layer_norm(x), 0.0)
    np.testing.assert_array_equal(cattn.layer_norm(x, bias=np.arange(40, dtype=np.float32)),
                                  np.broadcast_to(np.arange(40, dtype=np.float32), (3, 40)))
    with np.errstate(invalid="ignore"):
        assert np.isnan(cattn.layer_norm(x, eps=0.0)).all()      # 0/0 as torch
    x = np.random.default_rng(0).standard_normal((4, 50)).astype(np.float32)
    x[1, 3] = np.nan
    for f in (cattn.layer_norm, cattn.rms_norm):
        y = f(x)
        assert np.isnan(y[1]).all() and not np.isnan(np.delete(y, 1, axis=0)).any()
    big = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32) * 1e30
    check_ln(cattn.layer_norm(big), big, None, None)     # x^2 would overflow in float
    check_rms(cattn.rms_norm(big), big, None)


@pytest.mark.parametrize("dtype", FLOATS)
def test_strided_and_readonly(dtype):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 6, 37)).astype(dtype)
    w = rng.standard_normal(37).astype(dtype)
    b = rng.standard_normal(37).astype(dtype)
    for name, v in strided_variants(x):
        check_ln(cattn.layer_norm(v, w, b), x, w, b)
        check_rms(cattn.rms_norm(v, w), x, w)
    check_ln(cattn.layer_norm(x, w[::-1].copy()[::-1], b), x, w, b)   # strided weight


@pytest.mark.parametrize("dtype", FLOATS)
def test_out_and_in_place(dtype):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 50)).astype(dtype)
    w = rng.standard_normal(50).astype(dtype)
    want = cattn.layer_norm(x, w, w)
    out = np.empty_like(x)
    assert cattn.layer_norm(x, w, w, out=out) is out and out.tobytes() == want.tobytes()
    y = x.copy()
    assert cattn.layer_norm(y, w, w, out=y) is y and y.tobytes() == want.tobytes()
    y = x.copy()
    cattn.rms_norm(y, w, out=y)
    assert y.tobytes() == cattn.rms_norm(x, w).tobytes()
    fo = np.empty(x.shape, dtype, order="F")
    cattn.layer_norm(x, w, w, out=fo)
    np.testing.assert_array_equal(fo, want)
    with pytest.raises(ValueError, match="overlap"):
        cattn.layer_norm(x, w, out=x[::-1])                  # same memory, other layout
    with pytest.raises(ValueError, match="overlap"):
        cattn.rms_norm(x, x[0].copy(), out=x[:, ::-1])
    wv = np.zeros((2, 50), dtype)
    with pytest.raises(ValueError, match="overlap"):
        cattn.layer_norm(x[:2], wv[0], out=wv)               # out overlaps weight


def test_promotion_and_lists():
    x32 = np.random.default_rng(6).standard_normal((3, 8)).astype(np.float32)
    w64 = np.ones(8)
    y = cattn.layer_norm(x32, w64)
    assert y.dtype == np.float64
    check_ln(y, x32, w64, None)
    assert cattn.rms_norm(x32, w64.astype(np.float32)).dtype == np.float32
    y = cattn.layer_norm([[1, 2, 3], [4, 5, 7]])
    assert y.dtype == np.float64
    check_ln(y, np.array([[1, 2, 3], [4, 5, 7]], float), None, None)


def test_errors():
    x = np.ones((4, 8), np.float32)
    with pytest.raises(ValueError, match=r"weight has shape \(7,\).*\(8,\).*\(4, 8\)"):
        cattn.layer_norm(x, np.ones(7, np.float32))
    with pytest.raises(ValueError, match=r"bias has shape \(1, 8\)"):
        cattn.layer_norm(x, None, np.ones((1, 8), np.float32))
    with pytest.raises(ValueError, match=r"weight has shape \(4, 8\)"):
        cattn.rms_norm(x, x)
    with pytest.raises(TypeError, match="int32"):
        cattn.layer_norm(np.ones((2, 3), np.int32))
    with pytest.raises(TypeError, match="weight has dtype int64"):
        cattn.rms_norm(x, np.ones(8, np.int64))
    with pytest.raises(ValueError, match="eps"):
        cattn.layer_norm(x, eps=-1e-5)
    with pytest.raises(ValueError, match="eps"):
        cattn.rms_norm(x, eps=float("nan"))
    with pytest.raises(TypeError, match="eps"):
        cattn.layer_norm(x, eps="small")
    with pytest.raises(ValueError, match="at least 1 dimension"):
        cattn.layer_norm(np.float32(3.0))
    with pytest.raises(TypeError, match="float32"):
        cattn.layer_norm(x, out=np.empty((4, 8)))


def test_empty():
    assert cattn.layer_norm(np.ones((0, 5), np.float32)).shape == (0, 5)
    assert cattn.rms_norm(np.ones((3, 0))).shape == (3, 0)


def test_bitwise_across_threads():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1000, 257)).astype(np.float32)
    w = rng.standard_normal(257).astype(np.float32)
    threads_bitwise(cattn.layer_norm, x, w, w)
    threads_bitwise(cattn.rms_norm, x, w)
    threads_bitwise(cattn.layer_norm, x.astype(np.float64))


def test_large_output_same_bits():
    # a large (threaded, 17 MiB) output has the very bits of the small path
    rng = np.random.default_rng(13)
    x = rng.standard_normal((5500, 769)).astype(np.float32)
    w = rng.standard_normal(769).astype(np.float32)
    rows = [0, 2750, 5499]
    big = cattn.layer_norm(x, w, w)
    assert big[rows].tobytes() == cattn.layer_norm(x[rows], w, w).tobytes()
    big = cattn.rms_norm(x, w)
    assert big[rows].tobytes() == cattn.rms_norm(x[rows], w).tobytes()
    y = x.copy()
    cattn.layer_norm(y, w, w, out=y)
    assert y.tobytes() == cattn.layer_norm(x, w, w).tobytes()


def test_against_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(8)
    x = rng.standard_normal((64, 384)).astype(np.float32)
    w = rng.standard_normal(384).astype(np.float32)
    b = rng.standard_normal(384).astype(np.float32)
    tx, tw, tb = map(torch.from_numpy, (x, w, b))
    np.testing.assert_allclose(cattn.layer_norm(x, w, b, eps=1e-12),
                               F.layer_norm(tx, (384,), tw, tb, eps=1e-12).numpy(), rtol=1e-5, atol=1e-5)
    if hasattr(F, "rms_norm"):
        np.testing.assert_allclose(cattn.rms_norm(x, w, eps=1e-6),
                                   F.rms_norm(tx, (384,), tw, eps=1e-6).numpy(), rtol=1e-5, atol=1e-6)
