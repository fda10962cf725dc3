"""cattn.pack_weight / PackedWeight: a linear weight packed once.

The contract is exact: linear(x, pack_weight(w)) equals linear(x, w) bit
for bit (the same panels, micro-kernel and accumulation order), for any
row count (the few-row kernels on the panels included), any thread count,
and is right against the float64 reference (cattn_testing/gemm.py).
"""
import io
import pickle

import numpy as np
import pytest

import cattn
from cattn_testing.gemm import check_linear
from cattn_testing.numerics import randn

F32, F64 = np.float32, np.float64
ACTS = [None, "relu", "gelu", "gelu_tanh", "silu"]
# rows: 1-3 (few-row kernels), 4-12 (micro-kernel rows + few), 13+ (blocked)
ROWS = [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 40, 301]


@pytest.mark.parametrize("dtype", [F32, F64], ids=["f32", "f64"])
@pytest.mark.parametrize("M", ROWS)
def test_same_bits_as_linear_and_right(rng, dtype, M):
    N, K = 203, 600                    # ragged panels; K spans 3 KC blocks
    x, w, b = randn(rng, (M, K), dtype), randn(rng, (N, K), dtype), randn(rng, (N,), dtype)
    p = cattn.pack_weight(w, dtype=np.dtype(dtype).name)
    for act in (None, "gelu"):
        got = cattn.linear(x, p, b, activation=act)
        np.testing.assert_array_equal(got, cattn.linear(x, w, b, activation=act))
        check_linear(got, x, w, b, act)


@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("N,K", [(1, 1), (5, 7), (16, 256), (17, 257), (33, 512), (4097, 40)])
def test_shapes_and_activations(rng, N, K, activation):
    w, b = randn(rng, (N, K)) * F32(2 / np.sqrt(K)), randn(rng, (N,))
    p = cattn.pack_weight(w)
    for M in (1, 3, 9, 70):
        x = randn(rng, (M, K))
        got = cattn.linear(x, p, b, activation=activation)
        np.testing.assert_array_equal(got, cattn.linear(x, w, b, activation=activation))
        check_linear(got, x, w, b, activation)


def test_rows_are_batch_invariant_and_threads_do_not_matter(rng):
    x, w = randn(rng, (257, 300)), randn(rng, (77, 300))
    p = cattn.pack_weight(w)
    with cattn.num_threads(2):
        full = cattn.linear(x, p)
    with cattn.num_threads(1):
        for m in range(1, 14):
            np.testing.assert_array_equal(cattn.linear(x[5:5 + m], p), full[5:5 + m])
        np.testing.assert_array_equal(cattn.linear(x, p), full)
    np.testing.assert_array_equal(cattn.linear(x[7], p), full[7])        # 1-D x


def test_leading_dims_strided_x_and_out(rng):
    w = randn(rng, (33, 20))
    p = cattn.pack_weight(w)
    x = randn(rng, (2, 3, 40))[..., ::2]                      # strided, 3-D
    want = cattn.linear(np.ascontiguousarray(x), w)
    np.testing.assert_array_equal(cattn.linear(x, p), want)
    out = np.empty((2, 3, 33), F32)
    assert cattn.linear(x, p, out=out) is out
    np.testing.assert_array_equal(out, want)
    big = np.zeros((2, 3, 66), F32)                            # a strided out=
    cattn.linear(x, p, out=big[..., ::2])
    np.testing.assert_array_equal(big[..., ::2], want)
    assert (big[..., 1::2] == 0).all()


@pytest.mark.parametrize("fmt", ["float32", "bfloat16"])
@pytest.mark.parametrize("m", [1, 3, 4, 5, 6, 8, 11, 12])
def test_few_rows_with_a_row_stride(rng, fmt, m):
    """x's rows apart in memory (a row slice of a wider array): the few-row
    path copies them row by row; same bits as the contiguous copy."""
    w = randn(rng, (50, 70))
    p = cattn.pack_weight(w, fmt)
    wide = randn(rng, (3 * m, 90))
    x = wide[::3, 7:77]                                       # rows 270 floats apart
    assert x.strides == (3 * 90 * 4, 4)
    np.testing.assert_array_equal(cattn.linear(x, p), cattn.linear(np.ascontiguousarray(x), p))
    want = np.ascontiguousarray(x).astype(np.float64) @ p.unpack().T.astype(np.float64)
    np.testing.assert_allclose(cattn.linear(x, p), want, rtol=0, atol=1e-5 * np.sqrt(70) * np.abs(want).max())


