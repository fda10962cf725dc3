"""The "bfloat16dot" weight format: bfloat16 weights, activations rounded to
bfloat16, vdpbf16ps's arithmetic (csrc/cattn.h, cattn_linear_bf16dot).

What is checked, against an independent NumPy statement of the documented
formula (bf16dot_reference below; nothing of cattn's in it):
- the activations' rounding (subnormals as 0, to nearest even, NaN quiet),
  bit for bit over every kind of float32;
- the linear, bit for bit: ragged N, odd K, K over several KC blocks, 1..301
  rows (decode's and prefill's paths), bias; subnormal, zero, inf and NaN
  weights and activations (NaN by NaN-ness); the activations within their
  own evaluation error;
- a row gives the same bits alone or among others (decode = prefill) and
  for any thread count; tests/build/test_kernel_paths.py re-runs this module
  on the portable and AVX2 paths, where the emulation must give the same bits;
- it is not the float32 linear ("bfloat16" keeps that), stays within
  bfloat16's error of float64, and packs, unpacks, saves and stacks as
  bfloat16 does.
On this CPU the reference was matched against vdpbf16ps itself (Zen 4): the
tile's load check (kernels/avx512/bf16dot.c) compares the same two at import.
"""
import numpy as np
import pytest

import cattn
from cattn import _ext, reference
from cattn.ops import formats, stack_weights
from cattn_testing.numerics import randn, threads_bitwise

F32, F64, U16, U32 = np.float32, np.float64, np.uint16, np.uint32
TINY = F32(2.0 ** -126)                      # the smallest normal float32
ROWS = [1, 2, 3, 4, 5, 6, 7, 12, 13, 40, 301]
ACTS = [None, "relu", "gelu", "gelu_tanh", "silu"]


# ------------------------------------------------------- the reference

def _f32(bits):
    return (np.asarray(bits, U32) << 16).view(F32)


def round_reference(x):
    """bfloat16 bits of float32 x as the format rounds activations: a
    subnormal x is 0 (sign kept); |x| = m 2^e, spacing 2^(e-8): rint of |x| /
    spacing in float64 (exact) is to nearest, ties to even; >= 2^128 is inf.
    NaN entries: returned in the mask (any quiet NaN is right)."""
    x = np.asarray(x, F32)
    with np.errstate(invalid="ignore"):                  # casting signalling NaNs
        x64 = x.astype(F64)
    a = np.abs(x64)
    nan = np.isnan(a)
    a = np.where(nan | (a < 2.0 ** -126), 0.0, a)
    m, e = np.frexp(a)
    spacing = np.ldexp(1.0, e - 8)
    with np.errstate(over="ignore"):
        r = np.where(a == 0, 0.0, np.rint(a / spacing) * spacing)
        r = np.where(r >= 2.0 ** 128, np.inf, r)
        r32 = np.copysign(r, x64).astype(F32)
    return (r32.view(U32) >> 16).astype(U16), nan


def ftz(v):
    """subnormal float32 -> 0 of its sign"""
    v = np.asarray(v, F32)
    return np.where(np.abs(v) < TINY, np.copysign(F32(0), v), v).astype(F32)


