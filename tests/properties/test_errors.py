"""Clear errors for every scalar a caller can pass (issue 9).

Rules (cattn/_validate.py, README "Limits and errors"):
- a wrong type raises TypeError, a value out of range ValueError, a size
  too large for memory MemoryError (ValueError past what NumPy can
  describe); the message names the argument and shows its value;
- never OverflowError or SystemError: no Python int reaches C unchecked;
- bool is not a number: True is refused as a size, a thread count, an
  axis, eps or scale (TypeError), although Python treats it as an int;
- thread counts: int in 1 .. cattn._threads.MAX_THREADS = max(1024, CPUs);
- eps: finite real >= 0 (0 allowed as in torch); scale: None (1/sqrt(E))
  or any real finite in the compute dtype, 0 and negative included (as torch);
  dropout_p: 0 only; flags (is_causal, enable_gqa): bool, NumPy bool, 0 or 1.
"""
import contextlib
import math
import os

import numpy as np
import pytest

import cattn
import cattn.nn as cnn
import cattn.ops.attention
import cattn.ops.gemm
from cattn import _threads, _validate, reference
from cattn_testing.paths import run_python

try:  # NumPy >= 1.25
    from numpy.exceptions import AxisError
except ImportError:  # pragma: no cover
    AxisError = np.AxisError

F32, F64 = np.float32, np.float64
HUGE = 10 ** 400            # no float, no C type holds it
NOT_ALLOWED = (OverflowError, SystemError, AssertionError, KeyError, IndexError,
               AttributeError, ZeroDivisionError)

# a size no machine can allocate but NumPy can describe: 2^60 bytes (1 EiB),
# beyond any virtual address space, so even an overcommitting OS refuses it
EIB_F32_ROWS = 1 << 56       # rows of 4 float32 = 2^60 bytes


def _under_asan():
    """AddressSanitizer aborts on a 2^60-byte malloc (unless
    allocator_may_return_null=1) instead of returning NULL: under it, the
    "cannot allocate" paths are exercised with a simulated failure only."""
    return "asan" in os.environ.get("LD_PRELOAD", "") or "ASAN_OPTIONS" in os.environ


@contextlib.contextmanager
def _allocation_fails(module):
    """Inside the block, cattn's allocations in `module` (cattn.ops.gemm,
    cattn.ops.attention) fail as NumPy fails when malloc returns NULL."""
    real = _validate.alloc

    def fail(shape, *args, **kw):
        raise MemoryError(f"Unable to allocate (simulated) for an array with shape {shape}")

    def alloc(shape, dtype, op, what, init=None):
        return real(shape, dtype, op, what, init=fail)
    saved = module.alloc
    module.alloc = alloc
    try:
        yield
    finally:
        module.alloc = saved


def _id(v):
    """Short test ids (a 400-digit int would make a 400-character id)."""
    r = repr(v) if not isinstance(v, type) else v.__name__
    return r if len(r) <= 20 else f"{r[:8]}...({len(r)}ch)"


def _allowed_kind(e):
    # numpy's AxisError is a ValueError and an IndexError: the error NumPy
    # itself raises for a bad axis, kept as is
    return isinstance(e, AxisError) or not isinstance(e, NOT_ALLOWED)


def _raises_clearly(fn, names, allowed=(TypeError, ValueError, MemoryError)):
    """fn() raises one of `allowed` whose message contains one of `names`
    (a string or a tuple of alternatives)."""
    names = (names,) if isinstance(names, str) else names
    with pytest.raises(Exception) as e:
        fn()
    assert isinstance(e.value, allowed) and _allowed_kind(e.value), \
        f"{type(e.value).__name__}: {e.value}"
    msg = str(e.value)
    assert any(n in msg for n in names), f"message does not name {names}: {msg}"
    return e.value


# ---------------------------------------------------------------- threads

@pytest.mark.parametrize("setter", ["set_num_threads", "num_threads"])
@pytest.mark.parametrize("bad", [1 << 40, 2 ** 31, 2 ** 63, HUGE, _threads.MAX_THREADS + 1],
                         ids=_id)
def test_thread_count_too_large_is_refused_where_it_is_set(setter, bad):
    before = cattn.get_num_threads()
    if setter == "set_num_threads":
        e = _raises_clearly(lambda: cattn.set_num_threads(bad), "number of threads",
                            allowed=ValueError)
    else:
        def enter():
            with cattn.num_threads(bad):
                pass
        e = _raises_clearly(enter, "number of threads", allowed=ValueError)
    assert str(_threads.MAX_THREADS) in str(e) and "MAX_THREADS" in str(e)
    assert len(str(e)) < 400                    # a 400-digit value is shown cut
    assert cattn.get_num_threads() == before
    a = np.ones((3, 3), F32)
    np.testing.assert_array_equal(cattn.matmul(a, a), np.full((3, 3), 3, F32))


