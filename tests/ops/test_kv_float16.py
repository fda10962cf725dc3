"""float16 keys and values (a float16 KV cache): scaled_dot_product_attention
with a float32 query over float16 key and value (cattn_attention_f32_kvh),
and cattn.KVCache(dtype=float16).

The contract is exact: the result is, bit for bit, cattn's float32
attention over the keys and values widened to float32 (NumPy's astype, an
exact widening), on the decode path (few query rows: the float16 task
reads the cache) and the flash path (the driver widens each unit's keys
and values) alike; float32 attention is itself tested against the float64
reference in test_attention.py, and here once more within float32's
tolerance. The cache's rounding is NumPy's astype(float16) (IEEE
round-to-nearest-even). Re-run on every kernel path (test_kernel_paths.py)
and without F16C (CATTN_NO_F16C=1: the integer widening).
"""
import numpy as np
import pytest

import cattn
from cattn import reference

F16, F32 = np.float16, np.float32


def _same(a, b):
    """The same bits, NaN for NaN (a NaN's sign and payload are not part of
    the contract: compilers may order a product's operands either way)."""
    assert a.dtype == b.dtype and a.shape == b.shape
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b))
    np.testing.assert_array_equal(a.view(np.uint32)[~nan], b.view(np.uint32)[~nan])


def _sdpa_both(q, k, v, **kw):
    got = cattn.scaled_dot_product_attention(q, k, v, **kw)
    want = cattn.scaled_dot_product_attention(q, k.astype(F32), v.astype(F32), **kw)
    return got, want


# (B, kv heads, group, L, S, E, Ev): decode (group * L <= 8) and flash shapes,
# ragged head dims (SIMD tails), one key, more keys than a decode chunk (256)
SHAPES = [(1, 8, 2, 1, 192, 128, 128), (2, 3, 2, 1, 37, 13, 13), (1, 2, 3, 2, 300, 64, 70),
          (1, 1, 8, 1, 600, 24, 8), (1, 2, 1, 40, 77, 24, 24), (2, 2, 2, 17, 17, 8, 5),
          (1, 1, 1, 1, 1, 1, 1), (1, 2, 2, 5, 513, 9, 33)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_same_bits_as_float32_on_the_widened_values(shape, causal):
    B, H, G, L, S, E, Ev = shape
    rng = np.random.default_rng(sum(shape))
    q = rng.standard_normal((B, H * G, L, E)).astype(F32)
    k = (rng.standard_normal((B, H, S, E)) * 2).astype(F16)
    v = rng.standard_normal((B, H, S, Ev)).astype(F16)
    got, want = _sdpa_both(q, k, v, is_causal=causal, enable_gqa=G > 1,
                           causal_alignment="lower_right")
    _same(got, want)
    if not causal and G == 1:          # and the float64 reference, within float32's rounding
        ref = reference.scaled_dot_product_attention(q.astype(np.float64), k.astype(np.float64),
                                                     v.astype(np.float64))
        assert np.abs(got - ref).max() <= 1e-5 * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("L", [1, 3, 24])
def test_masks_strides_and_special_values(L):
    """Bool and additive masks, a strided (non-contiguous) cache view,
    subnormal, huge, infinite and NaN keys / values under masked positions
    and visible ones: still the float32 bits of the widened values."""
    rng = np.random.default_rng(L)
    H, G, S, E = 2, 2, 40, 16
    q = rng.standard_normal((1, H * G, L, E)).astype(F32)
    kb, vb = ((rng.standard_normal((1, H, 64, E + 3)) * 1e-6).astype(F16)   # subnormals,
              for _ in range(2))                                           # caches with room
    k, v = kb[:, :, 3:3 + S, 1:1 + E], vb[:, :, 10:10 + S, 2:2 + E]        # strided views
    assert not k.flags.c_contiguous
    k[0, 0, 5, :4] = [6e4, -6e4, 1e-7, -0.0]
    v[0, 1, 7, 2] = np.inf
    v[0, 1, 8, 3] = np.nan
    bool_mask = rng.random((1, 1, L, S)) > 0.3
    bool_mask[..., 7:9] = False                             # inf / NaN values masked
    add_mask = np.where(bool_mask, rng.standard_normal((1, 1, L, S)), -np.inf).astype(F32)
    for kw in (dict(attn_mask=bool_mask), dict(attn_mask=add_mask), dict(scale=0.3)):
        got, want = _sdpa_both(q, k, v, enable_gqa=True, **kw)
        _same(got, want)
        if "attn_mask" in kw:
            assert np.isfinite(got).all()


def test_float16_pairs_only():
    q = np.ones((1, 2, 1, 4), F32)
    k = np.ones((1, 2, 3, 4), F16)
    with pytest.raises(TypeError, match="float32 query"):
        cattn.scaled_dot_product_attention(q.astype(np.float64), k, k)
    with pytest.raises(TypeError, match="float16"):          # one float16 operand alone
        cattn.scaled_dot_product_attention(q, k, k.astype(F32))
    with pytest.raises(TypeError, match="float16"):
        cattn.attention_weights(q, k)


EDGES = np.array([0.0, -0.0, 1.0, 65504.0, 65519.99, -65519.99, 6.1035156e-05, 6.0e-05,
                  5.9604645e-08, 2.9802322e-08, 2.9802326e-08, 8.940697e-08, 1.0004883,
                  1.0009766, 1.0014648, 2049.0, 2051.0, np.nan], F32)


def test_cache_rounds_as_numpy_and_refuses_overflow():
    rng = np.random.default_rng(0)
    x = np.concatenate([EDGES, rng.standard_normal(46).astype(F32) * 1e3,
                        rng.standard_normal(64).astype(F32) * 1e-6])
    c = cattn.KVCache(1, 2, 8, 64, dtype=np.float16)
    k = x.reshape(1, 2, 1, 64)
    assert c.append(k, -k) == 1
    np.testing.assert_array_equal(c.keys.view(np.uint16)[np.isfinite(c.keys)],
                                  k.astype(F16).view(np.uint16)[np.isfinite(c.keys)])
    assert np.isnan(c.keys).sum() == np.isnan(k).sum()
    with pytest.raises(ValueError, match="overflow"):
        c.append(np.full((1, 2, 1, 64), 65520.0, F32), k)
    assert c.length == 1                                     # unchanged after the error
    q = np.random.default_rng(1).standard_normal((1, 4, 1, 64)).astype(F32)
    c2 = cattn.KVCache(1, 2, 8, 64)
    c2.append(c.keys.astype(F32), c.values.astype(F32))
    _same(c.attend(q), c2.attend(q))


def test_thread_count_does_not_change_the_bits():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((1, 8, 1, 64)).astype(F32)
    k = rng.standard_normal((1, 4, 700, 64)).astype(F16)
    before = cattn.get_num_threads()
    try:
        runs = []
        for n in (1, 2, 3):
            cattn.set_num_threads(n)
            runs.append(cattn.scaled_dot_product_attention(q, k, k, enable_gqa=True))
    finally:
        cattn.set_num_threads(before)
    for r in runs[1:]:
        _same(r, runs[0])
