"""Attention numerics at the edges: very long key sequences, values near the
float range, +inf scores. Legend: L queries, S keys, E head dim.

Why these tolerances. Both kernel paths keep the row sum l and the output
accumulator in double across key blocks and sum at most one block (<= 256
keys) in the input precision, so the float32 error of an output does not
grow with S: a few float32 roundings per block sum plus one per product,
relative to max|V|. 1e-5 relative (~84 u) is far above that and far below
the failure the issue measured (7e-6 at S = 2^16 growing to 0.97 at
S = 2^25, 6.0 instead of 3.0 for constant values).

S = 2^25 runs through stride-0 views (np.broadcast_to): no memory, and the
kernels read them like any other strided operand.
"""
import numpy as np
import pytest

import cattn
from cattn import reference

sdpa = cattn.scaled_dot_product_attention

# L = 4: the decode path (fixed key chunks combined by log-sum-exp);
# L = 9: the flash path (one query tile, key blocks of BC)
PATHS = [pytest.param(4, id="decode"), pytest.param(9, id="flash")]


def _const_rows(S, row, dtype):
    return np.broadcast_to(np.asarray(row, dtype), (S, len(row)))


@pytest.mark.parametrize("L", PATHS)
@pytest.mark.parametrize("S", [2**18 + 3, pytest.param(2**25 + 5, marks=pytest.mark.slow)])
def test_long_context_constant_values(L, S):
    """Every key alike: uniform weights 1/S, the output is exactly V's row."""
    vrow = [3.0, -1.5, 1e-3, 7.25]
    q = np.random.default_rng(0).standard_normal((L, 4)).astype(np.float32)
    k = _const_rows(S, [0.5, -0.25, 0.125, 1.0], np.float32)
    v = _const_rows(S, vrow, np.float32)
    out = sdpa(q, k, v)
    want = np.broadcast_to(np.asarray(vrow), out.shape)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=0)


@pytest.mark.parametrize("L", PATHS)
def test_long_context_random_matches_reference(L):
    """Near-uniform random weights over S = 2^18 keys, against float64."""
    S, E = 2**18, 8
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, L, E)).astype(np.float32)
    k = (0.05 * rng.standard_normal((2, S, E))).astype(np.float32)
    v = rng.standard_normal((2, S, E)).astype(np.float32)
    out = sdpa(q, k, v)
    ref = reference.scaled_dot_product_attention(q.astype(np.float64), k.astype(np.float64),
                                                 v.astype(np.float64))
    # the output is a weighted mean of ~N(0,1) values: |ref| ~ 1/sqrt(S),
    # so the error is measured against max|V| (what the roundings scale with)
    err = np.abs(out - ref).max() / np.abs(v).max()
    assert err <= 1e-5, err
    with cattn.num_threads(1):
        one = sdpa(q, k, v)
    with cattn.num_threads(2):
        two = sdpa(q, k, v)
    assert np.array_equal(one, two, equal_nan=True)


def test_long_context_masked_and_causal_lower_right():
    """A long cache with a stride-0 mask excluding the first half, and
    lower-right causal (the KV-cache convention) on the flash path."""
    S = 2**20 + 7
    q = np.zeros((12, 2), np.float32)
    k = _const_rows(S, [1.0, 1.0], np.float32)
    v = np.empty((S, 2), np.float32)
    v[: S // 2] = np.nan                        # masked: must never leak
    v[S // 2:] = [2.0, -4.0]
    mask = np.zeros(S, bool)
    mask[S // 2:] = True
    out = sdpa(q, k, v, attn_mask=np.broadcast_to(mask, (12, S)))
    np.testing.assert_allclose(out, np.broadcast_to([2.0, -4.0], out.shape), rtol=1e-5)
    out = sdpa(q, k, np.nan_to_num(v, nan=2.0), is_causal=True, causal_alignment="lower_right")
    np.testing.assert_allclose(out[:, 0], 2.0, rtol=1e-5)


def test_attention_weights_long_row_sums_to_one():
    S = 2**20 + 11
    rng = np.random.default_rng(2)
    q = rng.standard_normal((3, 4)).astype(np.float32)
    k = (0.05 * rng.standard_normal((S, 4))).astype(np.float32)
    w = cattn.attention_weights(q, k)
    ref = reference.attention_weights(q.astype(np.float64), k.astype(np.float64))
    np.testing.assert_allclose(w, ref, rtol=1e-5, atol=0)


@pytest.mark.parametrize("L", [3, 100])       # decode and flash paths
@pytest.mark.parametrize("dtype,big", [(np.float32, 8.5e37), (np.float64, 1e308)])
def test_huge_values_do_not_overflow(L, dtype, big):
    """Seven equal weights over values whose sum overflows: the exact
    result (a mean of the values) is finite, so the output must be too."""
    q = np.zeros((L, 1), dtype)
    k = np.zeros((7, 1), dtype)
    v = np.full((7, 1), big, dtype)
    np.testing.assert_allclose(sdpa(q, k, v), big, rtol=1e-6)
    v = np.array([[big], [big], [-big], [big], [big], [-big], [big]], dtype)
    np.testing.assert_allclose(sdpa(q, k, v), big / 7 * 3, rtol=1e-6)


@pytest.mark.parametrize("L", [3, 100])
def test_huge_values_many_blocks(L):
    """Values near the float32 limit spread over several key blocks, with
    non-uniform weights: compare with float64."""
    rng = np.random.default_rng(3)
    S, E = 1000, 5
    q = rng.standard_normal((L, E)).astype(np.float32)
    k = rng.standard_normal((S, E)).astype(np.float32)
    v = (rng.uniform(0.5, 1.0, (S, E)) * 3e38).astype(np.float32)
    out = sdpa(q, k, v)
    assert np.isfinite(out).all()
    ref = reference.scaled_dot_product_attention(q.astype(np.float64), k.astype(np.float64),
                                                 v.astype(np.float64))
    np.testing.assert_allclose(out, ref, rtol=1e-5)


@pytest.mark.parametrize("L", [1, 20])
def test_plus_inf_score_makes_the_row_nan(L):
    """softmax([inf, 1]) = [nan, nan] (inf - inf); attention agrees, and
    only the rows with the +inf score are affected."""
    q = np.ones((L, 1), np.float32)
    q[0] = -1.0                                  # row 0: scores [-inf, -1]
    k = np.array([[np.inf], [1.0]], np.float32)
    v = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    assert np.isnan(cattn.softmax(np.array([np.inf, 1.0], np.float32))).all()
    w = cattn.attention_weights(q, k)
    assert np.array_equal(w[0], [0.0, 1.0])
    assert np.isnan(w[1:]).all()
    out = sdpa(q, k, v)
    assert np.array_equal(out[0], [3.0, 4.0])
    assert np.isnan(out[1:]).all()


def test_nan_row_keeps_masked_positions_zero():
    """A NaN score makes its row NaN where it attends; masked positions stay 0."""
    q = np.array([[1.0], [np.nan]], np.float32)
    k = np.ones((3, 1), np.float32)
    mask = np.array([True, False, True])
    w = cattn.attention_weights(q, k, attn_mask=mask)
    np.testing.assert_allclose(w[0], [0.5, 0.0, 0.5])
    assert np.isnan(w[1, [0, 2]]).all() and w[1, 1] == 0.0

