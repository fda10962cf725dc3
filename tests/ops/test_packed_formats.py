"""cattn.pack_weight(w, "bfloat16" | "int8"): the two reduced formats.

What each format promises (cattn/ops/packed.py, csrc/cattn.h) and how it is
checked here, always against references written independently in this file:

- bfloat16 rounding: a bit-level reference built from frexp/rint in float64
  (not the integer add trick cattn uses), and torch's own conversion where
  torch is installed. Exact.
- bfloat16 linear: the float32 linear on the rounded weight, bit for bit.
- int8: row quantization (q, za, sa) equals cattn.h's formula computed in
  float64 NumPy, exactly; the kernel's int32 sums equal an int64 NumPy matmul
  of the same quantized values, exactly; the end-to-end result equals the
  documented dequantization done op by op in float32 NumPy, exactly (no
  activation; an activation is compared within its own evaluation error).
- accuracy against float64, with bounds from the quantization steps;
  determinism over thread counts and (int8) kernel paths; the PackedWeight
  API and its errors.

Legend: M rows of x, N outputs (out_features), K inputs (in_features).
Blocks the shapes avoid being multiples of: int8 tiles of 5 rows x 16
columns, tasks of 40 rows x 64 columns (csrc/config.h); float32 panels of
16 columns, KC = 256.
"""
import io
import math
import pickle

import numpy as np
import pytest

import cattn
from cattn import _ext, reference
from cattn.ops import formats as packed_mod
from cattn_testing.gemm import check_linear
from cattn_testing.numerics import assert_within, eps, randn, threads_bitwise
from cattn_testing.paths import PATHS, run_python

F32, F64, U16, U32 = np.float32, np.float64, np.uint16, np.uint32
ACTS = [None, "relu", "gelu", "gelu_tanh", "silu"]
ROWS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 40, 301]
# exactness limit of the qgemm_i32 hook (it returns the accumulators through float)
HOOK_EXACT = 2 ** 24
# the largest K for which an all-+-127 weight row keeps 255 * sum|qw| < 2^31
K_INT32_MAX = (2 ** 31 - 1) // (255 * 127)          # 66311


def _bits(x):
    return np.ascontiguousarray(x, F32).view(U32)


def _f32(bits):
    return np.asarray(bits, U32).view(F32)


# ---------------------------------------------------------------- references

def bf16_reference(x):
    """(bits uint16, nan mask) of float32 x rounded to bfloat16, computed by
    value: |x| = m 2^e (frexp, m in [0.5, 1)); bfloat16 keeps 8 significant
    bits, so its spacing at |x| is 2^(e-8), never below the subnormal spacing
    2^-133 (bfloat16 shares float32's exponent range). rint of |x| / spacing
    (exact in float64) rounds to nearest with ties to even; a result >= 2^128
    is inf. NaN entries: the mask (their bits are checked separately)."""
    x = np.asarray(x, F32)
    with np.errstate(invalid="ignore"):                  # casting signalling NaNs
        x64 = x.astype(F64)
    a = np.abs(x64)
    nan = np.isnan(a)
    a = np.where(nan, 0.0, a)
    _, e = np.frexp(a)
    sexp = np.maximum(e - 8, -133)
    r = np.ldexp(np.rint(np.ldexp(a, -sexp)), sexp)
    r = np.where(r >= 2.0 ** 128, np.inf, r)
    r32 = np.copysign(r, x64).astype(F32)     # exact: a bfloat16 value (or inf)
    u = r32.view(U32)
    assert not (u & 0xFFFF).any()                        # the reference's own check
    return (u >> 16).astype(U16), nan


def assert_bf16_bits(got, x, what):
    """got (uint16 bits) is x rounded to bfloat16: equal bits at non-NaN
    entries; NaN entries stay NaN (exponent all ones, mantissa != 0) with
    the sign of x."""
    want, nan = bf16_reference(x)
    got = np.asarray(got, U16)
    bad = (got != want) & ~nan
    if bad.any():
        i = np.argwhere(bad)[0]
        raise AssertionError(f"{what}: {int(bad.sum())} values differ; first x bits "
                             f"{int(_bits(x)[tuple(i)]):#010x}: got {int(got[tuple(i)]):#06x}, "
                             f"want {int(want[tuple(i)]):#06x}")
    g = got[nan]
    assert ((g & 0x7F80) == 0x7F80).all() and ((g & 0x7F) != 0).all(), f"{what}: NaN lost"
    assert ((g >> 15) == (_bits(x)[nan] >> 31)).all(), f"{what}: NaN sign lost"


def quantize_rows_reference(X):
    """cattn.h (cattn_quantize_rows) in float64 NumPy, row by row:
    lo = min(0, min x), hi = max(0, max x), d = hi - lo, inv = 255 / d,
    za = clamp(rint(-lo inv), 0, 255), q = clamp(rint(x *f float32(inv)) + za, 0, 255)
    (x *f: the float32 product, rounded once; a row so tiny that float32(inv)
    would overflow, inv > 2^126, is first multiplied by 2^64, exactly),
    sa = float32(d / 255); d = 0: q = za = sa = 0; NaN or +-inf in the row:
    q = za = 0, sa = NaN, bad."""
    X = np.asarray(X, F32)
    M, K = X.shape
    q = np.zeros((M, K), np.uint8)
    sa = np.zeros(M, F32)
    za = np.zeros(M, np.int32)
    bad = np.zeros(M, bool)
    for i in range(M):
        x = X[i].astype(F64)
        if not np.isfinite(x).all():
            bad[i], sa[i] = True, np.nan
            continue
        lo, hi = min(0.0, x.min(initial=0.0)), max(0.0, x.max(initial=0.0))
        d = hi - lo
        if d == 0.0:
            continue
        inv = 255.0 / d
        z = min(max(np.rint(-lo * inv), 0.0), 255.0)
        pre = F32(2.0 ** 64) if inv > 2.0 ** 126 else F32(1)   # (float)inv would overflow
        p = (X[i] * pre) * F32(inv / float(pre))       # float32 products, rounded once each
        assert p.dtype == F32 and np.isfinite(p).all()
        q[i] = np.clip(np.rint(p.astype(F64)) + z, 0, 255).astype(np.uint8)
        za[i], sa[i] = int(z), F32(d / 255.0)
    return q, sa, za, bad


def quantize_weight_reference(w):
    """(qw int64 (N, K), sw float32 (N,)): sw = float32(max |w| / 127) in
    float64, qw = rint(w / sw) in [-127, 127]; sw = 0 gives qw = 0."""
    w64 = np.asarray(w, F32).astype(F64)
    N, K = w64.shape
    qw = np.zeros((N, K), np.int64)
    sw = np.zeros(N, F32)
    for j in range(N):
        m = float(np.abs(w64[j]).max()) if K else 0.0
        sw[j] = F32(m / 127.0)
        if sw[j] > 0:
            qw[j] = np.clip(np.rint(w64[j] / float(sw[j])), -127, 127).astype(np.int64)
    return qw, sw