def bf16dot_reference(x, w, bias=None):
    """cattn.h's formula: x (M, K) float32, w (N, K) float32 holding bfloat16
    values. fma(a, b, c) is (a b + c) in float64 rounded once to float32:
    a b (8 x 8 significant bits) and the sum are exact in float64 unless
    one term is below the other's float32 half-ulp, where the single
    float64 rounding cannot reach a float32 tie."""
    xb, nan = round_reference(x)
    xb = _f32(xb)
    xb[nan] = np.nan
    w = ftz(w)                                          # subnormal weights: 0
    M, K = xb.shape
    N = w.shape[0]
    if K % 2:                                           # the last pair's partner: 0, 0
        xb = np.concatenate([xb, np.zeros((M, 1), F32)], axis=1)
        w = np.concatenate([w, np.zeros((N, 1), F32)], axis=1)
    x64, w64 = xb.astype(F64), w.astype(F64)
    acc = np.zeros((M, N), F32)
    with np.errstate(all="ignore"):
        for q in range(xb.shape[1] // 2):
            t = ftz((np.multiply.outer(x64[:, 2 * q + 1], w64[:, 2 * q + 1]) + acc).astype(F32))
            acc = ftz((np.multiply.outer(x64[:, 2 * q], w64[:, 2 * q]) + t).astype(F32))
        if bias is not None:
            acc = (acc + np.asarray(bias, F32)).astype(F32)
    return acc


def assert_bits(got, want, what=""):
    """same bits, NaN by NaN-ness"""
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    assert got.shape == want.shape, (got.shape, want.shape)
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{what}: NaN positions")
    bad = (got.view(U32) != want.view(U32)) & ~nan
    if bad.any():
        i = tuple(np.argwhere(bad)[0])
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} differ; first at {i}: "
                             f"{got[i]!r} vs {want[i]!r}")


def _weight(rng, N, K, scale=1.0):
    """(float32 w, its bfloat16 values as float32)"""
    w = randn(rng, (N, K)) * F32(scale)
    return w, _f32(formats.round_bfloat16(w))


# ------------------------------------------------------- activations' rounding

def test_activation_rounding_bits(rng):
    """every kind of float32 (random bits), exact ties, subnormals"""
    x = rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(U32)
    ties = (rng.integers(0, 2 ** 16, 2000, dtype=np.uint64).astype(U32) << 16) | 0x8000
    sub = rng.integers(0, 2 ** 23, 2000, dtype=np.uint64).astype(U32) | 0x80000000 * (
        np.arange(2000) % 2).astype(U32)
    special = np.array([0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x7F7F7FFF, 0x00800000,
                        0x007FFFFF, 0x80000001, 0x7F800000, 0xFF800000, 0x7F800001,
                        0xFFC00001, 0x3F808000, 0x3F818000, 0x00000000, 0x80000000], U32)
    x = np.concatenate([x, ties, sub, special]).view(F32)
    got = _ext.round_bf16_daz(x)
    want, nan = round_reference(x)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    g = got[nan].astype(U32)
    assert ((g & 0x7F80) == 0x7F80).all() and ((g & 0x7F) != 0).all()        # NaN
    assert ((g & 0x40) != 0).all()                                            # quiet
    assert (g >> 15 == (x[nan].view(U32) >> 31)).all()                       # its sign
    assert got[-2] == 0 and got[-1] == 0x8000


# ------------------------------------------------------- the linear, bit for bit

@pytest.mark.parametrize("M", ROWS)
def test_linear_bits_against_the_formula(rng, M):
    N, K = 203, 601                   # ragged panels; odd K over 3 KC blocks of 256
    w, wb = _weight(rng, N, K)
    x, b = randn(rng, (M, K)), randn(rng, (N,))
    p = cattn.pack_weight(w, "bfloat16dot")
    assert p.format == "bfloat16dot"
    np.testing.assert_array_equal(p.unpack(), wb)
    want = bf16dot_reference(x, wb)
    assert_bits(cattn.linear(x, p), want, f"M={M}")
    assert_bits(cattn.linear(x, p, b), bf16dot_reference(x, wb, b), f"M={M} bias")


@pytest.mark.parametrize("N,K", [(1, 1), (16, 2), (17, 3), (64, 256), (65, 257), (80, 512),
                                 (33, 513), (130, 95), (257, 64)])
def test_linear_bits_every_shape(rng, N, K):
    w, wb = _weight(rng, N, K)
    b = randn(rng, (N,))
    for M in (1, 3, 6, 7, 25):
        x = randn(rng, (M, K))
        assert_bits(cattn.linear(x, cattn.pack_weight(w, "bfloat16dot"), b),
                    bf16dot_reference(x, wb, b), f"N={N} K={K} M={M}")


