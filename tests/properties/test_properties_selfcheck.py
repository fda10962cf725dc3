"""The property tests must be able to fail: the layout machinery builds what it
claims, and every checker of cattn_testing/properties.py rejects a perturbed result (a
dropped term, an error a few times the tolerance, a leaked or missing NaN,
a wrong sign of inf, another formula, a thread-dependent result)."""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the property tests need hypothesis")
from hypothesis import given, strategies as st  # noqa: E402

import cattn  # noqa: E402
from cattn import reference  # noqa: E402
import cattn_testing.properties as pc  # noqa: E402
from cattn_testing.strategies import Layout, dtypes, examples, lay_out, layouts, poisoned_out  # noqa: E402

F32, F64 = np.float32, np.float64


def rejects(check, *args, **kw):
    with pytest.raises(AssertionError):
        check(*args, **kw)


# ---- layouts ---------------------------------------------------------------------

@examples(4)
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple), dtype=dtypes,
       data=st.data())
def test_layouts_hold_the_values_they_claim(shape, dtype, data):
    lay = data.draw(layouts(len(shape), np.dtype(dtype).itemsize))
    x = np.arange(np.prod(shape), dtype=dtype).reshape(shape) + 1
    v = lay_out(x, lay)
    assert v.shape == x.shape and v.dtype == x.dtype
    axes = [a for a in range(x.ndim) if lay.bcast[a] and x.shape[a] > 1]
    want = x
    for a in axes:                                     # stride 0: the first index repeated
        want = np.broadcast_to(np.take(want, [0], axis=a), want.shape)
    np.testing.assert_array_equal(v, want)
    if v.size:
        inner = lay.perm[-1] if x.ndim else None            # the axis `pad` applies to
        if lay.misalign or (lay.pad and x.shape[inner] > 1 and inner not in axes):
            assert not v.flags.aligned
        for a in axes:
            assert v.strides[a] == 0
        if lay.readonly or axes:
            assert not v.flags.writeable
        for a in range(x.ndim):
            if lay.flips[a] and x.shape[a] > 1 and a not in axes:
                assert v.strides[a] < 0


def test_layout_gaps_are_nan():
    """Elements between the described ones are NaN: a kernel reading them
    would make the result NaN."""
    x = np.ones((3, 4), F32)
    v = lay_out(x, Layout((0, 1), (1, 2), 0, (False, False), 0, (False, False), False))
    assert v.strides == (32, 8)
    every = np.lib.stride_tricks.as_strided(v, shape=(3, 7), strides=(32, 4))
    assert (every[:, ::2] == 1).all() and np.isnan(every[:, 1::2]).all()
    u = lay_out(x, Layout((1, 0), (2, 2), 0, (False, True), 1, (False, False), False))
    assert not u.flags.aligned and u.strides[1] < 0 and np.array_equal(u, x)
    out = poisoned_out((2, 3), F64, Layout((1, 0), (2, 1), 3, (True, False), 5, (True, True), True))
    assert np.isnan(out).all() and out.flags.writeable and out.flags.aligned


# ---- GEMM ------------------------------------------------------------------------

def test_matmul_checker_rejects():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 7, 300)).astype(F32)
    b = rng.standard_normal((300, 9)).astype(F32)
    good = cattn.matmul(a, b)
    pc.check_matmul(good, a, b)
    rejects(pc.check_matmul, np.matmul(a[..., :-1], b[:-1]), a, b)       # a dropped k term
    rejects(pc.check_matmul, good.astype(F64), a, b)                       # wrong dtype
    bad = good.copy()
    bad[1, 3, 4] = np.nan
    rejects(pc.check_matmul, bad, a, b)                                    # a leaked NaN
    a2 = a.copy()
    a2[0, 2, 5] = np.inf
    special = cattn.matmul(a2, b)
    pc.check_matmul(special, a2, b)
    flipped = special.copy()
    flipped[0, 2] = -flipped[0, 2]
    rejects(pc.check_matmul, flipped, a2, b)                               # inf signs flipped
    missing = special.copy()
    missing[0, 2, 0] = 1.0
    rejects(pc.check_matmul, missing, a2, b)                               # inf lost
    b2 = b.copy()
    b2[5, 3] = 0.0
    nan_expected = cattn.matmul(a2, b2)
    assert np.isnan(nan_expected[0, 2, 3])                                 # inf * 0
    pc.check_matmul(nan_expected, a2, b2)
    fixed = nan_expected.copy()
    fixed[0, 2, 3] = np.inf
    rejects(pc.check_matmul, fixed, a2, b2)
    # float64 accuracy demanded of a float64 result
    a64, b64 = a.astype(F64), b.astype(F64)
    rejects(pc.check_matmul, good.astype(F64), a64, b64)


