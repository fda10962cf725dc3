"""cattn.scaled_dot_product_attention and cattn.attention_weights against
the float64 oracle cattn.reference and, where installed, torch
(tolerances: see cattn_testing/attention.py).

Tiles this file aims at (csrc/config.h): flash BR = 96 query rows and
BC = 192 keys for float32 (32 / 96 for float64); the decode path for
L <= 8 with keys in chunks of 256; micro-kernel rows of 6 keys; E and Ev
tails at multiples of 16 (float32) / 8 (float64).
"""
import itertools
import tracemalloc

import numpy as np
import pytest

import cattn
from cattn import reference
from cattn_testing.attention import assert_close, check_sdpa, check_weights, expected_sdpa
from cattn_testing.numerics import randn as rn

sdpa = cattn.scaled_dot_product_attention
weights = cattn.attention_weights
F32, F64 = np.float32, np.float64


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def qkv(rng, B, Hq, H, L, S, E, Ev, dtype=F32):
    return (rn(rng, (B, Hq, L, E), dtype), rn(rng, (B, H, S, E), dtype),
            rn(rng, (B, H, S, Ev), dtype))


CAUSAL = {"none": {}, "upper_left": dict(is_causal=True),
          "lower_right": dict(is_causal=True, causal_alignment="lower_right")}


# ---- sizes: a pairwise covering of the spec's sizes -------------------------

def allpairs(factors):
    """Greedy all-pairs covering array: every pair of values of any two
    factors appears in at least one case (deterministic, ~55 cases here
    instead of the 7*7*6*6*2*3 = 10584 of the full product)."""
    n = len(factors)
    pairs = list(itertools.combinations(range(n), 2))
    todo = {(a, x, b, y) for a, b in pairs
            for x in range(len(factors[a])) for y in range(len(factors[b]))}
    cases = []
    while todo:
        a, x, b, y = min(todo)
        case = [None] * n
        case[a], case[b] = x, y
        for f in range(n):
            if case[f] is not None:
                continue

            def gain(val):
                case[f] = val
                g = sum((p, case[p], q, case[q]) in todo for p, q in pairs
                        if case[p] is not None and case[q] is not None)
                case[f] = None
                return g
            case[f] = max(range(len(factors[f])), key=lambda val: (gain(val), -val))
        for p, q in pairs:
            todo.discard((p, case[p], q, case[q]))
        cases.append(tuple(factors[i][v] for i, v in enumerate(case)))
    return cases


SIZES = [1, 3, 63, 64, 65, 127, 513]
PAIRWISE = allpairs([SIZES, SIZES, [1, 8, 32, 64, 80, 128], [1, 8, 17, 64, 80, 128],
                     ["float32", "float64"], list(CAUSAL)])


@pytest.mark.parametrize("L,S,E,Ev,dtype,causal", PAIRWISE,
                         ids=lambda x: str(x))
def test_sizes_pairwise(rng, L, S, E, Ev, dtype, causal):
    q, k, v = qkv(rng, 2, 2, 2, L, S, E, Ev, np.dtype(dtype))
    check_sdpa(sdpa(q, k, v, **CAUSAL[causal]), q, k, v, **CAUSAL[causal])


# tile edges: BR / BC (+-1, two blocks), decode L = 8 / 9 and chunks of 256,
# E / Ev tails, K-row tails of 6 (S = 5, 7)
EDGES_F32 = [(192, 192, 16, 16), (193, 193, 15, 17), (96, 385, 33, 31), (97, 191, 20, 16),
             (95, 64, 8, 24), (128, 192, 16, 16), (8, 255, 16, 48),
             (8, 257, 17, 16), (9, 512, 64, 64), (2, 769, 128, 7), (65, 5, 24, 16),
             (7, 7, 48, 1)]
EDGES_F64 = [(32, 96, 8, 8), (33, 97, 7, 9), (31, 193, 9, 15), (8, 257, 8, 16),
             (65, 6, 17, 4), (5, 7, 3, 8)]


@pytest.mark.parametrize("dtype,L,S,E,Ev", [(F32,) + c for c in EDGES_F32] +
                         [(F64,) + c for c in EDGES_F64], ids=str)
@pytest.mark.parametrize("causal", list(CAUSAL))
def test_tile_edges(rng, dtype, L, S, E, Ev, causal):
    q, k, v = qkv(rng, 1, 2, 2, L, S, E, Ev, dtype)
    check_sdpa(sdpa(q, k, v, **CAUSAL[causal]), q, k, v, **CAUSAL[causal])


def test_scale_argument(rng):
    q, k, v = qkv(rng, 1, 2, 2, 70, 100, 32, 16)
    for scale in (0.37, 2.0, 0.0, -0.5):
        check_sdpa(sdpa(q, k, v, scale=scale), q, k, v, scale=scale)
    # scale=0: every key gets weight 1/S, the output is the mean of V
    np.testing.assert_allclose(sdpa(q, k, v, scale=0.0)[0, :, 0], v[0].mean(axis=1),
                               rtol=1e-5, atol=1e-6)


def test_empty_sequences(rng):
    q, k, v = qkv(rng, 2, 3, 3, 5, 0, 8, 4)
    out = sdpa(q, k, v)                     # S = 0: no key for any row -> zeros
    assert out.shape == (2, 3, 5, 4) and (out == 0).all()
    q, k, v = qkv(rng, 2, 3, 3, 0, 7, 8, 4)
    assert sdpa(q, k, v).shape == (2, 3, 0, 4)
    assert weights(q, k).shape == (2, 3, 0, 7)


# ---- masks: every kind and broadcast shape, prefill and decode ---------------

B_, HQ, L_PRE, L_DEC, S_ = 2, 3, 70, 3, 200
MASK_SHAPES = {"LS": lambda L: (L, S_), "key_padding": lambda L: (B_, 1, 1, S_),
               "head": lambda L: (1, HQ, L, S_), "full": lambda L: (B_, HQ, L, S_),
               "row": lambda L: (S_,)}


