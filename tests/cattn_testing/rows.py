"""Row-kernel tools (test_vexp, test_softmax, test_norm, test_activations):
ulp measurement and strided views of the same values.
"""
import numpy as np


def ulp_error(got, ref, dtype):
    """|got - ref| in units of the spacing of `dtype` at ref (ref exact-ish,
    float64 or longdouble); where both are equal (incl. inf, nan) 0."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    wide = np.longdouble if np.dtype(dtype) == np.float64 else np.float64
    g, r = got.astype(wide), ref.astype(wide)
    same = (g == r) | (np.isnan(g) & np.isnan(r))
    with np.errstate(invalid="ignore", over="ignore"):
        spacing = np.spacing(np.abs(r.astype(dtype))).astype(wide)
        err = np.abs(g - r) / spacing
    return np.where(same, 0.0, err).astype(np.float64)


def strided_variants(x):
    """Views of x with the same values laid out differently: a negative-
    stride copy, a transposed (Fortran) copy, a sliced view of a bigger array
    and a read-only view. Each is (name, array) with array == x."""
    out = []
    big = np.zeros(tuple(2 * n for n in x.shape), dtype=x.dtype)
    sl = tuple(slice(None, None, 2) for _ in x.shape)
    big[sl] = x
    out.append(("every-other", big[sl]))
    out.append(("fortran", np.asfortranarray(x)))
    rev = tuple(slice(None, None, -1) for _ in x.shape)
    out.append(("reversed", np.ascontiguousarray(x[rev])[rev]))
    ro = x.copy()
    ro.flags.writeable = False
    out.append(("read-only", ro))
    if x.ndim >= 3:   # non-collapsible leading dims: a permuted copy, permuted back
        perm = tuple(range(x.ndim))[::-1]
        out.append(("permuted", np.ascontiguousarray(x.transpose(perm)).transpose(perm)))
    return out