def test_ieee_gemm_pattern():
    a = np.array([[np.inf, 1.0], [np.nan, 0.0], [np.inf, -np.inf], [1.0, 2.0]])
    b = np.array([[1.0, 0.0, -1.0], [1.0, 1.0, 1.0]])
    special, _, _ = pc.ieee_gemm(a, b)
    with np.errstate(invalid="ignore"):
        want = a @ b                                       # NumPy / BLAS agrees on this small case
    assert np.array_equal(np.isnan(special), np.isnan(want))
    assert np.array_equal(special[np.isinf(want)], want[np.isinf(want)])
    assert (special[np.isfinite(want)] == 0).all()


def test_linear_checker_rejects():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 40)).astype(F32)
    w = rng.standard_normal((6, 40)).astype(F32)
    bias = rng.standard_normal(6).astype(F32)
    for act in [None, "relu", "gelu", "gelu_tanh", "silu"]:
        pc.check_linear(cattn.linear(x, w, bias, activation=act), x, w, bias, act)
        rejects(pc.check_linear, cattn.linear(x, w, activation=act), x, w, bias, act)
    rejects(pc.check_linear, cattn.linear(x, w, bias, activation="gelu_tanh"), x, w, bias, "gelu")
    rejects(pc.check_linear, cattn.linear(x, w, bias, activation="silu"), x, w, bias, "gelu")
    # -inf pre-activation: relu gives 0, identity -inf
    x2 = x.copy()
    x2[0, 0] = -np.inf
    w2 = np.abs(w) + 0.1
    pc.check_linear(cattn.linear(x2, w2, None, activation="relu"), x2, w2, None, "relu")
    rejects(pc.check_linear, cattn.linear(x2, w2, None), x2, w2, None, "relu")


# ---- rows ------------------------------------------------------------------------

def test_softmax_checker_rejects():
    rng = np.random.default_rng(2)
    x = (3 * rng.standard_normal((4, 33, 5))).astype(F32)
    for log in (False, True):
        f = cattn.log_softmax if log else cattn.softmax
        pc.check_softmax(f(x, axis=1), x, 1, log)
        good = f(x, axis=1)
        rejects(pc.check_softmax, good * np.float32(1 + 2e-5), x, 1, log)
        x2 = x.copy()
        x2[1, 4, 2] = np.nan
        nan_slice = f(x2, axis=1)
        pc.check_softmax(nan_slice, x2, 1, log)
        rejects(pc.check_softmax, good, x2, 1, log)                   # NaN slice missing
    rejects(pc.check_softmax, cattn.softmax(x, axis=0), x, 1, False)     # another axis


def test_norm_checkers_reject():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, 50)) * 2 + 1).astype(F32)
    w = rng.standard_normal(50).astype(F32)
    b = rng.standard_normal(50).astype(F32)
    pc.check_layer_norm(cattn.layer_norm(x, w, b), x, w, b, 1e-5)
    rejects(pc.check_layer_norm, cattn.layer_norm(x, w, b, eps=1e-3), x, w, b, 1e-5)
    rejects(pc.check_layer_norm, cattn.layer_norm(x, w, None), x, w, b, 1e-5)
    pc.check_rms_norm(cattn.rms_norm(x, w), x, w, 1e-6)
    rejects(pc.check_rms_norm, cattn.rms_norm(x, w, eps=1e-2), x, w, 1e-6)
    x64 = x.astype(F64)
    rejects(pc.check_rms_norm, cattn.rms_norm(x, w).astype(F64), x64, w.astype(F64), 1e-6)


