"""cattn.ops.formats — the weight formats of cattn.pack_weight, one object
each: how a (N, K) weight is stored and packed, unpacked, saved as arrays
and checked when loaded back, and which kernel multiplies by it. Every
place that handles a packed weight asks its format (PackedWeight.format);
none switches on a name.

What this file is not: the kernels (csrc/: the panels of gemm_tmpl.h,
qgemm.c; the C switch from a format's kind to its kernel is
csrc/weights.c) or PackedWeight itself (packed.py).

Formats (cattn.linear computes in the format's `compute` dtype):
- "float32", "float64": the weight's values, prepacked into the GEMM's
  column panels (csrc/gemm_tmpl.h states the layout).
- "bfloat16": each value rounded to bfloat16 (to nearest, ties to even; NaN
  stays NaN, values past bfloat16's range become inf), half the bytes. The
  panels are widened to float32 in the kernel: the result is the float32
  linear on the rounded weight, bit for bit, on every CPU.
- "bfloat16dot": the bfloat16 weight (the same values, panels and bytes)
  with the activations rounded to bfloat16 too and vdpbf16ps's arithmetic
  (AVX512_BF16: Zen 4, Sapphire Rapids and later): per output one chain
  over the pairs of k, each step two fused multiply-adds rounded to
  float32 (odd k first), subnormal inputs and results flushed to zero
  (csrc/cattn.h, cattn_linear_bf16dot, states it exactly):
      xb = bfloat16(x) (subnormal x as 0, to nearest even); acc = +0
      acc = ftz(fma(xb[2q], w[2q], ftz(fma(xb[2q+1], w[2q+1], acc))))
      y = act(acc + b)
  The same bits on every kernel path (a CPU without the instruction runs a
  portable emulation: correct, slow) and thread count, for a row alone or
  among any others; not the float32 linear's bits (the activations keep 8
  significant bits). cattn.ops.preferred_bfloat16() names the format a
  loader packs bfloat16 values in: "bfloat16dot" where this CPU runs
  vdpbf16ps, else "bfloat16". Ask for "bfloat16" by name where the result
  must be the float32 linear's bits.
- "int8": symmetric per output channel, sw[j] = max_k |W[j, k]| / 127 and
  qw = rint(W / sw) in [-127, 127] (a quarter of the bytes); each row of x
  is quantized at call time to u8 with its own scale and zero point
  (csrc/cattn.h: cattn_quantize_rows), the sums are exact int32 and the
  scales, bias and activation are applied in the epilogue:
      y[i, j] = act(((float)(sum_k (qa[i,k] - za[i]) qw[j,k]) * sa[i]) * sw[j] + b[j])
  A row of x holding NaN or +-inf gives NaN in every output of that row.
  The int32 sums, the dequantization and the bias are the same bits on every
  kernel path (portable, AVX2, AVX-512) and thread count; an activation is
  then that path's activation kernel (cattn.gelu etc.: the paths can differ
  by an ulp in the far tails of gelu).
  Limits of the formula: each row keeps ~8 bits relative to its largest
  magnitude (one huge value zeroes the small ones); (float)t * sa can
  overflow to inf before * sw when |x| is near 1e33 or more, and a row whose
  range is below ~1e-36 gets a subnormal (or zero) scale and loses precision.
- "int4": groups of 32 inputs, q[j, k] in [0, 15] with a scale d and a
  min mn per output and group, both float16 or both float32: w[j, k] =
  d q + mn (or, with no mins, d (q - z), z = 0 or 8). Bytes a weight: 4
  bits + 32 (float16) or 64 (float32) bits per group: 5 or 6 bits (4.5 /
  5 without mins). pack_weight quantizes asymmetrically in float16 (mn =
  the group's minimum rounded down, d = (max - mn) / 15 rounded up, q =
  rint((w - mn) / d): llama.cpp's Q4_1 rule, in float64; float32 scales
  for values past float16's range); GGUF Q4_0 (float16 d, z = 8), Q4_1
  (float16 d, mn) and Q4_K (float32 d = D sc, mn = -Dmin m per 32) blocks
  are held exactly (int4_arrays). Each row of x is quantized at call time in groups of 32
  to int8 (symmetric: sx = amax / 127, llama.cpp's Q8_0), the group sums
  are exact int32 and the float steps fixed (csrc/cattn.h,
  cattn_linear_int4): the same bits on every path and thread count. A row
  of x holding NaN or +-inf gives NaN in every output of that row.
- "int8g": int4's groups, scales and call-time activations with 8-bit
  values u in [0, 255] and an optional int8 sub-scale s per 16 inputs:
  w = (d s) (u - z) + mn. pack_weight quantizes symmetrically as GGUF's
  Q8_0 (d = max |w| / 127 rounded up to float16, u = rint(w / d) + 128):
  8.5 bits a weight; GGUF Q8_0 blocks are held exactly (int8g_arrays).
- "int6g": int8g's values and formula with every u < 64, held in 6 bits
  (the low 4 in int4's nibbles, the top 2 in a plane beside them): 6.5
  bits a weight with float16 d, 7 with sub-scales (GGUF Q6_K), 7.5 with
  float16 mins. pack_weight quantizes symmetrically (d = max |w| / 31
  rounded up to float16, u = rint(w / d) + 32 in [1, 63]); GGUF Q6_K
  blocks are held exactly (int6g_arrays).
- "int5g": the same with every u < 32, held in 5 bits (the top bit in a
  plane of one bit a value): 5.5 bits a weight with float16 d (GGUF Q5_0,
  as the file holds it), 6 with float16 mins (Q5_1), 7 with float32 d and
  mins (Q5_K's two-level scales multiplied out). pack_weight quantizes
  symmetrically (d = max |w| / 15 rounded up to float16, u = rint(w / d) +
  16 in [1, 31]); GGUF Q5_0, Q5_1 and Q5_K blocks are held exactly
  (int5g_arrays).
- float64 weights are rounded to float32 first, then to bfloat16, int8,
  int4, int8g, int6g or int5g (as torch does): bfloat16 can then differ
  from rounding once.

Adding a format: a WeightFormat subclass here (layout, pack, unpack, the
extra arrays it saves and checks, its kernel `kind`), registered in
FORMATS; its kind in csrc/cattn.h (CATTN_W_*), a case in csrc/weights.c and
its kernels (csrc/ and csrc/kernels/<isa>/); its name in
cattn/_gemm.pxi's WEIGHT_KINDS; tests in tests/ops/test_packed_formats.py.
docs/formats.md walks through it.
"""
import numpy as np

from .. import _ext
from .._validate import alloc, show

