"""cattn.KVCache: incremental decoding equals the full causal forward
(lower_right alignment) of the float64 reference; views, limits, errors
(tolerances: see cattn_testing/attention.py)."""
import numpy as np
import pytest

import cattn
from cattn_testing.attention import assert_close, check_sdpa, expected_sdpa
from cattn_testing.numerics import randn as rn

F32, F64 = np.float32, np.float64
LR = dict(is_causal=True, causal_alignment="lower_right")


@pytest.fixture
def rng():
    return np.random.default_rng(4321)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("Hq,H", [(2, 2), (8, 2), (4, 1)])
def test_prefill_then_token_by_token_equals_full_causal(rng, dtype, Hq, H):
    """Prompt of 240 tokens (flash path, 4 query blocks), then 40 single
    tokens (decode path, crossing the 256-key chunk): the concatenated
    outputs equal one causal forward over all 280 positions."""
    B, T, P, E = 2, 280, 240, 32
    q, k, v = rn(rng, (B, Hq, T, E), dtype), rn(rng, (B, H, T, E), dtype), rn(rng, (B, H, T, E), dtype)
    cache = cattn.KVCache(B, H, 320, E, dtype=dtype)
    cache.append(k[:, :, :P], v[:, :, :P])
    outs = [cache.attend(q[:, :, :P])]
    for t in range(P, T):
        assert cache.append(k[:, :, t:t + 1], v[:, :, t:t + 1]) == t + 1
        outs.append(cache.attend(q[:, :, t:t + 1]))
    got = np.concatenate(outs, axis=2)
    assert got.dtype == dtype
    gqa = dict(enable_gqa=Hq != H)
    check_sdpa(got, q, k, v, **LR, **gqa)
    # the same tokens through the full (non-incremental) forward agree with it
    full = cattn.scaled_dot_product_attention(q, k, v, **LR, **gqa)
    _, tol = expected_sdpa(q, k, v, **LR, **gqa)
    assert_close(got, full.astype(F64), 2 * tol, "incremental vs full forward")


def test_chunked_appends_with_several_new_queries(rng):
    """Appending 5 tokens at a time and attending with those 5 queries (the
    lower_right convention: query r of the chunk sees the prefix and the
    chunk's first r + 1 tokens)."""
    B, H, T, E = 1, 3, 60, 16
    q, k, v = rn(rng, (B, H, T, E)), rn(rng, (B, H, T, E)), rn(rng, (B, H, T, 8))
    cache = cattn.KVCache(B, H, T, E, value_dim=8)
    outs = []
    for t in range(0, T, 5):
        cache.append(k[:, :, t:t + 5], v[:, :, t:t + 5])
        outs.append(cache.attend(q[:, :, t:t + 5]))
    check_sdpa(np.concatenate(outs, axis=2), q, k, v, **LR)


def test_keys_and_values_are_views_of_the_filled_prefix(rng):
    cache = cattn.KVCache(2, 2, 10, 4)
    assert cache.keys.shape == (2, 2, 0, 4) and cache.length == 0 and cache.max_len == 10
    k, v = rn(rng, (2, 2, 3, 4)), rn(rng, (2, 2, 3, 4))
    cache.append(k, v)
    assert cache.keys.shape == (2, 2, 3, 4) and cache.values.shape == (2, 2, 3, 4)
    assert np.array_equal(cache.keys, k) and np.array_equal(cache.values, v)
    assert np.shares_memory(cache.keys, cache.k) and np.shares_memory(cache.values, cache.v)
    cache.reset()
    assert cache.length == 0 and cache.keys.shape[2] == 0


def test_garbage_in_unfilled_slots_does_not_leak(rng):
    """NaN / inf beyond the filled prefix (stale or uninitialized slots) is
    never read, and NaN in a cached position excluded by a padding mask
    never reaches the output."""
    cache = cattn.KVCache(2, 2, 16, 8)
    cache.k[:] = np.nan
    cache.v[:] = np.inf
    k, v = rn(rng, (2, 2, 5, 8)), rn(rng, (2, 2, 5, 8))
    cache.append(k, v)
    q = rn(rng, (2, 2, 1, 8))
    out = cache.attend(q)
    assert np.isfinite(out).all()
    check_sdpa(out, q, k, v, **LR)
    # batch 1 is padded at positions 3..4 and holds NaN there
    cache.k[1, :, 3:5] = np.nan
    keep = np.ones((2, 1, 1, 5), bool)
    keep[1, ..., 3:] = False
    out = cache.attend(q, attn_mask=keep)
    assert np.isfinite(out).all()
    check_sdpa(out, q, cache.keys, cache.values, attn_mask=keep)