@pytest.mark.parametrize("bad", [True, False, np.True_, 2.0, 1.5, "2", None, 1j, np.ones(1)])
def test_thread_count_types(bad):
    _raises_clearly(lambda: cattn.set_num_threads(bad), "must be an int", allowed=TypeError)

    def enter():
        with cattn.num_threads(bad):
            pass
    _raises_clearly(enter, "must be an int", allowed=TypeError)


def test_thread_count_limits_accepted():
    cattn.set_num_threads(_threads.MAX_THREADS)
    assert cattn.get_num_threads() == _threads.MAX_THREADS
    a = np.ones((4, 4), F32)
    np.testing.assert_array_equal(cattn.matmul(a, a), np.full((4, 4), 4, F32))
    cattn.set_num_threads(np.int64(1))
    with cattn.num_threads(np.uint8(2)) as n:
        assert n == 2 and type(n) is int
    assert _threads.MAX_THREADS >= 1024


def test_openmp_default_is_clamped_to_the_limit():
    out = run_python("import cattn, cattn._threads as t; "
                     "print(cattn.get_num_threads(), t.MAX_THREADS)",
                     OMP_NUM_THREADS="100000")
    n, limit = map(int, out.split())
    assert n == min(100000, limit)


# ---------------------------------------------------------------- eps

@pytest.mark.parametrize("fn", ["layer_norm", "rms_norm"])
@pytest.mark.parametrize("bad,exc", [
    (HUGE, ValueError), (-HUGE, ValueError), (2 ** 1024, ValueError),
    (float("nan"), ValueError), (float("inf"), ValueError), (-1e-5, ValueError), (-1, ValueError),
    ("a", TypeError), (1j, TypeError), (None, TypeError), (True, TypeError),
    (np.ones(2), TypeError), ([1e-5], TypeError),
], ids=_id)
def test_eps(fn, bad, exc):
    x = np.ones((2, 4), F32)
    e = _raises_clearly(lambda: getattr(cattn, fn)(x, eps=bad), "eps", allowed=exc)
    assert fn in str(e)


@pytest.mark.parametrize("eps", [0, 0.0, 1, np.float32(1e-5), np.array(1e-3), 1e300, 10 ** 300],
                         ids=_id)
def test_eps_accepted(eps):
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(F64)
    got = cattn.layer_norm(x, eps=eps)
    np.testing.assert_allclose(got, reference.layer_norm(x, eps=float(eps)), rtol=1e-9, atol=1e-12)
    got = cattn.rms_norm(x, eps=eps)
    np.testing.assert_allclose(got, reference.rms_norm(x, eps=float(eps)), rtol=1e-9, atol=1e-12)


def test_layer_norm_module_checks_eps_at_construction():
    _raises_clearly(lambda: cnn.LayerNorm(4, eps=HUGE), "eps", allowed=ValueError)
    _raises_clearly(lambda: cnn.LayerNorm(4, eps="a"), "eps", allowed=TypeError)
    _raises_clearly(lambda: cnn.LayerNorm(4, eps=-1.0), "eps", allowed=ValueError)
    _raises_clearly(lambda: cnn.TransformerEncoderLayer(4, 1, 8, layer_norm_eps=HUGE), "eps",
                    allowed=ValueError)


# ---------------------------------------------------------------- scale, dropout_p, flags

def _sdpa(**kw):
    x = np.ones((2, 4), F32)
    return cattn.scaled_dot_product_attention(x, x, x, **kw)


def _weights(**kw):
    x = np.ones((2, 4), F32)
    return cattn.attention_weights(x, x, **kw)


def _attend(**kw):
    c = cattn.KVCache(1, 1, 4, 4)
    c.append(np.ones((1, 1, 2, 4), F32), np.ones((1, 1, 2, 4), F32))
    return c.attend(np.ones((1, 1, 1, 4), F32), **kw)


ATTN = [_sdpa, _weights, _attend]


