"""Property-based tests (hypothesis) of the row ops: softmax and log_softmax
(any axis), layer_norm, rms_norm, gelu (approximate "none" / "tanh"), silu
and relu, against the float64 oracle cattn.reference (checkers and their
tolerances: cattn_testing/properties.py).

Each example draws a shape (0 to 4 dims, zero-size and 1-sized dims
included), a dtype (mixed float32 / float64 where an op takes several
arrays), values at several scales (down to 1e-30, up to 1e30 / 1e150) with
NaN / +-inf entries, a memory layout per array (transposed, negative-stride,
sliced, stride-0, unaligned, non-whole-element strides, read-only) and
sometimes `out=` (a NaN-filled array of any layout, or the input itself for
an in-place call); it runs the op with 1 and 2 threads (same bits required)
and compares NaN / inf positions exactly and finite entries within the
tolerance.
"""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the property tests need hypothesis")
from hypothesis import given, note, strategies as st  # noqa: E402

import cattn  # noqa: E402
from cattn_testing.properties import (check_activation, check_layer_norm, check_rms_norm,  # noqa: E402
                        check_softmax, threads_bitwise)
from cattn_testing.strategies import F32, arrays, dtypes, examples, layouts, poisoned_out, sizes  # noqa: E402
from cattn_testing.paths import kernel_path as path  # noqa: E402

ROW_EDGES = (7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 65)   # vector widths and tails


@st.composite
def shapes(draw, min_dims=0, max_dims=4, last_hi=70):
    nd = draw(st.integers(min_dims, max_dims))
    if nd == 0:
        return ()
    lead = draw(st.lists(sizes(5), min_size=nd - 1, max_size=nd - 1))
    return tuple(lead) + (draw(sizes(last_hi, ROW_EDGES)),)


def _scales(dtype):
    big = 1e30 if dtype == F32 else 1e150
    return (1.0, 3.0, 1e-3, 1e-30, 30.0, 1e4, big)


def _out_mode(draw, x, dtype):
    """None, a NaN-filled out= of a drawn layout, or "inplace" (out=x; only
    when x is writeable, of the result dtype, and not a stride-0 view)."""
    mode = draw(st.sampled_from(["none", "none", "out", "inplace"]))
    if mode == "out":
        lay = draw(layouts(x.ndim, np.dtype(dtype).itemsize, broadcast=False))
        note(f"out= {lay}")
        return poisoned_out(x.shape, dtype, lay)
    if (mode == "inplace" and x.dtype == dtype and x.flags.writeable and x.flags.aligned
            and all(s % x.itemsize == 0 for s in x.strides)):
        note("out=x (in place)")
        return "inplace"
    return None


def _run(op, x, out, *args, **kw):
    """op(x, ...) (with out=), returning a fresh copy of the result; for the
    in-place mode x is restored from `x0` before each call."""
    if out is None:
        return op(x, *args, **kw)
    if isinstance(out, str):                      # in place
        x0 = x.copy()

        def call():
            x[...] = x0
            r = op(x, *args, out=x, **kw)
            assert r is x
            res = r.copy()
            x[...] = x0
            return res
        return call()
    out[...] = np.nan
    r = op(x, *args, out=out, **kw)
    assert r is out
    return r


# ---------------------------------------------------------------- softmax

@st.composite
def softmax_case(draw):
    dtype = draw(dtypes)
    shape = draw(shapes(min_dims=0))
    x, lay = draw(arrays(shape, dtype, scales=_scales(dtype), specials=draw(st.booleans()),
                         extra_specials=(np.finfo(dtype).max, -np.finfo(dtype).max)))
    axis = draw(st.integers(-x.ndim, x.ndim - 1)) if x.ndim else 0
    note(f"x {shape} {dtype} {lay} axis={axis}")
    return x, axis


@examples(4)
@given(case=softmax_case(), log=st.booleans(), data=st.data())
def test_softmax_matches_reference(case, log, data):
    """softmax / log_softmax along any axis; a slice with a NaN or +inf is all
    NaN, a slice of -inf gives 0 (softmax) / -inf (log_softmax), huge finite
    values stay finite where the exact result is."""
    x, axis = case
    if x.ndim == 0:
        # a 0-d array has no axis: softmax must raise, not crash
        with pytest.raises((ValueError, IndexError)):
            (cattn.log_softmax if log else cattn.softmax)(x, axis=axis)
        return
    op = cattn.log_softmax if log else cattn.softmax
    out = _out_mode(data.draw, x, x.dtype)
    got = threads_bitwise(lambda: _run(op, x, out, axis=axis))
    check_softmax(got, x, axis, log, "log_softmax" if log else "softmax")


# ---------------------------------------------------------------- norms

