"""cattn.linear: y = act(x @ weight.T + bias), weight (out_features, in_features)
as in torch, checked against reference.linear (tolerances: cattn_testing/gemm.py)."""
import numpy as np
import pytest

import cattn
from cattn_testing.gemm import check_linear
from cattn_testing.numerics import randn

ACTS = [None, "relu", "gelu", "gelu_tanh", "silu"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
@pytest.mark.parametrize("K", [7, 257])
def test_activations(rng, dtype, activation, with_bias, K):
    # pre-activations of std ~2: the tails of erf/tanh/exp are exercised
    x = randn(rng, (65, K), dtype)
    w = randn(rng, (33, K), dtype) * (2 / np.sqrt(K))
    b = randn(rng, (33,), dtype) if with_bias else None
    got = cattn.linear(x, w, b, activation=activation)
    assert got.shape == (65, 33)
    check_linear(got, x, w, b, activation)


def test_checker_rejects_the_wrong_activation(rng):
    """gelu and gelu_tanh differ by < 5e-4: at small K the check tells them apart."""
    x, w = randn(rng, (65, 7)), randn(rng, (33, 7))
    wrong = cattn.linear(x, w, activation="gelu_tanh")
    with pytest.raises(AssertionError, match="out of tolerance"):
        check_linear(wrong, x, w, None, "gelu")


def test_activation_none_string(rng):
    x, w = randn(rng, (5, 7)), randn(rng, (3, 7))
    check_linear(cattn.linear(x, w, activation="none"), x, w)


@pytest.mark.parametrize("x_shape", [(257,), (1, 257), (2, 3, 257), (2, 1, 5, 257), (0, 257)])
def test_leading_dims_are_free(rng, x_shape):
    x, w, b = randn(rng, x_shape), randn(rng, (17, 257)), randn(rng, (17,))
    got = cattn.linear(x, w, b, activation="relu")
    assert got.shape == x_shape[:-1] + (17,)
    check_linear(got, x, w, b, "relu")


@pytest.mark.parametrize("view", [
    lambda x: x[:, ::2],                 # strided last dim
    lambda x: x[::-1],                   # negative rows
    lambda x: x.T.copy().T,              # column-major
    lambda x: x.reshape(4, 5, -1)[:, 1:4, ::2],  # 3-D, not foldable into one M
], ids=["strided", "negative", "fortran", "3d-sliced"])
def test_non_contiguous_x(rng, view):
    x = view(randn(rng, (20, 130)))
    w, b = randn(rng, (9, x.shape[-1])), randn(rng, (9,))
    check_linear(cattn.linear(x, w, b, activation="silu"), x, w, b, "silu")


def test_non_contiguous_weight(rng):
    x = randn(rng, (17, 65))
    w = randn(rng, (65, 40)).T[::2]       # (20, 65) transposed, strided view
    b = randn(rng, (20,))
    check_linear(cattn.linear(x, w, b), x, w, b)


def test_block_edges(rng):
    """M > MC, K > KC, N > NC: bias/act applied once, after the last K block,
    on every jc block."""
    blocks = cattn._ext.gemm_blocks()["f32"]
    M, N = blocks["MC"] + 1, blocks["NC"] + 1
    x, w, b = randn(rng, (M, 300)), randn(rng, (N, 300)), randn(rng, (N,))
    check_linear(cattn.linear(x, w, b, activation="gelu_tanh"), x, w, b, "gelu_tanh")


def test_k_zero_gives_act_of_bias(rng):
    x, w, b = np.ones((3, 0), np.float32), np.ones((4, 0), np.float32), randn(rng, (4,))
    got = cattn.linear(x, w, b, activation="relu")
    np.testing.assert_array_equal(got, np.broadcast_to(np.maximum(b, 0), (3, 4)))


def test_mixed_dtypes(rng):
    x, w, b = randn(rng, (5, 17)), randn(rng, (7, 17)), randn(rng, (7,), np.float64)
    got = cattn.linear(x, w, b)
    assert got.dtype == np.float64
    check_linear(got, x, w, b)


def test_out(rng):
    x, w, b = randn(rng, (2, 65, 257)), randn(rng, (33, 257)), randn(rng, (33,))
    out = np.full((33, 65, 2), np.nan, np.float32).T      # transposed view
    assert cattn.linear(x, w, b, activation="gelu", out=out) is out
    check_linear(out, x, w, b, "gelu")


def test_bad_inputs():
    x, w = np.ones((4, 3), np.float32), np.ones((5, 3), np.float32)
    with pytest.raises(ValueError, match=r"weight must be 2-D.*\(3,\)"):
        cattn.linear(x, np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"weight must be 2-D.*\(1, 5, 3\)"):
        cattn.linear(x, w[None])
    with pytest.raises(ValueError, match=r"x has shape \(4, 3\) but weight has shape \(3, 5\)"):
        cattn.linear(x, w.T)
    with pytest.raises(ValueError, match=r"bias has shape \(3,\), expected \(5,\)"):
        cattn.linear(x, w, np.ones(3, np.float32))
    with pytest.raises(ValueError, match=r"bias has shape \(1, 5\), expected \(5,\)"):
        cattn.linear(x, w, np.ones((1, 5), np.float32))
    with pytest.raises(ValueError, match=r"x must have at least 1 dimension"):
        cattn.linear(np.float32(1.0), w)
    with pytest.raises(ValueError, match="unknown activation 'tanh'"):
        cattn.linear(x, w, activation="tanh")
    with pytest.raises(ValueError, match="unknown activation"):
        cattn.linear(x, w, activation=["relu"])
    with pytest.raises(TypeError, match="x has dtype int32"):
        cattn.linear(x.astype(np.int32), w)
    with pytest.raises(TypeError, match="weight has dtype complex64"):
        cattn.linear(x, w.astype(np.complex64))
    with pytest.raises(TypeError, match="bias has dtype bool"):
        cattn.linear(x, w, np.ones(5, bool))
    with pytest.raises(ValueError, match=r"out has shape \(5, 4\), expected \(4, 5\)"):
        cattn.linear(x, w, out=np.empty((5, 4), np.float32))
    with pytest.raises(ValueError, match="overlaps an input"):
        cattn.linear(x[:, :3], np.ones((3, 3), np.float32), out=x[:, :3])


# ---- row invariance: a row's result never depends on the other rows -------------------
# Few rows (<= 12) take the small-M path, many rows the packed blocked path;
# both accumulate every output in the same order (the micro-kernel's FMA
# chain per KC block, blocks in order, then the epilogue), so a row of x
# gives the same bits alone, in any slice, or among hundreds of rows.
# K = 600 spans three KC = 256 blocks with a ragged tail; N = 203 leaves
# ragged NR = 16 / 8 panels and GEMV_CHUNK = 192 chunks.

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("activation", [None, "gelu"])
def test_rows_are_batch_invariant(rng, dtype, activation):
    M, N, K = 300, 203, 600
    x = randn(rng, (M, K), dtype)
    w = randn(rng, (N, K), dtype) / np.sqrt(K)
    b = randn(rng, (N,), dtype)
    full = cattn.linear(x, w, b, activation=activation)
    check_linear(full, x, w, b, activation)              # and it is right
    for m in list(range(1, 14)) + [17, 40, 150]:
        for i0 in (0, 5, M - m):
            part = cattn.linear(x[i0:i0 + m], w, b, activation=activation)
            np.testing.assert_array_equal(part, full[i0:i0 + m], err_msg=f"rows {i0}:{i0 + m}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rows_are_batch_invariant_for_any_threads_and_layout(rng, dtype):
    M, N, K = 64, 77, 300
    x = randn(rng, (M, 2 * K), dtype)[:, ::2]             # strided rows of A
    w = randn(rng, (N, K), dtype)
    with cattn.num_threads(2):
        full = cattn.linear(x, w)
        pair = cattn.linear(x[3:5], w)
    with cattn.num_threads(1):
        one = cattn.linear(x[7], w)                        # a 1-D x: one row
        via_matmul = cattn.matmul(x[9:11], w.T)            # B = W^T: the same paths
    np.testing.assert_array_equal(pair, full[3:5])
    np.testing.assert_array_equal(one, full[7])
    np.testing.assert_array_equal(via_matmul, full[9:11])