def test_linear_bits_cancellation_and_rounding(rng):
    """sums that cancel and values of mixed magnitudes: every rounding step shows"""
    N, K, M = 48, 300, 9
    w = randn(rng, (N, K)) * (F32(2.0) ** rng.integers(-20, 20, (N, K))).astype(F32)
    x = randn(rng, (M, K)) * (F32(2.0) ** rng.integers(-20, 20, (M, K))).astype(F32)
    x[:, 1::2] = -x[:, ::2] * F32(1.001)                    # near-cancelling pairs
    wb = _f32(formats.round_bfloat16(w))
    assert_bits(cattn.linear(x, cattn.pack_weight(w, "bfloat16dot")), bf16dot_reference(x, wb))


def test_linear_subnormals_zeros_inf_nan(rng):
    """subnormal activations and weights count as 0; sums that underflow
    flush to 0 of their sign; inf and NaN propagate where the formula puts
    them (inf * 0 and inf - inf: NaN)"""
    N, K, M = 40, 70, 8
    w = randn(rng, (N, K))
    w[0, :] = F32(1e-39)                                    # subnormal weights: 0
    w[1, :] = F32(2.0 ** -70)                               # products underflow
    w[2, 5], w[3, 6], w[4, 0] = np.inf, -np.inf, np.nan
    w[5, :] = -0.0
    x = randn(rng, (M, K))
    x[0, :] = F32(1e-40)                                    # subnormal row
    x[1, :] = F32(2.0 ** -70)
    x[2, 5] = 0.0                                           # 0 * inf = NaN in row 2, col 2
    x[3, 9] = np.inf
    x[4, 3] = np.nan
    x[5, :] = -0.0
    x[6, :] = -F32(2.0 ** -70)
    wb = _f32(formats.round_bfloat16(w))
    got = cattn.linear(x, cattn.pack_weight(w, "bfloat16dot"))
    want = bf16dot_reference(x, wb)
    assert_bits(got, want)
    assert np.isnan(got[4]).all() and np.isnan(got[:, 4]).all()
    assert np.isnan(got[2, 2])                              # 0 * inf
    assert np.isinf(got[3, 5:]).any()                       # inf * finite
    assert (got[0, 5:] == 0).all() and np.isnan(got[0, 2:5]).all()   # 0 * inf: NaN
    assert (got[:3, 0] == 0).all() and (got[5:, 0] == 0).all()
    assert (got[1, 1] == 0) and (got[6, 1] == 0) and np.signbit(got[6, 1])   # flushed


