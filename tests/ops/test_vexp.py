"""The vector exp (csrc/kernels/avx2/vexp.h, csrc/kernels/ref/vexp.h) through the test hook
cattn._ext.vexp, on the selected kernel path (and, by the last test, on the
portable path too).

Contract: max error <= 2 ulp in float32 over the whole finite range (the
AVX2 kernel measured 1.26 ulp on an exhaustive sweep, libm expf < 1 ulp),
exp(-inf) = 0, exactly 0 below the underflow point (never a denormal),
+inf on overflow, NaN preserved. The references are exact enough not to
count: float64 exp for float32 results (error 2^-29 ulp), long double exp
for float64 results.
"""
import numpy as np
import pytest

from cattn import _ext
import cattn
from cattn_testing.paths import kernel_path as path
from cattn_testing.rows import ulp_error

# smallest float whose exp is normal, and the overflow point (csrc/vexp.h)
LO32 = np.float32(-87.33654022)
HI32 = np.float32(88.72283905)
LO64 = -708.39641853226408
HI64 = 709.78271289338397
FLT_MIN = np.finfo(np.float32).tiny
DBL_MIN = np.finfo(np.float64).tiny


def _f32_sweep():
    """~3.5e6 float32 inputs: a dense uniform grid over [LO, HI], every float
    near the ends, near 0 and near multiples of ln 2 / 2 (where the range
    reduction switches n), and random bit patterns of every exponent."""
    rng = np.random.default_rng(7)
    parts = [np.linspace(LO32, HI32, 2_000_001, dtype=np.float32)]
    for c in [LO32, HI32, np.float32(0.0)] + [np.float32(k * 0.34657359) for k in range(-252, 257, 7)]:
        b = np.array([c], dtype=np.float32).view(np.int32)[0]
        parts.append(np.arange(b - 2000, b + 2000, dtype=np.int32).view(np.float32))
    bits = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    parts.append(bits[np.isfinite(bits)])
    x = np.concatenate(parts)
    return x[(x >= LO32) & (x <= HI32)]


def test_f32_max_ulp():
    x = _f32_sweep()
    got = _ext.vexp(x)
    ref = np.exp(x.astype(np.float64))
    fin = ref < float(np.finfo(np.float32).max)    # rounds to a finite float
    err = ulp_error(got[fin], ref[fin], np.float32)
    assert err.max() <= 2.0, f"max {err.max():.3f} ulp at x={x[fin][err.argmax()]!r}"
    # the top few inputs whose exp rounds past FLT_MAX must give +inf
    assert np.all(np.isposinf(got[~fin]))


def test_f64_max_ulp():
    rng = np.random.default_rng(8)
    x = np.concatenate([
        np.linspace(LO64, HI64, 400_001),
        rng.uniform(LO64, HI64, 200_000),
        rng.uniform(-1, 1, 100_000) * 2.0 ** rng.integers(-60, 10, 100_000),
        np.array([LO64, HI64, np.nextafter(HI64, 0), np.nextafter(LO64, 0), 0.0, -0.0, 1.0]),
    ])
    got = _ext.vexp(x)
    ref = np.exp(x.astype(np.longdouble))
    err = ulp_error(got, ref, np.float64)
    assert err.max() <= 2.0, f"max {err.max():.3f} ulp at x={x[err.argmax()]!r}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_nonpositive_variant_matches(dtype):
    # softmax and the activations call the one-scaling variant for x <= 0:
    # it must give the same bits as the general exp there, specials included
    if dtype == np.float32:
        x = _f32_sweep()
        x = x[x <= 0]
    else:
        x = -np.abs(np.random.default_rng(9).uniform(LO64 * 1.01, 0, 300_000))
    x = np.concatenate([x, np.array([-np.inf, np.nan, -0.0, 0.0], dtype=dtype)]).astype(dtype)
    a, b = _ext.vexp(x), _ext.vexp(x, nonpositive=True)
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(dtype):
    lo, hi = (LO32, HI32) if dtype == np.float32 else (LO64, HI64)
    tiny = FLT_MIN if dtype == np.float32 else DBL_MIN
    big = np.finfo(dtype).max
    x = np.array([-np.inf, np.inf, np.nan, -np.nan, 0.0, -0.0, -big, big,
                  np.nextafter(dtype(lo), dtype(-np.inf)), dtype(lo) * 1.5, -1e4], dtype=dtype)
    y = _ext.vexp(x)
    assert y.dtype == dtype
    assert y[0] == 0 and y[1] == np.inf
    assert np.isnan(y[2]) and np.isnan(y[3])
    assert y[4] == 1 and y[5] == 1
    assert y[6] == 0 and y[7] == np.inf
    assert np.all(y[8:] == 0) and not np.signbit(y[8:]).any()
    # at the underflow point and just above: normal, never denormal
    a = np.array([lo, np.nextafter(dtype(lo), dtype(0))], dtype=dtype)
    ya = _ext.vexp(a)
    assert np.all(ya >= tiny)
    assert _ext.vexp(np.array([hi * 1.001], dtype=dtype))[0] == np.inf


def test_no_denormal_outputs():
    # every float32 from 1 ulp below LO down to -104 (where exp underflows
    # entirely): the exact exp is denormal there, the kernel gives exactly 0
    b0 = np.array([LO32], dtype=np.float32).view(np.int32)[0]
    b1 = np.array([-104.0], dtype=np.float32).view(np.int32)[0]
    x = np.arange(b0 + 1, b1 + 1, 97, dtype=np.int32).view(np.float32)
    assert np.all(_ext.vexp(x) == 0)
    y = _ext.vexp(_f32_sweep())
    assert not np.any((y != 0) & (np.abs(y) < FLT_MIN))


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 31, 33])
def test_lengths_and_tails(n):
    # the tail goes through the same vector code: position never matters
    x = np.linspace(-5, 5, n, dtype=np.float32)
    y = _ext.vexp(x)
    big = _ext.vexp(np.concatenate([np.zeros(3, np.float32), x]))[3:]
    assert y.tobytes() == big.tobytes()
    assert np.all(ulp_error(y, np.exp(x.astype(np.float64)), np.float32) <= 2.0)


def test_hook_input_checks():
    with pytest.raises(TypeError, match="int64"):
        _ext.vexp(np.arange(3))
    x = np.linspace(-1, 1, 20)[::2]         # non-contiguous input is fine
    np.testing.assert_allclose(_ext.vexp(x), np.exp(x), rtol=4e-16)


def test_path_is_selected():
    import os
    want = ("portable" if os.environ.get("CATTN_FORCE_PORTABLE") == "1"
            else os.environ.get("CATTN_ISA") or None)
    if want:
        assert path() == want
    else:
        # unforced, the best path this build and CPU run (available_paths is
        # ordered best first): avx512 on an AVX-512 CPU, avx2, else portable
        assert path() == cattn._ext.available_paths()[0]
