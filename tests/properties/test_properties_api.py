"""Property-based tests (hypothesis) of cattn's argument checking: nothing a
caller passes may crash the process or surface as anything but a clear
TypeError / ValueError (MemoryError for impossible sizes):

* every array argument of every op with a dtype other than float32 /
  float64 (bool is valid only for attn_mask) raises TypeError naming the dtype;
* cattn.matmul accepts exactly the shapes numpy.matmul accepts (same result
  shape), and raises ValueError naming the shapes otherwise;
* a valid linear / layer_norm / rms_norm / attention call with one shape
  broken raises ValueError naming the offending shape;
* odd scalar arguments (huge ints, NaN, strings, arrays, ...) for eps,
  scale, axis, activation, approximate, causal_alignment, dropout_p, thread
  counts and KVCache sizes either work or raise TypeError / ValueError /
  MemoryError naming the argument.
Failing examples found are kept as regular tests in test_regressions.py.
"""
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the property tests need hypothesis")
from hypothesis import assume, given, note, strategies as st  # noqa: E402

import cattn  # noqa: E402
from cattn_testing.strategies import examples  # noqa: E402

F32 = np.float32
CLEAR = (TypeError, ValueError)
BAD_DTYPES = [np.int8, np.int32, np.int64, np.uint8, np.uint64, np.float16, np.complex64,
              np.complex128, np.bool_, object, "U3", "M8[s]", np.longdouble]


def _bad(a, dtype):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(a).astype(dtype)


def _kv(bad_k, bad_v):
    c = cattn.KVCache(2, 1, 4, 4)
    return c.append(bad_k, bad_v)


X = np.ones((3, 4), F32)
W = np.ones((5, 4), F32)
Q = np.ones((2, 3, 4), F32)
ONE4 = np.ones((2, 1, 1, 4), F32)

# argument -> call with that argument replaced by `b(array)`
DTYPE_CALLS = {
    "matmul.a": lambda b: cattn.matmul(b(X), X.T),
    "matmul.b": lambda b: cattn.matmul(X, b(X.T)),
    "linear.x": lambda b: cattn.linear(b(X), W),
    "linear.weight": lambda b: cattn.linear(X, b(W)),
    "linear.bias": lambda b: cattn.linear(X, W, b(np.ones(5, F32))),
    "softmax.x": lambda b: cattn.softmax(b(X)),
    "log_softmax.x": lambda b: cattn.log_softmax(b(X)),
    "layer_norm.x": lambda b: cattn.layer_norm(b(X)),
    "layer_norm.weight": lambda b: cattn.layer_norm(X, b(np.ones(4, F32))),
    "layer_norm.bias": lambda b: cattn.layer_norm(X, None, b(np.ones(4, F32))),
    "rms_norm.x": lambda b: cattn.rms_norm(b(X)),
    "rms_norm.weight": lambda b: cattn.rms_norm(X, b(np.ones(4, F32))),
    "gelu.x": lambda b: cattn.gelu(b(X)),
    "gelu_tanh.x": lambda b: cattn.gelu(b(X), approximate="tanh"),
    "silu.x": lambda b: cattn.silu(b(X)),
    "relu.x": lambda b: cattn.relu(b(X)),
    "sdpa.query": lambda b: cattn.scaled_dot_product_attention(b(Q), Q, Q),
    "sdpa.key": lambda b: cattn.scaled_dot_product_attention(Q, b(Q), Q),
    "sdpa.value": lambda b: cattn.scaled_dot_product_attention(Q, Q, b(Q)),
    "sdpa.attn_mask": lambda b: cattn.scaled_dot_product_attention(Q, Q, Q, b(np.ones((3, 3), F32))),
    "attention_weights.query": lambda b: cattn.attention_weights(b(Q), Q),
    "attention_weights.key": lambda b: cattn.attention_weights(Q, b(Q)),
    "attention_weights.attn_mask": lambda b: cattn.attention_weights(Q, Q, b(np.ones((3, 3), F32))),
    "KVCache.append.k": lambda b: _kv(b(ONE4), ONE4),
    "KVCache.append.v": lambda b: _kv(ONE4, b(ONE4)),
    "KVCache.attend.q": lambda b: cattn.KVCache(2, 1, 4, 4).attend(b(ONE4)),
    "matmul.out": lambda b: cattn.matmul(X, X.T, out=b(np.empty((3, 3), F32))),
    "linear.out": lambda b: cattn.linear(X, W, out=b(np.empty((3, 5), F32))),
    "softmax.out": lambda b: cattn.softmax(X, out=b(np.empty((3, 4), F32))),
    "sdpa.out": lambda b: cattn.scaled_dot_product_attention(Q, Q, Q, out=b(np.empty((2, 3, 4), F32))),
}

