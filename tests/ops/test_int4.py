"""cattn.pack_weight(w, "int4" | "int8g"): the group-wise 4- and 8-bit formats.

What the format promises (cattn/ops/formats.py, csrc/cattn.h
cattn_linear_int4, csrc/dispatch.h cattn_ukr_q4_t) and how it is checked
here, against references written independently in this file:

- the weight: quantize_int4's rule (groups of 32, asymmetric, in float64)
  re-derived in NumPy; the panels round-trip; unpack() is d q + mn (or
  d (q - z)) op by op in float32.
- the activations: each row's groups of 32 quantized to int8 as the C
  header states, recomputed in NumPy, exactly.
- the linear: the documented formula evaluated in NumPy with exact integer
  sums and a correctly rounded fma (round-to-odd in float64, then to
  float32), bit for bit; every kernel path is held to it when
  test_kernel_paths re-runs this module.
- int8g (8-bit values, sub-scales per 16, mins, zero points): unpack and
  the linear against its own formula, the same way;
- PackedWeight.rows (an embedding lookup from a packed table) equals
  unpack()[ids] for every format;
- accuracy against float64 with a bound from the activations' steps;
  thread counts and batch neighbours never change a bit; NaN rows; empty
  and ragged dims; to_arrays / from_arrays / pickle and their errors.

Legend: M rows of x, N outputs, K inputs, G = ceil(K/32) groups. Tiles are
4 rows x 16 columns; tasks up to 8 panels (csrc/q4gemm.c): the shapes
straddle those.
"""
import pickle

import numpy as np
import pytest

import cattn
from cattn import _ext
from cattn.ops import formats
from cattn.ops.packed import PackedWeight
from cattn_testing.numerics import randn, threads_bitwise

F32, F64 = np.float32, np.float64
SHAPES = [(1, 1, 1), (1, 16, 32), (3, 17, 33), (4, 31, 64), (5, 33, 95), (9, 130, 257),
          (13, 16, 31), (1, 300, 900)]


# ---------------------------------------------------------------- references

_F16 = np.sort(np.arange(2 ** 16, dtype=np.uint16).view(np.float16)
               [np.isfinite(np.arange(2 ** 16, dtype=np.uint16).view(np.float16))]
               .astype(F64))


