"""cattn.matmul against the float64 reference (tolerances: see cattn_testing/gemm.py).

Block sizes this file aims at (csrc/config.h, cpuinfo.c): MR x NR = 6x16
(f32), 6x8 (f64); KC = 256; MC, NC from the caches (e.g. a Zen 3: MC = 144
(f32) / 72 (f64), NC = 4096 / 2048; `cattn info` shows them).
"""
import itertools
import random

import numpy as np
import pytest

import cattn
from cattn import reference
from cattn_testing.gemm import check_linear, check_matmul
from cattn_testing.numerics import randn

SIZES = [1, 2, 5, 7, 17, 63, 65, 255, 257, 1000]
# a few dozen (M, N, K) drawn from SIZES, none a multiple of any block size
COMBOS = random.Random(2).sample(list(itertools.product(SIZES, repeat=3)), 30)
COMBOS_F64 = random.Random(3).sample(list(itertools.product(SIZES, repeat=3)), 10)
# crossing block edges: M > MC (and not a multiple), K > KC (several K
# blocks with a partial last one), N > NC (a second jc block), with the
# block sizes this CPU runs (cpuinfo.c derives MC and NC from its caches)
_B32, _B64 = cattn._ext.gemm_blocks()["f32"], cattn._ext.gemm_blocks()["f64"]
EDGES_F32 = [(_B32["MC"] + 1, _B32["NC"] + 1, 2 * _B32["KC"] + 1), (2 * _B32["MC"] + 1, 33, 1000),
             (5, _B32["NC"] + 1, _B32["KC"] + 1)]
EDGES_F64 = [(_B64["MC"] + 1, _B64["NC"] + 1, 2 * _B64["KC"] + 1), (2 * _B64["MC"] + 1, 9, 257),
             (7, _B64["NC"] + 2, 300)]


def ids(mnk):
    return "x".join(map(str, mnk))


@pytest.mark.parametrize("mnk", COMBOS + EDGES_F32, ids=ids)
def test_sizes_float32(rng, mnk):
    M, N, K = mnk
    a, b = randn(rng, (M, K)), randn(rng, (K, N))
    check_matmul(cattn.matmul(a, b), a, b)


@pytest.mark.parametrize("mnk", COMBOS_F64 + EDGES_F64, ids=ids)
def test_sizes_float64(rng, mnk):
    M, N, K = mnk
    a, b = randn(rng, (M, K), np.float64), randn(rng, (K, N), np.float64)
    check_matmul(cattn.matmul(a, b), a, b)


def test_checker_rejects_a_dropped_k_term(rng):
    """The tolerance must be able to fail: a product missing its last k term
    (what an off-by-one in a K loop would give) is rejected."""
    a, b = randn(rng, (65, 1000)), randn(rng, (1000, 63))
    wrong = (a[:, :-1].astype(np.float64) @ b[:-1].astype(np.float64)).astype(np.float32)
    with pytest.raises(AssertionError, match="out of tolerance"):
        check_matmul(wrong, a, b)


def test_checker_rejects_float32_accuracy_for_float64(rng):
    a, b = randn(rng, (63, 257), np.float64), randn(rng, (257, 65), np.float64)
    with pytest.raises(AssertionError, match="out of tolerance"):
        check_matmul((a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64), a, b)