_I8_NR = 16        # int8 panels: 16 columns x pairs of k (csrc/cattn.h)
_Q4_NR, _Q4_G = 16, 32      # int4 panels: 16 columns x groups of 32 k (csrc/dispatch.h)


def round_bfloat16(w):
    """The bfloat16 bit patterns (uint16) of float32 w: to nearest, ties to
    even; NaN stays a (quiet) NaN with its sign; past the range -> +-inf."""
    u = np.ascontiguousarray(w, np.float32).view(np.uint32)
    r = ((u + (np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1)))) >> 16).astype(np.uint16)
    nan = np.isnan(w)
    if nan.any():
        r[nan] = ((u[nan] >> 16) | np.uint32(0x40)).astype(np.uint16)
    return r


def quantize_int8(w):
    """(qw int8 (N, K), sw float32 (N,)) of a finite float32 weight w (N, K):
    sw[j] = float32(max_k |w[j, k]| / 127) (computed in float64), qw =
    rint(w / sw) clipped to [-127, 127]; a row whose sw is 0 gives qw = 0."""
    w64 = np.asarray(w, np.float32).astype(np.float64)
    sw = (np.abs(w64).max(axis=1, initial=0.0) / 127.0).astype(np.float32)
    s64 = sw.astype(np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s64 > 0, np.rint(w64 / np.where(s64 > 0, s64, 1.0)), 0.0)
    return np.clip(q, -127, 127).astype(np.int8), sw


