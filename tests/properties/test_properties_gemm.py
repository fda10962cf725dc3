"""Property-based tests (hypothesis) of cattn.matmul and cattn.linear against
the float64 oracle cattn.reference (checkers: cattn_testing/properties.py, strategies:
cattn_testing/strategies.py, profiles: cattn_testing/profiles.py).

Each example draws shapes (zero-size and 1-sized dims included, numpy.matmul's
1-D promotion and batch broadcasting), dtypes (float32, float64, mixed),
values (optionally NaN / +-inf entries) and an independent memory layout per
operand (transposed, negative-stride, sliced, stride-0, unaligned,
non-whole-element strides, read-only), sometimes an `out=` pre-filled with
NaN; it runs the op with 1 and with 2 threads (the bits must agree) and
compares with the reference: NaN / inf positions exactly, finite entries
within 5 sqrt(K) eps |A||B| (cattn_testing.gemm.gemm_tol).
"""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the property tests need hypothesis")
from hypothesis import given, note, strategies as st  # noqa: E402

import cattn  # noqa: E402
from cattn_testing.properties import check_linear, check_matmul, threads_bitwise  # noqa: E402
from cattn_testing.strategies import arrays, dtypes, examples, layouts, poisoned_out, sizes  # noqa: E402

SCALES = (1.0, 1e-3, 30.0)          # |values| <= ~1e3: no finite float32 dot product overflows
K_EDGES = (1, 2, 15, 16, 17, 255, 256, 257)   # KC = 256
MN_EDGES = (5, 6, 7, 8, 9, 12, 13, 15, 16, 17)  # MR = 6, NR = 16 (float32) / 8 (float64), GEMV <= 12


@st.composite
def batch_shapes(draw, max_dims=2):
    """(shape_a_batch, shape_b_batch): two batch shapes that broadcast."""
    base = draw(st.lists(st.sampled_from([1, 2, 3, 0]), min_size=0, max_size=max_dims))
    out = []
    for _ in range(2):
        nd = draw(st.integers(0, len(base)))
        sh = [1 if draw(st.booleans()) else n for n in base[len(base) - nd:]]
        out.append(tuple(sh))
    return out


@st.composite
def matmul_case(draw, big=False, specials=False):
    da, db = draw(dtypes), draw(dtypes)
    if big:      # large enough to be split over 2 threads (>= 2^18 flops per thread)
        M, N, K = (draw(st.integers(40, 160)), draw(st.integers(40, 160)),
                   draw(st.integers(40, 300)))
        a_1d = b_1d = False
        ba, bb = draw(batch_shapes(max_dims=1))
    else:
        M, N = draw(sizes(24, MN_EDGES)), draw(sizes(24, MN_EDGES))
        K = draw(st.one_of(sizes(24, K_EDGES), st.integers(240, 300)))
        a_1d, b_1d = draw(st.booleans()) and draw(st.booleans()), draw(st.booleans()) and draw(st.booleans())
        ba, bb = draw(batch_shapes())
    sa = (K,) if a_1d else ba + (M, K)
    sb = (K,) if b_1d else bb + (K, N)
    a, la = draw(arrays(sa, da, scales=SCALES, specials=specials))
    b, lb = draw(arrays(sb, db, scales=SCALES, specials=specials))
    note(f"a {a.shape} {a.dtype} {la}; b {b.shape} {b.dtype} {lb}")
    return a, b


def _out_for(shape, dtype, draw):
    lay = draw(layouts(len(shape), np.dtype(dtype).itemsize, broadcast=False))
    out = poisoned_out(shape, dtype, lay)
    note(f"out= {lay}")
    return out


@examples(3)
@given(case=matmul_case(), use_out=st.booleans(), data=st.data())
def test_matmul_matches_reference(case, use_out, data):
    a, b = case
    if use_out:
        shape = np.matmul(np.zeros(a.shape, np.float32), np.zeros(b.shape, np.float32)).shape
        out = _out_for(shape, np.result_type(a, b), data.draw)

        def run():
            out[...] = np.nan
            r = cattn.matmul(a, b, out=out)
            assert r is out
            return r
    else:
        def run():
            return cattn.matmul(a, b)
    check_matmul(threads_bitwise(run), a, b)


@examples(2)
@given(case=matmul_case(specials=True))
def test_matmul_nan_inf_follow_ieee(case):
    """NaN and +-inf inputs: every result entry is NaN / +-inf exactly as the
    IEEE sum of its products is, whatever the blocking (cattn_testing.properties.ieee_gemm)."""
    a, b = case
    check_matmul(threads_bitwise(lambda: cattn.matmul(a, b)), a, b)


@examples(0.6)
@given(case=matmul_case(big=True, specials=False))
def test_matmul_threads_bitwise_large(case):
    """Shapes big enough for both threads to get work: same bits, and correct."""
    a, b = case
    check_matmul(threads_bitwise(lambda: cattn.matmul(a, b)), a, b)


ACTIVATIONS = [None, "relu", "gelu", "gelu_tanh", "silu"]


@st.composite
def linear_case(draw, specials=False, big=False):
    dx, dw = draw(dtypes), draw(dtypes)
    if big:
        lead = (draw(st.integers(30, 200)),)
        N, K = draw(st.integers(30, 160)), draw(st.integers(30, 300))
    else:
        lead = tuple(draw(st.lists(sizes(13, (1, 6, 12, 13)), min_size=0, max_size=2)))
        N = draw(sizes(24, MN_EDGES))
        K = draw(st.one_of(sizes(24, K_EDGES), st.integers(240, 300)))
    x, lx = draw(arrays(lead + (K,), dx, scales=SCALES, specials=specials))
    w, lw = draw(arrays((N, K), dw, scales=SCALES, specials=specials))
    bias, lb = None, None
    if draw(st.booleans()):
        bias, lb = draw(arrays((N,), draw(dtypes), scales=SCALES, specials=specials))
    act = draw(st.sampled_from(ACTIVATIONS))
    note(f"x {x.shape} {x.dtype} {lx}; w {w.shape} {w.dtype} {lw}; "
         f"bias {None if bias is None else (bias.dtype, lb)}; activation {act!r}")
    return x, w, bias, act


@examples(3)
@given(case=linear_case(), use_out=st.booleans(), data=st.data())
def test_linear_matches_reference(case, use_out, data):
    x, w, bias, act = case
    arrays_ = [x, w] + ([bias] if bias is not None else [])
    if use_out:
        out = _out_for(x.shape[:-1] + (w.shape[0],), np.result_type(*arrays_), data.draw)

        def run():
            out[...] = np.nan
            r = cattn.linear(x, w, bias, activation=act, out=out)
            assert r is out
            return r
    else:
        def run():
            return cattn.linear(x, w, bias, activation=act)
    check_linear(threads_bitwise(run), x, w, bias, act)


@examples(2)
@given(case=linear_case(specials=True))
def test_linear_nan_inf(case):
    """NaN / +-inf in x, weight or bias: IEEE pattern of x @ W.T + bias, then
    the activation's value at the pattern (act(+-inf) = its limit)."""
    x, w, bias, act = case
    check_linear(threads_bitwise(lambda: cattn.linear(x, w, bias, activation=act)), x, w, bias, act)


@examples(0.6)
@given(case=linear_case(big=True))
def test_linear_threads_bitwise_large(case):
    x, w, bias, act = case
    check_linear(threads_bitwise(lambda: cattn.linear(x, w, bias, activation=act)), x, w, bias, act)
