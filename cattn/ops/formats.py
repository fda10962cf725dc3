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
  linear on the rounded weight, bit for bit.
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
- float64 weights are rounded to float32 first, then to bfloat16 or int8
  (as torch does): bfloat16 can then differ from rounding once.

Adding a format: a WeightFormat subclass here (layout, pack, unpack, the
extra arrays it saves and checks, its kernel `kind`), registered in
FORMATS; its kind in csrc/cattn.h (CATTN_W_*), a case in csrc/weights.c and
its kernels (csrc/ and csrc/kernels/<isa>/); its name in
cattn/_gemm.pxi's WEIGHT_KINDS; tests in tests/test_packed_formats.py.
docs/formats.md walks through it.
"""
import numpy as np

from .. import _ext
from .._validate import alloc, show

_I8_NR = 16        # int8 panels: 16 columns x pairs of k (csrc/cattn.h)


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

    def loaded_extra(self, d, data, shape, op):
        """The extra arrays of a from_arrays() dict d, checked (ValueError)."""
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

    def unpack(self, data, shape, kc, extra):
        N, K = shape
        NR = _ext.gemm_blocks()["f64" if self.compute == np.float64 else "f32"]["NR"]
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

    def loaded_extra(self, d, data, shape, op):
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


def _make(cls, name, compute, stored):
    f = cls(name)
    f.compute, f.stored = np.dtype(compute), np.dtype(stored)
    f.kind = _ext.WEIGHT_KINDS.get(name)
    return f


FORMATS = {f: f for f in (
    _make(_Panels, "float32", np.float32, np.float32),
    _make(_Float64, "float64", np.float64, np.float64),
    _make(_BFloat16, "bfloat16", np.float32, np.uint16),
    _make(_Int8, "int8", np.float32, np.int8),
)}