def test_empty_dims(rng):
    p = cattn.pack_weight(randn(rng, (5, 4)))
    assert cattn.linear(np.zeros((0, 4), F32), p).shape == (0, 5)
    b = randn(rng, (3,))
    k0 = cattn.pack_weight(np.zeros((3, 0), F32))
    np.testing.assert_array_equal(cattn.linear(np.zeros((2, 0), F32), k0, b), np.tile(b, (2, 1)))
    n0 = cattn.pack_weight(np.zeros((0, 4), F32))
    assert cattn.linear(randn(rng, (2, 4)), n0).shape == (2, 0)


def test_metadata_unpack_and_round_trips(rng):
    w = randn(rng, (19, 300))
    w[3, 7], w[4, 8], w[5, 299] = np.inf, np.nan, -0.0
    p = cattn.pack_weight(w)
    assert p.shape == (19, 300) and p.dtype == F32 and p.format == "float32"
    assert p.nbytes == 300 * 32 * 4                          # N rounded up to 16 columns
    np.testing.assert_array_equal(p.unpack(), w)             # NaN, inf and -0 kept
    assert np.signbit(p.unpack()[5, 299])
    x = randn(rng, (4, 300))
    want = cattn.linear(x, p)
    buf = io.BytesIO()
    np.savez(buf, **p.to_arrays())
    buf.seek(0)
    with np.load(buf) as d:
        q = cattn.PackedWeight.from_arrays(d)
    np.testing.assert_array_equal(cattn.linear(x, q), want)
    r = pickle.loads(pickle.dumps(p))
    np.testing.assert_array_equal(cattn.linear(x, r), want)
    assert "float32" in repr(r) and r.shape == p.shape


def test_float64_weight_packed_as_float32_rounds(rng):
    w = randn(rng, (9, 30), F64)
    p = cattn.pack_weight(w)                                 # default: float32
    np.testing.assert_array_equal(p.unpack(), w.astype(F32))


def test_errors(rng):
    w = randn(rng, (5, 4))
    p = cattn.pack_weight(w)
    with pytest.raises(TypeError, match="float64 but the packed weight is float32"):
        cattn.linear(np.zeros((2, 4)), p)
    with pytest.raises(TypeError, match="bias is float64"):
        cattn.linear(np.zeros((2, 4), F32), p, np.zeros(5))
    with pytest.raises(ValueError, match="in_features=4"):
        cattn.linear(np.zeros((2, 5), F32), p)
    with pytest.raises(ValueError, match=r"bias has shape \(4,\)"):
        cattn.linear(np.zeros((2, 4), F32), p, np.zeros(4, F32))
    with pytest.raises(ValueError, match="unknown activation"):
        cattn.linear(np.zeros((2, 4), F32), p, activation="tanh")
    with pytest.raises(ValueError, match="out_features, in_features"):
        cattn.pack_weight(np.zeros(4, F32))
    with pytest.raises(TypeError):
        cattn.pack_weight(np.zeros((2, 2), np.int32))
    for bad in ("bf16", "uint8", "fp32", None, F32):
        with pytest.raises(ValueError, match="dtype must be one of"):
            cattn.pack_weight(w, dtype=bad)
    with pytest.raises(TypeError, match="cattn.pack_weight"):
        cattn.PackedWeight()
    with pytest.raises(ValueError, match="expected the dict"):
        cattn.PackedWeight.from_arrays({"data": 1})
    d = p.to_arrays()
    with pytest.raises(ValueError, match="KC"):
        cattn.PackedWeight.from_arrays({**d, "kc": np.array(128)})
    with pytest.raises(ValueError, match="needs"):
        cattn.PackedWeight.from_arrays({**d, "data": d["data"][:-1]})
    with pytest.raises(ValueError, match="unknown format"):
        cattn.PackedWeight.from_arrays({**d, "format": np.array("int3")})
    out = np.empty((2, 5), F32)
    out.flags.writeable = False
    with pytest.raises(ValueError):
        cattn.linear(np.zeros((2, 4), F32), p, out=out)
    assert p.to_arrays()["data"].flags.writeable                    # a copy
    with pytest.raises(ValueError):
        p._data[0] = 1.0                                     # packed data is read-only