@pytest.mark.parametrize("call", ATTN)
@pytest.mark.parametrize("bad,exc", [
    (HUGE, ValueError), (-HUGE, ValueError), (float("nan"), ValueError),
    (float("inf"), ValueError), (-float("inf"), ValueError),
    (1e300, ValueError),                       # not finite in float32, the compute dtype
    ("a", TypeError), (1j, TypeError), (True, TypeError), (np.ones(2), TypeError),
    ([1.0], TypeError),
], ids=_id)
def test_scale(call, bad, exc):
    _raises_clearly(lambda: call(scale=bad), "scale", allowed=exc)


@pytest.mark.parametrize("scale", [0, 0.0, -1.0, -0.25, 3, np.float32(0.5), np.array(2.0),
                                   1e-30, 3e38, 2 ** 64])
def test_scale_accepted_and_used(scale):
    """Any real number finite in the compute dtype (float64 here for 2**64),
    0 and negative included, as torch; it matches the reference."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((3, 4)) for _ in range(3))
    got = cattn.scaled_dot_product_attention(q, k, v, scale=scale)
    ref = reference.scaled_dot_product_attention(q, k, v, scale=float(scale))
    np.testing.assert_allclose(got, ref,
                               rtol=1e-9, atol=1e-9)
    if abs(float(scale)) <= 1:
        q32, k32, v32 = (a.astype(F32) for a in (q, k, v))
        got = cattn.attention_weights(q32, k32, scale=scale)
        np.testing.assert_allclose(got, reference.attention_weights(q, k, scale=float(scale)),
                                   rtol=1e-4, atol=1e-6)


def test_scale_large_but_finite_in_float64():
    x = np.ones((2, 4), F64)
    assert np.isfinite(cattn.scaled_dot_product_attention(x, x, x, scale=1e300)).all()


@pytest.mark.parametrize("bad,exc", [
    (HUGE, ValueError), (0.1, ValueError), (float("nan"), ValueError), ("a", TypeError),
    (np.zeros(2), TypeError), (None, TypeError),
], ids=_id)
def test_dropout_p(bad, exc):
    _raises_clearly(lambda: _sdpa(dropout_p=bad), "dropout_p", allowed=exc)


@pytest.mark.parametrize("ok", [0, 0.0, np.float32(0), -0.0])
def test_dropout_p_zero_accepted(ok):
    _sdpa(dropout_p=ok)


@pytest.mark.parametrize("flag", ["is_causal", "enable_gqa"])
@pytest.mark.parametrize("bad", [np.ones(2, bool), np.zeros(3), "yes", 2, 0.5, None])
def test_flags(flag, bad):
    _raises_clearly(lambda: _sdpa(**{flag: bad}), flag, allowed=TypeError)
    _raises_clearly(lambda: _weights(**{flag: bad}), flag, allowed=TypeError)


@pytest.mark.parametrize("ok", [True, False, np.True_, np.False_, 0, 1])
def test_flags_accepted(ok):
    x = np.random.default_rng(2).standard_normal((3, 4))
    got = cattn.scaled_dot_product_attention(x, x, x, is_causal=ok, enable_gqa=ok)
    ref = reference.scaled_dot_product_attention(x, x, x, is_causal=bool(ok))
    np.testing.assert_allclose(got, ref, rtol=1e-9)


def test_attend_is_causal_flag():
    _raises_clearly(lambda: _attend(is_causal=np.ones(2)), "is_causal", allowed=TypeError)


@pytest.mark.parametrize("bad", [["upper_left"], np.array(["upper_left"]), 1, None])
def test_causal_alignment(bad):
    _raises_clearly(lambda: _sdpa(is_causal=True, causal_alignment=bad), "causal_alignment",
                    allowed=ValueError)


# ---------------------------------------------------------------- axis, approximate, activation

@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
@pytest.mark.parametrize("bad,exc", [
    (HUGE, ValueError), (-HUGE, ValueError), (2, ValueError), (-3, ValueError),
    (1.0, TypeError), (None, TypeError), (True, TypeError), ("0", TypeError),
], ids=_id)
def test_axis(fn, bad, exc):
    _raises_clearly(lambda: getattr(cattn, fn)(np.ones((2, 3), F32), axis=bad), "axis",
                    allowed=exc)


def test_axis_numpy_ints_accepted():
    x = np.arange(6, dtype=F64).reshape(2, 3)
    np.testing.assert_allclose(cattn.softmax(x, axis=np.int64(0)), reference.softmax(x, axis=0))


@pytest.mark.parametrize("bad", [np.array(["none"]), ["tanh"], None, 1, "exact"])
def test_gelu_approximate(bad):
    _raises_clearly(lambda: cattn.gelu(np.ones(3, F32), approximate=bad), "approximate",
                    allowed=ValueError)


@pytest.mark.parametrize("bad", [[], "tanh", 1, np.array(["relu"])])
def test_linear_activation(bad):
    x = np.ones((2, 3), F32)
    _raises_clearly(lambda: cattn.linear(x, x, activation=bad), "activation", allowed=ValueError)


# ---------------------------------------------------------------- KVCache

@pytest.mark.parametrize("name", ["batch", "kv_heads", "max_len", "head_dim", "value_dim"])
@pytest.mark.parametrize("bad,exc", [
    (-1, ValueError), (-HUGE, ValueError), (2.5, TypeError), (2.0, TypeError),
    (True, TypeError), ("3", TypeError), (None, TypeError), (np.ones(2, int), TypeError),
], ids=_id)
def test_kv_cache_sizes(name, bad, exc):
    kw = dict(batch=1, kv_heads=2, max_len=4, head_dim=8)
    kw[name] = bad
    if name == "value_dim" and bad is None:          # None means head_dim
        assert cattn.KVCache(**kw).v.shape == (1, 2, 4, 8)
        return
    e = _raises_clearly(lambda: cattn.KVCache(**kw), name, allowed=exc)
    if bad is not None and not isinstance(bad, np.ndarray):
        assert repr(bad)[:10] in str(e)


@pytest.mark.parametrize("name", ["batch", "kv_heads", "max_len", "head_dim", "value_dim"])
@pytest.mark.parametrize("big", [HUGE, 2 ** 63, 2 ** 62], ids=_id)
def test_kv_cache_huge_sizes(name, big):
    """Sizes past what NumPy can describe: ValueError before any allocation."""
    kw = dict(batch=1, kv_heads=1, max_len=1, head_dim=4)
    kw[name] = big
    e = _raises_clearly(lambda: cattn.KVCache(**kw), name, allowed=ValueError)
    assert "shape" in str(e) and "more than any array can hold" in str(e)


@pytest.mark.parametrize("name", ["batch", "max_len", "head_dim", "value_dim"])
def test_kv_cache_too_large_for_memory(name):
    """A cache NumPy can describe but the machine cannot hold (1 EiB):
    MemoryError naming the sizes. The real allocation is tried except under
    AddressSanitizer; the failure is also simulated."""
    kw = dict(batch=1, kv_heads=1, max_len=4, head_dim=4)
    kw[name] = EIB_F32_ROWS // 4
    with _allocation_fails(cattn.ops.attention):
        e = _raises_clearly(lambda: cattn.KVCache(**kw), name, allowed=MemoryError)
    assert "shape" in str(e) and f"{name}={EIB_F32_ROWS // 4}" in str(e)
    if not _under_asan():
        _raises_clearly(lambda: cattn.KVCache(**kw), name, allowed=MemoryError)


def test_kv_cache_dtype():
    _raises_clearly(lambda: cattn.KVCache(1, 1, 4, 4, dtype="foo"), "dtype", allowed=TypeError)
    _raises_clearly(lambda: cattn.KVCache(1, 1, 4, 4, dtype=np.int16), "int16",
                    allowed=TypeError)
    assert cattn.KVCache(1, 1, 4, 4, dtype=np.float16).k.dtype == np.float16   # a float16 cache
    c = cattn.KVCache(np.int64(1), np.uint8(1), 4, 4, value_dim=np.int32(2))
    assert c.v.shape == (1, 1, 4, 2) and c.k.flags.aligned


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, object, np.int32, np.int64,
                                   np.bool_, np.float16, np.uint8, "U3"])
@pytest.mark.parametrize("which", ["k", "v"])
def test_kv_cache_append_dtypes(dtype, which):
    """float32 / float64 only, as every op: complex is not silently made real,
    ints and objects are refused; the cache is left unchanged."""
    c = cattn.KVCache(1, 2, 4, 3)
    c.append(np.ones((1, 2, 1, 3), F32), np.ones((1, 2, 1, 3), F32))
    before = (c.k.copy(), c.v.copy())
    good = np.ones((1, 2, 1, 3), F32)
    bad = np.ones((1, 2, 1, 3)).astype(dtype)
    args = (bad, good) if which == "k" else (good, bad)
    e = _raises_clearly(lambda: c.append(*args), which, allowed=TypeError)
    assert str(np.dtype(dtype)) in str(e)
    assert c.length == 1 and np.array_equal(c.k, before[0]) and np.array_equal(c.v, before[1])


def test_kv_cache_append_casts_floats():
    c = cattn.KVCache(1, 1, 4, 2)                       # float32 cache
    c.append(np.full((1, 1, 1, 2), 0.1), [[[[1.0, 2.0]]]])  # float64 array, a list
    assert c.k.dtype == F32 and c.k[0, 0, 0, 0] == F32(0.1)
    assert np.array_equal(c.values[0, 0, 0], [1.0, 2.0])
    with pytest.raises(ValueError, match="overflow"):
        c.append(np.full((1, 1, 1, 2), 1e300), np.ones((1, 1, 1, 2)))
    assert c.length == 1
    c.append(np.full((1, 1, 1, 2), np.inf), np.full((1, 1, 1, 2), np.nan))  # not an overflow
    assert c.length == 2
    c64 = cattn.KVCache(1, 1, 4, 2, dtype=F64)
    c64.append(np.ones((1, 1, 1, 2), F32), np.ones((1, 1, 1, 2), F32))
    assert c64.length == 1


@pytest.mark.parametrize("k_shape,v_shape,match", [
    ((2,), (2,), r"k has shape \(2,\)"),
    ((), (), r"k has shape \(\)"),
    ((1, 2, 1, 3), (1, 2, 1), r"v has shape \(1, 2, 1\)"),
    ((1, 2, 1, 3), (1, 2, 1, 3, 1), r"v has shape \(1, 2, 1, 3, 1\)"),
])
def test_kv_cache_append_shapes(k_shape, v_shape, match):
    c = cattn.KVCache(1, 2, 4, 3)
    with pytest.raises(ValueError, match=match):
        c.append(np.ones(k_shape, F32), np.ones(v_shape, F32))
    assert c.length == 0


def test_kv_cache_append_ragged_list():
    c = cattn.KVCache(1, 1, 4, 2)
    _raises_clearly(lambda: c.append([[[[1.0, 2.0], [1.0]]]], np.ones((1, 1, 1, 2))), "k",
                    allowed=TypeError)


# ---------------------------------------------------------------- output sizes

def test_huge_broadcast_results():
    """Outputs implied by broadcasting stride-0 views: MemoryError /
    ValueError naming the op and the shape, not a crash."""
    a = np.broadcast_to(np.ones((1, 1, 4), F32), (1 << 40, 1 << 16, 4))    # 2^60-byte result
    b = np.ones((4, 4), F32)
    with _allocation_fails(cattn.ops.gemm):
        e = _raises_clearly(lambda: cattn.matmul(a, b), "matmul", allowed=MemoryError)
    assert "shape (1099511627776, 65536, 4)" in str(e)
    if not _under_asan():
        _raises_clearly(lambda: cattn.matmul(a, b), "matmul", allowed=MemoryError)
    q = np.broadcast_to(np.ones((1, 4), F32), (1 << 31, 4))                 # 2^64-byte weights
    e = _raises_clearly(lambda: cattn.attention_weights(q, q), "attention_weights",
                        allowed=ValueError)
    assert "shape" in str(e)
    with _allocation_fails(cattn.ops.attention):
        _raises_clearly(lambda: cattn.scaled_dot_product_attention(q, q, q), "result",
                        allowed=MemoryError)


# ---------------------------------------------------------------- nn

@pytest.mark.parametrize("make,name,exc", [
    (lambda: cnn.Linear(2.5, 4), "in_features", TypeError),
    (lambda: cnn.Linear(4, True), "out_features", TypeError),
    (lambda: cnn.Linear(-1, 4), "in_features", ValueError),
    (lambda: cnn.Linear(HUGE, 4), "in_features", ValueError),
    (lambda: cnn.Linear(1 << 40, 1 << 40), "in_features", (ValueError, MemoryError)),
    (lambda: cnn.Linear(1 << 36, 1), "in_features", MemoryError),   # 512 GiB of weights
    (lambda: cnn.LayerNorm(HUGE), "normalized_shape", ValueError),
    (lambda: cnn.LayerNorm(1 << 50), "shape", MemoryError),
    (lambda: cnn.LayerNorm(2.0), "normalized_shape", TypeError),
    (lambda: cnn.MultiheadAttention(1 << 62, 1), "embed_dim", (ValueError, MemoryError)),
    (lambda: cnn.MultiheadAttention(4, 0), "num_heads", ValueError),
    (lambda: cnn.MultiheadAttention(4, 1.0), "num_heads", TypeError),
    (lambda: cnn.MultiheadAttention(4, 1, kdim=HUGE), "kdim", ValueError),
    (lambda: cnn.MultiheadAttention(4, 1, dropout=HUGE), "dropout", ValueError),
    (lambda: cnn.TransformerEncoderLayer(4, 1, dim_feedforward=HUGE), "out_features", ValueError),
    (lambda: cnn.TransformerEncoderLayer(4, 1, dim_feedforward=-1), "out_features", ValueError),
    (lambda: cnn.TransformerEncoder(cnn.TransformerEncoderLayer(4, 1, 8), HUGE), "num_layers",
     MemoryError),
    (lambda: cnn.TransformerEncoder(cnn.TransformerEncoderLayer(4, 1, 8), 10 ** 12),
     "num_layers", MemoryError),
    (lambda: cnn.TransformerDecoder(cnn.TransformerDecoderLayer(4, 1, 8), 10 ** 12),
     "num_layers", MemoryError),
    (lambda: cnn.TransformerEncoder(cnn.TransformerEncoderLayer(4, 1, 8), 2.0), "num_layers",
     TypeError),
    (lambda: cnn.DecoderOnly(4, 1, 10 ** 12), "num_layers", MemoryError),
    (lambda: cnn.DecoderOnly(4, 1, 1).new_cache(1, HUGE), "max_len", ValueError),
    (lambda: cnn.DecoderOnly(4, 1, 1).new_cache(-1, 4), "batch", ValueError),
    (lambda: cnn.PositionalEncoding(4, HUGE), "max_len", ValueError),
    (lambda: cnn.PositionalEncoding(4, 1 << 40), "max_len", MemoryError),
    (lambda: cnn.RotaryEmbedding(4, base=HUGE), "base", ValueError),
    (lambda: cnn.RotaryEmbedding(4, base=0), "base", ValueError),
    (lambda: cnn.RotaryEmbedding(4, base=float("nan")), "base", ValueError),
    (lambda: cnn.RotaryEmbedding(4.0), "head_dim", TypeError),
    (lambda: cnn.generate_square_subsequent_mask(HUGE), "sz", ValueError),
    (lambda: cnn.generate_square_subsequent_mask(1 << 28), "sz", MemoryError),
    (lambda: cnn.generate_square_subsequent_mask(-1), "sz", ValueError),
    (lambda: cnn.generate_square_subsequent_mask(2.0), "sz", TypeError),
])
def test_nn_constructor_errors(make, name, exc):
    _raises_clearly(make, name, allowed=exc)


def test_nn_forward_scalars():
    pe = cnn.PositionalEncoding(4, 10)
    x = np.ones((1, 2, 4), F32)
    _raises_clearly(lambda: pe(x, offset=1.5), "offset", allowed=TypeError)
    _raises_clearly(lambda: pe(x, offset=-1), "offset", allowed=ValueError)
    _raises_clearly(lambda: pe(x, offset=HUGE), ("offset", "max_len"), allowed=ValueError)
    rope = cnn.RotaryEmbedding(4)
    q = np.ones((3, 4), F32)
    _raises_clearly(lambda: rope.apply(q, -5), "offset", allowed=ValueError)
    _raises_clearly(lambda: rope.apply(q, 1.5), "offset", allowed=TypeError)
    _raises_clearly(lambda: rope.apply(q, HUGE), "offset", allowed=ValueError)
    _raises_clearly(lambda: rope.apply(q, 1 << 53), "offset", allowed=ValueError)


def test_mha_flags():
    m = cnn.MultiheadAttention(4, 2)
    x = np.ones((1, 3, 4), F32)
    for flag in ("need_weights", "average_attn_weights", "is_causal"):
        _raises_clearly(lambda: m(x, **{flag: np.ones(2, bool)}), flag, allowed=TypeError)
    out, w = m(x, need_weights=np.True_, average_attn_weights=0, is_causal=None)
    assert w.shape == (1, 2, 3, 3)


def test_rotary_negative_offset_was_silent_garbage():
    """offset=-5 used to index the cached table from its end (wrong angles,
    no error); it is a ValueError now."""
    rope = cnn.RotaryEmbedding(4)
    with pytest.raises(ValueError, match="offset"):
        rope.apply(np.ones((2, 4), F32), -5)


def test_rotary_far_positions_computed_directly_with_the_same_values():
    """Positions past the cached table's cap are computed per call (no
    2^40-row table) and equal the cached values bitwise."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 8)).astype(F32)
    cached = cnn.RotaryEmbedding(8)
    direct = cnn.RotaryEmbedding(8)
    direct._TABLE_MAX = 16                 # force the direct path for offset 100
    np.testing.assert_array_equal(direct.apply(x, 100), cached.apply(x, 100))
    far = cached.apply(x, 1 << 40)         # would be an 8 TiB table
    assert far.shape == x.shape and np.isfinite(far).all()
    assert all(t[0].shape[0] <= cnn.RotaryEmbedding._TABLE_MAX for t in cached._tables.values())