@st.composite
def norm_case(draw, rms):
    shape = draw(shapes(min_dims=1))
    dx = draw(dtypes)
    specials = draw(st.booleans())
    x, lx = draw(arrays(shape, dx, scales=_scales(dx), specials=specials))
    n = shape[-1]
    w = b = None
    lw = lb = None
    if draw(st.booleans()):
        dw = draw(dtypes)
        w, lw = draw(arrays((n,), dw, scales=(1.0, 3.0, 1e-3), specials=specials, n_special=1))
    if not rms and draw(st.booleans()):
        db = draw(dtypes)
        b, lb = draw(arrays((n,), db, scales=(1.0, 3.0, 1e-3), specials=specials, n_special=1))
    eps = draw(st.sampled_from([None, 1e-5, 1e-6, 1e-12, 0.5, 1]))
    note(f"x {shape} {dx} {lx}; weight {None if w is None else (w.dtype, lw)}; "
         f"bias {None if b is None else (b.dtype, lb)}; eps={eps}")
    return x, w, b, eps


@examples(3)
@given(case=norm_case(rms=False), data=st.data())
def test_layer_norm_matches_reference(case, data):
    x, w, b, eps = case
    kw = {} if eps is None else {"eps": eps}
    dtype = np.result_type(*[t for t in (x, w, b) if t is not None])
    out = _out_mode(data.draw, x, dtype)
    got = threads_bitwise(lambda: _run(cattn.layer_norm, x, out, w, b, **kw))
    check_layer_norm(got, x, w, b, 1e-5 if eps is None else eps)


@examples(3)
@given(case=norm_case(rms=True), data=st.data())
def test_rms_norm_matches_reference(case, data):
    x, w, _, eps = case
    kw = {} if eps is None else {"eps": eps}
    dtype = np.result_type(*[t for t in (x, w) if t is not None])
    out = _out_mode(data.draw, x, dtype)
    got = threads_bitwise(lambda: _run(cattn.rms_norm, x, out, w, **kw))
    check_rms_norm(got, x, w, 1e-6 if eps is None else eps)


# ---------------------------------------------------------------- activations

ACTS = {
    "gelu": lambda x, **kw: cattn.gelu(x, **kw),
    "gelu_tanh": lambda x, **kw: cattn.gelu(x, approximate="tanh", **kw),
    "silu": lambda x, **kw: cattn.silu(x, **kw),
    "relu": lambda x, **kw: cattn.relu(x, **kw),
}


@st.composite
def act_case(draw):
    dtype = draw(dtypes)
    shape = draw(shapes(min_dims=0, last_hi=40))
    x, lay = draw(arrays(shape, dtype, scales=(1.0, 4.0, 12.0, 1e-3, 1e-30, 1e4, 1e30, 300.0),
                         specials=draw(st.booleans()),
                         extra_specials=(0.0, -0.0, np.finfo(dtype).max, -np.finfo(dtype).max,
                                         np.finfo(dtype).smallest_subnormal)))
    note(f"x {shape} {dtype} {lay}")
    return x


@examples(4)
@given(x=act_case(), name=st.sampled_from(sorted(ACTS)), data=st.data())
def test_activations_match_reference(x, name, data):
    out = _out_mode(data.draw, x, x.dtype)
    got = threads_bitwise(lambda: _run(ACTS[name], x, out))
    check_activation(got, x, name)


@examples(1)
@given(x=act_case())
def test_relu_keeps_signed_zero_and_nan(x):
    """relu is exact: max(x, 0) with -0.0 kept and NaN kept."""
    got = cattn.relu(x)
    x64 = np.asarray(x, np.float64)
    want = np.where(x64 < 0, 0.0, x64)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.array_equal(np.signbit(got[x64 == 0]), np.signbit(x64[x64 == 0]))


@examples(1)
@given(x=act_case(), name=st.sampled_from(sorted(ACTS)))
def test_activations_threads_bitwise_large(x, name):
    """A large array (split over both threads): same bits, and correct."""
    big = np.resize(np.asarray(x).reshape(-1) if np.size(x) else np.zeros(1, x.dtype), 300_001)
    got = threads_bitwise(lambda: ACTS[name](big))
    check_activation(got, big, name)


def test_act_reference_forms():
    """act_reference's log-space forms equal cattn.reference's formulas where
    those are accurate (|x| <= 3: no cancellation in 1 + erf, 1 + tanh), and
    keep normal results where scipy's expit underflows."""
    from cattn import reference
    from cattn_testing.properties import act_reference
    x = np.linspace(-3, 3, 2001)
    np.testing.assert_allclose(act_reference("gelu", x), reference.gelu(x), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(act_reference("gelu_tanh", x), reference.gelu_tanh(x),
                               rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(act_reference("silu", x), reference.silu(x), rtol=1e-14)
    # x = -709.9: exp(x) = 5.0e-309 (subnormal), x exp(x) = -3.5e-306 (normal)
    np.testing.assert_allclose(act_reference("silu", np.array([-709.9])), -709.9 * np.exp(-709.9),
                               rtol=1e-3)
    assert act_reference("silu", np.array([-709.9]))[0] < -1e-306