@pytest.mark.parametrize("act", ACTS)
def test_activation_epilogue(rng, act):
    """act(acc + b): the bias bit for bit, the activation within its own
    evaluation error of float64 on the pre-activation bits"""
    N, K, M = 77, 300, 13
    w, wb = _weight(rng, N, K, 1 / np.sqrt(K))
    x, b = randn(rng, (M, K)), randn(rng, (N,))
    p = cattn.pack_weight(w, "bfloat16dot")
    pre = bf16dot_reference(x, wb, b)
    got = cattn.linear(x, p, b, activation=act)
    if act is None:
        assert_bits(got, pre)
        return
    fn = {"relu": reference.relu, "gelu": reference.gelu, "silu": reference.silu,
          "gelu_tanh": reference.gelu_tanh}[act]
    want = fn(pre.astype(F64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------- invariances

def test_row_alone_or_among_others_and_threads(rng):
    """decode (1-4 rows) and prefill (many) give a row the same bits, for
    any thread count"""
    N, K = 300, 520
    w, _ = _weight(rng, N, K)
    p = cattn.pack_weight(w, "bfloat16dot")
    x, b = randn(rng, (301, K)), randn(rng, (N,))
    many = threads_bitwise(cattn.linear, x, p, b, activation="silu")
    for i in (0, 5, 191, 192, 300):
        assert_bits(threads_bitwise(cattn.linear, x[i:i + 1], p, b, activation="silu"),
                    many[i:i + 1], f"row {i}")
    for M in (2, 3, 4, 7, 200):
        assert_bits(cattn.linear(x[100:100 + M], p, b, activation="silu"), many[100:100 + M])
    with cattn.num_threads(3):
        assert_bits(cattn.linear(x, p, b, activation="silu"), many)


def test_strided_and_batched_inputs(rng):
    N, K = 50, 130
    w, wb = _weight(rng, N, K)
    p = cattn.pack_weight(w, "bfloat16dot")
    xs = randn(rng, (3, 7, 2 * K))[..., ::2]                   # strided, 3-D
    want = bf16dot_reference(np.ascontiguousarray(xs).reshape(-1, K), wb).reshape(3, 7, N)
    assert_bits(cattn.linear(xs, p), want)
    out = np.empty((3, 7, N), F32)
    assert cattn.linear(xs, p, out=out) is out
    assert_bits(out, want)


def test_empty_shapes(rng):
    b = randn(rng, (3,))
    k0 = cattn.pack_weight(np.zeros((3, 0), F32), "bfloat16dot")
    np.testing.assert_array_equal(cattn.linear(np.zeros((2, 0), F32), k0, b), np.tile(b, (2, 1)))
    p = cattn.pack_weight(randn(rng, (5, 4)), "bfloat16dot")
    assert cattn.linear(np.zeros((0, 4), F32), p).shape == (0, 5)
    n0 = cattn.pack_weight(np.zeros((0, 4), F32), "bfloat16dot")
    assert cattn.linear(randn(rng, (2, 4)), n0).shape == (2, 0)


# ------------------------------------------------------- against the other formats

def test_not_the_float32_bits_but_within_bfloat16_error(rng):
    """"bfloat16" keeps the float32 linear's bits; "bfloat16dot" rounds the
    activations too: relative error per product <= 2^-8 (both roundings),
    random signs over K terms: tol = 6 * 2^-8 * sqrt(sum (x w)^2)"""
    M, N, K = 20, 96, 1000
    w = randn(rng, (N, K)) / F32(np.sqrt(K))
    x = randn(rng, (M, K))
    got = cattn.linear(x, cattn.pack_weight(w, "bfloat16dot"))
    wide = cattn.linear(x, cattn.pack_weight(w, "bfloat16"))
    assert (got != wide).any()
    np.testing.assert_array_equal(wide, cattn.linear(x, _f32(formats.round_bfloat16(w))))
    y64 = x.astype(F64) @ w.astype(F64).T
    rms = np.sqrt((x.astype(F64) ** 2) @ (w.astype(F64) ** 2).T)
    assert (np.abs(got - y64) <= 6 * 2.0 ** -8 * rms + 1e-6).all()


def test_same_values_and_bytes_as_bfloat16(rng):
    w = randn(rng, (45, 300))
    a, d = cattn.pack_weight(w, "bfloat16"), cattn.pack_weight(w, "bfloat16dot")
    np.testing.assert_array_equal(a.unpack(), d.unpack())
    assert a.nbytes == d.nbytes
    arrs = d.to_arrays()
    back = cattn.PackedWeight.from_arrays(arrs)
    assert back.format == "bfloat16dot"
    x = randn(rng, (3, 300))
    assert_bits(cattn.linear(x, back), cattn.linear(x, d))


def test_stacked_parts(rng):
    """a stack of a bfloat16dot part and others: each part's bits as alone"""
    w1, w2 = randn(rng, (40, 64)), randn(rng, (24, 64))
    p1, p2 = cattn.pack_weight(w1, "bfloat16dot"), cattn.pack_weight(w2, "float32")
    s = stack_weights([p1, p2])
    x = randn(rng, (5, 64))
    got = cattn.linear(x, s)
    assert_bits(got[:, :40], cattn.linear(x, p1))
    assert_bits(got[:, 40:], cattn.linear(x, p2))


def test_preferred_bfloat16_follows_the_kernel():
    """vdpbf16ps exactly where the avx512 path runs on a CPU with AVX512_BF16"""
    native = _ext.native_bf16dot()
    assert formats.preferred_bfloat16() == ("bfloat16dot" if native else "bfloat16")
    assert _ext.bf16dot_kernel().startswith("avx512_bf16") == native
    has = bool(_ext.cpu_info()["isa"].get("avx512_bf16"))
    assert native == (_ext.kernel_path() == "avx512" and has)
