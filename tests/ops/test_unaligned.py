"""Unaligned inputs (issue 9): every array cattn hands to its C kernels is
aligned with whole-element strides, whatever the caller passes.

np.ascontiguousarray returns a contiguous but unaligned array unchanged
(np.frombuffer(buf, np.float32, offset=1)), and reading it through a
float pointer in C is undefined behaviour (UBSan: misaligned load). The
ops copy such an input once (cattn._validate.readable / contiguous).

Checked here, for every op, float32 and float64, at byte offsets that are
not a multiple of the item size (1..7; 4 for float64 is the case seen in
practice):
- the result on an unaligned input is bitwise the result on an aligned
  array of the same layout (same strides, so the kernels take the same path);
- every ndarray that reaches cattn._ext is aligned with whole-element
  strides (the _ext functions are wrapped for the duration of a test);
- aligned inputs are not copied, broadcast (stride-0) dims stay views.
"""
import numpy as np
import pytest

import cattn
import cattn.nn as cnn
from cattn import _ext
from cattn._validate import contiguous, readable

F32, F64 = np.float32, np.float64
DTYPES = [F32, F64]


def offsets(dtype):
    """Byte offsets that misalign an element of this dtype."""
    item = np.dtype(dtype).itemsize
    return [o for o in range(1, 8) if o % item]


def unaligned(x, offset):
    """A copy of x (same shape, dtype and C layout) whose data pointer is
    `offset` bytes past a 64-byte boundary: misaligned for offset % itemsize."""
    x = np.ascontiguousarray(x)
    buf = np.empty(x.nbytes + 128, np.uint8)
    start = (-buf.ctypes.data) % 64 + offset
    u = np.ndarray(x.shape, dtype=x.dtype, buffer=buf, offset=start)
    u[...] = x
    assert u.ctypes.data % 64 == offset
    if offset % x.itemsize:
        assert not u.flags.aligned
    return u


def same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()


# ---------------------------------------------------------------- the _ext spy

_EXT_FUNCS = ("gemm", "gemm_batched", "attention", "softmax", "layer_norm", "rms_norm",
              "activation")


def _check_arg(fn, i, a):
    if not isinstance(a, np.ndarray):
        return
    assert a.flags.aligned, f"_ext.{fn}: argument {i} is unaligned ({a.ctypes.data:#x})"
    for n, s in zip(a.shape, a.strides):
        assert n <= 1 or s % a.itemsize == 0, \
            f"_ext.{fn}: argument {i} has stride {s} for itemsize {a.itemsize}"


@pytest.fixture
def ext_spy(monkeypatch):
    """Wrap cattn._ext's kernel entry points: each call checks that every
    ndarray argument is aligned with whole-element strides; yields the list
    of the names of the functions called."""
    calls = []
    for name in _EXT_FUNCS:
        real = getattr(_ext, name)

        def wrapper(*args, _real=real, _name=name):
            for i, a in enumerate(args):
                _check_arg(_name, i, a)
            calls.append(_name)
            return _real(*args)
        monkeypatch.setattr(_ext, name, wrapper)
    yield calls


def test_spy_sees_an_unaligned_pointer(monkeypatch, ext_spy):
    """The spy does catch a misaligned array (checked by calling the
    wrapped function directly, as a kernel call would)."""
    x = unaligned(np.ones((2, 2), F32), 1)
    with pytest.raises(AssertionError, match="unaligned"):
        _ext.activation(x, 2, x, 2, 2, 2, 1, 1)


# ---------------------------------------------------------------- the helpers

@pytest.mark.parametrize("dtype", DTYPES)
def test_readable_keeps_aligned_inputs(dtype):
    x = np.arange(24, dtype=dtype).reshape(2, 3, 4)
    for v in (x, x.T, x[:, ::-1], x[..., ::2], np.broadcast_to(x[:1], (5, 3, 4))):
        assert readable(v, np.dtype(dtype)) is v
    assert contiguous(x, np.dtype(dtype)) is x


@pytest.mark.parametrize("dtype,offset", [(F32, 1), (F32, 2), (F32, 7), (F64, 1), (F64, 4)])
def test_readable_realigns_once_and_keeps_layout(dtype, offset):
    x = unaligned(np.arange(24, dtype=dtype).reshape(2, 3, 4), offset)
    r = readable(x, np.dtype(dtype))
    assert r.flags.aligned and r.flags.c_contiguous and np.array_equal(r, x)
    t = readable(x.T, np.dtype(dtype))               # transposed stays transposed
    assert t.flags.aligned and t.strides == x.T.copy(order="K").strides
    assert np.array_equal(t, x.T)
    c = readable(x.T, np.dtype(dtype), last_contig=True)
    assert c.flags.aligned and c.strides[-1] == c.itemsize and np.array_equal(c, x.T)
    r2 = contiguous(x[0, 0], np.dtype(dtype))
    assert r2.flags.aligned and r2.flags.c_contiguous and np.array_equal(r2, x[0, 0])