# ---------------------------------------------------------------- sweep: no OverflowError

_X = np.ones((2, 4), F32)
_HOSTILE = [HUGE, -HUGE, 2 ** 63, 2 ** 64, -2 ** 63 - 1, 2 ** 31, float("nan"), float("inf"),
            -float("inf"), -1, "a", b"1", 1j, True, None, np.ones(2), object(), [1], 2.5]

_SWEEP = {
    "set_num_threads(n)": lambda v: cattn.set_num_threads(v),
    "layer_norm(eps)": lambda v: cattn.layer_norm(_X, eps=v),
    "rms_norm(eps)": lambda v: cattn.rms_norm(_X, eps=v),
    "softmax(axis)": lambda v: cattn.softmax(_X, axis=v),
    "log_softmax(axis)": lambda v: cattn.log_softmax(_X, axis=v),
    "sdpa(scale)": lambda v: cattn.scaled_dot_product_attention(_X, _X, _X, scale=v),
    "sdpa(dropout_p)": lambda v: cattn.scaled_dot_product_attention(_X, _X, _X, dropout_p=v),
    "sdpa(is_causal)": lambda v: cattn.scaled_dot_product_attention(_X, _X, _X, is_causal=v),
    "sdpa(enable_gqa)": lambda v: cattn.scaled_dot_product_attention(_X, _X, _X, enable_gqa=v),
    "attention_weights(scale)": lambda v: cattn.attention_weights(_X, _X, scale=v),
    # (the other sizes make every hostile int too large to describe: no real
    # multi-GiB allocation, which a sanitizer build may refuse by aborting)
    "KVCache(max_len)": lambda v: cattn.KVCache(1, 1, v, 1 << 40),
    "KVCache(value_dim)": lambda v: cattn.KVCache(1, 1, 1 << 40, 0, value_dim=v),
    "Linear(in_features)": lambda v: cnn.Linear(v, 2),
    "LayerNorm(eps)": lambda v: cnn.LayerNorm(4, eps=v),
    "MultiheadAttention(num_heads)": lambda v: cnn.MultiheadAttention(4, v),
    "PositionalEncoding(max_len)": lambda v: cnn.PositionalEncoding(4, v),
    "RotaryEmbedding(base)": lambda v: cnn.RotaryEmbedding(4, base=v),
    "RotaryEmbedding.apply(offset)": lambda v: cnn.RotaryEmbedding(4).apply(_X, v),
    "generate_square_subsequent_mask(sz)": lambda v: cnn.generate_square_subsequent_mask(v),
}