def test_attend_on_empty_cache_gives_zeros(rng):
    cache = cattn.KVCache(1, 2, 4, 8)
    out = cache.attend(rn(rng, (1, 2, 1, 8)))
    assert out.shape == (1, 2, 1, 8) and (out == 0).all()


def test_attend_out_argument(rng):
    cache = cattn.KVCache(1, 2, 8, 8)
    k, v = rn(rng, (1, 2, 6, 8)), rn(rng, (1, 2, 6, 8))
    cache.append(k, v)
    q = rn(rng, (1, 4, 2, 8))
    out = np.full((1, 4, 2, 8), np.nan, F32)
    assert cache.attend(q, out=out) is out
    check_sdpa(out, q, k, v, enable_gqa=True, **LR)


def test_append_past_max_len_raises_and_keeps_state(rng):
    cache = cattn.KVCache(1, 2, 4, 8)
    cache.append(rn(rng, (1, 2, 3, 8)), rn(rng, (1, 2, 3, 8)))
    before = cache.k.copy()
    with pytest.raises(ValueError, match="max_len"):
        cache.append(rn(rng, (1, 2, 2, 8)), rn(rng, (1, 2, 2, 8)))
    assert cache.length == 3 and np.array_equal(cache.k, before)
    cache.append(rn(rng, (1, 2, 1, 8)), rn(rng, (1, 2, 1, 8)))   # exactly full is fine
    with pytest.raises(ValueError, match="max_len"):
        cache.append(rn(rng, (1, 2, 1, 8)), rn(rng, (1, 2, 1, 8)))


@pytest.mark.parametrize("k_shape,v_shape,match", [
    ((1, 3, 1, 8), (1, 3, 1, 8), r"k has shape \(1, 3, 1, 8\)"),      # wrong heads
    ((2, 2, 1, 8), (2, 2, 1, 8), r"k has shape \(2, 2, 1, 8\)"),      # wrong batch
    ((1, 2, 1, 4), (1, 2, 1, 8), r"k has shape \(1, 2, 1, 4\)"),      # wrong head_dim
    ((1, 2, 8), (1, 2, 8), r"k has shape \(1, 2, 8\)"),               # 3-D
    ((1, 2, 2, 8), (1, 2, 1, 8), r"v has shape \(1, 2, 1, 8\)"),      # T differs
    ((1, 2, 1, 8), (1, 2, 1, 4), r"v has shape \(1, 2, 1, 4\)"),      # wrong value_dim
])
def test_append_wrong_shapes_raise(rng, k_shape, v_shape, match):
    cache = cattn.KVCache(1, 2, 4, 8)
    with pytest.raises(ValueError, match=match):
        cache.append(rn(rng, k_shape), rn(rng, v_shape))
    assert cache.length == 0


def test_attend_wrong_query_raises(rng):
    cache = cattn.KVCache(1, 2, 4, 8)
    cache.append(rn(rng, (1, 2, 2, 8)), rn(rng, (1, 2, 2, 8)))
    with pytest.raises(ValueError, match="multiple"):
        cache.attend(rn(rng, (1, 3, 1, 8)))                 # 3 heads over 2 kv heads
    with pytest.raises(ValueError, match="head dims differ"):
        cache.attend(rn(rng, (1, 2, 1, 4)))
    with pytest.raises(TypeError, match="int32"):
        cache.attend(np.ones((1, 2, 1, 8), np.int32))


def test_constructor_errors():
    with pytest.raises(TypeError, match="int32"):
        cattn.KVCache(1, 1, 4, 4, dtype=np.int32)
    with pytest.raises(ValueError, match="max_len"):
        cattn.KVCache(1, 1, -1, 4)
    with pytest.raises(TypeError, match="head_dim"):   # a non-integer size is a TypeError
        cattn.KVCache(1, 1, 4, 2.5)


def test_length_is_read_only():
    """The filled length changes only through append / reset: assigning it
    (e.g. -1) would expose stale slots to attend()."""
    cache = cattn.KVCache(1, 1, 4, 2)
    with pytest.raises(AttributeError):
        cache.length = -1
    assert cache.length == 0 and cache.keys.shape == (1, 1, 0, 2)