def int8_formula(x, w, bias=None):
    """The documented int8 result without activation, each op in float32:
    y = ((float32)(acc - za colsum) * sa) * sw (+ bias), with acc and colsum
    exact integers (int64 here). NaN rows: NaN everywhere."""
    X = np.asarray(x, F32).reshape(-1, np.shape(x)[-1])
    qw, sw = quantize_weight_reference(w)
    q, sa, za, bad = quantize_rows_reference(X)
    t = q.astype(np.int64) @ qw.T - za.astype(np.int64)[:, None] * qw.sum(axis=1)[None, :]
    assert np.abs(t).max(initial=0) < 2 ** 31
    with np.errstate(invalid="ignore", over="ignore"):
        y = (t.astype(F32) * sa[:, None]) * sw[None, :]
        if bias is not None:
            y = y + np.asarray(bias, F32)
    y[bad] = np.nan
    return y.reshape(np.shape(x)[:-1] + (len(sw),))


def _data(rng, M, N, K, scale_w=1.0):
    x = randn(rng, (M, K))
    w = randn(rng, (N, K)) * F32(scale_w)
    return x, w, randn(rng, (N,))


# ------------------------------------------------------- bfloat16 rounding

def _special_f32():
    """float32 bit patterns at every corner of the rounding."""
    hi = [0x3F80, 0x3F81, 0x4049, 0x404A, 0x0001, 0x0002, 0x007F, 0x0080, 0x7F7E, 0x7F7F,
          0x3F7F, 0x3FFF, 0x0000]
    pats = []
    for h in hi:
        for low in (0x0000, 0x0001, 0x7FFF, 0x8000, 0x8001, 0xFFFF):
            pats.append((h << 16) | low)              # below / at / above the tie,
    pats += [0x7F7FFFFF,            # max float -> inf                even and odd lsb
             0x7F7F7FFF,            # just below the tie under max -> bf16 max
             0x7F7F8000,            # the tie between bf16 max (odd) and 2^128 -> inf
             0x7F800000,            # inf
             0x00000001, 0x00008000, 0x00018000, 0x007FFFFF, 0x007F8000,   # subnormals
             0x3F7F8000,            # a tie that rounds up into the next binade (1.0)
             0x3F7FFFFF,            # rounds up into the next binade
             0x7FC00000, 0x7F800001, 0x7F808000, 0x7FFFFFFF, 0x7F80FFFF]   # NaNs
    pats = np.array(pats, U32)
    return _f32(np.concatenate([pats, pats | np.uint32(0x80000000)]))    # and negated


def test_bf16_reference_self_check():
    """The reference itself on hand-computed cases (so a wrong reference
    cannot agree with a wrong cattn)."""
    cases = {0x3F808000: 0x3F80,    # tie, even lsb: down
             0x3F818000: 0x3F82,    # tie, odd lsb: up
             0x3F808001: 0x3F81,    # above the tie: up
             0x3F807FFF: 0x3F80,    # below the tie: down
             0x3F7F8000: 0x3F80,    # tie, odd lsb: up into the next binade
             0x7F7FFFFF: 0x7F80,    # max float: inf
             0xFF7FFFFF: 0xFF80,    # -max float: -inf
             0x7F7F7FFF: 0x7F7F,    # stays bf16 max
             0x80000000: 0x8000,    # -0.0
             0x00018000: 0x0002,    # subnormal tie, odd: up
             0x00008000: 0x0000,    # subnormal tie, even: down
             0x007FFFFF: 0x0080,    # largest subnormal: the smallest normal
             0xFF800000: 0xFF80}
    x = _f32(np.array(list(cases), U32))
    got, nan = bf16_reference(x)
    assert not nan.any()
    assert [int(v) for v in got] == list(cases.values())


def _round_trip_bits(x):
    """the bfloat16 bits cattn stores for x, through pack_weight and unpack"""
    u = cattn.pack_weight(x.reshape(1, -1), "bfloat16").unpack().reshape(-1).view(U32)
    assert not (u & 0xFFFF).any(), "unpack gives values that are not bfloat16"
    return (u >> 16).astype(U16)


def test_bf16_rounding_special_values():
    x = _special_f32()
    assert_bf16_bits(packed_mod.round_bfloat16(x), x, "round_bfloat16")
    assert_bf16_bits(_round_trip_bits(x), x, "pack_weight(bfloat16).unpack()")
    # spelled out: the corners the issue names
    r = packed_mod.round_bfloat16(np.array([np.finfo(F32).max, -np.finfo(F32).max, np.inf,
                                            -np.inf, -0.0, np.nan, -np.nan], F32))
    assert [int(v) for v in r[:5]] == [0x7F80, 0xFF80, 0x7F80, 0xFF80, 0x8000]
    assert np.isnan(_f32(r[5:].astype(U32) << 16)).all() and r[5] >> 15 == 0 and r[6] >> 15 == 1


def test_bf16_rounding_random_bit_patterns(rng):
    """every kind of float32 (random bits: NaN, inf, subnormal, normal of
    every exponent), plus float32 values whose low 16 bits are exact ties"""
    u = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(U32)
    ties = (u & np.uint32(0xFFFF0000)) | np.uint32(0x8000)
    x = _f32(np.concatenate([u, ties]))
    assert_bf16_bits(packed_mod.round_bfloat16(x), x, "round_bfloat16")
    assert_bf16_bits(_round_trip_bits(x[:20_000]), x[:20_000], "pack_weight(bfloat16).unpack()")