def int8_panels(q):
    """qw (N, K) int8 -> the packed panels (csrc/cattn.h): [jp][p][j][t]."""
    N, K = q.shape
    Np, k2 = -(-N // _I8_NR) * _I8_NR, -(-K // 2)
    full = np.zeros((Np, 2 * k2), np.int8)
    full[:N, :K] = q
    return full.reshape(Np // _I8_NR, _I8_NR, k2, 2).transpose(0, 2, 1, 3).reshape(-1).copy()


def int8_unpanel(data, N, K):
    """The panels -> qw (N, K) int8 (a view)."""
    Np, k2 = -(-N // _I8_NR) * _I8_NR, -(-K // 2)
    full = data.reshape(Np // _I8_NR, k2, _I8_NR, 2).transpose(0, 2, 1, 3).reshape(Np, 2 * k2)
    return full[:N, :K]


def _int8_sums(q, op):
    """colsum (N,) int32 of qw, after checking that the kernel's int32 sums are
    exact: 255 * sum_k |qw[j, k]| < 2^31 for every j."""
    absum = np.abs(q.astype(np.int64)).sum(axis=1)
    if absum.size and absum.max() * 255 > np.iinfo(np.int32).max:
        raise ValueError(f"{op}: in_features={q.shape[1]} is too large for exact int32 sums "
                         f"in int8 (255 * sum |qw| = {int(absum.max()) * 255} >= 2^31 for some "
                         "output); use bfloat16 or float32")
    assert _ext.qweight_ok(np.ascontiguousarray(absum, np.int32))
    return q.sum(axis=1, dtype=np.int64).astype(np.int32)


def _pad16(a, dtype):
    """a (N,) padded with 0 to a multiple of the int8 panels' 16 columns."""
    return np.concatenate([np.asarray(a, dtype), np.zeros(-len(a) % _I8_NR, dtype)])


def _f16_toward(x, down):
    """float64 x -> the float16 nearest below (down) or above it."""
    with np.errstate(over="ignore"):
        h = x.astype(np.float16)
    off = h.astype(np.float64) > x if down else h.astype(np.float64) < x
    return np.where(off, np.nextafter(h, np.float16(-np.inf if down else np.inf)), h)


def quantize_int4(w):
    """(q uint8 (N, K) in [0, 15], d (N, G), mn (N, G)) of a finite weight w
    (N, K), groups of 32 along K (G = ceil(K/32); the last one may be
    short), values d q + mn. Per group lo = min w, hi = max w (in float64):
    float16 scales when they hold the group: mn = lo rounded down to a
    float16, d = (hi - mn) / 15 rounded up (so every w lies in [mn, mn +
    15 d]); float32 ones (mn = lo, d = (hi - lo) / 15 to nearest) for a
    weight whose values pass float16's range. q = rint((w - mn) / d)
    clipped to [0, 15] (d = 0: q = 0). Every value is within half a step
    d / 2 (plus float32 rounding) of w."""
    w64 = np.asarray(w, np.float32).astype(np.float64)
    N, K = w64.shape
    G = -(-K // _Q4_G)
    full = np.full((N, G * _Q4_G), np.nan)
    full[:, :K] = w64
    blk = full.reshape(N, G, _Q4_G)
    lo = np.nanmin(blk, axis=2) if K else np.zeros((N, 0))
    hi = np.nanmax(blk, axis=2) if K else np.zeros((N, 0))
    mn = _f16_toward(lo, down=True)
    d = _f16_toward((hi - mn.astype(np.float64)) / 15.0, down=False)
    if not (np.isfinite(mn).all() and np.isfinite(d).all()
            and np.all(mn.astype(np.float64) + 15.0 * d.astype(np.float64) < 65504)):
        d, mn = ((hi - lo) / 15.0).astype(np.float32), lo.astype(np.float32)
    d64, mn64 = d.astype(np.float64)[:, :, None], mn.astype(np.float64)[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d64 > 0, np.rint((blk - mn64) / np.where(d64 > 0, d64, 1.0)), 0.0)
    q = np.clip(np.nan_to_num(q), 0, 15).astype(np.uint8).reshape(N, G * _Q4_G)[:, :K]
    return np.ascontiguousarray(q), d, mn


def int4_panels(q):
    """q (N, K) uint8 in [0, 15] -> the packed panels (csrc/dispatch.h,
    cattn_ukr_q4_t): [p][g][t][j][u], low nibble k = 32g + 8t + u, high
    nibble k + 4; 0 past N and K."""
    N, K = q.shape
    P, G = -(-N // _Q4_NR), -(-K // _Q4_G)
    full = np.zeros((P * _Q4_NR, G * _Q4_G), np.uint8)
    full[:N, :K] = q
    f = full.reshape(P, _Q4_NR, G, 4, 2, 4).transpose(0, 2, 3, 1, 5, 4)   # p g t j u h
    return (f[..., 0] | (f[..., 1] << 4)).reshape(-1).copy()


def int4_unpanel(data, N, K):
    """The panels -> q (N, K) uint8."""
    P, G = -(-N // _Q4_NR), -(-K // _Q4_G)
    b = data.reshape(P, G, 4, _Q4_NR, 4)
    f = np.stack([b & 0x0F, b >> 4], axis=-1)                              # p g t j u h
    return f.transpose(0, 3, 1, 2, 5, 4).reshape(P * _Q4_NR, G * _Q4_G)[:N, :K]


def _group_panels(a, N, take=False):
    """(N, G) per output and group -> (P, G, 16) panels of a's dtype (0 past N), read-only
    (written in place: no padded copy of a beside the panels). take: a's memory
    may become the panels' (a C-contiguous writeable a with N a multiple of 16
    is rearranged in place, a block of panels at a time: no second copy)."""
    P, G = -(-N // _Q4_NR), a.shape[1]
    if (take and N % _Q4_NR == 0 and a.flags.c_contiguous and a.flags.writeable
            and a.base is None):
        flat, step = a.reshape(-1), max(1, (1 << 16) // max(1, G * _Q4_NR))
        for p0 in range(0, P, step):
            p1 = min(P, p0 + step)
            blk = a[p0 * _Q4_NR:p1 * _Q4_NR].reshape(p1 - p0, _Q4_NR, G).transpose(0, 2, 1).copy()
            flat[p0 * G * _Q4_NR:p1 * G * _Q4_NR] = blk.reshape(-1)
        flat.flags.writeable = False
        return flat
    out = np.empty((P, G, _Q4_NR), a.dtype)
    n0 = N // _Q4_NR
    out[:n0] = a[:n0 * _Q4_NR].reshape(n0, _Q4_NR, G).transpose(0, 2, 1)
    if n0 < P:                                          # the last panel: rows past N are 0
        out[n0] = 0
        out[n0, :, :N - n0 * _Q4_NR] = a[n0 * _Q4_NR:].T
    out = out.reshape(-1)
    out.flags.writeable = False
    return out


def _all_finite(a, rows=1 << 14):
    """Every value of a float array (N, ...) is finite: checked a block of rows
    at a time (no full-size temporary)."""
    return all(np.isfinite(a[r:r + rows]).all() for r in range(0, max(len(a), 1), rows))


def _group_unpanel(a, N, G):
    P = -(-N // _Q4_NR)
    return a.reshape(P, G, _Q4_NR).transpose(0, 2, 1).reshape(P * _Q4_NR, G)[:N]


class WeightFormat(str):
    """A weight format, named by itself (a str: "float32", "bfloat16", ...).

    Attributes: compute (the np.dtype of inputs, bias and results), stored
    (the np.dtype of the packed data), kind (its cattn_linear_weight kind,
    None for a format the programs do not run: float64). Methods take and
    give plain arrays; PackedWeight wraps them."""

    compute = stored = kind = None

    def __new__(cls, name):
        return super().__new__(cls, name)

    def __eq__(self, other):
        """Equal to its name; "float32" / "float64" also to that NumPy dtype
        or scalar type (pack_weight(w).dtype == np.float32 holds)."""
        if isinstance(other, str):
            return str.__eq__(self, other)
        try:
            return np.dtype(other).name == str(self)
        except TypeError:
            return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__

    def __reduce__(self):
        """Pickled by name: loads as this build's format object of that name."""
        return (_format_named, (str(self),))

    def layout(self, N, K):
        """(elements of packed data, KC the packing depends on)."""
        raise NotImplementedError

    def pack(self, w, data, op):
        """Pack w (N, K) (float32 or float64, checked) into `data` (the
        layout's elements of `stored`); returns the extra arrays (a dict)."""
        raise NotImplementedError

    def unpack(self, data, shape, kc, extra):
        """The (N, K) weight the kernel computes with, a new `compute` array."""
        raise NotImplementedError

    def saved_extra(self, extra, shape):
        """The extra arrays to_arrays() saves (a dict)."""
        return {}

    def stacked_parts(self, extra):
        """The PackedWeights a stack is made of (the "stack" format), else None."""
        return None

    def extra_nbytes(self, extra):
        """Bytes of the extra arrays the kernels read (scales, mins, sub-scales)."""
        total = 0
        for k, a in extra.items():
            if k in ("scale", "min", "sub") and a is not None:
                total += a.nbytes
            elif k == "k" and a is not None:               # int4's two-level scales
                total += sum(x.nbytes for x in a)
        return total

    def rows(self, data, shape, kc, extra, ids):
        """unpack()[ids] for int64 ids (n,) in [0, N): the rows' values."""
        return self.unpack(data, shape, kc, extra)[ids]

    def panel_rows(self):
        """The rows of one panel: a weight built a block of rows at a time
        (PackedWeight.from_row_blocks) starts each block at a multiple."""
        return _Q4_NR

    def place_rows(self, data, shape, r0, part):
        """Put `part`, the packed data of rows [r0, r0 + n) of a (N, K)
        weight packed alone (r0 a multiple of panel_rows()), into the whole
        weight's `data`. Here panels of whole rows, one after another: the
        part is one contiguous run of them."""
        P = self.panel_rows()
        at = r0 * (self.layout(P, shape[1])[0] // P)
        data[at:at + part.size] = part

    def loaded_extra(self, d, data, shape, op, take=False):
        """The extra arrays of a from_arrays() dict d, checked (ValueError);
        take: d's arrays are handed over (from_arrays(copy=False)): their
        memory may be rearranged and kept."""
        return {}

    def linear(self, y, x, M, data, extra, shape, bias, act, nt):
        """y (M, N) = act(x (M, K) · W^T + bias): both contiguous, `compute`."""
        _ext.linear_weight(self.entry(data, extra, shape, bias), y, x, M, act, nt)

    def entry(self, data, extra, shape, bias):
        """The weight as the C programs take it: (kind, data, scale, colsum,
        bias, N, K, rsw, csw)."""
        return (self.kind, data, None, None, bias, shape[0], shape[1], 0, 0)


class _Panels(WeightFormat):
    """float32 / float64: the values in the GEMM's panels."""

    def layout(self, N, K):
        return _ext.packed_layout(self.compute == np.float32, N, K)

    def pack(self, w, data, op):
        if data.size:
            W = np.ascontiguousarray(w, dtype=self.compute)
            _ext.pack_weight(data, W, W.shape[1], 1, *W.shape)
        return {}

    def panels(self, data):
        """The float32 / float64 panels (bfloat16 widens them)."""
        return data

    def panel_rows(self):
        return _ext.gemm_blocks()["f64" if self.compute == np.float64 else "f32"]["NR"]

    def place_rows(self, data, shape, r0, part):
        """The GEMM's panels run per KC block of inputs over every row: each
        block of the part goes into its block of the whole."""
        N, K = shape
        if part.size == 0:
            return
        size, kc = self.layout(N, K)
        Np, n = size // K, part.size // K              # rows rounded up to the panels
        for pc in range(0, K, kc):
            k = min(kc, K - pc)
            data[pc * Np + r0 * k:pc * Np + (r0 + n) * k] = part[pc * n:pc * n + n * k]

    def rows(self, data, shape, kc, extra, ids):
        N, K = shape
        NR = self.panel_rows()
        Np = -(-N // NR) * NR
        jp, j = ids // NR, ids % NR
        out = np.empty((len(ids), K), self.compute)
        for pc in range(0, K, kc):
            k = min(kc, K - pc)
            blk = data[pc * Np:(pc + k) * Np].reshape(Np // NR, k, NR)
            out[:, pc:pc + k] = self.panels(blk[jp, :, j])
        return out

    def unpack(self, data, shape, kc, extra):
        N, K = shape
        NR = self.panel_rows()
        Np = -(-N // NR) * NR
        data = self.panels(data)
        W = np.empty((N, K), self.compute)
        for pc in range(0, K, kc):
            k = min(kc, K - pc)
            blk = data[pc * Np:(pc + k) * Np].reshape(Np // NR, k, NR)
            W[:, pc:pc + k] = blk.transpose(0, 2, 1).reshape(Np, k)[:N]
        return W


class _Float64(_Panels):
    def linear(self, y, x, M, data, extra, shape, bias, act, nt):
        N, K = shape
        _ext.linear_packed(y, N, 1, x, K, 1, data, M, N, K, bias, act, nt)

    def entry(self, data, extra, shape, bias):
        return None


class _BFloat16(_Panels):
    def layout(self, N, K):
        return _ext.packed_layout(True, N, K)

    def pack(self, w, data, op):
        size = data.size
        f32 = alloc((size,), np.float32, op, "the packed weight")
        if size:         # the float32 panels of the rounded values, high halves
            W = np.ascontiguousarray(w, dtype=np.float32)
            _ext.pack_weight(f32, (round_bfloat16(W).astype(np.uint32) << 16).view(np.float32),
                             W.shape[1], 1, *W.shape)
        data[...] = f32.view(np.uint32) >> 16
        return {}

    def panels(self, data):
        return (data.astype(np.uint32) << 16).view(np.float32)


class _BFloat16Dot(_BFloat16):
    """The bfloat16 panels, vdpbf16ps's formula (kind CATTN_W_BF16DOT)."""


def preferred_bfloat16():
    """The format bfloat16 values load in by default: "bfloat16dot" where
    the selected kernel path runs it on vdpbf16ps (AVX512_BF16; not with
    CATTN_ISA=avx2 or portable), else "bfloat16" (the float32 linear's
    bits). Fixed for the process (the path is chosen at import)."""
    return FORMATS["bfloat16dot" if _ext.native_bf16dot() else "bfloat16"]


class _Int8(WeightFormat):
    def layout(self, N, K):
        return _ext.qpacked_size(N, K), 0

    def pack(self, w, data, op):
        with np.errstate(over="ignore"):         # past float32's range: inf, refused below
            W = np.asarray(w, np.float32)
        if not np.all(np.isfinite(W)):
            raise ValueError(f"{op}: w holds NaN or inf (or values past float32's range); "
                             "int8 needs a finite weight")
        q, sw = quantize_int8(W)
        colsum = _int8_sums(q, op)
        data[...] = int8_panels(q)
        return self._extra(sw, colsum)

    @staticmethod
    def _extra(sw, colsum):
        """sw and sum_k qw, (N,) padded with 0 to the panels' 16 columns, read-only."""
        extra = {"scale": _pad16(sw, np.float32), "colsum": _pad16(colsum, np.int32)}
        for a in extra.values():
            a.flags.writeable = False
        return extra

    def unpack(self, data, shape, kc, extra):
        N, K = shape
        return int8_unpanel(data, N, K).astype(np.float32) * extra["scale"][:N, None]

    def saved_extra(self, extra, shape):
        return {"scale": extra["scale"][:shape[0]].copy()}

    def loaded_extra(self, d, data, shape, op, take=False):
        try:
            scale = d["scale"]
        except (KeyError, TypeError, IndexError):
            scale = None
        scale = None if scale is None else np.asarray(scale)
        if (scale is None or scale.dtype != np.float32 or scale.shape != shape[:1]
                or not np.all(np.isfinite(scale) & (scale >= 0))):
            raise ValueError(f"{op}: an int8 weight needs 'scale': finite float32 >= 0 of shape "
                             f"({shape[0]},), got {show(scale)}")
        q = int8_unpanel(data, *shape)
        if q.size and q.min() < -127:
            raise ValueError(f"{op}: int8 data holds -128; the format's values are [-127, 127]")
        return self._extra(scale, _int8_sums(q, op))

    def entry(self, data, extra, shape, bias):
        return (self.kind, data, extra["scale"], extra["colsum"], bias, shape[0], shape[1], 0, 0)


class _Int4(WeightFormat):
    def layout(self, N, K):
        return _ext.q4_packed_bytes(N, K), 0

    def pack(self, w, data, op):
        with np.errstate(over="ignore"):
            W = np.asarray(w, np.float32)
        if not np.all(np.isfinite(W)):
            raise ValueError(f"{op}: w holds NaN or inf (or values past float32's range); "
                             "int4 needs a finite weight")
        q, d, mn = quantize_int4(W)
        data[...] = int4_panels(q)
        return self._extra(d, mn, 0, W.shape[0])

    @staticmethod
    def _extra(d, mn, z, N, k=None, take=False):
        """k: the two-level scales (sc, m (N, G) u8; D, Dmin (N, G/8) float16):
        d = D sc, mn = -(Dmin m) per group (GGUF Q4_K), kept in 4.6 bits a weight."""
        if k is not None:
            return {"scale": None, "min": None, "zero": 0,
                    "k": tuple(_group_panels(np.asarray(a), N, take) for a in k)}
        return {"scale": _group_panels(d, N, take),
                "min": None if mn is None else _group_panels(mn, N, take),
                "zero": int(z)}

    @staticmethod
    def _k_values(k, N, G, rows=None):
        """(d, mn) float32 (n, G) of the two-level scales (panels), rows all or given."""
        P = -(-N // _Q4_NR)
        rows = np.arange(N) if rows is None else rows
        p, j = rows // _Q4_NR, rows % _Q4_NR
        sc, m = (a.reshape(P, G, _Q4_NR)[p, :, j].astype(np.float32) for a in k[:2])
        D, Dm = (a.reshape(P, G // 8, _Q4_NR)[p, :, j].astype(np.float32) for a in k[2:])
        g8 = np.arange(G) // 8
        return D[:, g8] * sc, -(Dm[:, g8] * m)

    def unpack(self, data, shape, kc, extra):
        N, K = shape
        G = -(-K // _Q4_G)
        q = int4_unpanel(data, N, K).astype(np.float32)
        idx = np.arange(K) // _Q4_G
        if extra.get("k") is not None:
            d, mn = self._k_values(extra["k"], N, G)
            return d[:, idx] * q + mn[:, idx]
        d = _group_unpanel(extra["scale"], N, G)[:, idx].astype(np.float32)
        if extra["min"] is None:
            return d * (q - np.float32(extra["zero"]))
        return d * q + _group_unpanel(extra["min"], N, G)[:, idx].astype(np.float32)

    def _row_parts(self, extra, shape, ids):
        """(d, mn or None) of rows ids, (n, K) float32 per input."""
        N, K = shape
        G, P = -(-K // _Q4_G), -(-N // _Q4_NR)
        p, j, g = ids // _Q4_NR, ids % _Q4_NR, np.arange(K) // _Q4_G
        if extra.get("k") is not None:
            d, mn = self._k_values(extra["k"], N, G, ids)
            return d[:, g], mn[:, g]

        def pick(a):
            return a.reshape(P, G, _Q4_NR)[p, :, j][:, g].astype(np.float32)
        return pick(extra["scale"]), None if extra["min"] is None else pick(extra["min"])

    def rows(self, data, shape, kc, extra, ids):
        N, K = shape
        G, P = -(-K // _Q4_G), -(-N // _Q4_NR)
        b = data.reshape(P, G, 4, _Q4_NR, 4)[ids // _Q4_NR, :, :, ids % _Q4_NR]   # (n, G, 4, 4)
        q = np.stack([b & 0x0F, b >> 4], axis=-2).reshape(len(ids), G * _Q4_G)[:, :K]
        q = q.astype(np.float32)
        d, mn = self._row_parts(extra, shape, ids)
        return d * (q - np.float32(extra["zero"])) if mn is None else d * q + mn

    def saved_extra(self, extra, shape):
        N, K = shape
        G = -(-K // _Q4_G)
        if extra.get("k") is not None:
            sc, m, D, Dm = extra["k"]
            return {"ksc": _group_unpanel(sc, N, G).copy(), "kmin": _group_unpanel(m, N, G).copy(),
                    "kd": _group_unpanel(D, N, G // 8).copy(),
                    "kdmin": _group_unpanel(Dm, N, G // 8).copy(), "zero": np.array(0, np.int64)}
        out = {"scale": _group_unpanel(extra["scale"], N, G).copy(),
               "zero": np.array(extra["zero"], np.int64)}
        if extra["min"] is not None:
            out["min"] = _group_unpanel(extra["min"], N, G).copy()
        return out

    def loaded_extra(self, d, data, shape, op, take=False):
        N, K = shape
        G = -(-K // _Q4_G)

        def get(key):
            try:
                return None if d[key] is None else np.asarray(d[key])
            except (KeyError, TypeError, IndexError):
                return None

        scale, mn, z = get("scale"), get("min"), get("zero")
        if get("ksc") is not None:                     # two-level scales (Q4_K)
            want = {"ksc": (np.uint8, (N, G)), "kmin": (np.uint8, (N, G)),
                    "kd": (np.float16, (N, G // 8)), "kdmin": (np.float16, (N, G // 8))}
            parts = []
            for name, (dt, shp) in want.items():
                a = get(name)
                if (a is None or a.dtype != dt or a.shape != shp or G % 8
                        or (dt == np.float16 and not np.all(np.isfinite(a)))):
                    raise ValueError(f"{op}: an int4 weight with two-level scales needs {name!r}: "
                                     f"{np.dtype(dt).name} of shape {shp} (finite; groups a "
                                     f"multiple of 8), got {show(a)}")
                parts.append(a)
            return self._extra(None, None, 0, N, k=parts, take=take)
        for name, a in (("scale", scale), ("min", mn)):
            if a is None and name == "min":
                continue
            if (a is None or a.dtype not in (np.float32, np.float16) or a.shape != (N, G)
                    or not _all_finite(a)):
                raise ValueError(f"{op}: an int4 weight needs {name!r}: finite float32 or "
                                 f"float16 of shape ({N}, {G}) (per output and group of 32), "
                                 f"got {show(a)}")
        if mn is not None and mn.dtype != scale.dtype:
            raise ValueError(f"{op}: an int4 weight's 'min' has dtype {mn.dtype}, its 'scale' "
                             f"{scale.dtype}: they must match")
        if z is None or z.shape != () or z.dtype.kind not in "iu" or int(z) not in (0, 8):
            raise ValueError(f"{op}: an int4 weight needs 'zero': 0 or 8, got {show(z)}")
        if mn is not None and int(z) != 0:
            raise ValueError(f"{op}: an int4 weight with mins has 'zero' 0, got {int(z)}")
        return self._extra(scale, mn, int(z), N, take=take)

    def entry(self, data, extra, shape, bias):
        return (self.kind, data, extra["scale"], extra["min"], bias, shape[0], shape[1],
                extra["zero"], None, extra.get("k"))


def int4_arrays(q, d, mn=None, z=0):
    """The to_arrays() dict of the int4 weight with values d q + mn (mn
    None: d (q - z)): q uint8 (N, K) in [0, 15], d and mn float32 (N,
    ceil(K/32)) per output and group of 32, both float16 or both float32,
    z 0 or 8. PackedWeight.from_arrays of it holds those values exactly
    (GGUF's Q4_0, Q4_1 blocks with their float16 scales; Q4_K's in float32)."""
    q = np.asarray(q, np.uint8)
    N, K = q.shape
    out = {"format": np.array("int4"), "shape": np.array((N, K), np.int64),
           "kc": np.array(0, np.int64), "data": int4_panels(q),
           "scale": np.asarray(d), "zero": np.array(z, np.int64)}
    if mn is not None:
        out["min"] = np.asarray(mn)
    return out


def quantize_int8g(w):
    """(u uint8 (N, K), d (N, G)) of a finite weight w: per group of 32,
    symmetric as GGUF's Q8_0: d = max |w| / 127 rounded up to a float16
    (float32 to nearest past float16's range), u = rint(w / d) + 128 in
    [1, 255] (d = 0: u = 128); values d (u - 128)."""
    w64 = np.asarray(w, np.float32).astype(np.float64)
    N, K = w64.shape
    G = -(-K // _Q4_G)
    full = np.zeros((N, G * _Q4_G))
    full[:, :K] = w64
    blk = full.reshape(N, G, _Q4_G)
    amax = np.abs(blk).max(axis=2) if K else np.zeros((N, 0))
    d = _f16_toward(amax / 127.0, down=False)
    if not np.isfinite(d).all():
        d = (amax / 127.0).astype(np.float32)
    d64 = d.astype(np.float64)[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d64 > 0, np.rint(blk / np.where(d64 > 0, d64, 1.0)), 0.0)
    u = (np.clip(q, -127, 127) + 128).astype(np.uint8).reshape(N, G * _Q4_G)[:, :K]
    return np.ascontiguousarray(u), d


def int8g_panels(u):
    """u (N, K) uint8 -> the packed panels (csrc/dispatch.h, cattn_ukr_q8g_t):
    [p][g][t][j][v] = u[16p + j, 32g + 4t + v]; 0 past N and K."""
    N, K = u.shape
    P, G = -(-N // _Q4_NR), -(-K // _Q4_G)
    if N % _Q4_NR or K % _Q4_G:                # whole panels and groups: no padded copy
        full = np.zeros((P * _Q4_NR, G * _Q4_G), np.uint8)
        full[:N, :K] = u
    else:
        full = np.asarray(u)
    return full.reshape(P, _Q4_NR, G, 8, 4).transpose(0, 2, 3, 1, 4).reshape(-1)


def int8g_unpanel(data, N, K):
    P, G = -(-N // _Q4_NR), -(-K // _Q4_G)
    return data.reshape(P, G, 8, _Q4_NR, 4).transpose(0, 3, 1, 2, 4).reshape(
        P * _Q4_NR, G * _Q4_G)[:N, :K]


def _sub_panels(s, N):
    """(N, 2G) int8 sub-scales -> (P, G, 2, 16) panels (0 past N), read-only (written
    in place, as _group_panels)."""
    P, G2 = -(-N // _Q4_NR), s.shape[1]
    out = np.empty((P, G2 // 2, 2, _Q4_NR), np.int8)
    n0 = N // _Q4_NR
    out[:n0] = s[:n0 * _Q4_NR].reshape(n0, _Q4_NR, G2 // 2, 2).transpose(0, 2, 3, 1)
    if n0 < P:
        out[n0] = 0
        out[n0, :, :, :N - n0 * _Q4_NR] = s[n0 * _Q4_NR:].reshape(-1, G2 // 2, 2).transpose(1, 2, 0)
    out = out.reshape(-1)
    out.flags.writeable = False
    return out


def _sub_unpanel(a, N, G):
    P = -(-N // _Q4_NR)
    return a.reshape(P, G, 2, _Q4_NR).transpose(0, 3, 1, 2).reshape(P * _Q4_NR, 2 * G)[:N]


class _Int8G(_Int4):
    """int8g: _Int4's scales and mins, 8-bit values, optional int8 sub-scales per 16."""

    def layout(self, N, K):
        return _ext.q8g_packed_bytes(N, K), 0

    def pack(self, w, data, op):
        with np.errstate(over="ignore"):
            W = np.asarray(w, np.float32)
        if not np.all(np.isfinite(W)):
            raise ValueError(f"{op}: w holds NaN or inf (or values past float32's range); "
                             "int8g needs a finite weight")
        u, d = quantize_int8g(W)
        data[...] = int8g_panels(u)
        e = self._extra8(d, None, None, 128, W.shape[0])
        e["ubits"] = _ubits(data)
        return e

    def _values(self, data, N, K):
        """u (N, K), the stored values."""
        return int8g_unpanel(data, N, K)

    def _row_values(self, data, shape, ids):
        """u[ids] (n, K)."""
        N, K = shape
        G, P = -(-K // _Q4_G), -(-N // _Q4_NR)
        u = data.reshape(P, G, 8, _Q4_NR, 4)[ids // _Q4_NR, :, :, ids % _Q4_NR]   # (n, G, 8, 4)
        return u.reshape(len(ids), G * _Q4_G)[:, :K]

    def _extra8(self, d, mn, sub, z, N):
        e = self._extra(d, mn, z, N)
        e["sub"] = None if sub is None else _sub_panels(sub, N)
        return e

    def unpack(self, data, shape, kc, extra):
        N, K = shape
        G = -(-K // _Q4_G)
        u = self._values(data, N, K).astype(np.float32) - np.float32(extra["zero"])
        d = _group_unpanel(extra["scale"], N, G)[:, np.arange(K) // _Q4_G].astype(np.float32)
        if extra["sub"] is not None:
            d = d * _sub_unpanel(extra["sub"], N, G)[:, np.arange(K) // 16].astype(np.float32)
        out = d * u
        if extra["min"] is not None:
            out = out + _group_unpanel(extra["min"], N, G)[:, np.arange(K) // _Q4_G].astype(np.float32)
        return out

    def rows(self, data, shape, kc, extra, ids):
        N, K = shape
        G, P = -(-K // _Q4_G), -(-N // _Q4_NR)
        u = self._row_values(data, shape, ids).astype(np.float32) - np.float32(extra["zero"])
        d, mn = self._row_parts(extra, shape, ids)
        if extra["sub"] is not None:
            s = extra["sub"].reshape(P, G, 2, _Q4_NR)[ids // _Q4_NR, :, :, ids % _Q4_NR]
            d = d * s.reshape(len(ids), 2 * G)[:, np.arange(K) // 16].astype(np.float32)
        out = d * u
        return out if mn is None else out + mn

    def saved_extra(self, extra, shape):
        out = super().saved_extra(extra, shape)
        if extra["sub"] is not None:
            out["sub"] = _sub_unpanel(extra["sub"], shape[0], -(-shape[1] // _Q4_G)).copy()
        return out

    def loaded_extra(self, d, data, shape, op, take=False):
        N, K = shape
        G = -(-K // _Q4_G)
        try:
            z, sub = d["zero"], d.get("sub") if hasattr(d, "get") else None
        except (KeyError, TypeError, IndexError):
            z, sub = None, None
        z = None if z is None else np.asarray(z)
        if z is None or z.shape != () or z.dtype.kind not in "iu" or not 0 <= int(z) <= 255:
            raise ValueError(f"{op}: an int8g weight needs 'zero': 0 to 255, got {show(z)}")
        fake = dict(d)
        fake["zero"] = np.array(0 if "min" in fake and fake["min"] is not None else 8)
        e = _Int4.loaded_extra(self, fake, data, shape, op, take)
        e["zero"] = int(z)
        if sub is not None:
            sub = np.asarray(sub)
            if sub.dtype != np.int8 or sub.shape != (N, 2 * G):
                raise ValueError(f"{op}: an int8g weight's 'sub' must be int8 of shape "
                                 f"({N}, {2 * G}) (per output and 16 inputs), got {show(sub)}")
        e["sub"] = None if sub is None else _sub_panels(sub, N)
        e["ubits"] = _ubits(data)
        return e

    def entry(self, data, extra, shape, bias):
        return (self.kind, data, extra["scale"], extra["min"], bias, shape[0], shape[1],
                extra["zero"], extra["sub"], None, extra["ubits"])


def _ubits(data):
    """The bits the largest stored value needs (every u < 2^ubits; GGUF's
    Q5_x / Q6_K values need 5 / 6): kernels may sum narrow values in 16 bits."""
    top = int(data.max()) if data.size else 0
    return max(1, top.bit_length())


def int4_k_arrays(q, D, Dmin, sc, m):
    """The to_arrays() dict of the int4 weight with two-level scales: values
    (D sc) q - (Dmin m) per group of 32 (D, Dmin float16 (N, K/256); sc, m
    uint8 (N, K/32)): GGUF's Q4_K blocks as stored, 4.6 bits a weight."""
    q = np.asarray(q, np.uint8)
    N, K = q.shape
    return {"format": np.array("int4"), "shape": np.array((N, K), np.int64),
            "kc": np.array(0, np.int64), "data": int4_panels(q), "zero": np.array(0, np.int64),
            "ksc": np.asarray(sc, np.uint8), "kmin": np.asarray(m, np.uint8),
            "kd": np.asarray(D, np.float16), "kdmin": np.asarray(Dmin, np.float16)}


def int8g_arrays(u, d, mn=None, sub=None, z=0):
    """The to_arrays() dict of the int8g weight with values (d s) (u - z) +
    mn: u uint8 (N, K); d, mn (N, ceil(K/32)) float16 or float32; sub None
    or int8 (N, 2 ceil(K/32)) per 16 inputs; z in [0, 255] (GGUF's Q8_0,
    Q5_0, Q5_1, Q5_K, Q6_K blocks, held exactly)."""
    u = np.asarray(u, np.uint8)
    N, K = u.shape
    out = {"format": np.array("int8g"), "shape": np.array((N, K), np.int64),
           "kc": np.array(0, np.int64), "data": int8g_panels(u), "scale": np.asarray(d),
           "zero": np.array(z, np.int64)}
    if mn is not None:
        out["min"] = np.asarray(mn)
    if sub is not None:
        out["sub"] = np.asarray(sub, np.int8)
    return out


def _quantize_sym(w, top):
    """(u uint8 (N, K), d (N, G)) of a finite weight w: per group of 32,
    symmetric: d = max |w| / top rounded up to a float16 (float32 to nearest
    past float16's range), u = rint(w / d) + top + 1 in [1, 2 top + 1]
    (d = 0: u = top + 1); values d (u - top - 1)."""
    w64 = np.asarray(w, np.float32).astype(np.float64)
    N, K = w64.shape
    G = -(-K // _Q4_G)
    full = np.zeros((N, G * _Q4_G))
    full[:, :K] = w64
    blk = full.reshape(N, G, _Q4_G)
    amax = np.abs(blk).max(axis=2) if K else np.zeros((N, 0))
    d = _f16_toward(amax / float(top), down=False)
    if not np.isfinite(d).all():
        d = (amax / float(top)).astype(np.float32)
    d64 = d.astype(np.float64)[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(d64 > 0, np.rint(blk / np.where(d64 > 0, d64, 1.0)), 0.0)
    u = (np.clip(q, -top, top) + top + 1).astype(np.uint8).reshape(N, G * _Q4_G)[:, :K]
    return np.ascontiguousarray(u), d


def quantize_int6g(w):
    """(u uint8 (N, K), d (N, G)) of a finite weight w: per group of 32,
    symmetric: d = max |w| / 31 rounded up to a float16 (float32 to nearest
    past float16's range), u = rint(w / d) + 32 in [1, 63] (d = 0: u = 32);
    values d (u - 32)."""
    return _quantize_sym(w, 31)


def quantize_int5g(w):
    """quantize_int6g's rule in 5 bits: d = max |w| / 15 rounded up to a
    float16, u = rint(w / d) + 16 in [1, 31]; values d (u - 16)."""
    return _quantize_sym(w, 15)


def int6g_panels(u):
    """u (N, K) uint8, every value < 64 -> the int6g panels (csrc/dispatch.h,
    ukr_q6g): per panel p and group g, 256 bytes of the low 4 bits in int4's
    layout (int4_panels), then 128 bytes [s][j][v] whose bits 2f, 2f + 1 are
    u[16p + j, 32g + 16s + 4f + v] >> 4; 0 past N and K."""
    N, K = u.shape
    P, G = -(-N // _Q4_NR), -(-K // _Q4_G)
    full = np.zeros((P * _Q4_NR, G * _Q4_G), np.uint8)
    full[:N, :K] = u
    low = int4_panels(full & np.uint8(15)).reshape(P, G, 256)
    top = (full >> 4).reshape(P, _Q4_NR, G, 2, 4, 4).transpose(0, 2, 3, 1, 5, 4)  # p g s j v f
    t = top[..., 0] | top[..., 1] << 2 | top[..., 2] << 4 | top[..., 3] << 6
    return np.concatenate([low, t.reshape(P, G, 128)], axis=2).reshape(-1)


def int6g_unpanel(data, N, K):
    P, G = -(-N // _Q4_NR), -(-K // _Q4_G)
    b = data.reshape(P, G, 384)
    low = int4_unpanel(np.ascontiguousarray(b[:, :, :256]).reshape(-1), P * _Q4_NR, G * _Q4_G)
    t = b[:, :, 256:].reshape(P, G, 2, _Q4_NR, 4)                                  # p g s j v
    top = np.stack([(t >> (2 * f)) & 3 for f in range(4)], axis=-1)               # p g s j v f
    top = top.transpose(0, 3, 1, 2, 5, 4).reshape(P * _Q4_NR, G * _Q4_G)
    return (low | top << 4)[:N, :K]


def int5g_panels(u):
    """u (N, K) uint8, every value < 32 -> the int5g panels (csrc/dispatch.h,
    ukr_q5g): per panel p and group g, 256 bytes of the low 4 bits in int4's
    layout (int4_panels), then 64 bytes [j][v] whose bit f is u[16p + j,
    32g + 4f + v] >> 4; 0 past N and K."""
    N, K = u.shape
    P, G = -(-N // _Q4_NR), -(-K // _Q4_G)
    full = np.zeros((P * _Q4_NR, G * _Q4_G), np.uint8)
    full[:N, :K] = u
    low = int4_panels(full & np.uint8(15)).reshape(P, G, 256)
    top = ((full >> 4) & 1).reshape(P, _Q4_NR, G, 8, 4).transpose(0, 2, 1, 4, 3)  # p g j v f
    t = np.zeros(top.shape[:-1], np.uint8)
    for f in range(8):
        t |= top[..., f] << f
    return np.concatenate([low, t.reshape(P, G, 64)], axis=2).reshape(-1)


def _int5g_top(t):
    """(.., 4 v) bytes of the top plane -> (.., 32 k) top bits (k = 4f + v)."""
    bits = np.stack([(t >> f) & 1 for f in range(8)], axis=-2)          # .. f v
    return bits.reshape(t.shape[:-1] + (_Q4_G,))


def int5g_unpanel(data, N, K):
    P, G = -(-N // _Q4_NR), -(-K // _Q4_G)
    b = data.reshape(P, G, 320)
    low = int4_unpanel(np.ascontiguousarray(b[:, :, :256]).reshape(-1), P * _Q4_NR, G * _Q4_G)
    top = _int5g_top(b[:, :, 256:].reshape(P, G, _Q4_NR, 4))                   # p g j k
    top = top.transpose(0, 2, 1, 3).reshape(P * _Q4_NR, G * _Q4_G)
    return (low | top << 4)[:N, :K]


def _int6g_rows(b, ids):
    """int6g panels' bytes (P, G, 384) -> u[ids] (n, G * 32)."""
    n, G = len(ids), b.shape[1]
    lo = b[:, :, :256].reshape(-1, G, 4, _Q4_NR, 4)[ids // _Q4_NR, :, :, ids % _Q4_NR]  # n G t v
    q = np.stack([lo & 15, lo >> 4], axis=-2).reshape(n, G, 2, 16)                    # k = 16s + ..
    t = b[:, :, 256:].reshape(-1, G, 2, _Q4_NR, 4)[ids // _Q4_NR, :, :, ids % _Q4_NR]  # n G s v
    top = np.stack([(t >> (2 * f)) & 3 for f in range(4)], axis=-2)                  # n G s f v
    return (q | top.reshape(n, G, 2, 16) << 4).reshape(n, G * _Q4_G)


def _int5g_rows(b, ids):
    """int5g panels' bytes (P, G, 320) -> u[ids] (n, G * 32)."""
    n, G = len(ids), b.shape[1]
    lo = b[:, :, :256].reshape(-1, G, 4, _Q4_NR, 4)[ids // _Q4_NR, :, :, ids % _Q4_NR]  # n G t v
    q = np.stack([lo & 15, lo >> 4], axis=-2).reshape(n, G, _Q4_G)
    top = _int5g_top(b[:, :, 256:].reshape(-1, G, _Q4_NR, 4)[ids // _Q4_NR, :, ids % _Q4_NR])
    return (q | top << 4).reshape(n, G * _Q4_G)


class _Narrow(_Int8G):
    """int6g / int5g: int8g's values, formula and extra arrays, every u <
    2^bits held in `bits` bits (the low 4 as int4's nibbles, the rest in a
    plane beside them)."""

    def __new__(cls, name, bits, quantize, panels, unpanel, rows_of):
        self = super().__new__(cls, name)
        self.bits, self._quantize, self._panels = bits, quantize, panels
        self._unpanel, self._rows_of = unpanel, rows_of
        return self

    def layout(self, N, K):
        return _ext.q6g_packed_bytes(N, K) if self.bits == 6 else _ext.q5g_packed_bytes(N, K), 0

    def pack(self, w, data, op):
        with np.errstate(over="ignore"):
            W = np.asarray(w, np.float32)
        if not np.all(np.isfinite(W)):
            raise ValueError(f"{op}: w holds NaN or inf (or values past float32's range); "
                             f"{self} needs a finite weight")
        u, d = self._quantize(W)
        data[...] = self._panels(u)
        e = self._extra8(d, None, None, 1 << (self.bits - 1), W.shape[0])
        e["ubits"] = self.bits
        return e

    def _values(self, data, N, K):
        return self._unpanel(data, N, K)

    def _row_values(self, data, shape, ids):
        N, K = shape
        G, P = -(-K // _Q4_G), -(-N // _Q4_NR)
        return self._rows_of(data.reshape(P, G, 64 * self.bits), ids)[:, :K]

    def loaded_extra(self, d, data, shape, op, take=False):
        e = super().loaded_extra(d, data, shape, op, take)
        e["ubits"] = self.bits
        return e


def _narrow_arrays(name, panels, top, u, d, mn, sub, z):
    u = np.asarray(u, np.uint8)
    if u.size and int(u.max()) > top:
        raise ValueError(f"{name}_arrays: every value must be below {top + 1}, got {int(u.max())}")
    out = {"format": np.array(name), "shape": np.array(u.shape, np.int64),
           "kc": np.array(0, np.int64), "data": panels(u), "scale": np.asarray(d),
           "zero": np.array(z, np.int64)}
    if mn is not None:
        out["min"] = np.asarray(mn)
    if sub is not None:
        out["sub"] = np.asarray(sub, np.int8)
    return out


def int6g_arrays(u, d, mn=None, sub=None, z=0):
    """The to_arrays() dict of the int6g weight with values (d s) (u - z) +
    mn, int8g_arrays' arguments with every u < 64 (GGUF's Q6_K blocks, held
    exactly)."""
    return _narrow_arrays("int6g", int6g_panels, 63, u, d, mn, sub, z)


def int5g_arrays(u, d, mn=None, sub=None, z=0):
    """The to_arrays() dict of the int5g weight with values (d s) (u - z) +
    mn, int8g_arrays' arguments with every u < 32 (GGUF's Q5_0, Q5_1, Q5_K
    blocks, held exactly)."""
    return _narrow_arrays("int5g", int5g_panels, 31, u, d, mn, sub, z)


def _make(cls, name, compute, stored):
    f = cls(name)
    f.compute, f.stored = np.dtype(compute), np.dtype(stored)
    f.kind = _ext.WEIGHT_KINDS.get(name)
    return f


def _format_named(name):
    return FORMATS[name]


def _make_narrow(name, *args):
    f = _Narrow(name, *args)
    f.compute, f.stored = np.dtype(np.float32), np.dtype(np.uint8)
    f.kind = _ext.WEIGHT_KINDS.get(name)
    return f


FORMATS = {f: f for f in (
    _make(_Panels, "float32", np.float32, np.float32),
    _make(_Float64, "float64", np.float64, np.float64),
    _make(_BFloat16, "bfloat16", np.float32, np.uint16),
    _make(_BFloat16Dot, "bfloat16dot", np.float32, np.uint16),
    _make(_Int8, "int8", np.float32, np.int8),
    _make(_Int4, "int4", np.float32, np.uint8),
    _make(_Int8G, "int8g", np.float32, np.uint8),
    _make_narrow("int6g", 6, quantize_int6g, int6g_panels, int6g_unpanel, _int6g_rows),
    _make_narrow("int5g", 5, quantize_int5g, int5g_panels, int5g_unpanel, _int5g_rows),
)}