def make_mask(rng, kind, shape):
    keep = rng.random(shape) < 0.7
    if kind == "bool":
        return keep
    if kind == "float_inf":        # finite biases where allowed, -inf elsewhere
        return np.where(keep, 2.0 * rng.standard_normal(shape), -np.inf).astype(F32)
    return (3.0 * rng.standard_normal(shape)).astype(F32)   # finite only


@pytest.mark.parametrize("L", [L_PRE, L_DEC], ids=["prefill", "decode"])
@pytest.mark.parametrize("shape", list(MASK_SHAPES))
@pytest.mark.parametrize("kind", ["bool", "float_inf", "float_finite"])
def test_masks(rng, kind, shape, L):
    q, k, v = qkv(rng, B_, HQ, HQ, L, S_, 32, 24)
    m = make_mask(rng, kind, MASK_SHAPES[shape](L))
    check_sdpa(sdpa(q, k, v, m), q, k, v, attn_mask=m)
    check_weights(weights(q, k, m), q, k, attn_mask=m)


@pytest.mark.parametrize("L", [L_PRE, L_DEC], ids=["prefill", "decode"])
def test_mask_strides(rng, L):
    """Masks read through their strides: transposed, sliced, reversed, and a
    (B, 1, 1, S) mask broadcast by stride 0."""
    q, k, v = qkv(rng, B_, HQ, HQ, L, S_, 16, 16)
    full = rng.random((S_, L, HQ, B_)) < 0.6
    masks = [full.T,                                               # transposed
             (rng.random((L, 2 * S_)) < 0.6)[:, ::2],              # sliced keys
             np.where(rng.random((L, S_)) < 0.6, 0.5, -np.inf)[::-1, ::-1],
             np.broadcast_to(rng.random((B_, 1, 1, S_)) < 0.6, (B_, HQ, L, S_)),
             [bool(x) for x in rng.random(S_) < 0.6]]              # a Python list
    for m in masks:
        check_sdpa(sdpa(q, k, v, m), q, k, v, attn_mask=m)


def test_float_mask_dtype_follows_inputs(rng):
    q, k, v = qkv(rng, 1, 2, 2, 10, 20, 8, 8)
    m64 = np.where(rng.random((10, 20)) < 0.7, rng.standard_normal((10, 20)), -np.inf)
    check_sdpa(sdpa(q, k, v, m64), q, k, v, attn_mask=m64.astype(F32))  # f64 mask, f32 math
    q64, k64, v64 = (x.astype(F64) for x in (q, k, v))
    m32 = m64.astype(F32)
    check_sdpa(sdpa(q64, k64, v64, m32), q64, k64, v64, attn_mask=m32)


def test_key_padding_mask_is_never_expanded(rng):
    """A (B, 1, 1, S) mask (bool, or float64 for float32 inputs) is read by
    strides: no NumPy allocation anywhere near the (B, H, L, S) size happens
    during the call. (C scratch is not traced; it has its own bound.)"""
    B, H, L, S, E = 2, 8, 256, 1024, 16
    q, k, v = qkv(rng, B, H, H, L, S, E, E)
    keep = rng.random((B, 1, 1, S)) < 0.9
    for m in (keep, np.where(keep, 0.0, -np.inf)):
        sdpa(q, k, v, m)                                  # warm caches / imports
        tracemalloc.start()
        try:
            out = sdpa(q, k, v, m)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        expanded = B * H * L * S                          # bytes of a bool expansion
        assert peak < out.nbytes + expanded // 8, (peak, out.nbytes, expanded)


# ---- causal alignment -------------------------------------------------------

@pytest.mark.parametrize("L,S", [(5, 9), (9, 5), (70, 300), (300, 70), (3, 600), (8, 3)])
@pytest.mark.parametrize("alignment", ["upper_left", "lower_right"])
def test_causal_alignment(rng, L, S, alignment):
    q, k, v = qkv(rng, 1, 2, 2, L, S, 16, 8)
    kw = dict(is_causal=True, causal_alignment=alignment)
    check_sdpa(sdpa(q, k, v, **kw), q, k, v, **kw)
    # the pattern of exactly-zero weights, independent of reference.causal_mask:
    # row i sees key j iff j <= i (upper_left) or j <= i + S - L (lower_right)
    w = weights(q, k, **kw)
    shift = 0 if alignment == "upper_left" else S - L
    sees = np.arange(S)[None, :] <= np.arange(L)[:, None] + shift
    assert (w[..., ~sees] == 0).all()
    assert (w[..., sees] > 0).all()
    out = sdpa(q, k, v, **kw)
    empty = ~sees.any(axis=1)                   # rows that see no key: exactly 0
    assert (out[..., empty, :] == 0).all()


def test_causal_lower_right_last_row_sees_everything(rng):
    q, k, v = qkv(rng, 1, 1, 1, 4, 50, 16, 16)
    a = sdpa(q, k, v, is_causal=True, causal_alignment="lower_right")[..., -1:, :]
    check_sdpa(a, q[..., -1:, :], k, v)         # the last query, no mask at all


# ---- GQA / MQA --------------------------------------------------------------

