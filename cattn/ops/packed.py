"""cattn.ops.packed — weights packed once for cattn.linear (cattn.pack_weight).

A linear layer reads its weight W (N, K) (torch's layout: out_features x
in_features) on every call; the GEMM first packs it into column panels
(csrc/gemm_tmpl.h states the layout). PackedWeight keeps that packed form,
so the many-row path skips the per-call packing and the few-row path
(<= 12 rows: token-by-token decoding, a short sentence) streams the panels
instead of transposing W on the fly. Results are the same bits as
cattn.linear on the plain weight, for any number of rows.

Formats (cattn.linear computes in the format's dtype: float32, or float64):
- "float32", "float64": the weight's values, prepacked.
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
  kernel path (portable, AVX2) and thread count; an activation is then that
  path's activation kernel (cattn.gelu etc.: the paths can differ by an ulp
  in the far tails of gelu).
  Limits of the formula: each row keeps ~8 bits relative to its largest
  magnitude (one huge value zeroes the small ones); (float)t * sa can
  overflow to inf before * sw when |x| is near 1e33 or more, and a row whose
  range is below ~1e-36 gets a subnormal (or zero) scale and loses precision.
- float64 weights are rounded to float32 first, then to bfloat16 or int8
  (as torch does): bfloat16 can then differ from rounding once.

Packed data of 64 KiB or more lives in shared huge-page blocks
(weight_memory.py): only speed depends on it.
"""
import numpy as np

from .. import _ext
from .._validate import alloc, as_float_array, show
from . import weight_memory

FORMATS = ("float32", "float64", "bfloat16", "int8")
# the arithmetic's dtype (of inputs and results), and the stored data's
_DTYPES = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
           "bfloat16": np.dtype(np.float32), "int8": np.dtype(np.float32)}
_STORED = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64),
           "bfloat16": np.dtype(np.uint16), "int8": np.dtype(np.int8)}
_I8_NR = 16        # int8 panels: 16 columns x pairs of k (csrc/cattn.h)


def _layout(fmt, N, K):
    """(elements of data, KC) of a packed (N, K) weight in format fmt."""
    if fmt == "int8":
        return _ext.qpacked_size(N, K), 0
    return _ext.packed_layout(fmt != "float64", N, K)


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