# ---- zero-sized dims ----

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape_a,shape_b", [
    ((0, 5), (5, 7)), ((5, 3), (3, 0)), ((0, 3), (3, 0)),
    ((0, 4, 5), (5, 6)), ((3, 0, 5), (3, 5, 2)), ((1, 3, 4), (0, 4, 5)),
    ((0,), (0, 5)), ((4, 0), (0,)), ((0,), (0,)),
])
def test_empty_results(dtype, shape_a, shape_b):
    a, b = np.ones(shape_a, dtype), np.ones(shape_b, dtype)
    got = cattn.matmul(a, b)
    assert got.shape == np.matmul(a, b).shape and got.dtype == dtype
    check_matmul(got, a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape_a,shape_b", [((5, 0), (0, 7)), ((2, 3, 0), (0, 4)), ((0,), (0,))])
def test_k_zero_gives_zeros(dtype, shape_a, shape_b):
    out_shape = np.matmul(np.ones(shape_a), np.ones(shape_b)).shape
    out = np.full(out_shape, np.nan, dtype)     # must be overwritten, not read
    got = cattn.matmul(np.ones(shape_a, dtype), np.ones(shape_b, dtype), out=out)
    assert got is out and (got == 0).all()


# ---- 1-D operands ----

@pytest.mark.parametrize("shape_a,shape_b", [
    ((257,), (257, 17)), ((17, 257), (257,)), ((257,), (257,)),
    ((5,), (3, 5, 7)), ((3, 7, 5), (5,)), ((1,), (1,)),
])
def test_one_d_operands(rng, shape_a, shape_b):
    a, b = randn(rng, shape_a), randn(rng, shape_b)
    got = cattn.matmul(a, b)
    assert got.shape == np.matmul(a, b).shape
    check_matmul(got, a, b)


def test_vec_vec_is_zero_d(rng):
    a, b = randn(rng, (65,)), randn(rng, (65,))
    got = cattn.matmul(a, b)
    assert isinstance(got, np.ndarray) and got.shape == ()
    check_matmul(got, a, b)


def test_python_lists_become_float64():
    got = cattn.matmul([[1, 2], [3, 4]], [[5.0], [6.0]])
    assert got.dtype == np.float64 and got.tolist() == [[17.0], [39.0]]


# ---- batches and broadcasting ----

@pytest.mark.parametrize("shape_a,shape_b", [
    ((2, 1, 17, 65), (3, 65, 7)),       # (2,1) x (3,) -> (2,3)
    ((4, 63, 257), (257, 5)),           # shared B: batch folds into M
    ((63, 257), (4, 257, 5)),           # shared A
    ((3, 5, 7), (3, 7, 2)),
    ((1, 1, 7, 5), (2, 5, 3)),
    ((2, 2, 145, 300), (2, 1, 300, 70)),  # items big enough to share threads
    ((40, 7, 17), (40, 17, 9)),         # many small items, one per thread
])
def test_batched_broadcast(rng, shape_a, shape_b):
    a, b = randn(rng, shape_a), randn(rng, shape_b)
    check_matmul(cattn.matmul(a, b), a, b)


def test_batch_with_stride_zero(rng):
    a = np.broadcast_to(randn(rng, (1, 17, 65)), (5, 17, 65))   # stride 0 batch
    b = np.broadcast_to(randn(rng, (65, 7)), (5, 65, 7))
    assert a.strides[0] == 0 and b.strides[0] == 0
    check_matmul(cattn.matmul(a, b), a, b)


def test_stride_zero_inside_a_matrix(rng):
    a = np.broadcast_to(randn(rng, (1, 65)), (17, 65))         # every row the same
    b = np.broadcast_to(randn(rng, (65, 1)), (65, 7))
    check_matmul(cattn.matmul(a, b), a, b)


def test_batch_not_evenly_spaced(rng):
    """batch rows not foldable into one big M: the per-item path"""
    big = randn(rng, (3, 20, 65))
    a = big[:, :17, :]
    b = randn(rng, (65, 9))
    check_matmul(cattn.matmul(a, b), a, b)


# ---- layouts ----

def _layouts(rng, dtype):
    A = randn(rng, (70, 300), dtype)
    B = randn(rng, (300, 70), dtype)
    return {
        "transposed": (A.T.copy().T, B.T.copy().T),
        "fortran": (np.asfortranarray(A), np.asfortranarray(B)),
        "A.T and B.T": (B.T, A.T),
        "sliced": (A[1:66:2, 3:260], B[3:260, ::3]),
        "negative": (A[::-1, ::-1], B[::-1, ::-2]),
        "negative K": (A[:, ::-1], B[::-1]),
        "readonly": tuple(x.copy() for x in (A, B)),
    }


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["transposed", "fortran", "A.T and B.T", "sliced",
                                    "negative", "negative K", "readonly"])
def test_layouts(rng, dtype, layout):
    a, b = _layouts(rng, dtype)[layout]
    if layout == "readonly":
        a.flags.writeable = b.flags.writeable = False
    check_matmul(cattn.matmul(a, b), a, b)