@pytest.mark.parametrize("Hq,H", [(8, 2), (6, 3), (4, 1)])
@pytest.mark.parametrize("L", [1, 4, 70])
def test_gqa(rng, Hq, H, L):
    q, k, v = qkv(rng, 2, Hq, H, L, 300, 32, 16)
    check_sdpa(sdpa(q, k, v, enable_gqa=True), q, k, v, enable_gqa=True)
    kw = dict(enable_gqa=True, is_causal=True, causal_alignment="lower_right")
    check_sdpa(sdpa(q, k, v, **kw), q, k, v, **kw)
    m = rng.random((2, 1, 1, 300)) < 0.5
    check_sdpa(sdpa(q, k, v, m, enable_gqa=True), q, k, v, attn_mask=m, enable_gqa=True)
    m = np.where(rng.random((Hq, L, 300)) < 0.5, 0.3, -np.inf)
    check_sdpa(sdpa(q, k, v, m, enable_gqa=True), q, k, v, attn_mask=m, enable_gqa=True)
    # query head h uses kv head h // (Hq / H): head 0 of group 2 equals plain attention
    h = (Hq // H) * (H - 1)
    check_sdpa(sdpa(q, k, v, enable_gqa=True)[:, h], q[:, h], k[:, H - 1], v[:, H - 1])


def test_mqa_by_broadcasting(rng):
    """A single kv head broadcasts over the query heads without enable_gqa."""
    q, k, v = qkv(rng, 2, 4, 1, 70, 100, 16, 16)
    check_sdpa(sdpa(q, k, v), q, k, v)
    check_sdpa(sdpa(q[:, :, :2], k, v), q[:, :, :2], k, v)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_decode_gqa_many_chunks(rng, dtype):
    """L <= 8 rows over S spanning several 256-key chunks, GQA group 4."""
    for L in (1, 2, 8):
        q, k, v = qkv(rng, 1, 8, 2, L, 1100, 128, 64, dtype)
        check_sdpa(sdpa(q, k, v, enable_gqa=True), q, k, v, enable_gqa=True)
        kw = dict(enable_gqa=True, is_causal=True, causal_alignment="lower_right")
        check_sdpa(sdpa(q, k, v, **kw), q, k, v, **kw)


# ---- fully masked rows, huge logits -----------------------------------------

@pytest.mark.parametrize("L", [70, 3], ids=["prefill", "decode"])
def test_fully_masked_rows_are_exactly_zero(rng, L):
    q, k, v = qkv(rng, 2, 2, 2, L, 300, 16, 16)
    keep = rng.random((L, 300)) < 0.5
    keep[0] = False
    keep[-1, :] = False
    keep[1, :] = False
    keep[1, 299] = True                     # a row with one key, in the last block
    inf_mask = np.where(keep, 0.0, -np.inf).astype(F32)
    for m in (keep, inf_mask):
        out = sdpa(q, k, v, m)
        assert (out[:, :, [0, -1]] == 0).all() and not np.isnan(out).any()
        check_sdpa(out, q, k, v, attn_mask=m)
        w = weights(q, k, m)
        assert (w[:, :, [0, -1]] == 0).all()
    # a NaN query row with no key to attend to is 0 as well
    q[0, 0, 0] = np.nan
    assert (sdpa(q, k, v, keep)[0, 0, 0] == 0).all()


@pytest.mark.parametrize("sign", [1, -1])
@pytest.mark.parametrize("L", [70, 3], ids=["prefill", "decode"])
def test_logits_near_1e4(rng, sign, L):
    """scores = +-1e4 + O(4): exp overflows (+) or underflows (-) unless the
    row max is subtracted. In float32 the absolute score error near 1e4 is
    ~1e-3, i.e. a relative weight error of ~1e-3: the tolerance is wide here
    for a real reason, and an overflow (NaN) or underflow (zeros) still fails."""
    E = 16
    q = np.concatenate([np.ones((L, 1)), 1e-3 * rng.standard_normal((L, E - 1))], 1).astype(F32)
    k = np.concatenate([np.full((300, 1), 10.0 * sign),
                        rng.standard_normal((300, E - 1))], 1).astype(F32)
    v = rn(rng, (300, 8))
    out = sdpa(q, k, v, scale=1000.0)
    assert np.isfinite(out).all()
    check_sdpa(out, q, k, v, scale=1000.0)
    w = weights(q, k, scale=1000.0)
    check_weights(w, q, k, scale=1000.0)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)


# ---- NaN / inf propagation --------------------------------------------------
# prefill (L = 70) and decode (L = 4); S = 300 spans two flash kv blocks
# and two decode chunks, so the non-finite value sits in a later block.

PATHS = pytest.mark.parametrize("L", [70, 4], ids=["prefill", "decode"])