@examples(6)
@given(arg=st.sampled_from(sorted(DTYPE_CALLS)), dtype=st.sampled_from(BAD_DTYPES))
def test_wrong_dtype_raises_type_error(arg, dtype):
    dtype = np.dtype(dtype)
    assume(not (arg.endswith("attn_mask") and dtype == np.bool_))     # a valid bool mask
    with pytest.raises(TypeError) as info:
        DTYPE_CALLS[arg](lambda a: _bad(a, dtype))
    assert str(dtype) in str(info.value), f"{arg}: message does not name {dtype}: {info.value}"


# ---- shapes ------------------------------------------------------------------------

small_shapes = st.lists(st.integers(0, 3), min_size=0, max_size=4).map(tuple)


@examples(4)
@given(sa=small_shapes, sb=small_shapes, da=st.sampled_from([np.float32, np.float64]))
def test_matmul_accepts_exactly_numpy_shapes(sa, sb, da):
    a, b = np.ones(sa, da), np.ones(sb, np.float32)
    try:
        want = np.matmul(a, b)
    except ValueError:
        want = None
    if want is None:
        with pytest.raises(ValueError) as info:
            cattn.matmul(a, b)
        msg = str(info.value)
        assert str(sa) in msg or str(sb) in msg, f"message names neither shape: {msg}"
    else:
        got = cattn.matmul(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _shape_case(draw, op):
    """(call, offending shape) for one broken shape of a valid call of op."""
    n = draw(st.integers(1, 5))
    lead = tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
    other = draw(st.integers(0, 6).filter(lambda m: m != n))
    if op == "linear":
        N = draw(st.integers(1, 4))
        x, w, bias = np.ones(lead + (n,), F32), np.ones((N, n), F32), np.ones(N, F32)
        kind = draw(st.sampled_from(["x_last", "w_ndim", "bias", "x_0d"]))
        if kind == "x_last":
            x = np.ones(lead + (other,), F32)
            return (lambda: cattn.linear(x, w, bias)), x.shape
        if kind == "w_ndim":
            w = np.ones(draw(st.sampled_from([(n,), (1, N, n)])), F32)
            return (lambda: cattn.linear(x, w)), w.shape
        if kind == "bias":
            bias = np.ones(draw(st.sampled_from([(N + 1,), (1, N), ()])), F32)
            return (lambda: cattn.linear(x, w, bias)), bias.shape
        x = np.ones((), F32)
        return (lambda: cattn.linear(x, w)), x.shape
    if op in ("layer_norm", "rms_norm"):
        f = getattr(cattn, op)
        x = np.ones(lead + (n,), F32)
        kind = draw(st.sampled_from(["weight", "bias", "x_0d"] if op == "layer_norm"
                                    else ["weight", "x_0d"]))
        if kind == "x_0d":
            x = np.ones((), F32)
            return (lambda: f(x)), x.shape
        p = np.ones(draw(st.sampled_from([(other,), (1, n), ()])), F32)
        if kind == "weight":
            return (lambda: f(x, p)), p.shape
        return (lambda: f(x, None, p)), p.shape
    # attention
    B, H, g = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    L, S, E, Ev = (draw(st.integers(1, 10)), draw(st.integers(1, 10)), draw(st.integers(1, 6)),
                   draw(st.integers(1, 6)))
    q = np.ones((B, H * g, L, E), F32)
    k = np.ones((B, H, S, E), F32)
    v = np.ones((B, H, S, Ev), F32)
    kw = dict(enable_gqa=True)
    kind = draw(st.sampled_from(["key_E", "value_S", "value_heads", "gqa", "batch", "mask",
                                 "query_1d", "no_gqa"]))
    if kind == "key_E":
        k = np.ones((B, H, S, E + draw(st.integers(1, 3))), F32)
        bad = k.shape
    elif kind == "value_S":
        v = np.ones((B, H, S + draw(st.integers(1, 3)), Ev), F32)
        bad = v.shape
    elif kind == "value_heads":
        v = np.ones((B, H + 1, S, Ev), F32) if H > 1 else np.ones((B, 2, S, Ev), F32)
        assume(v.shape[1] != H)
        bad = v.shape
    elif kind == "gqa":
        assume(H > 1)
        q = np.ones((B, H * g + 1, L, E), F32)
        assume((H * g + 1) % H)
        bad = q.shape
    elif kind == "batch":                                   # 3 vs 2: no broadcast
        k, v = np.ones((2, H, S, E), F32), np.ones((2, H, S, Ev), F32)
        q = np.ones((3, H * g, L, E), F32)
        bad = q.shape
    elif kind == "mask":
        m = np.ones(draw(st.sampled_from([(L, S + 1), (L + 1, S), (B + 1, 1, L, S),
                                          (1, H * g + 1, L, S)])), bool)
        kw["attn_mask"] = m
        bad = m.shape
    elif kind == "query_1d":
        q = np.ones((E,), F32)
        bad = q.shape
    else:                          # heads differ (neither is 1), gqa not enabled
        assume(g > 1 and H > 1)
        kw = {}
        bad = q.shape
    f = draw(st.sampled_from(["sdpa", "weights"]))
    if f == "weights" and kind in ("value_S", "value_heads"):
        f = "sdpa"
    if f == "sdpa":
        return (lambda: cattn.scaled_dot_product_attention(q, k, v, **kw)), bad
    return (lambda: cattn.attention_weights(q, k, **kw)), bad


@examples(6)
@given(op=st.sampled_from(["linear", "layer_norm", "rms_norm", "attention"]), data=st.data())
def test_bad_shapes_raise_value_error_naming_them(op, data):
    call, bad = _shape_case(data.draw, op)
    note(f"offending shape {bad}")
    with pytest.raises(ValueError) as info:
        call()
    assert str(bad) in str(info.value), f"message does not name {bad}: {info.value}"


# ---- scalar arguments ------------------------------------------------------------

JUNK = [10**400, 1 << 40, 2**63, -(1 << 70), -1, 0, 1, 2, 1.5, float("nan"), float("inf"),
        -float("inf"), "a", "", None, [1.0], (1 + 1j), np.float32(2.0), np.int64(3), True, b"x",
        object(), np.array([1.0, 2.0]), 1e300]


def _threads_then_matmul(j):
    cattn.set_num_threads(j)
    return cattn.matmul(X, X.T)


def _ctx_then_matmul(j):
    with cattn.num_threads(j):
        return cattn.matmul(X, X.T)


SCALAR_CALLS = {   # name: (call, words one of which the message must contain)
    "layer_norm.eps": (lambda j: cattn.layer_norm(X, eps=j), ("eps",)),
    "rms_norm.eps": (lambda j: cattn.rms_norm(X, eps=j), ("eps",)),
    "sdpa.scale": (lambda j: cattn.scaled_dot_product_attention(Q, Q, Q, scale=j), ("scale",)),
    "attention_weights.scale": (lambda j: cattn.attention_weights(Q, Q, scale=j), ("scale",)),
    "softmax.axis": (lambda j: cattn.softmax(X, axis=j), ("axis",)),
    "log_softmax.axis": (lambda j: cattn.log_softmax(X, axis=j), ("axis",)),
    "linear.activation": (lambda j: cattn.linear(X, W, activation=j), ("activation",)),
    "gelu.approximate": (lambda j: cattn.gelu(X, approximate=j), ("approximate",)),
    "sdpa.causal_alignment": (lambda j: cattn.scaled_dot_product_attention(
        Q, Q, Q, is_causal=True, causal_alignment=j), ("causal_alignment",)),
    "sdpa.dropout_p": (lambda j: cattn.scaled_dot_product_attention(Q, Q, Q, dropout_p=j),
                       ("dropout_p",)),
    "set_num_threads": (_threads_then_matmul, ("thread",)),
    "num_threads": (_ctx_then_matmul, ("thread",)),
    "KVCache.max_len": (lambda j: cattn.KVCache(1, 1, j, 4), ("max_len",)),
    "KVCache.head_dim": (lambda j: cattn.KVCache(1, 1, 4, j), ("head_dim",)),
    "KVCache.value_dim": (lambda j: cattn.KVCache(1, 1, 4, 4, value_dim=j), ("value_dim",)),
}


@examples(8)
@given(name=st.sampled_from(sorted(SCALAR_CALLS)), j=st.sampled_from(JUNK))
def test_scalar_arguments_work_or_raise_clear_errors(name, j):
    call, words = SCALAR_CALLS[name]
    saved = cattn._threads._global
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(j)
    except CLEAR + (MemoryError,) as e:
        if not isinstance(e, MemoryError):
            assert any(w in str(e) for w in words), \
                f"{name}={j!r}: {type(e).__name__} does not name the argument: {e}"
    finally:
        cattn._threads._global = saved
