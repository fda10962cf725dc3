"""cattn.softmax / cattn.log_softmax against scipy.special (float64) and
cattn.reference: every axis of 1-D to 4-D arrays, both dtypes, strided and
read-only inputs, extreme values, out= and in-place, errors, bitwise
equality across thread counts, and (last test) the portable kernel path.

Tolerances, from the arithmetic of the kernels (u = eps/2, e = eps):
  softmax y = exp(x - m) * (1/s):
    x - m rounds once: relative error <= u |x - m| in exp(x - m);
    exp <= 2 ulp (test_vexp); 1/s and the product: 1 ulp together;
    s = sum of n terms in L independent partial sums (AVX2: 32 float / 16
    double lanes; portable: one double sum for float32, 4 for float64):
    relative error <= (n/L + 5) u.
  => |y - ref| <= ref * e * (4 + |x - m| + n/L/2 + 3) + 2 * tiny
    (tiny = smallest normal: the exp flushes results below it to 0).
  log_softmax y = (x - m) - log(s): absolute error <= e (|x - m| + |log s|)
    + relative error of s (same as above) + 1/2 ulp of y; |x - m| and
    |log s| are both <= |y|, so |y - ref| <= e * (2 |y| + n/L/2 + 8).
The float64 reference has the same kind of error as a float64 result, so
the tolerance doubles for float64.
"""
import numpy as np
import pytest
import scipy.special as sp

import cattn
from cattn import reference
from cattn_testing.numerics import eps, threads_bitwise
from cattn_testing.paths import kernel_path as path
from cattn_testing.rows import strided_variants

FLOATS = [np.float32, np.float64]


def _lanes(dtype):
    if path() == "avx2":
        return 32 if dtype == np.float32 else 16
    return 1e300 if dtype == np.float32 else 4


def _check(got, x, axis, log, dtype):
    """Compare got with the float64 reference under the tolerance above."""
    x64 = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        ref = reference.log_softmax(x64, axis) if log else reference.softmax(x64, axis)
    m = np.max(x64, axis=axis, keepdims=True)
    n = x64.shape[axis]
    e = eps(dtype) * (2 if dtype == np.float64 else 1)
    spread = n / _lanes(dtype) / 2
    assert got.dtype == dtype and got.shape == x64.shape
    g = got.astype(np.float64)
    with np.errstate(over="ignore"):
        ref = ref.astype(dtype).astype(np.float64)     # -6e38 is -inf in float32
    fin = np.isfinite(ref)
    assert np.array_equal(np.isnan(g), np.isnan(ref))
    assert np.array_equal(g[np.isinf(ref)], ref[np.isinf(ref)])
    with np.errstate(invalid="ignore", over="ignore"):
        if log:
            tol = e * (2 * np.abs(ref) + spread + 8)
        else:
            d = np.where(ref > 0, np.abs(x64 - m), 0.0)
            tol = ref * e * (7 + d + spread) + 2 * np.finfo(dtype).tiny
    with np.errstate(invalid="ignore"):
        bad = fin & ~(np.abs(g - ref) <= tol)
    assert not bad.any(), (
        f"{bad.sum()} entries off; worst |err|/tol = {np.max(np.abs(g - ref)[bad] / tol[bad]):.3g}")


SHAPES = [(37,), (5, 37), (3, 40, 45), (2, 3, 5, 33), (1, 1), (4, 1, 3), (2, 70, 3)]
CASES = [(s, a) for s in SHAPES for a in list(range(len(s))) + [-1]]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,axis", CASES)
@pytest.mark.parametrize("log", [False, True])
def test_every_axis(dtype, shape, axis, log):
    rng = np.random.default_rng(hash((shape, axis)) % 2**32)
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    got = (cattn.log_softmax if log else cattn.softmax)(x, axis=axis)
    _check(got, x, axis, log, dtype)
    want = (sp.log_softmax if log else sp.softmax)(x.astype(np.float64), axis=axis)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-13,
                               atol=1e-6 if dtype == np.float32 else 1e-14)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 7, 8, 9, 31, 33, 1000, 4099, 100_000])