@PATHS
def test_nan_in_query_row_reaches_only_that_row(rng, L):
    q, k, v = qkv(rng, 2, 2, 2, L, 300, 32, 16)
    q[1, 0, L // 2, 5] = np.nan
    out = sdpa(q, k, v)
    bad = np.zeros(out.shape, bool)
    bad[1, 0, L // 2] = True
    assert (np.isnan(out) == bad).all()
    check_sdpa(out, q, k, v)


@PATHS
@pytest.mark.parametrize("kind", ["bool", "float_inf"])
def test_nan_in_masked_key_or_value_does_not_leak(rng, L, kind):
    q, k, v = qkv(rng, 2, 2, 2, L, 300, 32, 16)
    keep = np.ones((2, 1, 1, 300), bool)
    keep[0, ..., 250:] = False              # padding of batch 0 (second kv block)
    keep[1, ..., 3] = False                 # one masked key in the first block
    k[0, :, 260] = np.nan
    v[0, :, 270] = np.nan
    v[0, 1, 299, 3] = np.nan
    k[1, 0, 3] = np.nan
    v[1, 1, 3] = np.nan
    m = keep if kind == "bool" else np.where(keep, 0.0, -np.inf).astype(F32)
    out = sdpa(q, k, v, m)
    assert np.isfinite(out).all()
    check_sdpa(out, q, k, v, attn_mask=m)


@PATHS
@pytest.mark.parametrize("value", [np.inf, -np.inf])
def test_inf_in_masked_value_does_not_leak(rng, L, value):
    q, k, v = qkv(rng, 1, 2, 2, L, 300, 16, 16)
    keep = np.ones(300, bool)
    keep[[7, 200]] = False
    v[0, :, [7, 200]] = value
    out = sdpa(q, k, v, keep)
    assert np.isfinite(out).all()
    check_sdpa(out, q, k, v, attn_mask=keep)


@PATHS
@pytest.mark.parametrize("alignment", ["upper_left", "lower_right"])
def test_nan_in_future_key_or_value_under_causal(rng, L, alignment):
    S = 300
    q, k, v = qkv(rng, 1, 2, 2, L, S, 16, 16)
    shift = 0 if alignment == "upper_left" else S - L
    j = min(S - 1, L // 2 + shift)          # first seen by row L // 2
    k[0, 0, j] = np.nan                     # head 0: key j
    v[0, 1, j, 2] = np.nan                  # head 1: value j, column 2
    kw = dict(is_causal=True, causal_alignment=alignment)
    out = sdpa(q, k, v, **kw)
    rows = np.arange(L) + shift >= j        # rows that attend key j
    assert np.isnan(out[0, 0, rows]).all() and not np.isnan(out[0, 0, ~rows]).any()
    assert np.isnan(out[0, 1, rows, 2]).all()
    assert not np.isnan(out[0, 1, ~rows]).any() and not np.isnan(out[0, 1, :, [0, 1, 3]]).any()
    check_sdpa(out, q, k, v, **kw)


@PATHS
def test_nan_in_attended_key_or_value(rng, L):
    q, k, v = qkv(rng, 1, 2, 2, L, 300, 16, 16)
    v[0, 0, 280, 4] = np.nan                # attended by every row: column 4 NaN
    k[0, 1, 10] = np.nan                    # attended by every row: rows all NaN
    out = sdpa(q, k, v)
    assert np.isnan(out[0, 0, :, 4]).all()
    assert not np.isnan(np.delete(out[0, 0], 4, axis=1)).any()
    assert np.isnan(out[0, 1]).all()
    check_sdpa(out, q, k, v)


def test_inf_in_attended_value_gives_inf(rng):
    q, k, v = qkv(rng, 1, 1, 1, 5, 20, 8, 4)
    v[0, 0, 3, 1] = np.inf
    out = sdpa(q, k, v)
    assert (out[0, 0, :, 1] == np.inf).all()
    check_sdpa(out, q, k, v)


# ---- layouts: strides, 2-D, broadcast batch dims, dtypes ----------------------

def _unaligned(a):
    buf = bytearray(a.nbytes + 1)
    u = np.frombuffer(buf, dtype=a.dtype, offset=1, count=a.size).reshape(a.shape)
    u[...] = a
    return u


LAYOUTS = {
    "transposed_batch_head": lambda a: np.ascontiguousarray(a.transpose(1, 0, 2, 3)).transpose(1, 0, 2, 3),
    "seq_major": lambda a: np.ascontiguousarray(a.transpose(2, 1, 0, 3)).transpose(2, 1, 0, 3),
    "sliced_seq": lambda a: np.repeat(a, 2, axis=2)[:, :, ::2],
    "negative_strides": lambda a: np.ascontiguousarray(a[::-1, ::-1, ::-1])[::-1, ::-1, ::-1],
    "noncontig_last_axis": lambda a: np.repeat(a, 2, axis=3)[..., ::2],
    "reversed_last_axis": lambda a: np.ascontiguousarray(a[..., ::-1])[..., ::-1],
    "unaligned": _unaligned,
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("L", [70, 4], ids=["prefill", "decode"])
def test_strided_inputs(rng, layout, L):
    q, k, v = qkv(rng, 2, 4, 2, L, 200, 24, 16)
    f = LAYOUTS[layout]
    qs, ks, vs = f(q), f(k), f(v)
    assert np.array_equal(qs, q) and not (qs.flags.c_contiguous and qs.flags.aligned)
    kw = dict(enable_gqa=True, is_causal=True, causal_alignment="lower_right")
    check_sdpa(sdpa(qs, ks, vs, **kw), q, k, v, **kw)
    check_weights(weights(qs, ks, **kw), q, k, **kw)


def test_stride_zero_broadcast_inputs(rng):
    """Keys / values broadcast by stride 0 along the sequence or head axis."""
    q = rn(rng, (2, 3, 20, 8))
    k = np.broadcast_to(rn(rng, (2, 1, 1, 8)), (2, 3, 30, 8))
    v = np.broadcast_to(rn(rng, (1, 3, 30, 4)), (2, 3, 30, 4))
    check_sdpa(sdpa(q, k, v), q, k, v)


def test_2d_inputs(rng):
    q, k, v = rn(rng, (70, 16)), rn(rng, (90, 16)), rn(rng, (90, 8))
    out = sdpa(q, k, v, is_causal=True)
    assert out.shape == (70, 8)
    check_sdpa(out, q, k, v, is_causal=True)
    check_weights(weights(q, k), q, k)
    assert weights(q, k).shape == (70, 90)
    # a 2-D query against batched keys broadcasts like a matmul
    k4, v4 = rn(rng, (2, 3, 90, 16)), rn(rng, (2, 3, 90, 8))
    check_sdpa(sdpa(q[:4], k4, v4), q[:4], k4, v4)


def test_broadcast_batch_dims(rng):
    q = rn(rng, (3, 1, 2, 20, 16))
    k = rn(rng, (1, 4, 2, 30, 16))
    v = rn(rng, (4, 2, 30, 8))
    out = sdpa(q, k, v)
    assert out.shape == (3, 4, 2, 20, 8)
    check_sdpa(out, q, k, v)
    m = rng.random((4, 1, 20, 30)) < 0.5
    check_sdpa(sdpa(q, k, v, m), q, k, v, attn_mask=m)


@pytest.mark.parametrize("dtypes", [(F64, F64, F64), (F32, F64, F32), (F64, F32, F32),
                                    (F32, F32, F64)], ids=str)
@pytest.mark.parametrize("L", [70, 4], ids=["prefill", "decode"])
def test_float64_and_mixed_dtypes(rng, dtypes, L):
    q, k, v = (rn(rng, s, d) for s, d in zip([(1, 2, L, 40), (1, 2, 150, 40), (1, 2, 150, 12)],
                                             dtypes))
    out = sdpa(q, k, v, is_causal=True)
    assert out.dtype == F64                 # promoted as NumPy would
    check_sdpa(out, q, k, v, is_causal=True)
    if q.dtype == k.dtype == F64:
        assert weights(q, k).dtype == F64


# ---- out= --------------------------------------------------------------------

@pytest.mark.parametrize("L", [70, 4], ids=["prefill", "decode"])
def test_out_argument(rng, L):
    q, k, v = qkv(rng, 2, 4, 2, L, 100, 16, 12)
    kw = dict(enable_gqa=True)
    ref, tol = expected_sdpa(q, k, v, **kw)
    outs = {"contiguous": np.full((2, 4, L, 12), np.nan, F32),
            "noncontig_last_axis": np.full((2, 4, L, 24), np.nan, F32)[..., ::2],
            "reversed_last_axis": np.full((2, 4, L, 12), np.nan, F32)[..., ::-1],
            "transposed": np.full((4, 2, L, 12), np.nan, F32).transpose(1, 0, 2, 3)}
    for name, out in outs.items():
        got = sdpa(q, k, v, out=out, **kw)
        assert got is out, name
        assert_close(out, ref, tol, f"out={name}")


def test_out_2d_and_fully_masked_rows_overwrite_garbage(rng):
    q, k, v = rn(rng, (6, 8)), rn(rng, (9, 8)), rn(rng, (9, 3))
    keep = rng.random((6, 9)) < 0.5
    keep[2] = False
    out = np.full((6, 3), np.nan, F32)
    sdpa(q, k, v, keep, out=out)
    assert (out[2] == 0).all()
    check_sdpa(out, q, k, v, attn_mask=keep)


# ---- attention_weights ----------------------------------------------------------

@pytest.mark.parametrize("L,S,E,dtype,causal", [c[:3] + (c[4], c[5]) for c in PAIRWISE[::3]],
                         ids=str)
def test_weights_match_reference_and_sum_to_one(rng, L, S, E, dtype, causal):
    q, k, _ = qkv(rng, 1, 2, 2, L, S, E, 1, np.dtype(dtype))
    w = weights(q, k, **CAUSAL[causal])
    ref = check_weights(w, q, k, **CAUSAL[causal])
    # each row with a key sums to 1: S weights, each with a relative error of
    # a few eps, plus the per-block rescaling of the running sum
    eps = np.finfo(dtype).eps
    live = ref.sum(-1) > 0
    assert np.all(np.abs(w.sum(-1, dtype=F64)[live] - 1) <= (5 * np.sqrt(S) + 3 * S / 96 + 8) * eps)
    assert (w[~live] == 0).all()


@pytest.mark.parametrize("mask", ["none", "bool", "float", "causal"])
def test_weights_times_v_equals_sdpa(rng, mask):
    q, k, v = qkv(rng, 2, 4, 2, 70, 300, 32, 16)
    kw = dict(enable_gqa=True)
    if mask == "bool":
        kw["attn_mask"] = rng.random((2, 1, 70, 300)) < 0.3
    elif mask == "float":
        kw["attn_mask"] = np.where(rng.random((70, 300)) < 0.3, 1.5, -np.inf).astype(F32)
    elif mask == "causal":
        kw.update(is_causal=True, causal_alignment="lower_right")
    w = weights(q, k, **kw)
    prod = np.repeat(v, 2, axis=1).astype(F64)
    wv = np.matmul(w.astype(F64), prod)
    ref, tol = expected_sdpa(q, k, v, **kw)
    assert_close(wv, ref, tol, "attention_weights @ v vs reference")
    assert_close(wv, sdpa(q, k, v, **kw).astype(F64), 2 * tol, "attention_weights @ v vs sdpa")


def test_weights_masked_entries_stay_zero_in_nan_row():
    q = np.array([[np.nan, 1.0], [1.0, 0.0]], F32)
    k = np.array([[1.0, 0.0], [0.0, 1.0]], F32)
    w = weights(q, k, np.array([[True, False], [True, True]]))
    assert w[0, 1] == 0.0 and np.isnan(w[0, 0])


# ---- torch ---------------------------------------------------------------------------

def _torch_sdpa(q, k, v, attn_mask=None, dtype=F64, **kw):
    torch = pytest.importorskip("torch")
    t = lambda x: torch.from_numpy(np.ascontiguousarray(x, dtype=dtype))  # noqa: E731
    m = None
    if attn_mask is not None:
        m = torch.from_numpy(np.ascontiguousarray(attn_mask)) if attn_mask.dtype == bool \
            else t(attn_mask)
    with torch.inference_mode():
        return torch.nn.functional.scaled_dot_product_attention(
            t(q), t(k), t(v), attn_mask=m, **kw).numpy()


TORCH_CASES = {
    "plain": (dict(L=70, S=130), {}),
    "decode": (dict(L=1, S=600), {}),
    "bool_mask": (dict(L=70, S=130), dict(mask="bool")),
    "float_mask": (dict(L=65, S=130), dict(mask="float")),
    "fully_masked_rows": (dict(L=65, S=64), dict(mask="empty_rows")),
    "causal_L<S": (dict(L=63, S=200), dict(is_causal=True)),
    "causal_L>S": (dict(L=200, S=63), dict(is_causal=True)),
    "scale": (dict(L=33, S=65), dict(scale=0.7)),
    "gqa": (dict(L=70, S=130, Hq=8, H=2), dict(enable_gqa=True)),
    "gqa_decode": (dict(L=1, S=600, Hq=8, H=2), dict(enable_gqa=True)),
    "mqa_broadcast": (dict(L=70, S=130, Hq=4, H=1), {}),
}


@pytest.mark.parametrize("case", list(TORCH_CASES))
def test_against_torch(rng, case):
    pytest.importorskip("torch")
    dims, kw = TORCH_CASES[case]
    L, S = dims["L"], dims["S"]
    Hq, H = dims.get("Hq", 2), dims.get("H", 2)
    q, k, v = qkv(rng, 2, Hq, H, L, S, 48, 24)
    kw = dict(kw)
    mask = kw.pop("mask", None)
    if mask == "bool":
        kw["attn_mask"] = rng.random((2, 1, L, S)) < 0.6
    elif mask == "float":
        kw["attn_mask"] = np.where(rng.random((L, S)) < 0.6, rng.standard_normal((L, S)),
                                   -np.inf).astype(F32)
    elif mask == "empty_rows":
        keep = rng.random((L, S)) < 0.6
        keep[::7] = False
        kw["attn_mask"] = keep
    want = _torch_sdpa(q, k, v, **kw)
    _, tol = expected_sdpa(q, k, v, **kw)
    assert_close(sdpa(q, k, v, **kw), want, tol, f"vs torch: {case}")


@pytest.mark.parametrize("L,S", [(5, 9), (70, 300), (1, 600)])
def test_lower_right_against_torch_causal_bias(rng, L, S):
    torch = pytest.importorskip("torch")
    from torch.nn.attention.bias import causal_lower_right
    q, k, v = qkv(rng, 1, 2, 2, L, S, 16, 16)
    t = [torch.from_numpy(x.astype(F64)) for x in (q, k, v)]
    want = torch.nn.functional.scaled_dot_product_attention(
        *t, attn_mask=causal_lower_right(L, S)).numpy()
    kw = dict(is_causal=True, causal_alignment="lower_right")
    _, tol = expected_sdpa(q, k, v, **kw)
    assert_close(sdpa(q, k, v, **kw), want, tol, "lower_right vs torch causal_lower_right")


@pytest.mark.parametrize("L", [70, 3], ids=["prefill", "decode"])
def test_finite_fill_matches_torch_float32(rng, L):
    """A float mask filled with -1e9 (the classic finite fill): a fully
    'masked' row gives the mean of V, as in torch. In float32, s - 1e9 rounds
    to exactly -1e9 for |s| < 32, so the weights are exactly 1 / S."""
    q, k, v = qkv(rng, 1, 2, 2, L, 100, 16, 8)
    keep = rng.random((L, 100)) < 0.5
    keep[0] = False
    m = np.where(keep, 0.0, -1e9).astype(F32)
    out = sdpa(q, k, v, m)
    np.testing.assert_allclose(out[0, :, 0], v[0].mean(axis=1), rtol=0, atol=1e-6)
    want = _torch_sdpa(q, k, v, attn_mask=m, dtype=F32)
    np.testing.assert_allclose(out, want, rtol=0, atol=2e-6)


# ---- threads and kernel paths -------------------------------------------------------

def _bitwise_same(f):
    with cattn.num_threads(1):
        ref = f()
    for n in (2, 3):
        with cattn.num_threads(n):
            got = f()
        assert got.dtype == ref.dtype and got.tobytes() == ref.tobytes(), f"{n} threads"


@pytest.mark.parametrize("dtype", [F32, F64])
def test_bitwise_equal_across_thread_counts(rng, dtype):
    q, k, v = qkv(rng, 1, 4, 2, 200, 600, 64, 48, dtype)
    m = np.where(rng.random((1, 1, 200, 600)) < 0.8, 0.25, -np.inf).astype(dtype)
    v[0, 1, 590] = np.nan
    cases = [lambda: sdpa(q, k, v, enable_gqa=True, is_causal=True),           # prefill
             lambda: sdpa(q, k, v, m, enable_gqa=True),
             lambda: sdpa(q[:, :, :3], k, v, enable_gqa=True),                 # decode
             lambda: sdpa(q[:, :, :1], k, v, m[..., :1, :], enable_gqa=True),
             lambda: weights(q, k, enable_gqa=True, is_causal=True),
             lambda: weights(q, k, m, enable_gqa=True)]
    for f in cases:
        _bitwise_same(f)


# The former portable-path subprocess check, in process: test_kernel_paths.py
# re-runs this module on every other kernel path.
def test_gqa_masks_and_padded_nonfinite_keys():
    rng = np.random.default_rng(7)
    for dtype in (np.float32, np.float64):
        for L, S, E, Ev in [(70, 300, 33, 17), (4, 600, 64, 64), (65, 97, 8, 80)]:
            q = rng.standard_normal((2, 4, L, E)).astype(dtype)
            k = rng.standard_normal((2, 2, S, E)).astype(dtype)
            v = rng.standard_normal((2, 2, S, Ev)).astype(dtype)
            m = np.where(rng.random((2, 1, 1, S)) < 0.8, 0.5, -np.inf).astype(dtype)
            for kw in (dict(is_causal=True, causal_alignment="lower_right"), dict(attn_mask=m),
                       dict(is_causal=True)):
                check_sdpa(cattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw),
                           q, k, v, enable_gqa=True, **kw)
                check_weights(cattn.attention_weights(q, k, enable_gqa=True, **kw),
                              q, k, enable_gqa=True, **kw)
            pad = np.flatnonzero(m[0, 0, 0] == -np.inf)
            k[0, 0, pad[0]] = np.nan                 # NaN / inf in padded keys and values
            v[0, 1, pad[-1]] = np.inf
            out = cattn.scaled_dot_product_attention(q, k, v, m, enable_gqa=True)
            assert np.isfinite(out).all()
            check_sdpa(out, q, k, v, attn_mask=m, enable_gqa=True)
            with cattn.num_threads(1):
                a = cattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=True)
            with cattn.num_threads(2):
                b = cattn.scaled_dot_product_attention(q, k, v, enable_gqa=True, is_causal=True)
            assert a.tobytes() == b.tobytes()


# ---- errors --------------------------------------------------------------------------

def _args(rng=np.random.default_rng(0)):
    return (rn(rng, (2, 4, 5, 8)), rn(rng, (2, 2, 7, 8)), rn(rng, (2, 2, 7, 3)))


Q, K, V = _args()
Q2 = Q[:, :2]
ERRORS = {
    "int_query": (lambda: sdpa(Q.astype(np.int32), K, V, enable_gqa=True), TypeError, "query.*int32"),
    "int_key": (lambda: sdpa(Q2, K.astype(np.int64), V), TypeError, "key.*int64"),
    "float16_value": (lambda: sdpa(Q2, K, V.astype(np.float16)), TypeError, "value.*float16"),
    "complex_query": (lambda: sdpa(Q2.astype(np.complex64), K, V), TypeError, "complex64"),
    "int_mask": (lambda: sdpa(Q2, K, V, np.ones((5, 7), np.int32)), TypeError, "attn_mask.*int32"),
    "float16_mask": (lambda: sdpa(Q2, K, V, np.ones((5, 7), np.float16)), TypeError, "float16"),
    "head_dim_mismatch": (lambda: sdpa(Q2[..., :4], K, V), ValueError, r"\(2, 2, 5, 4\).*\(2, 2, 7, 8\)"),
    "seq_mismatch_k_v": (lambda: sdpa(Q2, K, V[:, :, :6]), ValueError, r"\(2, 2, 7, 8\).*\(2, 2, 6, 3\)"),
    "heads_mismatch_k_v": (lambda: sdpa(Q2, K, np.concatenate([V, V], 1)), ValueError, "head"),
    "gqa_not_multiple": (lambda: sdpa(Q[:, :3], K, V, enable_gqa=True), ValueError, r"multiple.*\(2, 3, 5, 8\)"),
    "heads_without_gqa": (lambda: sdpa(Q, K, V), ValueError, r"\(2, 4, 5, 8\).*broadcast"),
    "batch_not_broadcastable": (lambda: sdpa(rn(np.random.default_rng(1), (3, 2, 5, 8)), K, V),
                                ValueError, r"\(3, 2, 5, 8\).*broadcast"),
    "mask_not_broadcastable": (lambda: sdpa(Q2, K, V, np.ones((5, 6), bool)), ValueError,
                               r"\(5, 6\).*\(2, 2, 5, 7\)"),
    "mask_bigger_batch": (lambda: sdpa(Q2, K, V, np.ones((3, 2, 5, 7), bool)), ValueError,
                          r"\(3, 2, 5, 7\)"),
    "dropout": (lambda: sdpa(Q2, K, V, dropout_p=0.1), ValueError, "dropout_p"),
    "causal_and_mask": (lambda: sdpa(Q2, K, V, np.ones((5, 7), bool), is_causal=True),
                        ValueError, "attn_mask.*is_causal|is_causal.*attn_mask"),
    "bad_alignment": (lambda: sdpa(Q2, K, V, is_causal=True, causal_alignment="top_left"),
                      ValueError, "top_left"),
    "query_1d": (lambda: sdpa(Q2[0, 0, 0], K, V), ValueError, r"query.*\(8,\)"),
    "out_shape": (lambda: sdpa(Q2, K, V, out=np.empty((2, 2, 5, 4), F32)), ValueError,
                  r"\(2, 2, 5, 4\).*\(2, 2, 5, 3\)"),
    "out_dtype": (lambda: sdpa(Q2, K, V, out=np.empty((2, 2, 5, 3), F64)), TypeError, "float64"),
    "out_not_array": (lambda: sdpa(Q2, K, V, out=[0.0]), TypeError, "ndarray"),
    "out_read_only": (lambda: sdpa(Q2, K, V, out=np.broadcast_to(np.empty(3, F32), (2, 2, 5, 3))),
                      ValueError, "read-only"),
    "out_overlaps_input": (lambda: (lambda qq: sdpa(qq, K[..., :3], V, out=qq))(Q2[..., :3].copy()),
                           ValueError, "overlap"),
    "value_none": (lambda: sdpa(Q2, K, None), TypeError, "value must be an array, got None"),
    "value_none_masked": (lambda: sdpa(Q2, K, None, np.ones((5, 7), bool)), TypeError,
                          "value must be an array, got None"),
    "value_none_causal": (lambda: sdpa(Q2, K, None, is_causal=True), TypeError, "value"),
    "key_none": (lambda: sdpa(Q2, None, V), TypeError, "key must be an array, got None"),
    "query_none": (lambda: sdpa(None, K, V), TypeError, "query must be an array, got None"),
    "weights_int": (lambda: weights(Q2.astype(np.int8), K), TypeError, "int8"),
    "weights_int_mask": (lambda: weights(Q2, K, np.ones((5, 7), np.int64)), TypeError, "int64"),
    "weights_head_dim": (lambda: weights(Q2[..., :4], K), ValueError, r"\(2, 2, 5, 4\)"),
    "weights_gqa": (lambda: weights(Q[:, :3], K, enable_gqa=True), ValueError, "multiple"),
    "weights_causal_and_mask": (lambda: weights(Q2, K, np.ones((5, 7), bool), is_causal=True),
                                ValueError, "is_causal"),
    "weights_alignment": (lambda: weights(Q2, K, is_causal=True, causal_alignment="x"),
                          ValueError, "causal_alignment"),
    "weights_mask_shape": (lambda: weights(Q2, K, np.ones((2, 7), bool)), ValueError, r"\(2, 7\)"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_errors(case):
    f, exc, match = ERRORS[case]
    with pytest.raises(exc, match=match):
        f()


# ---- the checker itself must be able to fail ---------------------------------------

def test_checker_rejects_a_dropped_key(rng):
    q, k, v = qkv(rng, 1, 2, 2, 65, 513, 64, 64)
    wrong = reference.scaled_dot_product_attention(q, k[:, :, :-1], v[:, :, :-1]).astype(F32)
    with pytest.raises(AssertionError, match="out of tolerance"):
        check_sdpa(wrong, q, k, v)


def test_checker_rejects_causal_off_by_one(rng):
    q, k, v = qkv(rng, 1, 2, 2, 65, 513, 64, 64)
    # row i sees keys j <= i + S - L + 1: one key too many (the last row is unchanged)
    off = np.arange(513)[None, :] <= np.arange(65)[:, None] + 513 - 65 + 1
    wrong = reference.scaled_dot_product_attention(q, k, v, attn_mask=off).astype(F32)
    with pytest.raises(AssertionError, match="out of tolerance"):
        check_sdpa(wrong, q, k, v, is_causal=True, causal_alignment="lower_right")


def test_checker_rejects_float32_accuracy_for_float64(rng):
    q, k, v = qkv(rng, 1, 2, 2, 65, 130, 64, 64, F64)
    wrong = sdpa(q.astype(F32), k.astype(F32), v.astype(F32)).astype(F64)
    with pytest.raises(AssertionError, match="out of tolerance"):
        check_sdpa(wrong, q, k, v)


def test_checker_rejects_a_leaked_nan(rng):
    q, k, v = qkv(rng, 1, 1, 1, 5, 20, 8, 4)
    keep = np.ones(20, bool)
    keep[3] = False
    v[0, 0, 3] = np.nan
    wrong = reference.scaled_dot_product_attention(q, k, v, attn_mask=keep).astype(F32)
    wrong[0, 0, 2, 1] = np.nan
    with pytest.raises(AssertionError, match="NaN pattern"):
        check_sdpa(wrong, q, k, v, attn_mask=keep)


# ---- the quick plan of the common call -------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("view", ["contiguous", "seq-major", "sliced"])
@pytest.mark.parametrize("B,H,L,S,E,Ev", [(1, 12, 16, 16, 64, 64), (2, 3, 5, 7, 9, 11),
                                          (1, 1, 1, 1, 1, 1), (1, 2, 9, 400, 64, 16)])
def testfast_plan_is_the_general_plan(rng, dtype, view, B, H, L, S, E, Ev):
    """The common call (4-D arrays of one dtype, no mask, out, scale or GQA)
    skips the general checks (ops/attention.py: fast_plan); its plan must be
    field by field the one _prepare builds, and the results the same bits."""
    from cattn.ops import attention as A
    q = rng.standard_normal((B, H, L, E)).astype(dtype)
    k = rng.standard_normal((B, H, S, E)).astype(dtype)
    v = rng.standard_normal((B, H, S, Ev)).astype(dtype)
    if view == "seq-major":          # (B, L, H, E) memory, as projections leave it
        q = np.ascontiguousarray(q.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
        k = np.ascontiguousarray(k.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    elif view == "sliced":
        q = np.concatenate([q, q], axis=-1)[..., :E]
    for causal in (False, True):
        fast = A.fast_plan(q, k, v, causal)
        assert fast is not None
        general = A._prepare("sdpa", q, k, v, None, causal, None, False, "upper_left")[0]
        for name in general._fields:
            a, b = getattr(fast[0], name), getattr(general, name)
            assert (np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b), name
        np.testing.assert_array_equal(
            cattn.scaled_dot_product_attention(q, k, v, is_causal=causal),
            cattn.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1 / np.sqrt(E)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("B,H,L,S,E,Ev", [(1, 12, 9, 9, 32, 32), (2, 3, 5, 7, 9, 11)])
def testfast_plan_with_out_is_the_general_plan(rng, dtype, B, H, L, S, E, Ev):
    """out= given as a (B, L, H, Ev)-memory view (what nn's real-tokens path
    passes): the quick plan writes into it with the general plan's fields."""
    from cattn.ops import attention as A
    q = rng.standard_normal((B, H, L, E)).astype(dtype)
    k = rng.standard_normal((B, H, S, E)).astype(dtype)
    v = rng.standard_normal((B, H, S, Ev)).astype(dtype)
    for causal in (False, True):
        out = np.full((B, L, H, Ev), np.nan, dtype).transpose(0, 2, 1, 3)
        fast = A.fast_plan(q, k, v, causal, out)
        assert fast is not None and fast[1] is out
        general = A._prepare("sdpa", q, k, v, None, causal, None, False, "upper_left", out)[0]
        for name in general._fields:
            a, b = getattr(fast[0], name), getattr(general, name)
            assert (np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b), name
        r = cattn.scaled_dot_product_attention(q, k, v, is_causal=causal, out=out)
        assert r is out
        np.testing.assert_array_equal(
            out, cattn.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=1 / np.sqrt(E)))
    # declined: an out that overlaps an input, a read-only out, a wrong dtype or shape
    out = np.empty((B, H, L, Ev), dtype)
    assert A.fast_plan(q, k, q[..., :Ev] if Ev <= E else v, False, q[..., :Ev]
                        if Ev <= E else v) is None
    ro = np.empty((B, H, L, Ev), dtype)
    ro.flags.writeable = False
    assert A.fast_plan(q, k, v, False, ro) is None
    assert A.fast_plan(q, k, v, False, out.astype(np.float16)) is None
    assert A.fast_plan(q, k, v, False, out[:, :, :1]) is None


def testfast_plan_declines_what_it_does_not_cover(rng):
    from cattn.ops import attention as A
    q = rng.standard_normal((1, 2, 4, 8)).astype(np.float32)
    assert A.fast_plan(q, q, q.astype(np.float64), False) is None        # mixed dtypes
    assert A.fast_plan(q[0], q[0], q[0], False) is None                    # 3-D
    assert A.fast_plan(q, q[:, :1], q[:, :1], False) is None               # GQA / broadcast
    assert A.fast_plan(q[..., ::2], q[..., ::2], q[..., ::2], False) is None  # strided rows
    assert A.fast_plan(q[:, :, :0], q, q, False) is None                   # empty
    assert A.fast_plan(q.astype(">f4"), q.astype(">f4"), q.astype(">f4"), False) is None
