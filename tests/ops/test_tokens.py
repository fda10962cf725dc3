"""The sentence models' token-row kernels (csrc/tokens.c, cattn/_tokens.pxi):
the mean pooling against a float64 reference, their edges and their errors."""
import numpy as np
import pytest

from cattn import _ext
from cattn.models.sentence import _pool

F32 = np.float32


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def _ref_pool(x, lengths, normalize):
    """float64 reference of the pooling: mean, then / max(norm, 1e-12)."""
    out, r = [], 0
    for n in lengths:
        m = x[r:r + n].astype(np.float64).mean(axis=0) if n else np.zeros(x.shape[1])
        if normalize:
            m = m / max(np.linalg.norm(m), 1e-12)
        out.append(m)
        r += n
    return np.array(out).reshape(len(lengths), x.shape[1])


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("lengths,E", [([1], 1), ([8], 384), ([3, 0, 5, 1], 17),
                                       ([0], 4), ([], 4), ([200, 7], 64)])
def test_mean_pool_matches_float64(rng, lengths, E, normalize):
    lengths = np.array(lengths, np.int64)
    x = (rng.standard_normal((int(lengths.sum()), E)) * 3 + 1).astype(F32)
    out = _pool(x, lengths, normalize)
    assert out.dtype == F32 and out.shape == (len(lengths), E)
    ref = _ref_pool(x, lengths, normalize)
    # sums in double, one rounding at the end: within an ulp of float32 of the
    # reference (the double sums' own error is ~1e-16 relative)
    np.testing.assert_allclose(out, ref, rtol=2 ** -23, atol=1e-30)
    assert (out[lengths == 0] == 0).all()


def test_mean_pool_is_batch_invariant(rng):
    lengths = np.array([4, 9, 1, 6], np.int64)
    x = rng.standard_normal((20, 32)).astype(F32)
    together = _pool(x, lengths, True)
    r = 0
    for b, n in enumerate(lengths):
        alone = _pool(np.ascontiguousarray(x[r:r + n]), lengths[b:b + 1], True)
        np.testing.assert_array_equal(alone[0], together[b])
        r += n


def test_mean_pool_zero_vector_and_huge_values():
    x = np.zeros((3, 5), F32)
    assert (_pool(x, np.array([3], np.int64), True) == 0).all()       # norm floor: no NaN
    big = np.full((2, 4), 3e38, F32)                                   # the float32 sum overflows
    np.testing.assert_allclose(_pool(big, np.array([2], np.int64), False), 3e38, rtol=1e-7)
    np.testing.assert_allclose(_pool(big, np.array([2], np.int64), True), 0.5, rtol=1e-7)


def test_mean_pool_float64_formula(rng):
    # float64 rows take the NumPy transcription of the same formula
    lengths = np.array([3, 0, 4], np.int64)
    x = rng.standard_normal((7, 6))
    np.testing.assert_allclose(_pool(x, lengths, True), _ref_pool(x, lengths, True),
                               rtol=1e-15, atol=1e-300)


def test_mean_pool_float64_is_batch_invariant(rng):
    lengths = np.array([4, 0, 9, 1, 6], np.int64)
    x = rng.standard_normal((20, 32))
    together = _pool(x, lengths, True)
    r = 0
    for b, n in enumerate(lengths):
        alone = _pool(x[r:r + n], lengths[b:b + 1], True)
        np.testing.assert_array_equal(alone[0], together[b])
        r += n
    assert (together[1] == 0).all()


@pytest.mark.parametrize("bad", ["sum", "negative", "width", "dtype"])
def test_mean_pool_rejects_bad_arguments(bad):
    out, x = np.empty((2, 4), F32), np.zeros((5, 4), F32)
    lengths = np.array([2, 3], np.int64)
    if bad == "sum":
        lengths = np.array([2, 2], np.int64)
    elif bad == "negative":
        lengths = np.array([6, -1], np.int64)
    elif bad == "width":
        x = np.zeros((5, 3), F32)
    else:
        lengths = lengths.astype(np.int32)
    with pytest.raises(ValueError, match="mean_pool_f32"):
        _ext.mean_pool_f32(out, x, lengths, True)