def test_unaligned_input_is_copied(rng):
    a0, b0 = randn(rng, (17, 65)), randn(rng, (65, 7))
    buf = np.zeros(a0.nbytes + 1, np.uint8)
    a = np.ndarray(a0.shape, np.float32, buffer=buf, offset=1)   # byte offset 1
    a[...] = a0
    assert not a.flags.aligned
    check_matmul(cattn.matmul(a, b0), a, b0)
    check_matmul(cattn.matmul(b0.T, a.T), b0.T, a.T)


# ---- out= ----

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_out_written_and_returned(rng, dtype):
    a, b = randn(rng, (65, 257), dtype), randn(rng, (257, 17), dtype)
    out = np.full((65, 17), np.nan, dtype)
    got = cattn.matmul(a, b, out=out)
    assert got is out
    check_matmul(out, a, b)


@pytest.mark.parametrize("make_out", [
    lambda: np.empty((17, 65), np.float32).T,               # transposed view
    lambda: np.empty((130, 51), np.float32)[::2, ::3],      # strided view
    lambda: np.empty((65, 17), np.float32)[::-1],           # negative stride
    lambda: np.empty((65, 17), np.float32, order="F"),
], ids=["transposed", "strided", "negative", "fortran"])
def test_out_views(rng, make_out):
    a, b = randn(rng, (65, 257)), randn(rng, (257, 17))
    out = make_out()
    out[...] = np.nan
    assert cattn.matmul(a, b, out=out) is out
    check_matmul(out, a, b)


def test_out_batched_view(rng):
    a, b = randn(rng, (3, 17, 65)), randn(rng, (3, 65, 7))
    out = np.empty((7, 3, 17), np.float32).transpose(1, 2, 0)
    assert cattn.matmul(a, b, out=out) is out
    check_matmul(out, a, b)


def test_out_vec_vec(rng):
    a, b = randn(rng, (65,)), randn(rng, (65,))
    out = np.empty((), np.float32)
    assert cattn.matmul(a, b, out=out) is out
    check_matmul(out, a, b)


# ---- dtypes ----

@pytest.mark.parametrize("da,db", [(np.float32, np.float64), (np.float64, np.float32)])
def test_mixed_dtypes_give_float64(rng, da, db):
    a, b = randn(rng, (17, 257), da), randn(rng, (257, 65), db)
    got = cattn.matmul(a, b)
    assert got.dtype == np.float64
    check_matmul(got, a, b)   # float64 tolerance: the float32 operand converts exactly


def test_result_is_not_a_float32_gemm_in_disguise(rng):
    """float64 inputs need float64 accuracy; 1 + 1e-10 survives."""
    a = np.array([[1.0, 1e-10]])
    b = np.array([[1.0], [1.0]])
    assert cattn.matmul(a, b)[0, 0] == 1.0 + 1e-10


# ---- block edges of both kernel paths (test_kernel_paths.py re-runs this module
# on every other path: the former portable-path subprocess check, in process) ----

def test_block_edges_matmul_and_linear():
    rng = np.random.default_rng(0)
    for dt in (np.float32, np.float64):
        for M, N, K in [(1, 1, 1), (7, 17, 65), (145, 33, 257), (63, 4097 if dt == np.float32 else 2041, 5)]:
            a = rng.standard_normal((M, K)).astype(dt); b = rng.standard_normal((K, N)).astype(dt)
            check_matmul(cattn.matmul(a, b), a, b)
            check_matmul(cattn.matmul(b.T, a.T), b.T, a.T)
        a = rng.standard_normal((3, 17, 65)).astype(dt); b = rng.standard_normal((3, 65, 9)).astype(dt)
        check_matmul(cattn.matmul(a, b), a, b)
        x = rng.standard_normal((2, 7, 65)).astype(dt); w = rng.standard_normal((33, 65)).astype(dt)
        bias = rng.standard_normal(33).astype(dt)
        check_linear(cattn.linear(x, w, bias, activation="gelu"), x, w, bias, "gelu")


# ---- bad input ----