@pytest.mark.parametrize("where", list(_SWEEP))
def test_no_overflow_or_system_error_anywhere(where):
    """Every hostile scalar either works or raises TypeError / ValueError /
    MemoryError naming the argument; never OverflowError / SystemError."""
    name = where[where.index("(") + 1:-1]
    for v in _HOSTILE:
        try:
            _SWEEP[where](v)
        except (TypeError, ValueError, MemoryError) as e:
            assert _allowed_kind(e), f"{where} with {v!r}: {e!r}"
            msg = str(e)
            assert name in msg or name.replace("_", " ") in msg or "threads" in msg, \
                f"{where} with {v!r}: message does not name {name}: {msg}"
            assert len(msg) < 600, f"{where}: message too long ({len(msg)})"
        except Exception as e:  # noqa: BLE001 - this is what the test is about
            pytest.fail(f"{where} with {v!r} raised {type(e).__name__}: {e}")
    cattn._threads._global = None


def test_bert_config_validates_numbers():
    from cattn.models import bert
    with pytest.raises(ValueError, match="num_attention_heads"):
        bert.BertConfig.from_dict({"num_attention_heads": 0})
    with pytest.raises(TypeError, match="hidden_size"):
        bert.BertConfig.from_dict({"hidden_size": 768.5})
    with pytest.raises(ValueError, match="layer_norm_eps"):
        bert.BertConfig.from_dict({"layer_norm_eps": HUGE})
    assert math.isclose(bert.BertConfig.from_dict({}).layer_norm_eps, 1e-12)