def test_readable_keeps_broadcast_dims_as_views():
    """An unaligned stride-0 view of a huge axis is realigned without
    materialising the axis (2^40 rows here would be 16 TiB)."""
    row = unaligned(np.arange(4, dtype=F32), 1)
    big = np.broadcast_to(row, (1 << 40, 4))
    r = readable(big, np.dtype(F32))
    assert r.shape == big.shape and r.strides[0] == 0 and r.flags.aligned
    assert np.array_equal(r[123456789], row)
    r = readable(big, np.dtype(F64))                 # cast: still a view of one row
    assert r.strides[0] == 0 and r.dtype == F64
    col = np.broadcast_to(unaligned(np.arange(3, dtype=F32), 1)[:, None], (3, 1 << 20))
    r = readable(col, np.dtype(F32), last_contig=True)   # a broadcast last axis is expanded
    assert r.strides[-1] == 4 and r.shape == col.shape


# ---------------------------------------------------------------- ops, bitwise

def _args(rng, shapes, dtype):
    return [rng.standard_normal(s).astype(dtype) for s in shapes]


def _cases(rng, dtype):
    """(name, function of its array arguments, aligned arrays)."""
    a, b = _args(rng, [(9, 20), (20, 7)], dtype)
    ab, bb = _args(rng, [(3, 5, 6), (6, 4)], dtype)
    ab2, bb2 = _args(rng, [(2, 5, 6), (2, 6, 4)], dtype)     # per-item B: gemm_batched
    qg = _args(rng, [(2, 6, 10, 8)], dtype)[0]               # 6 query heads over 3 kv heads
    x, w, bias = _args(rng, [(2, 3, 16), (11, 16), (11,)], dtype)
    xs = _args(rng, [(4, 33)], dtype)[0]
    nw, nb = _args(rng, [(33,), (33,)], dtype)
    q, k, v = _args(rng, [(2, 3, 10, 8), (2, 3, 13, 8), (2, 3, 13, 6)], dtype)
    qd = _args(rng, [(2, 3, 1, 8)], dtype)[0]            # one query row: the decode path
    fm = np.where(rng.random((10, 13)) < 0.3, -np.inf, rng.standard_normal((10, 13))).astype(dtype)
    return [
        ("matmul", lambda a, b: cattn.matmul(a, b), [a, b]),
        ("matmul batched", lambda a, b: cattn.matmul(a, b), [ab, bb]),
        ("matmul batched B", lambda a, b: cattn.matmul(a, b), [ab2, bb2]),
        ("matmul 1-D", lambda a, b: cattn.matmul(a, b), [a[0], b]),
        ("matmul transposed b", lambda a, b: cattn.matmul(a, b.T), [a, b.T.copy()]),
        ("matmul out=", lambda a, b: cattn.matmul(a, b, out=np.empty((9, 7), dtype)), [a, b]),
        ("linear", lambda x, w, b: cattn.linear(x, w, b), [x, w, bias]),
        ("linear gelu", lambda x, w, b: cattn.linear(x, w, b, activation="gelu"), [x, w, bias]),
        ("linear no bias", lambda x, w: cattn.linear(x, w), [x, w]),
        ("linear weight.T", lambda x, w: cattn.linear(x, w.T), [x, w.T.copy()]),
        ("linear out=", lambda x, w, b: cattn.linear(x, w, b, out=np.empty((2, 3, 11), dtype)),
         [x, w, bias]),
        ("layer_norm", lambda x, w, b: cattn.layer_norm(x, w, b), [xs, nw, nb]),
        ("rms_norm", lambda x, w: cattn.rms_norm(x, w), [xs, nw]),
        ("gelu", lambda x: cattn.gelu(x), [xs]),
        ("gelu tanh", lambda x: cattn.gelu(x, approximate="tanh"), [xs]),
        ("silu", lambda x: cattn.silu(x), [xs]),
        ("relu", lambda x: cattn.relu(x), [xs]),
        ("softmax", lambda x: cattn.softmax(x), [xs]),
        ("softmax axis 0", lambda x: cattn.softmax(x, axis=0), [xs]),
        ("log_softmax", lambda x: cattn.log_softmax(x), [xs]),
        ("sdpa", lambda q, k, v: cattn.scaled_dot_product_attention(q, k, v), [q, k, v]),
        ("sdpa causal", lambda q, k, v: cattn.scaled_dot_product_attention(
            q, k, v, is_causal=True), [q, k, v]),
        ("sdpa float mask", lambda q, k, v, m: cattn.scaled_dot_product_attention(
            q, k, v, attn_mask=m), [q, k, v, fm]),
        ("sdpa gqa", lambda q, k, v: cattn.scaled_dot_product_attention(
            q, k, v, enable_gqa=True), [qg, k, v]),
        ("sdpa decode", lambda q, k, v: cattn.scaled_dot_product_attention(q, k, v), [qd, k, v]),
        ("attention_weights", lambda q, k, m: cattn.attention_weights(q, k, m), [q, k, fm]),
    ]


