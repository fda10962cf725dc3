"""cattn.ops.packed — weights packed once for cattn.linear (cattn.pack_weight).

A linear layer reads its weight W (N, K) (torch's layout: out_features x
in_features) on every call; the GEMM first packs it into column panels
(csrc/gemm_tmpl.h states the layout). PackedWeight keeps that packed form,
so the many-row path skips the per-call packing and the few-row path
(<= 12 rows: token-by-token decoding, a short sentence) streams the panels
instead of transposing W on the fly. Results are the same bits as
cattn.linear on the plain weight, for any number of rows.

Formats: "float32" and "float64" (the weight's values, prepacked).
"""
import numpy as np

from .. import _ext
from .._validate import alloc, as_float_array, show

FORMATS = ("float32", "float64")
_DTYPES = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}


class PackedWeight:
    """A (N, K) weight packed for cattn.linear: make one with
    cattn.pack_weight(w). Attributes: shape (N, K), dtype, format, nbytes.
    to_arrays() / PackedWeight.from_arrays(d) round-trip through plain NumPy
    arrays (np.savez-able); pickle works. unpack() gives W back."""

    __slots__ = ("_data", "_shape", "_format", "_kc")

    def __init__(self, *args, **kwargs):
        raise TypeError("PackedWeight: make one with cattn.pack_weight(w, dtype=...) or "
                        "PackedWeight.from_arrays(d)")

    @classmethod
    def _new(cls, data, shape, fmt, kc):
        self = object.__new__(cls)
        self._data, self._shape, self._format, self._kc = data, shape, fmt, kc
        data.flags.writeable = False
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
        return self._data.nbytes

    def __repr__(self):
        return f"PackedWeight(shape={self._shape}, format={self._format!r}, nbytes={self.nbytes})"

    def to_arrays(self):
        """{'format', 'shape', 'kc', 'data'}: plain NumPy arrays (np.savez-able)."""
        return {"format": np.array(self._format), "shape": np.array(self._shape, np.int64),
                "kc": np.array(self._kc, np.int64), "data": self._data.copy()}

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
        fmt = str(np.asarray(fmt))
        if fmt not in FORMATS:
            raise ValueError(f"{op}: unknown format {fmt!r}; expected one of {FORMATS}")
        shape = tuple(int(v) for v in np.asarray(shape).reshape(-1))
        if len(shape) != 2 or min(shape) < 0:
            raise ValueError(f"{op}: shape must be (N, K) >= 0, got {shape}")
        size, want_kc = _ext.packed_layout(fmt == "float32", *shape)
        data = np.asarray(data)
        if int(np.asarray(kc)) != want_kc:
            raise ValueError(f"{op}: packed with KC = {int(np.asarray(kc))}, this build packs "
                             f"with KC = {want_kc}: pack the weight again here")
        if data.dtype != _DTYPES[fmt] or data.shape != (size,):
            raise ValueError(f"{op}: data has dtype {data.dtype} and shape {data.shape}; a "
                             f"{fmt} {shape} weight needs ({size},) {_DTYPES[fmt]}")
        return cls._new(np.array(data, order="C", copy=True), shape, fmt, want_kc)

    def __reduce__(self):
        return (PackedWeight.from_arrays, (self.to_arrays(),))

    def unpack(self):
        """W (N, K) again, as a new array (every value, NaN and inf included):
        for each KC block of K, the panels [jp][p][j] of NR columns."""
        N, K = self._shape
        NR = _ext.gemm_blocks()["f32" if self._format == "float32" else "f64"]["NR"]
        Np = -(-N // NR) * NR
        W = np.empty((N, K), self.dtype)
        for pc in range(0, K, self._kc):
            k = min(self._kc, K - pc)
            blk = self._data[pc * Np:(pc + k) * Np].reshape(Np // NR, k, NR)
            W[:, pc:pc + k] = blk.transpose(0, 2, 1).reshape(Np, k)[:N]
        return W


def pack_weight(w, dtype="float32"):
    """Pack a linear layer's weight w (N, K) (torch's layout: out_features x
    in_features) once, for cattn.linear(x, packed, bias, activation=...).

    dtype: "float32" (the default; float64 weights are rounded) or
    "float64". The result gives the same bits as cattn.linear(x, w) with w
    in that dtype, for any number of rows, without packing w on each call.
    """
    op = "pack_weight"
    if not isinstance(dtype, str) or dtype not in FORMATS:
        raise ValueError(f"{op}: dtype must be one of {', '.join(map(repr, FORMATS))}, got "
                         f"{show(dtype)} (bfloat16 and int8 are not available yet)")
    w = as_float_array(w, "w", op)
    if w.ndim != 2:
        raise ValueError(f"{op}: w must be 2-D (out_features, in_features), got shape {w.shape}")
    dt = _DTYPES[dtype]
    N, K = w.shape
    W = np.ascontiguousarray(w, dtype=dt)
    size, kc = _ext.packed_layout(dtype == "float32", N, K)
    data = alloc((size,), dt, op, "the packed weight")
    if size:
        _ext.pack_weight(data, W, K, 1, N, K)
    return PackedWeight._new(data, (N, K), dtype, kc)