def test_bf16_rounding_matches_torch():
    torch = pytest.importorskip("torch", reason="torch is not installed: the torch "
                                                "comparison needs it")
    x = np.concatenate([_special_f32(), _f32(np.random.default_rng(5).integers(
        0, 2 ** 32, 100_000, dtype=np.uint64).astype(U32))])
    t = torch.from_numpy(x.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(U16)
    got = packed_mod.round_bfloat16(x)
    nan = np.isnan(x)
    # torch writes every NaN as 0xFFFF (sign not kept): compare NaN-ness there
    np.testing.assert_array_equal(got[~nan], t[~nan])
    assert np.isnan(_f32(t[nan].astype(U32) << 16)).all()
    assert np.isnan(_f32(got[nan].astype(U32) << 16)).all()


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_bf16_round_of_float64_weight():
    """a float64 weight is rounded to float32 first, then to bfloat16, as
    torch's float64 -> bfloat16 conversion does: 1 + 2^-8 + 2^-30 becomes
    1 + 2^-8 in float32, a tie, so 1.0 (rounded once it would be 1 + 2^-7);
    values past float32's range become inf"""
    w = np.array([[1.0 + 2.0 ** -8 + 2.0 ** -30, 1e39, -1e39, 2.0 ** -140]], F64)
    with np.errstate(over="ignore"):
        w32 = w.astype(F32)
    got = cattn.pack_weight(w, "bfloat16").unpack()
    assert_bf16_bits(_bits(got) >> 16, w32, "float64 weight")
    assert got[0, 0] == 1.0 and got[0, 1] == np.inf and got[0, 2] == -np.inf


def test_bf16_round_of_float64_weight_matches_torch():
    torch = pytest.importorskip("torch", reason="torch is not installed: the torch "
                                                "comparison needs it")
    w = np.random.default_rng(3).standard_normal((7, 300)) * 10.0 ** np.arange(-20, 10, 0.1)
    w[0, :4] = [1.0 + 2.0 ** -8 + 2.0 ** -30, 1.0 + 2.0 ** -8 - 2.0 ** -30, -1.0 - 2.0 ** -8, 0.0]
    t = torch.from_numpy(w).to(torch.bfloat16).to(torch.float32).numpy()
    np.testing.assert_array_equal(cattn.pack_weight(w, "bfloat16").unpack(), t)


# ------------------------------------------------------- bfloat16 linear

def _w_rounded(w):
    """the bfloat16 values of w as float32, from the independent reference"""
    bits, nan = bf16_reference(w)
    assert not nan.any()
    return _f32(bits.astype(U32) << 16)


@pytest.mark.parametrize("M", ROWS)
def test_bf16_linear_same_bits_as_float32_on_rounded_weight(rng, M):
    N, K = 203, 600                     # ragged panels; K spans 3 KC blocks of 256
    x, w, b = _data(rng, M, N, K, 1 / np.sqrt(600))
    p = cattn.pack_weight(w, "bfloat16")
    wr = _w_rounded(w)
    np.testing.assert_array_equal(p.unpack(), wr)
    for act in ACTS:
        for bias in (None, b):
            got = cattn.linear(x, p, bias, activation=act)
            assert got.dtype == F32 and got.shape == (M, N)
            want = cattn.linear(x, wr, bias, activation=act)
            np.testing.assert_array_equal(got, want, err_msg=f"M={M} act={act}")
    if M:
        check_linear(cattn.linear(x, p, b, activation="gelu"), x, wr, b, "gelu")


@pytest.mark.parametrize("N,K", [(1, 1), (5, 7), (15, 255), (16, 256), (17, 257), (33, 513),
                                 (70, 1000), (300, 3), (4113, 40), (4100, 300)])
def test_bf16_linear_shapes(rng, N, K):
    """ragged panels, K blocks, few-row chunks of 192 columns and (N > 4096)
    several column blocks of the blocked path"""
    x, w, b = _data(rng, 60, N, K, 2 / np.sqrt(K))
    p, wr = cattn.pack_weight(w, "bfloat16"), _w_rounded(w)
    for M in (1, 2, 3, 5, 12, 13, 60):
        for act in (None, "silu"):
            np.testing.assert_array_equal(cattn.linear(x[:M], p, b, activation=act),
                                          cattn.linear(x[:M], wr, b, activation=act))


def test_bf16_linear_strided_x_out_and_batch_invariance(rng):
    N, K = 77, 300
    w, b = randn(rng, (N, K)), randn(rng, (N,))
    p, wr = cattn.pack_weight(w, "bfloat16"), _w_rounded(w)
    xs = randn(rng, (3, 7, 2 * K))[..., ::2]                   # strided, 3-D
    want = cattn.linear(np.ascontiguousarray(xs), wr, b)
    np.testing.assert_array_equal(cattn.linear(xs, p, b), want)
    xt = randn(rng, (K, 9)).T                                  # transposed
    np.testing.assert_array_equal(cattn.linear(xt, p), cattn.linear(np.ascontiguousarray(xt), wr))
    out = np.empty((3, 7, N), F32)
    assert cattn.linear(xs, p, b, out=out) is out
    np.testing.assert_array_equal(out, want)
    big = np.zeros((3, 7, 2 * N), F32)                         # a strided out=
    cattn.linear(xs, p, b, out=big[..., 1::2])
    np.testing.assert_array_equal(big[..., 1::2], want)
    assert (big[..., ::2] == 0).all()
    x = randn(rng, (301, K))                                   # a row alone / in a batch
    full = cattn.linear(x, p, b, activation="gelu")
    for i in (0, 4, 5, 150, 299, 300):
        np.testing.assert_array_equal(cattn.linear(x[i], p, b, activation="gelu"), full[i])
        np.testing.assert_array_equal(cattn.linear(x[i:i + 3], p, b, activation="gelu"),
                                      full[i:i + 3])


def test_bf16_linear_nonfinite_weight(rng):
    """NaN and inf weights are kept (bfloat16 has them): the float32 linear's
    bits on them, NaN and inf columns included"""
    w = randn(rng, (40, 70))
    w[3, 2], w[5, 1], w[6, 0] = np.nan, np.inf, 3.4e38        # 3.4e38 rounds to inf
    p = cattn.pack_weight(w, "bfloat16")
    wr = p.unpack()
    assert np.isnan(wr[3, 2]) and np.isposinf(wr[5, 1]) and np.isposinf(wr[6, 0])
    for M in (1, 3, 7, 13, 40):
        x = np.abs(randn(rng, (M, 70)))
        got = cattn.linear(x, p)
        assert got.tobytes() == cattn.linear(x, wr).tobytes()
        assert np.isnan(got[:, 3]).all() and np.isposinf(got[:, 5]).all()


def test_bf16_linear_empty_dims(rng):
    b = randn(rng, (3,))
    k0 = cattn.pack_weight(np.zeros((3, 0), F32), "bfloat16")
    np.testing.assert_array_equal(cattn.linear(np.zeros((2, 0), F32), k0, b), np.tile(b, (2, 1)))
    assert cattn.linear(np.zeros((0, 4), F32), cattn.pack_weight(randn(rng, (5, 4)),
                                                                 "bfloat16")).shape == (0, 5)
    n0 = cattn.pack_weight(np.zeros((0, 4), F32), "bfloat16")
    assert cattn.linear(randn(rng, (2, 4)), n0).shape == (2, 0)


# ------------------------------------------------------- int8: the integers

def _unpanel(p):
    return packed_mod.int8_unpanel(p.kernel_entry()[1], *p.shape).astype(np.int64)


def _qgemm_check(qa, p):
    """the hook's int32 sums == int64 NumPy matmul of the same integers"""
    qw = _unpanel(p)
    want = qa.astype(np.int64) @ qw.T
    assert np.abs(want).max(initial=0) <= HOOK_EXACT, "test data past the hook's exactness"
    got = _ext.qgemm_i32(np.ascontiguousarray(qa, np.uint8), p._data, p.shape[0])
    assert got.dtype == np.int32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("N,K", [(1, 1), (16, 2), (17, 3), (15, 31), (33, 64), (70, 257),
                                 (130, 517)])
def test_int8_weight_quantization_and_panels(rng, N, K):
    w = randn(rng, (N, K)) * F32(3)
    w[0, :] = 0.0                                             # an all-zero row: qw = 0, sw = 0
    if N > 2:
        w[1, :] = -np.abs(w[1, :])                           # the max |w| is negative
        w[2, min(1, K - 1)] = 1e30                           # one huge value
    p = cattn.pack_weight(w, "int8")
    qw, sw = quantize_weight_reference(w)
    np.testing.assert_array_equal(_unpanel(p), qw)
    np.testing.assert_array_equal(p.kernel_entry()[2][:N], sw)
    assert (p.kernel_entry()[2][N:] == 0).all() and (p.kernel_entry()[3][N:] == 0).all()
    np.testing.assert_array_equal(p.kernel_entry()[3][:N], qw.sum(axis=1))
    assert np.abs(qw).max(axis=1)[sw > 0].tolist() == [127] * int((sw > 0).sum())
    np.testing.assert_array_equal(p.unpack(), qw.astype(F32) * sw[:, None])
    q2, s2 = packed_mod.quantize_int8(w)                      # the public helper agrees
    np.testing.assert_array_equal(q2, qw)
    np.testing.assert_array_equal(s2, sw)
    # the panel layout of cattn.h: P[jp*k2*32 + p*32 + 2j + t] = qw[16 jp + j, 2p + t]
    k2, data = -(-K // 2), p._data
    for (j, k) in [(0, 0), (N - 1, K - 1), (N // 2, K // 2), (min(N - 1, 16), K - 1)]:
        assert data[(j // 16) * k2 * 32 + (k // 2) * 32 + 2 * (j % 16) + k % 2] == qw[j, k]
    assert data.size == -(-N // 16) * 16 * 2 * k2


@pytest.mark.parametrize("M", [1, 2, 3, 4, 5, 6, 9, 10, 11, 13, 40, 41, 301])
@pytest.mark.parametrize("N,K", [(1, 1), (17, 3), (16, 8), (63, 33), (130, 257)])
def test_int8_int32_sums_exact(rng, M, N, K):
    qa = rng.integers(0, 256, (M, K), dtype=np.uint8)
    p = cattn.pack_weight(randn(rng, (N, K)), "int8")
    _qgemm_check(qa, p)


@pytest.mark.parametrize("K", [1, 2, 517, 518])
def test_int8_int32_sums_extreme(rng, K):
    """all activations 255 against weights all +127, all -127, alternating:
    |acc| up to 255 * 127 * 518 = 16,774,830 (< 2^24, the hook's limit)"""
    w = np.ones((35, K), F32)
    w[1] = -1.0
    w[2, ::2] = -1.0
    w[3:] = np.where(rng.random((32, K)) < 0.5, -1.0, 1.0)
    p = cattn.pack_weight(w, "int8")
    assert np.abs(_unpanel(p)).min() == 127
    for qa in (np.full((7, K), 255, np.uint8), np.zeros((7, K), np.uint8),
               rng.choice(np.array([0, 255], np.uint8), (11, K))):
        _qgemm_check(qa, p)
    assert _ext.qgemm_i32(np.full((1, K), 255, np.uint8), p._data, 35)[0, 0] == 255 * 127 * K


def test_int8_int32_sums_empty_k():
    p = cattn.pack_weight(np.zeros((5, 0), F32), "int8")
    np.testing.assert_array_equal(_ext.qgemm_i32(np.zeros((3, 0), np.uint8), p._data, 5),
                                  np.zeros((3, 5), np.int32))


# ------------------------------------------------------- int8: row quantization

def _rows_check(X):
    X = np.ascontiguousarray(X, F32)
    got = _ext.quantize_rows(X)
    want = quantize_rows_reference(X)
    for name, g, w in zip(("q", "sa", "za", "bad"), got, want):
        assert g.dtype == w.dtype, (name, g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w, err_msg=f"quantize_rows: {name}")
    return got


def _odd_rows(K, rng):
    """rows of every kind the formula distinguishes, K elements each"""
    tiny = np.finfo(F32).smallest_subnormal
    big = np.finfo(F32).max
    r = [randn(rng, (K,)), np.zeros(K), np.full(K, -0.0),
         -np.abs(randn(rng, (K,))) - 0.1, np.abs(randn(rng, (K,))) + 0.1,   # one-signed
         np.full(K, 3.0), np.full(K, -3.0),
         randn(rng, (K,)) * 1e-38, randn(rng, (K,)) * 1e-42,               # tiny, subnormal
         np.full(K, tiny), np.full(K, -tiny),
         np.full(K, big), np.full(K, -big), randn(rng, (K,)) * 1e30]
    one_huge = randn(rng, (K,)) * 1e-3
    one_huge[K // 2] = 1e30
    r.append(one_huge)
    mm = randn(rng, (K,))
    mm[0], mm[-1] = big, -big                                 # range 2 * max float
    r.append(mm)
    ties = np.zeros(K)                                        # x * inv exactly at .5
    ties[0] = 2.0
    ties[1::2] = 1.0                                          # 127.5: ties to even
    r.append(ties)
    sym = np.zeros(K)                                         # za = rint(127.5) = 128 and
    sym[0], sym[-1] = -1.0, 1.0                               # 1 -> 127.5 + 128 -> clamp 255
    r.append(sym)
    for pos in {0, K // 2, K - 1}:
        for v in (np.nan, np.inf, -np.inf):
            t = randn(rng, (K,))
            t[pos] = v
            r.append(t)
    return np.array(r, F32)


@pytest.mark.parametrize("K", [1, 2, 3, 7, 8, 9, 15, 16, 17, 33, 100, 257])
def test_int8_row_quantization_exact(rng, K):
    with np.errstate(over="ignore"):
        X = _odd_rows(K, rng)
    q, sa, za, bad = _rows_check(X)
    assert bad.sum() == (~np.isfinite(X)).any(axis=1).sum() > 0
    assert np.isnan(sa[bad]).all() and (q[bad] == 0).all() and (za[bad] == 0).all()
    assert (q[1:3] == 0).all() and (sa[1:3] == 0).all() and (za[1:3] == 0).all()   # zeros
    assert (za[3] == 255) and (za[4] == 0)                     # one-signed rows
    if K > 1:
        assert q[3].min() == 0 and q[4].max() == 255           # they use the full range
    for i in (7, 8, 9, 10):                   # tiny and subnormal rows use the full range too
        assert q[i].max() == 255 or q[i].min() == 0, (i, q[i], za[i])   # (sa may underflow)
    _rows_check(randn(rng, (50, K)) * F32(10))
    _rows_check(np.zeros((0, K), F32))


def test_int8_row_quantization_hand_cases():
    """rows small enough to check by hand (not only against the reference)"""
    X = np.array([[0.0, 2.0, 1.0, 0.5],          # inv 127.5: 0, 255, 127.5 -> 128, 63.75 -> 64
                  [-1.0, 1.0, 0.0, 0.0],         # inv 127.5: za 128; 1 -> 128 + 128 -> 255
                  [-2.0, -1.0, -0.5, 0.0],       # za 255; -1 -> -127.5 -> -128
                  [0.0, 0.0, 0.0, 0.0]], F32)
    q, sa, za, bad = _rows_check(X)
    assert q.tolist() == [[0, 255, 128, 64], [0, 255, 128, 128], [0, 127, 191, 255],
                          [0, 0, 0, 0]]                 # -127.5 -> -128 (even) + 255 = 127
    assert za.tolist() == [0, 128, 255, 0] and not bad.any()
    assert sa.tolist() == [F32(2 / 255), F32(2 / 255), F32(2 / 255), 0.0]


# ------------------------------------------------------- int8: end to end

INT8_SHAPES = [(1, 1, 1), (1, 17, 2), (2, 16, 3), (3, 15, 31), (4, 64, 64), (5, 65, 100),
               (6, 63, 257), (7, 1, 300), (11, 130, 513), (39, 33, 7), (40, 64, 16),
               (41, 65, 17), (81, 129, 129), (301, 203, 600)]


@pytest.mark.parametrize("M,N,K", INT8_SHAPES)
def test_int8_linear_equals_documented_formula(rng, M, N, K):
    x, w, b = _data(rng, M, N, K, 1 / np.sqrt(K))
    p = cattn.pack_weight(w, "int8")
    for bias in (None, b):
        got = cattn.linear(x, p, bias)
        assert got.dtype == F32 and got.shape == (M, N)
        np.testing.assert_array_equal(got, int8_formula(x, w, bias))


@pytest.mark.parametrize("M,N,K", [(159, 37, 203), (160, 37, 203), (161, 37, 203),
                                   (321, 37, 203), (487, 37, 203), (321, 530, 100)])
def test_int8_linear_row_block_tasks(rng, M, N, K):
    # from 4 row blocks of 40 per thread on, each task quantizes its own
    # rows (csrc/qgemm.c, by_rows) and sweeps its columns ~96 KiB of weight
    # at a time (K = 100: 256, 256, then 18 columns): the formula's bits, for
    # any thread count, strided x and out=, and each row alone (few rows:
    # the other task order)
    x, w, b = _data(rng, M, N, K, 1 / np.sqrt(K))
    xs = np.asfortranarray(x)
    p = cattn.pack_weight(w, "int8")
    got = threads_bitwise(cattn.linear, x, p, b)
    np.testing.assert_array_equal(got, int8_formula(x, w, b))
    np.testing.assert_array_equal(threads_bitwise(cattn.linear, xs, p, b), got)
    big = np.zeros((M, 2 * N), F32)
    cattn.linear(x, p, b, out=big[:, ::2])                     # columns 8 bytes apart
    np.testing.assert_array_equal(big[:, ::2], got)
    assert not big[:, 1::2].any()
    for i in (0, 39, 40, M - 1):
        np.testing.assert_array_equal(cattn.linear(x[i:i + 1], p, b), got[i:i + 1])
    g = threads_bitwise(cattn.linear, x, p, b, activation="gelu")
    np.testing.assert_array_equal(g[-3:], cattn.linear(x[-3:], p, b, activation="gelu"))


@pytest.mark.parametrize("activation", ACTS[1:])
@pytest.mark.parametrize("M,N,K", [(1, 17, 33), (7, 70, 257), (45, 130, 100)])
def test_int8_linear_activation(rng, M, N, K, activation):
    """z is the exact formula; the activation on it is within its own
    evaluation error: cattn's activation on z to 4 ulps (the epilogue runs
    on a row buffer, cattn.gelu on the whole array: vector / tail splits
    may differ), and the float64 activation within 8 eps |z| (the bound
    cattn_testing.gemm.check_linear uses for the evaluation)"""
    x, w, b = _data(rng, M, N, K, 3 / np.sqrt(K))
    p = cattn.pack_weight(w, "int8")
    z = int8_formula(x, w, b)
    got = cattn.linear(x, p, b, activation=activation)
    act = {"relu": cattn.relu, "gelu": cattn.gelu, "silu": cattn.silu,
           "gelu_tanh": lambda v: cattn.gelu(v, approximate="tanh")}[activation]
    ca = act(z)
    ulp = np.spacing(np.abs(ca)).astype(F64)
    assert_within(got, ca.astype(F64), 4 * ulp, f"int8 {activation} vs cattn.{activation}")
    ref = reference.ACTIVATIONS[activation](z)
    assert_within(got, ref, 8 * eps(F32) * np.abs(z) + np.spacing(np.abs(ref)),
                  f"int8 {activation} vs float64")


def test_int8_linear_empty_and_tiny_dims(rng):
    w, b = randn(rng, (5, 4)), randn(rng, (5,))
    p = cattn.pack_weight(w, "int8")
    assert cattn.linear(np.zeros((0, 4), F32), p, b).shape == (0, 5)
    assert cattn.linear(np.zeros((2, 0, 4), F32), p).shape == (2, 0, 5)
    k0 = cattn.pack_weight(np.zeros((3, 0), F32), "int8")      # K = 0: y = bias
    b3 = randn(rng, (3,))
    np.testing.assert_array_equal(cattn.linear(np.zeros((2, 0), F32), k0, b3), np.tile(b3, (2, 1)))
    np.testing.assert_array_equal(cattn.linear(np.zeros((2, 0), F32), k0), np.zeros((2, 3)))
    n0 = cattn.pack_weight(np.zeros((0, 4), F32), "int8")
    assert cattn.linear(randn(rng, (2, 4)), n0).shape == (2, 0)
    x1 = randn(rng, (4,))                                       # 1-D x: one row
    got = cattn.linear(x1, p, b)
    assert got.shape == (5,)
    np.testing.assert_array_equal(got, int8_formula(x1[None], w, b)[0])
    x1, w1 = randn(rng, (6, 1)), randn(rng, (4, 1))             # K = 1
    np.testing.assert_array_equal(cattn.linear(x1, cattn.pack_weight(w1, "int8"), b[:4]),
                                  int8_formula(x1, w1, b[:4]))


def test_int8_nonfinite_rows_are_nan_and_others_unaffected(rng):
    M, N, K = 23, 37, 45
    x, w, b = _data(rng, M, N, K)
    p = cattn.pack_weight(w, "int8")
    clean = cattn.linear(x, p, b)
    badrows = {0: (0, np.nan), 6: (44, np.inf), 7: (8, -np.inf), 22: (40, np.nan)}
    for i, (k, v) in badrows.items():
        x[i, k] = v
    for act in (None, "relu", "gelu"):
        got = cattn.linear(x, p, b, activation=act)
        rows = np.array(sorted(badrows))
        assert np.isnan(got[rows]).all(), act
        keep = np.setdiff1d(np.arange(M), rows)
        assert not np.isnan(got[keep]).any()
        np.testing.assert_array_equal(got[keep], cattn.linear(x[keep], p, b, activation=act))
        if act is None:
            np.testing.assert_array_equal(got[keep], clean[keep])
            np.testing.assert_array_equal(got, int8_formula(x, w, b))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_int8_weight_validation(rng):
    w = randn(rng, (4, 6))
    for v in (np.nan, np.inf, -np.inf):
        bad = w.copy()
        bad[2, 3] = v
        with pytest.raises(ValueError, match="NaN or inf"):
            cattn.pack_weight(bad, "int8")
    w64 = w.astype(F64)
    w64[1, 1] = 1e39                                            # finite, past float32
    with pytest.raises(ValueError, match="NaN or inf"):
        cattn.pack_weight(w64, "int8")


def test_int8_zero_weight_rows_give_bias(rng):
    w, b = randn(rng, (20, 33)), randn(rng, (20,))
    w[[0, 7, 19]] = 0.0
    p = cattn.pack_weight(w, "int8")
    x = randn(rng, (9, 33)) * F32(100)
    got = cattn.linear(x, p, b)
    np.testing.assert_array_equal(got[:, [0, 7, 19]], np.tile(b[[0, 7, 19]], (9, 1)))
    assert (cattn.linear(x, p)[:, [0, 7, 19]] == 0).all()
    np.testing.assert_array_equal(got, int8_formula(x, w, b))


def test_int8_extreme_rows(rng):
    """What happens to extreme rows (each equals the formula exactly):
    - all zero: sa = 0, so y = bias (exactly);
    - one huge value (1e30) among O(1) values: the step sa ~ 1e30 / 255
      swallows the others (they quantize to the zero point): y is the huge
      term alone, x[k] w[j, k] to the 8-bit accuracy;
    - a tiny row (1e-41, subnormal): sa itself is a subnormal float and
      loses bits; a row whose range is below ~255 * 2^-150 gets sa = 0 and
      gives y = bias;
    - a constant row: q = 255 (or 0 with za = 255) for every k."""
    N, K = 21, 50
    w, b = randn(rng, (N, K)), randn(rng, (N,))
    p = cattn.pack_weight(w, "int8")
    X = randn(rng, (6, K))
    X[0] = 0.0
    X[1] = randn(rng, (K,))
    X[1, 17] = 1e30
    X[2] = randn(rng, (K,)) * F32(1e-41)
    X[3] = randn(rng, (K,)) * F32(1e-45)                   # range ~ 1e-45: sa = 0
    X[4] = 2.5
    X[5] = -2.5
    got = cattn.linear(X, p, b)
    np.testing.assert_array_equal(got, int8_formula(X, w, b))
    np.testing.assert_array_equal(got[0], b)
    np.testing.assert_array_equal(got[3], b)
    qw, sw = quantize_weight_reference(w)
    huge = 1e30 * qw[:, 17] * sw.astype(F64)               # the huge term, quantized weight
    np.testing.assert_allclose(got[1] - b, huge, rtol=1e-6)         # b is lost next to 1e30
    # constant rows are represented exactly (255 steps of 2.5 / 255): only the
    # weight's rounding remains, |err| <= sum_k 2.5 sw / 2 (+ float32 roundings)
    err = np.abs(got[4:] - reference.linear(X[4:], w, b))
    assert (err <= 2.5 * K * sw / 2 + 1e-5 * 2.5 * K).all()


def test_int8_float64_weight_is_rounded_to_float32_first(rng):
    w = randn(rng, (9, 30), F64) / 3
    p = cattn.pack_weight(w, "int8")
    np.testing.assert_array_equal(_unpanel(p), quantize_weight_reference(w.astype(F32))[0])
    x = randn(rng, (4, 30))
    np.testing.assert_array_equal(cattn.linear(x, p), int8_formula(x, w.astype(F32)))


def test_int8_sums_at_the_int32_limit(rng):
    """K = 66311 with |qw| = 127 everywhere is the largest K whose sums are
    guaranteed exact (255 * 127 * K < 2^31): rows of +max, -max and mixed
    activations reach |acc - za colsum| = 2,147,481,735; one more column is
    refused when packing (and when loading the arrays)."""
    K = K_INT32_MAX
    assert 255 * 127 * K < 2 ** 31 <= 255 * 127 * (K + 1)
    w = np.ones((3, K), F32)
    w[1] = -1.0
    w[2, ::3] = -1.0
    p = cattn.pack_weight(w, "int8")
    x = np.ones((4, K), F32)
    x[1] = -1.0
    x[2] = rng.standard_normal(K)
    x[3, ::2] = -1.0
    got = cattn.linear(x, p)
    np.testing.assert_array_equal(got, int8_formula(x, w))
    assert abs(got[0, 0] - K) <= 1e-5 * K and abs(got[1, 0] + K) <= 1e-5 * K
    with pytest.raises(ValueError, match="too large for exact int32"):
        cattn.pack_weight(np.ones((2, K + 1), F32), "int8")
    d = p.to_arrays()
    d["data"] = np.full(packed_mod._ext.qpacked_size(1, K + 1), 127, np.int8)
    d["shape"], d["scale"] = np.array([1, K + 1]), np.ones(1, F32)
    with pytest.raises(ValueError, match="too large for exact int32"):
        cattn.PackedWeight.from_arrays(d)


def test_int8_strided_x_out_and_batch_invariance(rng):
    N, K = 77, 300
    w, b = randn(rng, (N, K)), randn(rng, (N,))
    p = cattn.pack_weight(w, "int8")
    xs = randn(rng, (3, 7, 2 * K))[..., ::2]
    want = int8_formula(np.ascontiguousarray(xs), w, b)
    np.testing.assert_array_equal(cattn.linear(xs, p, b), want)
    xt = randn(rng, (K, 9)).T
    np.testing.assert_array_equal(cattn.linear(xt, p), int8_formula(np.ascontiguousarray(xt), w))
    out = np.empty((3, 7, N), F32)
    assert cattn.linear(xs, p, b, out=out) is out
    np.testing.assert_array_equal(out, want)
    big = np.zeros((3, 7, 2 * N), F32)
    cattn.linear(xs, p, b, out=big[..., 1::2])
    np.testing.assert_array_equal(big[..., 1::2], want)
    assert (big[..., ::2] == 0).all()
    x = randn(rng, (301, K))
    full = cattn.linear(x, p, b, activation="gelu")
    for i in (0, 4, 5, 39, 40, 150, 300):
        np.testing.assert_array_equal(cattn.linear(x[i], p, b, activation="gelu"), full[i])
        np.testing.assert_array_equal(cattn.linear(x[i:i + 7], p, b, activation="gelu"),
                                      full[i:i + 7])


# ------------------------------------------------------- accuracy

def test_int8_accuracy_within_quantization_steps(rng):
    """int8 against the float64 linear on the unquantized data.

    Each x[i, k] is off by at most sa[i] / 2 (one rounding to the grid of
    step sa; the clamp at 0 / 255 can add one step, rarely), each w[j, k] by
    at most sw[j] / 2. Over K terms with random signs the errors add like a
    random walk:
        s^2 = sum_k (sa/2)^2 w^2 + (sw/2)^2 x^2 + (sa sw / 4)^2
    and, the roundings being ~uniform (variance step^2 / 12 = (step/2)^2 / 3),
    the error's standard deviation is about s / sqrt(3).
    - elementwise: |y - y64| <= 6 s (> 10 standard deviations) + the
      float32 epilogue's few roundings;
    - over all 6144 outputs: rms(y - y64) <= 1.3 rms(s) / sqrt(3) (the rms
      of 6144 samples is within a few % of sigma). Here that is ~1% of
      rms(y): a zero point off by one (a bias of one step per term) fails
      it, as checked at the end."""
    M, N, K = 64, 96, 768
    x, w, b = _data(rng, M, N, K, 1 / np.sqrt(K))
    p = cattn.pack_weight(w, "int8")
    got = cattn.linear(x, p, b).astype(F64)
    y64 = reference.linear(x, w, b)
    q, sa32, za, _ = quantize_rows_reference(x)
    qw, sw32 = quantize_weight_reference(w)
    sa, sw = sa32.astype(F64)[:, None], sw32.astype(F64)[None, :]
    x64, w64 = x.astype(F64), w.astype(F64)
    s = np.sqrt((sa / 2) ** 2 * (w64 ** 2).sum(axis=1)[None, :]
                + (sw / 2) ** 2 * (x64 ** 2).sum(axis=1)[:, None] + K * (sa * sw / 4) ** 2)
    mag = reference.linear(np.abs(x), np.abs(w), np.abs(b))
    assert_within(got, y64, 6 * s + 4 * eps(F32) * mag, "int8 vs float64")
    agg = 1.3 * np.sqrt(np.mean(s ** 2) / 3)
    rms_y = np.sqrt(np.mean(y64 ** 2))

    def rms_err(y):
        return np.sqrt(np.mean((y - y64) ** 2))

    assert rms_err(got) <= agg, (rms_err(got), agg)
    assert 1e-3 * rms_y < rms_err(got) and agg < 0.02 * rms_y      # quantized, and close
    t = q.astype(np.int64) @ qw.T - (za + 1).astype(np.int64)[:, None] * qw.sum(axis=1)
    wrong = (t.astype(F32) * sa32[:, None]) * sw32 + b               # zero point off by one
    assert rms_err(wrong) > agg, (rms_err(wrong), agg)


def test_bf16_accuracy(rng):
    """bfloat16 rounds each weight with relative error <= 2^-9 (8
    significant bits); random signs over K terms: sigma <= 2^-9 sqrt(sum_k
    (x w)^2) / sqrt(3). tol = 6 * 2^-9 * sqrt(sum (x w)^2) (> 10 sigma) plus
    the float32 GEMM's own bound (check_linear's)."""
    M, N, K = 50, 96, 1000
    x, w, b = _data(rng, M, N, K, 1 / np.sqrt(K))
    p = cattn.pack_weight(w, "bfloat16")
    got = cattn.linear(x, p, b)
    y64 = reference.linear(x, w, b)
    rms = np.sqrt((x.astype(F64) ** 2) @ (w.astype(F64) ** 2).T)
    mag = reference.linear(np.abs(x), np.abs(w), np.abs(b))
    tol = 6 * 2.0 ** -9 * rms + 5 * math.sqrt(K + 1) * eps(F32) * mag
    assert_within(got, y64, tol, "bfloat16 vs float64")
    rel = np.linalg.norm(got - y64) / np.linalg.norm(y64)
    assert 2.0 ** -14 < rel < 2.0 ** -8, rel
    # the unrounded weight would give a different (float32-accurate) result
    assert (cattn.linear(x, w, b) != got).mean() > 0.5


# ------------------------------------------------------- determinism

@pytest.mark.parametrize("fmt", ["int8", "bfloat16"])
@pytest.mark.parametrize("M", [1, 3, 8, 12, 13, 301])
def test_threads_bitwise(rng, fmt, M):
    N, K = 203, 600
    x, w, b = _data(rng, M, N, K, 1 / np.sqrt(K))
    p = cattn.pack_weight(w, fmt)
    x[M // 2, 3] = np.nan                      # a NaN row's bits too
    for act in (None, "gelu"):
        threads_bitwise(cattn.linear, x, p, b, activation=act)


_PATH_CODE = """
import hashlib, numpy as np, cattn
from cattn import _ext
rng = np.random.default_rng(7)
h = hashlib.sha256()
for M, N, K in [(1, 17, 3), (5, 16, 8), (13, 70, 257), (301, 130, 600)]:
    x = rng.standard_normal((M, K)).astype(np.float32)
    x[M // 2, K // 3] = np.nan
    x[M - 1, :] *= 1e-41
    w = rng.standard_normal((N, K)).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    p = cattn.pack_weight(w, "int8")
    for bias in (None, b):
        h.update(cattn.linear(x, p, bias).tobytes())
    for a in _ext.quantize_rows(x):
        h.update(np.ascontiguousarray(a).tobytes())
    qa = rng.integers(0, 256, (M, K), dtype=np.uint8)
    h.update(_ext.qgemm_i32(qa, p._data, N).tobytes())
print(cattn._ext.kernel_path(), h.hexdigest())
"""


def test_int8_same_bits_on_every_kernel_path():
    """int8 without activation (and the row quantization, and the sums) are
    exact integer work plus the same float32 ops in the same order: every
    kernel path the CPU runs gives the same bits (one fresh interpreter
    per path: the kernel table is chosen at import)."""
    paths = [name for name, kp in PATHS.items() if kp.available() and kp.force_env]
    if len(paths) < 2:
        pytest.skip(f"this CPU runs only {paths}: nothing to compare")
    seen = {}
    for name in paths:
        got, digest = run_python(_PATH_CODE, **PATHS[name].force_env).split()
        assert got == name
        seen[name] = digest
    assert len(set(seen.values())) == 1, seen


# ------------------------------------------------------- the PackedWeight API

@pytest.mark.parametrize("fmt", ["int8", "bfloat16"])
@pytest.mark.parametrize("N,K", [(19, 300), (1, 1), (32, 33)])
def test_metadata_round_trips_and_readonly(rng, fmt, N, K):
    w = randn(rng, (N, K))
    p = cattn.pack_weight(w, fmt)
    assert p.format == fmt and p.dtype == fmt and p.compute_dtype == F32 and p.shape == (N, K)
    Np = -(-N // 16) * 16
    if fmt == "int8":
        assert p._data.dtype == np.int8
        assert p.nbytes == Np * 2 * (-(-K // 2)) + 4 * Np       # bytes + float32 scales
        assert N * K + 4 * N <= p.nbytes <= (Np * (K + 1) + 4 * Np)
    else:
        assert p._data.dtype == U16
        assert p.nbytes == 2 * Np * K
        assert 2 * N * K <= p.nbytes
    assert fmt in repr(p) and str(p.nbytes) in repr(p)
    x = randn(rng, (5, K))
    want = cattn.linear(x, p)
    unpacked = p.unpack()
    assert unpacked.dtype == F32 and unpacked.shape == (N, K)
    d = p.to_arrays()
    assert set(d) == ({"format", "shape", "kc", "data"} | ({"scale"} if fmt == "int8" else set()))
    assert d["data"].flags.writeable and not np.shares_memory(d["data"], p._data)
    buf = io.BytesIO()
    np.savez(buf, **d)
    buf.seek(0)
    with np.load(buf) as f:
        q = cattn.PackedWeight.from_arrays(f)
    r = pickle.loads(pickle.dumps(p))
    for other in (q, r):
        assert other.format == fmt and other.shape == (N, K) and other.nbytes == p.nbytes
        np.testing.assert_array_equal(other.unpack(), unpacked)
        np.testing.assert_array_equal(cattn.linear(x, other), want)
    for a in (p._data, p.kernel_entry()[2], p.kernel_entry()[3], q._data):
        if a is not None:
            assert not a.flags.writeable
            with pytest.raises(ValueError):
                a[0] = 1
    d["data"][...] = 0                                           # the copy is not p's data
    np.testing.assert_array_equal(cattn.linear(x, p), want)


def test_int8_from_arrays_padding_is_never_read(rng):
    """the panels' padding (columns past N, the odd k past K) may hold any
    byte, -128 included: only the (N, K) values are checked and used"""
    N, K = 19, 7
    w = randn(rng, (N, K))
    p = cattn.pack_weight(w, "int8")
    full = rng.integers(-128, 128, (32, 8)).astype(np.int8)
    full[:N, :K] = _unpanel(p)
    d = {**p.to_arrays(), "data": packed_mod.int8_panels(full)}
    q = cattn.PackedWeight.from_arrays(d)
    x = randn(rng, (13, K))
    np.testing.assert_array_equal(cattn.linear(x, q), cattn.linear(x, p))
    np.testing.assert_array_equal(q.unpack(), p.unpack())


def test_from_arrays_errors(rng):
    w = randn(rng, (5, 6))
    d8 = cattn.pack_weight(w, "int8").to_arrays()
    d16 = cattn.pack_weight(w, "bfloat16").to_arrays()
    cases = [
        ({**d8, "data": d8["data"].astype(np.uint8)}, "needs"),
        ({**d8, "data": d8["data"].astype(F32)}, "needs"),
        ({**d8, "data": d8["data"][:-1]}, "needs"),
        ({**d8, "data": d8["data"].reshape(-1, 2)}, "needs"),
        ({**d8, "shape": np.array([5, 7])}, "needs"),
        ({k: v for k, v in d8.items() if k != "scale"}, "scale"),
        ({**d8, "scale": -d8["scale"]}, "scale"),
        ({**d8, "scale": np.where(np.arange(5) == 2, np.nan, d8["scale"]).astype(F32)}, "scale"),
        ({**d8, "scale": np.where(np.arange(5) == 2, np.inf, d8["scale"]).astype(F32)}, "scale"),
        ({**d8, "scale": d8["scale"].astype(F64)}, "scale"),
        ({**d8, "scale": d8["scale"][:4]}, "scale"),
        ({**d8, "data": np.where(np.arange(d8["data"].size) == 3, -128,
                                 d8["data"]).astype(np.int8)}, "-128"),
        ({**d16, "data": d16["data"].astype(np.int16)}, "needs"),
        ({**d16, "data": d16["data"].view(F32) if d16["data"].size % 2 == 0
          else d16["data"].astype(F32)}, "needs"),
        ({**d16, "data": d16["data"][1:]}, "needs"),
        ({**d16, "kc": np.array(128)}, "KC"),
        ({**d8, "format": np.array("int3")}, "unknown format"),
        ({**d8, "shape": np.array([5])}, "shape"),
    ]
    for d, msg in cases:
        with pytest.raises(ValueError, match=msg):
            cattn.PackedWeight.from_arrays(d)
    cattn.PackedWeight.from_arrays(d8)                      # the originals still load


@pytest.mark.parametrize("fmt", ["int8", "bfloat16"])
def test_linear_errors(rng, fmt):
    p = cattn.pack_weight(randn(rng, (5, 4)), fmt)
    with pytest.raises(TypeError, match=f"float64 but the packed weight is {fmt}.*float32"):
        cattn.linear(np.zeros((2, 4)), p)
    with pytest.raises(TypeError, match="bias is float64"):
        cattn.linear(np.zeros((2, 4), F32), p, np.zeros(5))
    with pytest.raises(TypeError):
        cattn.linear(np.zeros((2, 4), np.int32), p)
    with pytest.raises(ValueError, match="in_features=4"):
        cattn.linear(np.zeros((2, 5), F32), p)
    with pytest.raises(ValueError, match="in_features=4"):
        cattn.linear(np.float32(1.0), p)
    with pytest.raises(ValueError, match=r"bias has shape \(4,\)"):
        cattn.linear(np.zeros((2, 4), F32), p, np.zeros(4, F32))
    with pytest.raises(ValueError, match="unknown activation"):
        cattn.linear(np.zeros((2, 4), F32), p, activation="tanh")
    for out in (np.empty((2, 4), F32), np.empty((2, 5), F64), np.empty((5,), F32)):
        with pytest.raises((ValueError, TypeError)):
            cattn.linear(np.zeros((2, 4), F32), p, out=out)
    ro = np.empty((2, 5), F32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        cattn.linear(np.zeros((2, 4), F32), p, out=ro)
    for dt in (np.float16, np.int8, np.int64, np.bool_):
        with pytest.raises(TypeError, match=np.dtype(dt).name):
            cattn.linear(np.ones((3, 4), dt), p)
    sq = cattn.pack_weight(randn(rng, (4, 4)), fmt)
    x = randn(rng, (6, 4))
    with pytest.raises(ValueError, match="overlaps"):
        cattn.linear(x, sq, out=x)
    xb = x.astype(">f4")                                       # byte-swapped float32 is float32
    np.testing.assert_array_equal(cattn.linear(xb, sq), cattn.linear(x, sq))
    with pytest.raises(TypeError, match="float16"):
        cattn.pack_weight(np.ones((2, 2), np.float16), fmt)


@pytest.mark.parametrize("N", [64, 128, 200, 64 * 7 + 16 + 5])
@pytest.mark.parametrize("K", [2, 33, 896])
def test_int8_one_row_four_panel_tasks(rng, N, K):
    """One row (a decode's GEMV): a task's whole panels go four at a time
    through the path's four-stream kernel where it has one (AVX2), the rest
    one at a time: every column the exact formula's bits, with and without
    bias and activation, for any thread count, into a strided out= too."""
    x, w, b = _data(rng, 1, N, K, 1 / np.sqrt(K))
    p = cattn.pack_weight(w, "int8")
    for bias, act in ((None, None), (b, None), (b, "gelu")):
        got = threads_bitwise(cattn.linear, x, p, bias, activation=act)
        want = int8_formula(x, w, bias)
        if act is None:
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_array_equal(got, cattn.linear(np.repeat(x, 3, 0), p, bias,
                                                            activation=act)[:1])
    big = np.zeros((1, 2 * N), F32)
    cattn.linear(x, p, b, out=big[:, 1::2])                    # not direct: one panel at a time
    np.testing.assert_array_equal(big[:, 1::2], int8_formula(x, w, b))