@pytest.mark.parametrize("bad,name", [
    (np.ones((3, 3), np.int32), "int32"),
    (np.ones((3, 3), np.complex128), "complex128"),
    (np.ones((3, 3), bool), "bool"),
    (np.array([[1.0, 2.0]], dtype=object), "object"),
    (np.ones((3, 3), np.float16), "float16"),
])
def test_bad_dtype(bad, name):
    good = np.ones((3, 3), np.float32)
    with pytest.raises(TypeError, match=f"dtype {name}"):
        cattn.matmul(bad, good)
    with pytest.raises(TypeError, match=f"dtype {name}"):
        cattn.matmul(good, bad)


def test_ragged_list():
    with pytest.raises(TypeError, match="could not be converted"):
        cattn.matmul([[1.0, 2.0], [3.0]], np.ones((2, 2)))


@pytest.mark.parametrize("sa,sb,msg", [
    ((), (3,), r"at least 1 dimension.*\(\)"),
    ((3, 3), (), r"at least 1 dimension.*\(\)"),
    ((3, 4), (5, 6), r"\(3, 4\).*\(5, 6\)"),
    ((4,), (5,), r"\(4,\).*\(5,\)"),
    ((2, 3, 4), (3, 4, 5), r"\(2, 3, 4\) and \(3, 4, 5\) do not broadcast"),
])
def test_bad_shapes(sa, sb, msg):
    with pytest.raises(ValueError, match=msg):
        cattn.matmul(np.ones(sa, np.float32), np.ones(sb, np.float32))


def test_bad_out():
    a, b = np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)
    with pytest.raises(ValueError, match=r"out has shape \(5, 4\), expected \(4, 5\)"):
        cattn.matmul(a, b, out=np.empty((5, 4), np.float32))
    with pytest.raises(TypeError, match="out has dtype float64, expected float32"):
        cattn.matmul(a, b, out=np.empty((4, 5), np.float64))
    ro = np.empty((4, 5), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cattn.matmul(a, b, out=ro)
    with pytest.raises(TypeError, match="out must be a numpy.ndarray, got list"):
        cattn.matmul(a, b, out=[[0.0] * 5] * 4)
    sq = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="overlaps an input"):
        cattn.matmul(sq, sq.copy(), out=sq)
    with pytest.raises(ValueError, match="overlaps an input"):
        cattn.matmul(sq[:, :3].copy(), sq[:3], out=sq[::-1])
    buf = np.zeros(4 * 5 * 4 + 1, np.uint8)
    unaligned = np.ndarray((4, 5), np.float32, buffer=buf, offset=1)
    with pytest.raises(ValueError, match="aligned"):
        cattn.matmul(a, b, out=unaligned)


def test_reference_matches_numpy_semantics(rng):
    """guard for the oracle itself on one broadcast case"""
    a, b = randn(rng, (2, 1, 3, 4)), randn(rng, (5, 4, 2))
    np.testing.assert_allclose(reference.matmul(a, b), np.matmul(a, b), rtol=1e-5, atol=1e-5)


# ---- non-finite values stay where they belong ----

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mnk", [(7, 17, 5), (145, 33, 257), (13, 4097, 3)], ids=ids)
def test_nan_and_inf_only_where_they_belong(rng, dtype, mnk):
    """A NaN in a[i, p] poisons row i only; inf in b[p, j] gives +-inf or NaN
    (inf * 0) in column j only; zero padding of edge tiles adds nothing."""
    M, N, K = mnk
    a, b = randn(rng, (M, K), dtype), randn(rng, (K, N), dtype)
    a[M - 1, K // 2] = np.nan
    b[K - 1, N - 1] = np.inf
    a[0, K - 1] = 0.0                       # 0 * inf = NaN at (0, N-1)
    got = cattn.matmul(a, b)
    with np.errstate(invalid="ignore"):
        ref = reference.matmul(a, b)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    assert np.isfinite(ref).sum() == (M - 1) * (N - 1)   # last row NaN, last column inf/NaN
    check_matmul(got[:-1, :-1], a[:-1], b[:, :-1])


def test_out_with_zero_stride_rejected(rng):
    """threads would race on an out whose elements alias each other"""
    a, b = randn(rng, (4, 3)), randn(rng, (3, 5))
    out = np.lib.stride_tricks.as_strided(np.zeros(5, np.float32), (4, 5), (0, 4))
    with pytest.raises(ValueError, match="overlapping elements"):
        cattn.matmul(a, b, out=out)