def quant_weight_ref(w):
    """quantize_int4's rule group by group in plain loops, the float16
    roundings looked up in the sorted table of every finite float16."""
    N, K = w.shape
    G = -(-K // 32)
    q = np.zeros((N, K), np.uint8)
    d = np.zeros((N, G), np.float16)
    mn = np.zeros((N, G), np.float16)
    for j in range(N):
        for g in range(G):
            blk = w[j, 32 * g:32 * g + 32].astype(F64)
            lo, hi = blk.min(), blk.max()
            m = _F16[np.searchsorted(_F16, lo, "right") - 1]          # largest <= lo
            s = _F16[np.searchsorted(_F16, (hi - m) / 15.0, "left")]   # smallest >= step
            d[j, g], mn[j, g] = s, m
            if s > 0:
                r = np.rint((blk - m) / s)
                q[j, 32 * g:32 * g + len(blk)] = np.clip(r, 0, 15)
    return q, d, mn


def quant_act_ref(x):
    """(qx (M, 32G), sx, xs, sxs (M, G), bad (M,)): cattn.h's formula."""
    M, K = x.shape
    G = -(-K // 32)
    qx = np.zeros((M, 32 * G), np.int8)
    sx = np.zeros((M, G), F32)
    xs = np.zeros((M, G), np.int32)
    sxs = np.zeros((M, G), F32)
    bad = ~np.isfinite(x).all(axis=1) if K else np.zeros(M, bool)
    for i in range(M):
        if bad[i]:
            sx[i] = sxs[i] = np.nan
            continue
        for g in range(G):
            v = np.zeros(32, F32)
            seg = x[i, 32 * g:32 * g + 32]
            v[:len(seg)] = seg
            amax = np.abs(v).max()
            if amax == 0:
                continue
            if amax >= F32(2.0 ** -100):
                r = np.rint(v * (F32(127) / amax))
            else:
                r = np.rint(v.astype(F64) * (127.0 / F64(amax)))
            qx[i, 32 * g:32 * g + 32] = np.clip(r, -127, 127)
            sx[i, g] = F32(F64(amax) / 127.0)
            xs[i, g] = int(qx[i, 32 * g:32 * g + 32].astype(np.int64).sum())
            sxs[i, g] = sx[i, g] * F32(xs[i, g])
    return qx, sx, xs, sxs, bad.astype(np.uint8)


def fma32(a, b, c):
    """float32 fma(a, b, c), correctly rounded: a*b is exact in float64
    (48 bits); the sum's exact value is s + e (TwoSum); s made odd when e
    is not 0 (round to odd) rounds once to float32 correctly (53 >= 24 + 2)."""
    p = a.astype(F64) * b.astype(F64)
    c = c.astype(F64)
    with np.errstate(invalid="ignore", over="ignore"):
        s = p + c
        bp = s - c
        e = (p - bp) + (c - (s - bp))
        fin = np.isfinite(s)
        odd = (np.where(fin, s, 0).view(np.uint64) & 1) == 1
        fix = fin & (e != 0) & ~odd
        s = np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
    return s.astype(F32)


def linear_formula(x, q, d, mn, z, bias=None):
    """The documented result from the weight's (q, d, mn, z)."""
    M, K = x.shape
    N = q.shape[0]
    G = -(-K // 32)
    qx, sx, xs, sxs, bad = quant_act_ref(x)
    qp = np.zeros((N, 32 * G), np.int64)
    qp[:, :K] = q
    acc = np.zeros((M, N), F32)
    for g in range(G):
        isum = qx[:, 32 * g:32 * g + 32].astype(np.int64) @ qp[:, 32 * g:32 * g + 32].T
        t = (isum - z * xs[:, g:g + 1].astype(np.int64)).astype(F32)
        ds = d[None, :, g] * sx[:, g:g + 1]
        acc = fma32(t, ds, acc)
        if mn is not None:
            acc = fma32(np.broadcast_to(mn[None, :, g], (M, N)),
                        np.broadcast_to(sxs[:, g:g + 1], (M, N)), acc)
    if bias is not None:
        acc = acc + bias
    acc[bad.astype(bool)] = np.nan
    return acc


# ---------------------------------------------------------------- the weight

@pytest.mark.parametrize("N,K", [(1, 1), (16, 32), (17, 33), (40, 95), (3, 257)])
def test_weight_quantization_and_panels(rng, N, K):
    w = randn(rng, (N, K))
    q, d, mn = formats.quantize_int4(w)
    rq, rd, rmn = quant_weight_ref(w)
    np.testing.assert_array_equal(q, rq)
    np.testing.assert_array_equal(d, rd)
    np.testing.assert_array_equal(mn, rmn)
    np.testing.assert_array_equal(formats.int4_unpanel(formats.int4_panels(q), N, K), q)
    p = cattn.pack_weight(w, "int4")
    idx = np.arange(K) // 32
    np.testing.assert_array_equal(p.unpack(), rd[:, idx].astype(F32) * q.astype(F32)
                                  + rmn[:, idx].astype(F32))
    # each value within half a step of its group (plus the float rounding of d q + mn)
    step = rd[:, idx].astype(F64)
    assert np.all(np.abs(p.unpack().astype(F64) - w) <= 0.5 * step * (1 + 1e-5) + 1e-6 * np.abs(w))


def test_panel_byte_layout():
    """One panel's bytes as dispatch.h states them, built by hand."""
    q = (np.arange(16 * 64).reshape(16, 64) * 7 % 16).astype(np.uint8)
    data = formats.int4_panels(q)
    assert data.shape == (2 * 256,)
    for g in range(2):
        for t in range(4):
            for j in range(16):
                for u in range(4):
                    byte = data[g * 256 + t * 64 + 4 * j + u]
                    k = 32 * g + 8 * t + u
                    assert byte & 15 == q[j, k] and byte >> 4 == q[j, k + 4]


def test_weight_validation(rng):
    w = randn(rng, (4, 40))
    for v in (np.nan, np.inf):
        bad = w.copy()
        bad[1, 3] = v
        with pytest.raises(ValueError, match="NaN or inf"):
            cattn.pack_weight(bad, "int4")


def test_constant_and_zero_groups(rng):
    w = randn(rng, (3, 64))
    w[0, :32] = 0.25
    w[1] = 0.0
    p = cattn.pack_weight(w, "int4")
    u = p.unpack()
    np.testing.assert_array_equal(u[0, :32], w[0, :32])
    np.testing.assert_array_equal(u[1], 0.0)


def test_bytes(rng):
    p = cattn.pack_weight(randn(rng, (20, 70)), "int4")
    # panels: 2 x 16 columns x 3 groups x 16 bytes; float16 scale and min per
    # (N, G) padded to 32
    assert p.nbytes == 2 * 16 * 3 * 16 + 2 * (32 * 3 * 2)
    assert p.dtype == "int4" and p.compute_dtype == F32


def test_float32_scales_past_float16_range(rng):
    """A weight with values past float16's range keeps float32 scales
    (to nearest: d = (hi - lo) / 15, mn = lo) and its accuracy."""
    w = randn(rng, (5, 64))
    w[2, 3] = 1e6
    q, d, mn = formats.quantize_int4(w)
    assert d.dtype == F32 and mn.dtype == F32
    lo = w.reshape(5, 2, 32).min(2).astype(F64)
    hi = w.reshape(5, 2, 32).max(2).astype(F64)
    np.testing.assert_array_equal(d, ((hi - lo) / 15).astype(F32))
    np.testing.assert_array_equal(mn, lo.astype(F32))
    p = cattn.pack_weight(w, "int4")
    assert p.nbytes == 16 * 2 * 16 + 2 * (16 * 2 * 4)
    x = randn(rng, (3, 64))
    np.testing.assert_array_equal(cattn.linear(x, p), linear_formula(x, q, d, mn, 0))
    assert np.all(np.abs(p.unpack() - w) <= 0.5 * np.repeat(d, 32, axis=1) * 1.0001 + 1e-6)


# ---------------------------------------------------------------- activations

@pytest.mark.parametrize("K", [1, 31, 32, 33, 64, 100, 256, 4864])
def test_activation_quantization_exact(rng, K):
    x = randn(rng, (6, K)) * F32(3)
    x[1] *= F32(1e-32)                     # the tiny path (127 / amax near float's range)
    x[2, : min(K, 40)] = 0.0
    if K > 5:
        x[3, 5] = -x[3].max() * 2
    x[4, 0] = np.nan
    got = _ext.quantize_q8_blocks(np.ascontiguousarray(x))
    want = quant_act_ref(x)
    for g, w_ in zip(got, want):
        np.testing.assert_array_equal(g, w_)


def test_activation_quantization_mixed_groups(rng):
    """One row whose groups take every branch: normal, all zero, tiny
    (127 / amax past float32's range), normal again, a partial tail; the
    vector paths quantize full normal groups and leave the rest to the
    driver's loop, so each must land in its own place."""
    x = randn(rng, (3, 5 * 32 + 7)) * F32(5)
    x[:, 32:64] = 0.0
    x[:, 64:96] *= F32(1e-33)
    x[1, 100] = np.inf
    x[2, 96:128] = [127, 63.5, -0.5, 1.5] * 8   # ties to even in a full group
    got = _ext.quantize_q8_blocks(np.ascontiguousarray(x))
    want = quant_act_ref(x)
    for g, w_ in zip(got, want):
        np.testing.assert_array_equal(g, w_)


@pytest.mark.parametrize("special", ["none", "nan", "inf", "-inf"])
def test_activation_quantization_batches_of_groups(rng, special):
    """Rows of 20 full groups and a tail (the vector path takes 8 groups a
    pass): zero, tiny and normal groups at every place in a pass, and one
    NaN or +-inf at different places (its row becomes the NaN form)."""
    x = randn(rng, (8, 20 * 32 + 5)) * F32(4)
    for r in range(8):
        x[r, 32 * r:32 * r + 32] = 0.0                           # a zero group, place r
        x[r, 32 * (r + 9):32 * (r + 10)] *= F32(1e-34)          # a tiny one in the next pass
    if special != "none":
        v = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf}[special]
        for r, k in ((1, 3), (3, 255), (5, 256 + 31), (6, 20 * 32 + 2)):
            x[r, k] = v
    got = _ext.quantize_q8_blocks(np.ascontiguousarray(x))
    want = quant_act_ref(x)
    for g, w_ in zip(got, want):
        np.testing.assert_array_equal(g, w_)


def test_activation_quantization_subnormal_and_ties():
    x = np.zeros((2, 32), F32)
    x[0, 0] = F32(1e-40)                    # subnormal amax
    x[0, 1] = -F32(5e-41)
    x[1, :4] = [127, 63.5, -0.5, 1.5]       # ties to even at the step 1
    got = _ext.quantize_q8_blocks(x)
    want = quant_act_ref(x)
    for g, w_ in zip(got, want):
        np.testing.assert_array_equal(g, w_)
    assert list(got[0][1, :4]) == [127, 64, 0, 2]


# ---------------------------------------------------------------- the linear

@pytest.mark.parametrize("M,N,K", SHAPES)
def test_linear_equals_documented_formula(rng, M, N, K):
    x, w, b = randn(rng, (M, K)), randn(rng, (N, K)), randn(rng, (N,))
    p = cattn.pack_weight(w, "int4")
    q, d, mn = formats.quantize_int4(w)
    np.testing.assert_array_equal(cattn.linear(x, p), linear_formula(x, q, d, mn, 0))
    np.testing.assert_array_equal(cattn.linear(x, p, b), linear_formula(x, q, d, mn, 0, b))


@pytest.mark.parametrize("z", [0, 8])
@pytest.mark.parametrize("M,N,K", [(1, 17, 64), (6, 40, 96), (11, 33, 257)])
def test_linear_without_mins(rng, M, N, K, z):
    """The Q4_0 form d (q - z): built through int4_arrays."""
    q = rng.integers(0, 16, (N, K)).astype(np.uint8)
    d = (rng.random((N, -(-K // 32))) * 0.1).astype(np.float16 if z else F32)
    p = PackedWeight.from_arrays(formats.int4_arrays(q, d, None, z))
    idx = np.arange(K) // 32
    np.testing.assert_array_equal(p.unpack(), d[:, idx].astype(F32) * (q.astype(F32) - F32(z)))
    x = randn(rng, (M, K))
    np.testing.assert_array_equal(cattn.linear(x, p), linear_formula(x, q, d, None, z))


@pytest.mark.parametrize("M,N,K", [(1, 64, 256), (7, 45, 100), (40, 70, 512)])
def test_accuracy_against_float64(rng, M, N, K):
    """|y - x W^T| (W = unpack) <= sum_k |W[j,k]| sx[g] / 2 (each x off by at
    most half its group's step) + float32 rounding of the group terms."""
    x, w = randn(rng, (M, K)), randn(rng, (N, K))
    p = cattn.pack_weight(w, "int4")
    W = p.unpack().astype(F64)
    y = cattn.linear(x, p).astype(F64)
    ref = x.astype(F64) @ W.T
    _, sx, _, _, _ = quant_act_ref(x)
    idx = np.arange(K) // 32
    bound = (0.5 * sx[:, idx].astype(F64)) @ np.abs(W).T
    bound += 4 * 2.0 ** -24 * (np.abs(x).astype(F64) @ np.abs(W).T) + 1e-30
    assert np.all(np.abs(y - ref) <= bound)


def test_activations_and_strided_input(rng):
    x, w, b = randn(rng, (9, 70)), randn(rng, (37, 70)), randn(rng, (37,))
    p = cattn.pack_weight(w, "int4")
    plain = cattn.linear(x, p, b)
    for act in ("relu", "gelu", "silu"):
        np.testing.assert_array_equal(cattn.linear(x, p, b, activation=act),
                                      getattr(cattn, act)(plain))
    big = randn(rng, (9, 140))
    big[:, ::2] = x
    np.testing.assert_array_equal(cattn.linear(big[:, ::2], p, b), plain)


def test_batch_and_thread_invariance(rng):
    x, w, b = randn(rng, (41, 300)), randn(rng, (150, 300)), randn(rng, (150,))
    p = cattn.pack_weight(w, "int4")
    full = threads_bitwise(cattn.linear, x, p, b)
    for i in (0, 3, 17, 40):
        np.testing.assert_array_equal(cattn.linear(x[i:i + 1], p, b), full[i:i + 1])
    np.testing.assert_array_equal(cattn.linear(x[5:13], p, b), full[5:13])


def test_nonfinite_rows_are_nan_and_others_unaffected(rng):
    x, w = randn(rng, (10, 64)), randn(rng, (20, 64))
    p = cattn.pack_weight(w, "int4")
    clean = cattn.linear(x, p)
    x[2, 3], x[7, 63] = np.nan, -np.inf
    got = cattn.linear(x, p)
    assert np.isnan(got[[2, 7]]).all()
    keep = [i for i in range(10) if i not in (2, 7)]
    np.testing.assert_array_equal(got[keep], clean[keep])


def test_empty_dims(rng):
    for M, N, K in ((0, 5, 40), (3, 0, 40), (3, 5, 0)):
        p = cattn.pack_weight(randn(rng, (N, K)), "int4")
        b = randn(rng, (N,))
        y = cattn.linear(randn(rng, (M, K)), p, b)
        assert y.shape == (M, N) and y.dtype == F32
        np.testing.assert_array_equal(y, np.broadcast_to(b, (M, N)))


# ---------------------------------------------------------------- round trips

def test_round_trip_and_pickle(rng):
    w = randn(rng, (21, 77))
    p = cattn.pack_weight(w, "int4")
    x = randn(rng, (3, 77))
    for back in (PackedWeight.from_arrays(p.to_arrays()), pickle.loads(pickle.dumps(p))):
        assert back.format == "int4" and back.shape == (21, 77)
        np.testing.assert_array_equal(back.unpack(), p.unpack())
        np.testing.assert_array_equal(cattn.linear(x, back), cattn.linear(x, p))


@pytest.mark.parametrize("N", [48, 37])
def test_from_arrays_without_copy_takes_its_arrays(rng, N):
    """from_arrays(d, copy=False) (a loader handing its arrays over: the
    scales may be rearranged into panels in place, when N is a multiple of
    16) holds the weight its formula gives, int4 with mins and int8g alike."""
    K = 96
    G = K // 32
    x = randn(rng, (3, K))
    q = rng.integers(0, 16, (N, K)).astype(np.uint8)
    d = (rng.random((N, G)) * 0.1).astype(np.float16)
    mn = (-rng.random((N, G)) * 0.1).astype(np.float16)
    p = PackedWeight.from_arrays(formats.int4_arrays(q, d.copy(), mn.copy(), 0), copy=False)
    np.testing.assert_array_equal(cattn.linear(x, p), linear_formula(x, q, d, mn, 0))
    u = rng.integers(0, 256, (N, K)).astype(np.uint8)
    arrays = formats.int8g_arrays(u, d.copy(), None, None, 128)
    p8 = PackedWeight.from_arrays({k: np.array(v) for k, v in arrays.items()}, copy=False)
    np.testing.assert_array_equal(cattn.linear(x, p8), linear_formula8(x, u, d, None, None, 128))
    np.testing.assert_array_equal(p8.to_arrays()["scale"], d)


def test_from_arrays_errors(rng):
    d = cattn.pack_weight(randn(rng, (5, 40)), "int4").to_arrays()
    cases = {
        "scale": {**d, "scale": d["scale"][:, :1]},
        "min": {**d, "min": np.full_like(d["min"], np.nan)},
        "zero": {**d, "zero": np.array(3)},
        "must match": {**d, "min": d["min"].astype(F32)},
        "float32 or float16": {**d, "scale": d["scale"].astype(F64)},
    }
    for name, bad in cases.items():
        with pytest.raises(ValueError, match=name):
            PackedWeight.from_arrays(bad)
    no_min = {k: v for k, v in d.items() if k != "min"}
    no_min["zero"] = np.array(8)
    PackedWeight.from_arrays(no_min)                       # the Q4_0 form loads
    with pytest.raises(ValueError, match="'zero' 0"):
        PackedWeight.from_arrays({**d, "zero": np.array(8)})


# ---------------------------------------------------------------- int8g

def linear_formula8(x, u, d, mn, sub, z, bias=None):
    """The int8g result (csrc/dispatch.h, cattn_ukr_q8g_t) from (u, d, mn, sub, z)."""
    M, K = x.shape
    N = u.shape[0]
    G = -(-K // 32)
    qx, sx, xs, sxs, bad, xs16 = _ext.quantize_q8_blocks(np.ascontiguousarray(x))
    up = np.zeros((N, 32 * G), np.int64)
    up[:, :K] = u
    acc = np.zeros((M, N), F32)
    for g in range(G):
        if sub is None:
            isum = qx[:, 32 * g:32 * g + 32].astype(np.int64) @ up[:, 32 * g:32 * g + 32].T
            t = isum - z * xs[:, g:g + 1].astype(np.int64)
        else:
            t = 0
            for h in range(2):
                k0 = 32 * g + 16 * h
                part = qx[:, k0:k0 + 16].astype(np.int64) @ up[:, k0:k0 + 16].T
                t = t + sub[None, :, 2 * g + h].astype(np.int64) * (
                    part - z * xs16[:, 2 * g + h:2 * g + h + 1].astype(np.int64))
        assert np.abs(t).max(initial=0) < 2 ** 31
        ds = d[None, :, g].astype(F32) * sx[:, g:g + 1]
        acc = fma32(t.astype(F32), ds, acc)
        if mn is not None:
            acc = fma32(np.broadcast_to(mn[None, :, g].astype(F32), (M, N)),
                        np.broadcast_to(sxs[:, g:g + 1], (M, N)), acc)
    if bias is not None:
        acc = acc + bias
    acc[bad.astype(bool)] = np.nan
    return acc


def test_activation_half_sums(rng):
    x = randn(rng, (5, 70))
    qx, _, xs, _, _, xs16 = _ext.quantize_q8_blocks(x)
    q = qx.astype(np.int64).reshape(5, -1, 2, 16).sum(3)
    np.testing.assert_array_equal(xs16, q.reshape(5, -1))
    np.testing.assert_array_equal(xs, q.sum(2))


@pytest.mark.parametrize("fmt,bits", [("int6g", 6), ("int5g", 5)])
@pytest.mark.parametrize("M,N,K", SHAPES)
def test_narrow_linear_equals_documented_formula(rng, M, N, K, fmt, bits):
    """pack_weight(w, "int6g" / "int5g"): symmetric values d (u - z), z =
    2^(bits-1), u in [1, 2z - 1], d = max |w| / (z - 1) rounded up to
    float16; the linear is int8g's formula on them, in bits/8 of int8g's
    bytes (6.5 / 5.5 bits a weight against 8.5)."""
    z = 1 << (bits - 1)
    x, w, b = randn(rng, (M, K)), randn(rng, (N, K)), randn(rng, (N,))
    p = cattn.pack_weight(w, fmt)
    u, d = getattr(formats, f"quantize_{fmt}")(w)
    assert d.dtype == np.float16 and u.min() >= 1 and u.max() <= 2 * z - 1
    np.testing.assert_array_equal(p.unpack(), np.repeat(d.astype(F32), 32, axis=1)[:, :K]
                                  * (u.astype(F32) - F32(z)))
    np.testing.assert_array_equal(cattn.linear(x, p, b), linear_formula8(x, u, d, None, None, z, b))
    step = np.repeat(d.astype(F64), 32, axis=1)[:, :K]
    assert np.all(np.abs(p.unpack() - w) <= 0.5 * step * 1.0001 + 1e-7)
    G, P = -(-K // 32), -(-N // 16)
    assert p.nbytes == P * G * 16 * (4 * bits + 2)            # panels + float16 d per 16 x 32


@pytest.mark.parametrize("M", [1, 2, 4, 5])
def test_float16_scales_of_every_class(rng, M):
    """float16 scales and mins that are subnormal (down to 2^-24), normal up
    to 65504, and +-0 are widened exactly on every kernel (AVX2 widens them
    without F16C; a subnormal once took a slow path there): int4 and int6g
    against their formulas."""
    N, K = 37, 96
    G = K // 32
    classes = np.array([2.0 ** -24, 3 * 2.0 ** -24, 1023 * 2.0 ** -24, 2.0 ** -14, 0.0, -0.0,
                        1e-5, 0.5, 65504.0, 6.1e-5], np.float16)
    d = classes[rng.integers(0, len(classes), (N, G))]
    mn = -classes[rng.integers(0, len(classes), (N, G))]
    q = rng.integers(0, 16, (N, K)).astype(np.uint8)
    x = randn(rng, (M, K)) * 1e-3
    p4 = PackedWeight.from_arrays(formats.int4_arrays(q, d, mn, 0))
    np.testing.assert_array_equal(cattn.linear(x, p4), linear_formula(x, q, d, mn, 0))
    u = rng.integers(0, 64, (N, K)).astype(np.uint8)
    sub = rng.integers(-128, 128, (N, 2 * G)).astype(np.int8)
    p6 = PackedWeight.from_arrays(formats.int6g_arrays(u, d, None, sub, 32))
    np.testing.assert_array_equal(cattn.linear(x, p6), linear_formula8(x, u, d, None, sub, 32))
    u5 = u >> 1
    p5 = PackedWeight.from_arrays(formats.int5g_arrays(u5, d, mn, None, 0))
    np.testing.assert_array_equal(cattn.linear(x, p5), linear_formula8(x, u5, d, mn, None, 0))


def test_int6g_panel_layout_and_bounds(rng):
    """int6g_panels: the low 4 bits in int4's nibbles, the top 2 in a plane
    of [s][j][v] bytes (bit 2f: k = 16s + 4f + v); values of 64 or more are
    refused by name."""
    u = rng.integers(0, 64, (16, 32)).astype(np.uint8)
    data = formats.int6g_panels(u)
    assert data.shape == (384,)
    np.testing.assert_array_equal(data[:256], formats.int4_panels(u & 15))
    for s_, j, v, f in ((0, 0, 0, 0), (1, 15, 3, 3), (0, 7, 2, 1), (1, 3, 1, 2)):
        assert (data[256 + 64 * s_ + 4 * j + v] >> (2 * f)) & 3 == u[j, 16 * s_ + 4 * f + v] >> 4
    np.testing.assert_array_equal(formats.int6g_unpanel(data, 16, 32), u)
    with pytest.raises(ValueError, match="below 64, got 64"):
        formats.int6g_arrays(np.full((2, 32), 64, np.uint8), np.ones((2, 1), np.float16))


def test_int5g_panel_layout_and_bounds(rng):
    """int5g_panels: the low 4 bits in int4's nibbles, the top bit in a
    plane of [j][v] bytes (bit f: k = 4f + v); values of 32 or more are
    refused by name."""
    u = rng.integers(0, 32, (16, 32)).astype(np.uint8)
    data = formats.int5g_panels(u)
    assert data.shape == (320,) == (_ext.q5g_packed_bytes(16, 32),)
    np.testing.assert_array_equal(data[:256], formats.int4_panels(u & 15))
    for j in range(16):
        for k in range(32):
            assert (data[256 + 4 * j + k % 4] >> (k // 4)) & 1 == u[j, k] >> 4
    np.testing.assert_array_equal(formats.int5g_unpanel(data, 16, 32), u)
    v = rng.integers(0, 32, (37, 70)).astype(np.uint8)           # ragged: 0 past N and K
    np.testing.assert_array_equal(formats.int5g_unpanel(formats.int5g_panels(v), 37, 70), v)
    with pytest.raises(ValueError, match="below 32, got 32"):
        formats.int5g_arrays(np.full((2, 32), 32, np.uint8), np.ones((2, 1), np.float16))


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_int8g_linear_equals_documented_formula(rng, M, N, K):
    x, w, b = randn(rng, (M, K)), randn(rng, (N, K)), randn(rng, (N,))
    p = cattn.pack_weight(w, "int8g")
    u, d = formats.quantize_int8g(w)
    assert d.dtype == np.float16
    np.testing.assert_array_equal(p.unpack(), np.repeat(d.astype(F32), 32, axis=1)[:, :K]
                                  * (u.astype(F32) - F32(128)))
    np.testing.assert_array_equal(cattn.linear(x, p, b), linear_formula8(x, u, d, None, None, 128, b))
    step = np.repeat(d.astype(F64), 32, axis=1)[:, :K]
    assert np.all(np.abs(p.unpack() - w) <= 0.5 * step * 1.0001 + 1e-7)


@pytest.mark.parametrize("fmt", ["int8g", "int6g", "int5g"])
@pytest.mark.parametrize("case", ["sub", "min", "zero", "zero-min", "sub-f32", "q5", "q5-min"])
@pytest.mark.parametrize("M,N,K", [(1, 17, 64), (5, 40, 96), (9, 33, 257)])
def test_int8g_forms(rng, M, N, K, case, fmt):
    """The GGUF forms through int8g_arrays / int6g_arrays (values < 64):
    Q6_K-like sub-scales with z = 32, Q5_1-like mins, Q8_0-like z = 128;
    unpack and the formula."""
    G = -(-K // 32)
    top = 64 if case.startswith("sub") else 32 if case.startswith("q5") else 256
    if fmt != "int8g":
        top = min(top, 64 if fmt == "int6g" else 32)
    u = rng.integers(0, top, (N, K)).astype(np.uint8)          # 6- and 5-bit: the narrow kernels
    d = (rng.random((N, G)) * 0.01).astype(F32 if case == "sub-f32" else np.float16)
    mn = (randn(rng, (N, G)) * 0.1).astype(d.dtype) if case.endswith("min") else None
    sub = rng.integers(-128, 128, (N, 2 * G)).astype(np.int8) if case.startswith("sub") else None
    z = {"sub": 32, "sub-f32": 32, "min": 0, "zero": 128, "zero-min": 128, "q5": 16,
         "q5-min": 0}[case]
    arrays = getattr(formats, f"{fmt}_arrays")
    p = PackedWeight.from_arrays(arrays(u, d, mn, sub, z))
    assert p.format == fmt
    want = np.repeat(d.astype(F32), 32, axis=1)[:, :K]
    if sub is not None:
        want = want * np.repeat(sub.astype(F32), 16, axis=1)[:, :K]
    want = want * (u.astype(F32) - F32(z))
    if mn is not None:
        want = want + np.repeat(mn.astype(F32), 32, axis=1)[:, :K]
    np.testing.assert_array_equal(p.unpack(), want)
    x = randn(rng, (M, K))
    np.testing.assert_array_equal(cattn.linear(x, p), linear_formula8(x, u, d, mn, sub, z))
    back = PackedWeight.from_arrays(p.to_arrays())
    np.testing.assert_array_equal(cattn.linear(x, back), cattn.linear(x, p))
    np.testing.assert_array_equal(threads_bitwise(cattn.linear, x, p), cattn.linear(x, p))


@pytest.mark.parametrize("fmt,z,top,sub", [
    ("int8g", 0, 255, False), ("int8g", 128, 255, False), ("int8g", 32, 63, True),
    ("int8g", 16, 31, False), ("int8g", 0, 63, False),
    ("int6g", 32, 63, True), ("int6g", 0, 63, False), ("int6g", 32, 63, False),
    ("int5g", 16, 31, False), ("int5g", 0, 31, False), ("int5g", 32, 31, True)])
@pytest.mark.parametrize("M", [1, 2, 3, 4, 6])
def test_int8g_extreme_products(rng, fmt, z, top, sub, M):
    """Every product at its largest: u in {0, top} against activations of
    +-127 (rows of +-1), the pairs an AVX2 kernel sums in 16 bits (z = 128:
    |q| = 128 by the sign trick; top 63 or 31: the narrow kernel's bytes
    unsplit), against the formula."""
    N, K = 24, 96
    u = np.where(rng.random((N, K)) < 0.5, 0, top).astype(np.uint8)
    u[0], u[1] = 0, top
    d = np.full((N, K // 32), 0.01, np.float16)
    s = np.full((N, 2 * (K // 32)), -128, np.int8) if sub else None
    arrays = getattr(formats, f"{fmt}_arrays")
    p = PackedWeight.from_arrays(arrays(u, d, None, s, z))
    x = np.where(rng.random((M, K)) < 0.5, -1.0, 1.0).astype(F32)
    x[0] = 1.0
    np.testing.assert_array_equal(cattn.linear(x, p), linear_formula8(x, u, d, None, s, z))


@pytest.mark.parametrize("fmt", ["int8g", "int6g", "int5g"])
def test_int8g_nonfinite_empty_and_errors(rng, fmt):
    x, w = randn(rng, (6, 64)), randn(rng, (20, 64))
    p = cattn.pack_weight(w, fmt)
    clean = cattn.linear(x, p)
    x[3, 1] = np.inf
    got = cattn.linear(x, p)
    assert np.isnan(got[3]).all()
    np.testing.assert_array_equal(np.delete(got, 3, 0), np.delete(clean, 3, 0))
    for M, N, K in ((0, 5, 40), (3, 0, 40), (3, 5, 0)):
        q = cattn.pack_weight(randn(rng, (N, K)), fmt)
        assert cattn.linear(randn(rng, (M, K)), q).shape == (M, N)
    bad = w.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        cattn.pack_weight(bad, fmt)
    d = p.to_arrays()
    for name, case in (("zero", {**d, "zero": np.array(300)}),
                       ("sub", {**d, "sub": np.zeros((20, 3), np.int8)}),
                       ("scale", {**d, "scale": d["scale"][:1]})):
        with pytest.raises(ValueError, match=name):
            PackedWeight.from_arrays(case)


def test_vnni_group_kernels_pass_their_load_check():
    """On a VNNI CPU the int4 / int8g VNNI kernels are used only after they
    matched the AVX-512BW int4 and AVX2 int8g kernels on a test tile at
    load (csrc/kernels/avx512/table.c): that check runs the non-VNNI
    kernels here too."""
    assert "failed" not in _ext.int4_kernel()
    if _ext.kernel_path() == "avx512":
        assert "avx512" in _ext.int4_kernel()


@pytest.mark.parametrize("fmt", ["float32", "bfloat16", "int8", "int4", "int8g", "int4-z8",
                                 "int8g-sub", "int4-f32", "int6g", "int6g-sub", "int5g",
                                 "int5g-min"])
def test_rows_equal_unpack(rng, fmt):
    """PackedWeight.rows(ids): unpack()[ids] for any id shape, without unpacking the table."""
    N, K = 37, 70
    if fmt == "int4-z8":
        q = rng.integers(0, 16, (N, K)).astype(np.uint8)
        p = PackedWeight.from_arrays(formats.int4_arrays(
            q, (rng.random((N, 3)) * 0.1).astype(np.float16), None, 8))
    elif fmt in ("int8g-sub", "int6g-sub"):
        u = rng.integers(0, 64, (N, K)).astype(np.uint8)
        arrays = formats.int6g_arrays if fmt == "int6g-sub" else formats.int8g_arrays
        p = PackedWeight.from_arrays(arrays(
            u, (rng.random((N, 3)) * 0.1).astype(np.float16), None,
            rng.integers(-128, 128, (N, 6)).astype(np.int8), 32))
    elif fmt == "int5g-min":
        u = rng.integers(0, 32, (N, K)).astype(np.uint8)
        p = PackedWeight.from_arrays(formats.int5g_arrays(
            u, (rng.random((N, 3)) * 0.1).astype(F32), (randn(rng, (N, 3)) * 0.1), None, 0))
    elif fmt == "int4-f32":
        w = randn(rng, (N, K))
        w[0, 0] = 1e6                                     # float32 scales
        p = cattn.pack_weight(w, "int4")
    else:
        p = cattn.pack_weight(randn(rng, (N, K)), fmt)
    full = p.unpack()
    for ids in (np.array([0, 36, 5, 5, 16, 17]), np.array([[3, 1], [31, 32]]), np.array([], int)):
        got = p.rows(ids)
        assert got.shape == ids.shape + (K,) and got.dtype == F32
        np.testing.assert_array_equal(got, full[ids])
    with pytest.raises(ValueError, match=r"\[0, 37\)"):
        p.rows([37])
    with pytest.raises(TypeError, match="integers"):
        p.rows([1.0])


@pytest.mark.parametrize("M,N,K", [(1, 20, 256), (6, 33, 512), (13, 17, 768), (3, 40, 512),
                                   (1, 300, 1024)])
def test_two_level_scales_equal_the_float32_ones(rng, M, N, K):
    """int4 with GGUF Q4_K's two-level scales (D, Dmin float16 per 256, sc,
    m 6-bit per 32) holds d = D sc, mn = -(Dmin m): the same values and the
    same linear bits as the float32-scale weight, in fewer bytes; rows,
    round trips and threads as every format."""
    q = rng.integers(0, 16, (N, K)).astype(np.uint8)
    D = (rng.random((N, K // 256)) * 0.01).astype(np.float16)
    Dm = (rng.random((N, K // 256)) * 0.01).astype(np.float16)
    sc = rng.integers(0, 64, (N, K // 32)).astype(np.uint8)
    m = rng.integers(0, 64, (N, K // 32)).astype(np.uint8)
    two = PackedWeight.from_arrays(formats.int4_k_arrays(q, D, Dm, sc, m))
    d = np.repeat(D.astype(F32), 8, axis=1) * sc.astype(F32)
    mn = -(np.repeat(Dm.astype(F32), 8, axis=1) * m.astype(F32))
    one = PackedWeight.from_arrays(formats.int4_arrays(q, d, mn, 0))
    np.testing.assert_array_equal(two.unpack(), one.unpack())
    x = randn(rng, (M, K))
    np.testing.assert_array_equal(cattn.linear(x, two), cattn.linear(x, one))
    np.testing.assert_array_equal(cattn.linear(x, two), linear_formula(x, q, d, mn, 0))
    np.testing.assert_array_equal(threads_bitwise(cattn.linear, x, two), cattn.linear(x, two))
    assert two.nbytes < one.nbytes * 0.8
    ids = np.array([0, N - 1, 3])
    np.testing.assert_array_equal(two.rows(ids), one.unpack()[ids])
    back = PackedWeight.from_arrays(two.to_arrays())
    np.testing.assert_array_equal(cattn.linear(x, back), cattn.linear(x, two))
    bad = two.to_arrays()
    bad["kd"] = bad["kd"][:, :0]
    with pytest.raises(ValueError, match="'kd'"):
        PackedWeight.from_arrays(bad)


@pytest.mark.parametrize("N", [64, 200, 64 * 3 + 16 + 5])
@pytest.mark.parametrize("K", [32, 96, 257])
def test_one_row_many_panels(rng, N, K):
    """One row (a decode's GEMV) over many panels and tasks: the formula's
    bits with mins (float32 scales) and without (Q4_0's float16 d (q - 8)),
    with bias, for any thread count; a non-finite row is NaN. (A four-panel
    one-row kernel as int8's was tried on AVX2: the int4 tile is compute
    heavier per byte, and four panels at once read slower, 26 -> 21 GB/s.)"""
    x, w, b = randn(rng, (1, K)), randn(rng, (N, K)), randn(rng, (N,))
    p = cattn.pack_weight(w, "int4")
    q, d, mn = formats.quantize_int4(w)
    np.testing.assert_array_equal(threads_bitwise(cattn.linear, x, p, b),
                                  linear_formula(x, q, d, mn, 0, b))
    q8 = rng.integers(0, 16, (N, K)).astype(np.uint8)
    d16 = (rng.random((N, -(-K // 32))) * 0.1).astype(np.float16)
    p8 = PackedWeight.from_arrays(formats.int4_arrays(q8, d16, None, 8))
    np.testing.assert_array_equal(threads_bitwise(cattn.linear, x, p8),
                                  linear_formula(x, q8, d16, None, 8))
    bad = x.copy()
    bad[0, K // 2] = np.inf
    assert np.isnan(cattn.linear(bad, p8)).all()