# ---------------------------------------------------------------- other array kinds

def test_non_native_byte_order_is_converted():
    """'>f4' data is float32 in the other byte order: converted (one copy),
    never handed to C as is, and never refused as 'not float32'."""
    rng = np.random.default_rng(8)
    for dt in (F32, F64):
        x = rng.standard_normal((3, 4)).astype(dt)
        sw = x.astype(np.dtype(dt).newbyteorder())
        assert sw.dtype.byteorder != "=" and np.array_equal(sw, x)
        np.testing.assert_array_equal(cattn.matmul(sw, sw.T), cattn.matmul(x, x.T))
        np.testing.assert_array_equal(cattn.linear(sw, sw, sw[:, 0]), cattn.linear(x, x, x[:, 0]))
        np.testing.assert_array_equal(cattn.softmax(sw), cattn.softmax(x))
        np.testing.assert_array_equal(cattn.layer_norm(sw, sw[0], sw[1]),
                                      cattn.layer_norm(x, x[0], x[1]))
        np.testing.assert_array_equal(cattn.gelu(sw), cattn.gelu(x))
        m = np.where(x[:, :3] > 0, 0, -1.5).astype(dt)
        np.testing.assert_array_equal(
            cattn.scaled_dot_product_attention(sw, sw[:3], sw[:3], attn_mask=m.astype(sw.dtype)),
            cattn.scaled_dot_product_attention(x, x[:3], x[:3], attn_mask=m))
        c = cattn.KVCache(1, 1, 4, 4, dtype=dt)
        c.append(sw[None, None], sw[None, None])
        assert np.array_equal(c.keys[0, 0], x)
        layer = cnn.Linear(4, 2, dtype=dt, seed=0)
        np.testing.assert_array_equal(layer(sw), layer(x))
        mha = cnn.MultiheadAttention(4, 2, dtype=dt, seed=0)
        np.testing.assert_array_equal(mha(sw[None])[0], mha(x[None])[0])