def test_row_lengths(dtype, n):
    # vector main loops, tails, and a long row (sum error grows as n/L)
    x = np.random.default_rng(n).standard_normal((2, n)).astype(dtype) * 3
    _check(cattn.softmax(x), x, -1, False, dtype)
    _check(cattn.log_softmax(x), x, -1, True, dtype)
    # the same rows as columns (column kernel, inner vectorized)
    _check(cattn.softmax(x.T.copy(), axis=0), x.T, 0, False, dtype)
    np.testing.assert_allclose(cattn.softmax(x).sum(-1), 1.0, rtol=1e-5 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("log", [False, True])
def test_strided_and_readonly(dtype, log):
    x = np.random.default_rng(3).standard_normal((4, 19, 35)).astype(dtype)
    f = cattn.log_softmax if log else cattn.softmax
    for axis in range(3):
        for name, v in strided_variants(x):
            _check(f(v, axis=axis), x, axis, log, dtype)
    bx = np.broadcast_to(x[:, :1, :], x.shape)          # zero stride along axis 1
    _check(f(bx, axis=1), bx, 1, log, dtype)


def _extreme_rows(dtype):
    big = 3e38 if dtype == np.float32 else 1e308
    ninf, nan = -np.inf, np.nan
    rows = [
        [1e4, 1e4 - 1, 1e4 - 2, 1e4 + 0.5, 1e4, 1e4, 1e4, 1e4, 1e4],
        [-1e4, -1e4 - 1, -1e4 + 3, -1e4, -1e4, -1e4, -1e4, -1e4, -1e4],
        [1e4, -1e4, 0, 1e4, -1e4, 0, 1, 2, 3],
        [big, -big, 0, big, 1, -1, -big, 0, 0],
        [-big, -big, -big, -big, -big, -big, -big, -big, -big],
        [ninf, 1, 2, ninf, 3, ninf, ninf, ninf, 0],
        [ninf, ninf, ninf, ninf, -1e4, ninf, ninf, ninf, ninf],
        [ninf] * 9,
        [1, 2, nan, 4, 5, 6, 7, 8, 9],
        [ninf, ninf, nan, ninf, ninf, ninf, ninf, ninf, ninf],
        [1, 2, np.inf, 4, 5, 6, 7, 8, 9],
        [0.5, 0.25, 0.125, 1, 2, 3, 4, 5, 6],
    ]
    return np.array(rows, dtype=dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("columns", [False, True])
def test_extreme_values(dtype, columns):
    x = _extreme_rows(dtype)
    xs = np.tile(x, (1, 5))            # 45 per row: main loop + tail, 2 column blocks
    axis = -1
    if columns:
        xs, axis = np.ascontiguousarray(xs.T), 0
    with np.errstate(invalid="ignore", over="ignore"):
        y = cattn.softmax(xs, axis=axis)
        ly = cattn.log_softmax(xs, axis=axis)
    if columns:
        y, ly, xs = y.T, ly.T, xs.T
    nan_rows = [8, 9, 10]        # NaN, NaN among -inf, +inf (inf - inf = NaN)
    ok_rows = [r for r in range(len(x)) if r not in nan_rows and r != 7]
    # NaN rows are all NaN; no other row has any NaN
    assert np.isnan(y[nan_rows]).all() and np.isnan(ly[nan_rows]).all()
    assert not np.isnan(y[ok_rows + [7]]).any() and not np.isnan(ly[ok_rows + [7]]).any()
    # a row of all -inf: zeros and -inf
    assert np.all(y[7] == 0) and np.all(ly[7] == -np.inf)
    _check(y[ok_rows], xs[ok_rows], -1, False, dtype)
    _check(ly[ok_rows], xs[ok_rows], -1, True, dtype)
    # spot values: the -inf entries of a mixed row are exact zeros / -inf
    assert np.all(y[5][np.isneginf(xs[5])] == 0) and np.all(ly[5][np.isneginf(xs[5])] == -np.inf)
    np.testing.assert_allclose(y[6][np.isfinite(xs[6])], 0.2, rtol=4 * eps(dtype))
    np.testing.assert_allclose(y[4], 1 / 45, rtol=8 * eps(dtype))


def test_nan_stays_in_its_row():
    x = np.random.default_rng(1).standard_normal((6, 50)).astype(np.float32)
    x[2, 17] = np.nan
    y = cattn.softmax(x)
    assert np.isnan(y[2]).all() and not np.isnan(np.delete(y, 2, axis=0)).any()
    y0 = cattn.softmax(x, axis=0)                      # along columns: only column 17
    assert np.isnan(y0[:, 17]).all() and not np.isnan(np.delete(y0, 17, axis=1)).any()


@pytest.mark.parametrize("dtype", FLOATS)
def test_out_and_in_place(dtype):
    x = np.random.default_rng(2).standard_normal((8, 40, 33)).astype(dtype)
    for axis in (0, 1, 2):
        want = cattn.softmax(x, axis=axis)
        out = np.empty_like(x)
        assert cattn.softmax(x, axis=axis, out=out) is out
        assert out.tobytes() == want.tobytes()
        y = x.copy()
        assert cattn.softmax(y, axis=axis, out=y) is y        # in place
        assert y.tobytes() == want.tobytes()
        wl = cattn.log_softmax(x, axis=axis)
        y = x.copy()
        cattn.log_softmax(y, axis=axis, out=y)
        assert y.tobytes() == wl.tobytes()
        big = np.zeros((8, 80, 33), dtype=dtype)              # strided in place
        v = big[:, ::2]
        v[...] = x
        cattn.softmax(v, axis=axis, out=v)
        np.testing.assert_allclose(v, want, rtol=64 * eps(dtype), atol=1e-30)
        assert np.all(big[:, 1::2] == 0)
    fo = np.empty(x.shape, dtype=dtype, order="F")            # out with another layout
    cattn.softmax(x, axis=1, out=fo)
    np.testing.assert_allclose(fo, cattn.softmax(x, axis=1), rtol=64 * eps(dtype))


def test_out_errors():
    x = np.random.default_rng(0).standard_normal((4, 10)).astype(np.float32)
    with pytest.raises(TypeError, match="float64"):
        cattn.softmax(x, out=np.empty((4, 10)))
    with pytest.raises(ValueError, match=r"\(4, 9\)"):
        cattn.softmax(x, out=np.empty((4, 9), np.float32))
    buf = np.zeros((5, 10), np.float32)
    buf[:4] = x
    with pytest.raises(ValueError, match="overlap"):
        cattn.softmax(buf[:4], out=buf[1:])                   # partial overlap
    ro = np.empty((4, 10), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cattn.softmax(x, out=ro)


def test_input_errors():
    with pytest.raises(TypeError, match="int64"):
        cattn.softmax(np.arange(6).reshape(2, 3))
    with pytest.raises(TypeError, match="float16"):
        cattn.log_softmax(np.ones(3, np.float16))
    with pytest.raises(TypeError, match="complex128"):
        cattn.softmax(np.ones(3, complex))
    with pytest.raises(np.exceptions.AxisError, match="axis 2"):
        cattn.softmax(np.ones((2, 3)), axis=2)
    with pytest.raises(ValueError, match="axis -3"):          # AxisError is a ValueError
        cattn.log_softmax(np.ones((2, 3)), axis=-3)
    with pytest.raises(np.exceptions.AxisError):
        cattn.softmax(np.float64(1.0))                        # 0-d: no axis -1
    with pytest.raises(TypeError, match="axis"):
        cattn.softmax(np.ones(3), axis=0.5)


def test_lists_and_empty():
    np.testing.assert_allclose(cattn.softmax([1, 2, 3]), sp.softmax([1.0, 2.0, 3.0]), rtol=1e-15)
    for shape, axis in [((0, 5), -1), ((0, 5), 0), ((3, 0), -1), ((3, 0, 2), 1)]:
        y = cattn.softmax(np.ones(shape, np.float32), axis=axis)
        assert y.shape == shape and y.dtype == np.float32


@pytest.mark.parametrize("log", [False, True])
def test_bitwise_across_threads(log):
    f = cattn.log_softmax if log else cattn.softmax
    rng = np.random.default_rng(5)
    x = rng.standard_normal((300, 257)).astype(np.float32)   # > 2 x 32768: 2 threads run
    threads_bitwise(f, x)
    threads_bitwise(f, x, axis=0)                             # column kernel
    x3 = rng.standard_normal((64, 40, 50))
    threads_bitwise(f, x3, axis=1)
    threads_bitwise(f, x3[:, :, ::2], axis=2)                 # gathered rows (stride 2)
    threads_bitwise(f, x3, axis=1, out=np.empty((64, 40, 50), order="F"))  # scattered


@pytest.mark.parametrize("log", [False, True])
def test_large_output_same_bits(log):
    # a large (threaded, 17 MiB) output has the very bits of the small path
    f = cattn.log_softmax if log else cattn.softmax
    x = np.random.default_rng(6).standard_normal((4099, 1025)).astype(np.float32)
    big = f(x)
    rows = [0, 1, 2047, 4098]
    assert big[rows].tobytes() == f(x[rows]).tobytes()
    x64 = x[:2100].astype(np.float64)                         # 17 MiB of float64
    assert f(x64)[[5, 2099]].tobytes() == f(x64[[5, 2099]]).tobytes()
    y = x.copy()
    f(y, out=y)                                               # in place
    assert y.tobytes() == big.tobytes()


def test_against_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(9).standard_normal((16, 12, 33, 65)).astype(np.float32) * 5
    for axis in (-1, 1):
        ref = torch.softmax(torch.from_numpy(x), dim=axis).numpy()
        np.testing.assert_allclose(cattn.softmax(x, axis=axis), ref, rtol=2e-5, atol=1e-7)
        ref = torch.log_softmax(torch.from_numpy(x), dim=axis).numpy()
        np.testing.assert_allclose(cattn.log_softmax(x, axis=axis), ref, rtol=2e-5, atol=2e-5)