def _int8_panels(q):
    """qw (N, K) int8 -> the packed panels (csrc/cattn.h): [jp][p][j][t]."""
    N, K = q.shape
    Np, k2 = -(-N // _I8_NR) * _I8_NR, -(-K // 2)
    full = np.zeros((Np, 2 * k2), np.int8)
    full[:N, :K] = q
    return full.reshape(Np // _I8_NR, _I8_NR, k2, 2).transpose(0, 2, 1, 3).reshape(-1).copy()


def _int8_unpanel(data, N, K):
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


class PackedWeight:
    """A (N, K) weight packed for cattn.linear: make one with
    cattn.pack_weight(w). Attributes: shape (N, K), dtype, format, nbytes.
    to_arrays() / PackedWeight.from_arrays(d) round-trip through plain NumPy
    arrays (np.savez-able); pickle works. unpack() gives W back."""

    __slots__ = ("_data", "_shape", "_format", "_kc", "_scale", "_colsum")

    def __init__(self, *args, **kwargs):
        raise TypeError("PackedWeight: make one with cattn.pack_weight(w, dtype=...) or "
                        "PackedWeight.from_arrays(d)")

    @classmethod
    def _new(cls, data, shape, fmt, kc, scale=None, colsum=None):
        self = object.__new__(cls)
        self._data, self._shape, self._format, self._kc = data, shape, fmt, kc
        # int8: sw and sum_k qw, (N,) padded with 0 to the panels' 16 columns
        if scale is not None:
            pad = -len(scale) % _I8_NR
            scale = np.concatenate([scale, np.zeros(pad, np.float32)])
            colsum = np.concatenate([colsum, np.zeros(pad, np.int32)])
        self._scale, self._colsum = scale, colsum
        for a in (data, scale, colsum):
            if a is not None:
                a.flags.writeable = False
        return self

    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        """The dtype of the arithmetic (and of inputs and results)."""
        return _DTYPES[self._format]

    @property
    def format(self):
        return self._format

    @property
    def nbytes(self):
        """Bytes of the packed data (and of int8's scales)."""
        return self._data.nbytes + (0 if self._scale is None else self._scale.nbytes)

    def kernel_arrays(self):
        """(data, scale, colsum): the read-only arrays the kernels take (the
        packed panels in their stored dtype; int8's per-channel scales and
        sums of qw, padded with 0 to 16 columns; None for other formats)."""
        return self._data, self._scale, self._colsum

    def __repr__(self):
        return f"PackedWeight(shape={self._shape}, format={self._format!r}, nbytes={self.nbytes})"

    def to_arrays(self):
        """{'format', 'shape', 'kc', 'data'} (+ 'scale' for int8): plain NumPy
        arrays (np.savez-able)."""
        d = {"format": np.array(self._format), "shape": np.array(self._shape, np.int64),
             "kc": np.array(self._kc, np.int64), "data": self._data.copy()}
        if self._scale is not None:
            d["scale"] = self._scale[:self._shape[0]].copy()
        return d

    @classmethod
    def from_arrays(cls, d):
        """The PackedWeight that to_arrays() described (d: a dict or an
        np.load result). ValueError if it does not fit this build."""
        op = "PackedWeight.from_arrays"
        try:
            fmt, shape, kc, data = (d["format"], d["shape"], d["kc"], d["data"])
        except (KeyError, TypeError, IndexError):
            raise ValueError(f"{op}: expected the dict of to_arrays() (format, shape, kc, data), "
                             f"got {show(d)}") from None
        try:
            scale = d["scale"]
        except (KeyError, TypeError, IndexError):
            scale = None
        fmt = str(np.asarray(fmt))
        if fmt not in FORMATS:
            raise ValueError(f"{op}: unknown format {fmt!r}; expected one of {FORMATS}")
        shape = tuple(int(v) for v in np.asarray(shape).reshape(-1))
        if len(shape) != 2 or min(shape) < 0:
            raise ValueError(f"{op}: shape must be (N, K) >= 0, got {shape}")
        size, want_kc = _layout(fmt, *shape)
        data = np.asarray(data)
        if int(np.asarray(kc)) != want_kc:
            raise ValueError(f"{op}: packed with KC = {int(np.asarray(kc))}, this build packs "
                             f"with KC = {want_kc}: pack the weight again here")
        if data.dtype != _STORED[fmt] or data.shape != (size,):
            raise ValueError(f"{op}: data has dtype {data.dtype} and shape {data.shape}; a "
                             f"{fmt} {shape} weight needs ({size},) {_STORED[fmt]}")
        data, src = weight_memory.empty(size, _STORED[fmt], op, "the packed weight"), data
        data[...] = src
        if fmt != "int8":
            return cls._new(data, shape, fmt, want_kc)
        scale = None if scale is None else np.asarray(scale)
        if (scale is None or scale.dtype != np.float32 or scale.shape != shape[:1]
                or not np.all(np.isfinite(scale) & (scale >= 0))):
            raise ValueError(f"{op}: an int8 weight needs 'scale': finite float32 >= 0 of shape "
                             f"({shape[0]},), got {show(scale)}")
        q = _int8_unpanel(data, *shape)
        if q.size and q.min() < -127:
            raise ValueError(f"{op}: int8 data holds -128; the format's values are [-127, 127]")
        return cls._new(data, shape, fmt, want_kc, np.array(scale, copy=True),
                        _int8_sums(q, op))

    def __reduce__(self):
        return (PackedWeight.from_arrays, (self.to_arrays(),))

    def unpack(self):
        """The (N, K) weight the kernel computes with, as a new array in
        self.dtype: the values (float32/float64, NaN and inf included), the
        bfloat16 values, or int8's qw * sw[j]. From the panels: for each KC
        block of K, [jp][p][j] of NR columns (int8: cattn.h's layout)."""
        N, K = self._shape
        if self._format == "int8":
            return _int8_unpanel(self._data, N, K).astype(np.float32) * self._scale[:N, None]
        NR = _ext.gemm_blocks()["f64" if self._format == "float64" else "f32"]["NR"]
        Np = -(-N // NR) * NR
        data = self._data
        if self._format == "bfloat16":
            data = (data.astype(np.uint32) << 16).view(np.float32)
        W = np.empty((N, K), self.dtype)
        for pc in range(0, K, self._kc):
            k = min(self._kc, K - pc)
            blk = data[pc * Np:(pc + k) * Np].reshape(Np // NR, k, NR)
            W[:, pc:pc + k] = blk.transpose(0, 2, 1).reshape(Np, k)[:N]
        return W


def pack_weight(w, dtype="float32"):
    """Pack a linear layer's weight w (N, K) (torch's layout: out_features x
    in_features) once, for cattn.linear(x, packed, bias, activation=...).

    dtype (the format; see this module's docstring):
    - "float32" (the default; float64 weights are rounded) or "float64": the
      same bits as cattn.linear(x, w) with w in that dtype, for any number
      of rows, without packing w on each call;
    - "bfloat16": w rounded to bfloat16, computed in float32 (x float32);
    - "int8": w quantized per output channel (w must be finite), x
      quantized per row at call time; computed in exact int32.
    Every format gives a row the same bits alone or among any other rows,
    on any thread count.
    """
    op = "pack_weight"
    if not isinstance(dtype, str) or dtype not in FORMATS:
        raise ValueError(f"{op}: dtype must be one of {', '.join(map(repr, FORMATS))}, got "
                         f"{show(dtype)}")
    w = as_float_array(w, "w", op)
    if w.ndim != 2:
        raise ValueError(f"{op}: w must be 2-D (out_features, in_features), got shape {w.shape}")
    N, K = w.shape
    size, kc = _layout(dtype, N, K)
    data = weight_memory.empty(size, _STORED[dtype], op, "the packed weight")
    if dtype == "int8":
        with np.errstate(over="ignore"):         # past float32's range: inf, refused below
            W = np.asarray(w, np.float32)
        if not np.all(np.isfinite(W)):
            raise ValueError(f"{op}: w holds NaN or inf (or values past float32's range); "
                             "int8 needs a finite weight")
        q, sw = quantize_int8(W)
        colsum = _int8_sums(q, op)
        data[...] = _int8_panels(q)
        return PackedWeight._new(data, (N, K), dtype, kc, sw, colsum)
    W = np.ascontiguousarray(w, dtype=_DTYPES[dtype])
    if dtype == "bfloat16":     # the float32 panels of the rounded values, high halves
        f32 = alloc((size,), np.float32, op, "the packed weight")
        if size:
            _ext.pack_weight(f32, (round_bfloat16(W).astype(np.uint32) << 16).view(np.float32),
                             K, 1, N, K)
        data[...] = f32.view(np.uint32) >> 16
    elif size:
        _ext.pack_weight(data, W, K, 1, N, K)
    return PackedWeight._new(data, (N, K), dtype, kc)