def test_masked_arrays_are_refused():
    ma = np.ma.masked_array(np.ones((3, 3), F32), mask=np.eye(3, dtype=bool))
    for fn in (lambda: cattn.matmul(ma, ma), lambda: cattn.softmax(ma),
               lambda: cattn.layer_norm(ma), lambda: cattn.scaled_dot_product_attention(ma, ma, ma),
               lambda: cattn.KVCache(1, 1, 4, 3).append(ma[None, None], ma[None, None])):
        _raises_clearly(fn, "masked array", allowed=TypeError)


def test_ragged_mask():
    x = np.ones((2, 3), F32)
    ragged = [[1.0], [1.0, 2.0]]
    _raises_clearly(lambda: cattn.scaled_dot_product_attention(x, x, x, attn_mask=ragged),
                    "attn_mask", allowed=TypeError)


def test_mha_kv_cache_type():
    m = cnn.MultiheadAttention(4, 2)
    _raises_clearly(lambda: m(np.ones((1, 2, 4), F32), kv_cache=[1]), "kv_cache", allowed=TypeError)


def test_decoder_only_bad_caches_leave_every_cache_unchanged():
    model = cnn.DecoderOnly(8, 2, 3, seed=0)
    x = np.random.default_rng(0).standard_normal((1, 2, 8)).astype(F32)
    _raises_clearly(lambda: model(x, cache=5), "cache", allowed=TypeError)
    _raises_clearly(lambda: model(x, cache=[5, 5, 5]), "cache", allowed=TypeError)
    good = model.new_cache(1, 4)
    model(x, cache=good)
    for bad_last in (cattn.KVCache(1, 2, 4, 4, dtype=F64),   # wrong dtype
                     cattn.KVCache(2, 2, 4, 4),               # wrong batch
                     cattn.KVCache(1, 1, 4, 8),               # wrong heads / head_dim
                     cattn.KVCache(1, 2, 2, 4)):              # no room for 2 more positions
        if bad_last.max_len == 2:
            bad_last.append(np.ones((1, 2, 1, 4), F32), np.ones((1, 2, 1, 4), F32))
        cache = good[:2] + [bad_last]
        before = [(c.length, c.k.copy()) for c in cache]
        _raises_clearly(lambda: model(x, cache=cache), "cache[2]", allowed=ValueError)
        assert all(c.length == n and np.array_equal(c.k, k) for c, (n, k) in zip(cache, before))
    model(x, cache=good)                                                            # full: 4 of 4
    _raises_clearly(lambda: model(x, cache=good), "max_len", allowed=ValueError)
    assert all(c.length == 4 for c in good)