def _names(dtype):
    return [c[0] for c in _cases(np.random.default_rng(0), dtype)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", _names(F32))
def test_op_on_unaligned_inputs_is_bitwise_the_aligned_result(ext_spy, dtype, case):
    rng = np.random.default_rng(7)
    name, fn, arrays = next(c for c in _cases(rng, dtype) if c[0] == case)
    want = fn(*arrays)
    for offset in offsets(dtype):
        # each argument unaligned alone, then all of them
        for which in list(range(len(arrays))) + ["all"]:
            args = [unaligned(a, offset) if which in (i, "all") else a
                    for i, a in enumerate(arrays)]
            got = fn(*args)
            same_bits(got, want)
    assert ext_spy, f"{name}: no kernel was called"


@pytest.mark.parametrize("dtype", DTYPES)
def test_unaligned_stride0_keys_and_values(ext_spy, dtype):
    """Long stride-0 K/V views whose one real row is unaligned: realigned
    without materialising S rows."""
    S = 1 << 16
    k = np.broadcast_to(unaligned(np.full(4, 0.5, dtype), 2), (S, 4))
    v = np.broadcast_to(unaligned(np.full(4, 3.0, dtype), 2), (S, 4))
    q = np.ones((2, 4), dtype)
    out = cattn.scaled_dot_product_attention(q, k, v)
    want = cattn.scaled_dot_product_attention(q, np.ascontiguousarray(k), np.ascontiguousarray(v))
    same_bits(out, want)
    np.testing.assert_allclose(out, 3.0, rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
def test_kv_cache_with_unaligned_inputs(ext_spy, dtype):
    rng = np.random.default_rng(3)
    k, v, q = _args(rng, [(1, 2, 3, 8), (1, 2, 3, 8), (1, 4, 2, 8)], dtype)
    ref = cattn.KVCache(1, 2, 8, 8, dtype=dtype)
    ref.append(k, v)
    want = ref.attend(q)
    for offset in offsets(dtype):
        c = cattn.KVCache(1, 2, 8, 8, dtype=dtype)
        c.append(unaligned(k, offset), unaligned(v, offset))
        same_bits(c.keys, ref.keys)
        same_bits(c.attend(unaligned(q, offset)), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_nn_layers_with_unaligned_inputs(ext_spy, dtype):
    rng = np.random.default_rng(5)
    E = 16
    x = rng.standard_normal((2, 5, E)).astype(dtype)
    mods = [cnn.Linear(E, 8, dtype=dtype, seed=1), cnn.LayerNorm(E, dtype=dtype),
            cnn.MultiheadAttention(E, 4, dtype=dtype, seed=2),
            cnn.TransformerEncoderLayer(E, 4, 32, dtype=dtype, seed=3),
            cnn.TransformerEncoderLayer(E, 4, 32, norm_first=True, dtype=dtype, seed=4)]
    for m in mods:
        want = m(x)
        want = want[0] if isinstance(want, tuple) else want
        for offset in offsets(dtype):
            got = m(unaligned(x, offset))
            got = got[0] if isinstance(got, tuple) else got
            same_bits(got, want)
    dec = cnn.TransformerDecoderLayer(E, 4, 32, dtype=dtype, seed=6)
    mem = rng.standard_normal((2, 7, E)).astype(dtype)
    same_bits(dec(unaligned(x, 2), unaligned(mem, 3)), dec(x, mem))


@pytest.mark.parametrize("dtype", DTYPES)
def test_unaligned_parameters_are_realigned_when_set(dtype):
    """A parameter assigned from unaligned memory (e.g. a buffer read from a
    file at an odd offset) is realigned once, not copied by every forward."""
    lin = cnn.Linear(6, 3, dtype=dtype, seed=0)
    w = unaligned(np.arange(18, dtype=dtype).reshape(3, 6), 2)
    lin.weight = w
    assert lin.weight.flags.aligned and np.array_equal(lin.weight, w)


def test_unaligned_out_is_still_rejected():
    a = np.ones((2, 2), F32)
    out = unaligned(np.empty((2, 2), F32), 1)
    with pytest.raises(ValueError, match="aligned"):
        cattn.matmul(a, a, out=out)
    with pytest.raises(ValueError, match="aligned"):
        cattn.softmax(a, out=out)


def test_vexp_hook_realigns():
    x = unaligned(np.linspace(-3, 3, 37).astype(F32), 1)
    same_bits(_ext.vexp(x), _ext.vexp(np.ascontiguousarray(x).copy()))
