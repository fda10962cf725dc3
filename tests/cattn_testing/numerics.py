"""What every checker shares: machine epsilon, the result dtype NumPy would
promote to, unit-normal test data, the two elementwise comparisons and the
1-vs-2-threads bitwise check.

  assert_within  finite data: |got - ref| <= tol everywhere (a NaN or inf in
                 got, or a non-finite ref, fails)
  assert_close   NaN exactly where ref has NaN, inf entries equal, finite
                 entries within tol (the attention and property checkers)
"""
import numpy as np

import cattn


def eps(dtype):
    return float(np.finfo(dtype).eps)


def result_dtype(*arrays):
    """The dtype NumPy's promotion gives the result (None entries ignored)."""
    return np.result_type(*[np.asarray(a).dtype for a in arrays if a is not None])


def randn(rng, shape, dtype=np.float32):
    """Unit-normal data of the given shape and dtype."""
    return rng.standard_normal(shape).astype(dtype)


def _first(bad):
    return tuple(int(i) for i in np.argwhere(bad)[0])


def _out_of_tolerance(bad, got64, ref, err, tol, what):
    idx = _first(bad)
    raise AssertionError(
        f"{what}: {int(bad.sum())} of {bad.size} entries out of tolerance; first at {idx}: "
        f"got {got64[idx]!r}, reference {ref[idx]!r}, |err| {err[idx]:.3g} > tol "
        f"{float(np.broadcast_to(tol, ref.shape)[idx]):.3g}")


def assert_within(got, ref, tol, what=""):
    got64 = np.asarray(got, dtype=np.float64)
    assert got64.shape == ref.shape, f"{what}: shape {got64.shape} != reference {ref.shape}"
    err = np.abs(got64 - ref)
    bad = ~(err <= tol)  # NaN in got counts as bad
    if bad.any():
        _out_of_tolerance(bad, got64, ref, err, tol, what)


def assert_close(got, ref, tol, what="", nan_tol_accepts=False):
    """Shapes equal; NaN exactly where the reference has NaN; inf entries
    equal; finite entries within tol (a non-finite got there fails).

    nan_tol_accepts: a NaN tolerance accepts whatever got holds at a finite
    reference entry (the attention tolerances are NaN on rows whose error
    bound is NaN, e.g. masked weights of a NaN row); otherwise it fails."""
    got64 = np.asarray(got, dtype=np.float64)
    assert got64.shape == ref.shape, f"{what}: shape {got64.shape} != reference {ref.shape}"
    nan_g, nan_r = np.isnan(got64), np.isnan(ref)
    if (nan_g != nan_r).any():
        idx = _first(nan_g != nan_r)
        raise AssertionError(
            f"{what}: NaN pattern differs at {int((nan_g != nan_r).sum())} of {ref.size} entries; "
            f"first at {idx}: got {got64[idx]!r}, reference {ref[idx]!r}")
    fin = np.isfinite(ref)
    inf_bad = np.isinf(ref) & (got64 != ref)
    with np.errstate(invalid="ignore"):
        err = np.where(fin & ~nan_g, np.abs(got64 - ref), 0.0)
        if nan_tol_accepts:
            bad = inf_bad | (fin & ~(err <= np.where(np.isnan(tol), np.inf, tol)))
        else:
            bad = inf_bad | (fin & ~(err <= tol)) | (fin & ~np.isfinite(got64))
    if bad.any():
        _out_of_tolerance(bad, got64, ref, err, tol, what)


def threads_bitwise(fn, *args, **kw):
    """fn(*args, **kw) with 1 and with 2 threads: the results must have the
    same bits (NaN payloads included). Returns the 1-thread result."""
    with cattn.num_threads(1):
        a = np.array(fn(*args, **kw), copy=True)     # copies: `out=` may be reused
    with cattn.num_threads(2):
        b = np.array(fn(*args, **kw), copy=True)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.tobytes() != b.tobytes():
        fa, fb = a.reshape(-1), b.reshape(-1)
        i = next(i for i in range(fa.size) if fa[i:i + 1].tobytes() != fb[i:i + 1].tobytes())
        idx = np.unravel_index(i, a.shape) if a.ndim else ()
        raise AssertionError(f"1 and 2 threads give different bits; first at {idx}: "
                             f"{fa[i]!r} vs {fb[i]!r}")
    return a