def test_activation_checker_rejects():
    x = np.linspace(-10, 10, 2001).astype(F32)
    for name, f in [("gelu", cattn.gelu), ("silu", cattn.silu), ("relu", cattn.relu)]:
        pc.check_activation(f(x), x, name)
    tanh = cattn.gelu(x, approximate="tanh")
    pc.check_activation(tanh, x, "gelu_tanh")
    rejects(pc.check_activation, tanh, x, "gelu")
    g = cattn.gelu(x)
    rejects(pc.check_activation, np.nextafter(np.nextafter(g, np.inf), np.inf), x, "gelu")  # 2 ulp
    x64 = x.astype(F64)
    rejects(pc.check_activation, cattn.gelu(x).astype(F64), x64, "gelu")   # float32 accuracy
    xs = np.array([-np.inf, np.inf, np.nan], F32)
    pc.check_activation(cattn.silu(xs), xs, "silu")
    rejects(pc.check_activation, np.array([np.nan, np.inf, np.nan], F32), xs, "silu")


# ---- attention -------------------------------------------------------------------

def test_attention_checkers_reject():
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 70, 16)).astype(F32)
    k = rng.standard_normal((2, 300, 16)).astype(F32)
    v = rng.standard_normal((2, 300, 8)).astype(F32)
    out = cattn.scaled_dot_product_attention(q, k, v)
    pc.check_attention(out, q, k, v)
    dropped = reference.scaled_dot_product_attention(q, k[:, :-1], v[:, :-1]).astype(F32)
    rejects(pc.check_attention, dropped, q, k, v)
    kw = dict(is_causal=True, causal_alignment="lower_right")
    pc.check_attention(cattn.scaled_dot_product_attention(q, k, v, **kw), q, k, v, **kw)
    rejects(pc.check_attention, cattn.scaled_dot_product_attention(q, k, v, is_causal=True),
            q, k, v, **kw)
    # an inf value attended with a sizeable weight: inf required (no ambiguity there)
    v2 = v.copy()
    v2[0, 5, 3] = np.inf
    good = cattn.scaled_dot_product_attention(q, k, v2)
    pc.check_attention(good, q, k, v2)
    bad = good.copy()
    bad[0, :, 3] = 1.0
    rejects(pc.check_attention, bad, q, k, v2)
    # a NaN in a masked value must not appear
    keep = np.ones(300, bool)
    keep[7] = False
    v3 = v.copy()
    v3[1, 7] = np.nan
    clean = cattn.scaled_dot_product_attention(q, k, v3, attn_mask=keep)
    pc.check_attention(clean, q, k, v3, attn_mask=keep)
    leaked = clean.copy()
    leaked[1, 3, 2] = np.nan
    rejects(pc.check_attention, leaked, q, k, v3, attn_mask=keep)
    w = cattn.attention_weights(q, k)
    pc.check_attention_weights(w, q, k)
    rejects(pc.check_attention_weights, cattn.attention_weights(q, k, scale=0.26), q, k)
    # S = 0: rows must be exactly 0
    z = np.zeros((2, 70, 8), F32)
    pc.check_attention(z, q, k[:, :0], v[:, :0])
    rejects(pc.check_attention, z + 1, q, k[:, :0], v[:, :0])


def test_threads_bitwise_rejects_a_thread_dependent_result():
    pc.threads_bitwise(lambda: np.arange(5.0))
    with pytest.raises(AssertionError, match="different bits"):
        pc.threads_bitwise(lambda: np.arange(5.0) + cattn.get_num_threads())
