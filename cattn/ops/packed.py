"""cattn.ops.packed — weights packed once for cattn.linear (cattn.pack_weight).

A linear layer reads its weight W (N, K) (torch's layout: out_features x
in_features) on every call; the GEMM first packs it into column panels
(csrc/gemm_tmpl.h states the layout). PackedWeight keeps that packed form,
so the many-row path skips the per-call packing and the few-row path
(<= 12 rows: token-by-token decoding, a short sentence) streams the panels
instead of transposing W on the fly. Results are the same bits as
cattn.linear on the plain weight, for any number of rows.

The formats ("float32", "float64", "bfloat16", "int8", "int4", "int8g",
"int6g", "int5g": what each stores
and computes) are objects of cattn/ops/formats.py; a PackedWeight holds
its format's arrays and asks the format for every operation. Which
attribute is which: `dtype` and `format` are the format you asked for
(pack_weight(w, dtype="int8").dtype == "int8"); `compute_dtype` is the
NumPy dtype of inputs, bias and results (float32 for bfloat16 and int8).

Packed data of 64 KiB or more lives in shared huge-page blocks
(weight_memory.py): only speed depends on it.
"""
import numpy as np

from .._validate import as_float_array, show
from . import weight_memory
from .formats import FORMATS

__all__ = ["PackedWeight", "pack_weight", "FORMATS"]


class PackedWeight:
    """A (N, K) weight packed for cattn.linear: make one with
    cattn.pack_weight(w, dtype=...). Attributes: shape (N, K); format and
    dtype, the format asked for (a cattn.ops.formats.WeightFormat, a str:
    "float32", "float64", "bfloat16" or "int8"); compute_dtype (the NumPy
    dtype of inputs and results); nbytes. to_arrays() /
    PackedWeight.from_arrays(d) round-trip through plain NumPy arrays
    (np.savez-able); pickle works; from_row_blocks builds one a block of
    rows at a time (a loader). unpack() gives the weight the kernels use
    back."""

    __slots__ = ("_data", "_shape", "_format", "_kc", "_extra")

    def __init__(self, *args, **kwargs):
        raise TypeError("PackedWeight: make one with cattn.pack_weight(w, dtype=...) or "
                        "PackedWeight.from_arrays(d)")

    @classmethod
    def _new(cls, data, shape, fmt, kc, extra):
        self = object.__new__(cls)
        self._data, self._shape, self._format, self._kc = data, shape, fmt, kc
        self._extra = extra
        data.flags.writeable = False
        return self

    @property
    def shape(self):
        return self._shape

    @property
    def format(self):
        """The format (a WeightFormat: a str naming it, with its methods)."""
        return self._format

    @property
    def dtype(self):
        """The format asked for, as pack_weight's dtype= took it (== format)."""
        return self._format

    @property
    def compute_dtype(self):
        """The NumPy dtype of the arithmetic (and of inputs and results)."""
        return self._format.compute

    @property
    def nbytes(self):
        """Bytes of the packed data and of the format's extra arrays (int8's scales)."""
        return self._data.nbytes + self._format.extra_nbytes(self._extra)

    @property
    def parts(self):
        """The weights whose rows this one stacks in order (a "stack" weight:
        cattn.ops.stack_weights), else (self,)."""
        parts = self._format.stacked_parts(self._extra)
        return (self,) if parts is None else parts

    def __repr__(self):
        return f"PackedWeight(shape={self._shape}, format={str(self._format)!r}, nbytes={self.nbytes})"

    def linear(self, y, x, M, bias, act, nt):
        """y (M, N) = act(x (M, K) · W^T + bias) by the format's kernel (x, y
        contiguous compute_dtype arrays, bias None or (N,); checked by the caller)."""
        self._format.linear(y, x, M, self._data, self._extra, self._shape, bias, act, nt)

    def kernel_entry(self, bias=None):
        """The weight as the C programs take it, (kind, data, scale, colsum,
        bias, N, K, rsw, csw), or None for a format they do not run."""
        return self._format.entry(self._data, self._extra, self._shape, bias)

    def to_arrays(self):
        """{'format', 'shape', 'kc', 'data'} (+ the format's extras, int8's
        'scale'): plain NumPy arrays (np.savez-able)."""
        d = {"format": np.array(str(self._format)), "shape": np.array(self._shape, np.int64),
             "kc": np.array(self._kc, np.int64), "data": self._data.copy()}
        d.update(self._format.saved_extra(self._extra, self._shape))
        return d

    @classmethod
    def from_arrays(cls, d, *, copy=True):
        """The PackedWeight that to_arrays() described (d: a dict or an
        np.load result). ValueError if it does not fit this build.
        copy=False: d["data"] itself becomes the packed data when it is a
        writeable C-contiguous array of the right dtype and size (a loader
        building a large weight in place, e.g. from
        cattn.ops.weight_memory.empty; it must not change it afterwards),
        and d's other arrays are handed over too: a group format's scales
        may be rearranged into its panels in place (no second copy)."""
        op = "PackedWeight.from_arrays"
        try:
            fmt, shape, kc, data = (d["format"], d["shape"], d["kc"], d["data"])
        except (KeyError, TypeError, IndexError):
            raise ValueError(f"{op}: expected the dict of to_arrays() (format, shape, kc, data), "
                             f"got {show(d)}") from None
        name = str(np.asarray(fmt))
        fmt = FORMATS.get(name)
        if fmt is None:
            raise ValueError(f"{op}: unknown format {name!r}; expected one of {tuple(FORMATS)}")
        shape = tuple(int(v) for v in np.asarray(shape).reshape(-1))
        if len(shape) != 2 or min(shape) < 0:
            raise ValueError(f"{op}: shape must be (N, K) >= 0, got {shape}")
        size, want_kc = fmt.layout(*shape)
        data = np.asarray(data)
        if int(np.asarray(kc)) != want_kc:
            raise ValueError(f"{op}: packed with KC = {int(np.asarray(kc))}, this build packs "
                             f"with KC = {want_kc}: pack the weight again here")
        if data.dtype != fmt.stored or data.shape != (size,):
            raise ValueError(f"{op}: data has dtype {data.dtype} and shape {data.shape}; a "
                             f"{fmt} {shape} weight needs ({size},) {fmt.stored}")
        if copy or not (data.flags.c_contiguous and data.flags.writeable):
            data, src = weight_memory.empty(size, fmt.stored, op, "the packed weight"), data
            data[...] = src
        return cls._new(data, shape, fmt, want_kc,
                        fmt.loaded_extra(d, data, shape, op, take=not copy))

    @classmethod
    def from_row_blocks(cls, fmt, shape, block, *, rows=1024, done=None):
        """The (N, K) PackedWeight in format `fmt` built a block of rows at a
        time, so that a loader holds no full-size temporary beside it.
        block(r0, r1) gives rows [r0, r1): a float array of their values
        ((r1 - r0) * K of them), packed here in `fmt`; or the to_arrays()
        dict of those rows alone in `fmt` (cattn.ops.formats.int4_arrays(...)
        of them); or None, and None is returned. The blocks are `rows` rows
        rounded up to whole panels (the last one shorter), chosen here; each
        block's panels and per-row arrays are put in place, then done(r0,
        r1) runs (a reader letting its pages of the rows go)."""
        op = "PackedWeight.from_row_blocks"
        f = FORMATS.get(str(fmt))
        if f is None:
            raise ValueError(f"{op}: unknown format {fmt!r}; expected one of {tuple(FORMATS)}")
        N, K = (int(v) for v in shape)
        size, kc = f.layout(N, K)
        step = -(-max(1, int(rows)) // f.panel_rows()) * f.panel_rows()
        full = None
        for r0 in range(0, max(N, 1), step):
            r1 = min(N, r0 + step)
            d = block(r0, r1)
            if d is None:
                return None
            data, per_row = _block_arrays(f, d, (r1 - r0, K), kc, f"{op}: rows [{r0}, {r1})")
            if full is None:                           # the first block: the whole's arrays
                full = {k: v if v.ndim == 0 else np.empty((N,) + v.shape[1:], v.dtype)
                        for k, v in per_row.items()}
                full["data"] = weight_memory.empty(size, f.stored, op, "the packed weight")
            if per_row.keys() != full.keys() - {"data"} or any(
                    v.ndim == 0 and v != full[k] for k, v in per_row.items()):
                raise ValueError(f"{op}: rows [{r0}, {r1}) have the arrays {sorted(per_row)} "
                                 "(or a scalar among them) unlike the first rows'")
            f.place_rows(full["data"], (N, K), r0, data)
            for k, v in per_row.items():
                if v.ndim:
                    full[k][r0:r1] = v
            del d, data, per_row
            if done is not None:
                done(r0, r1)
        full.update(format=np.array(str(f)), shape=np.array((N, K), np.int64),
                    kc=np.array(kc, np.int64))
        return cls.from_arrays(full, copy=False)

    def __reduce__(self):
        return (PackedWeight.from_arrays, (self.to_arrays(),))

    def rows(self, ids):
        """The values of rows `ids` (integers in [0, N), any shape) as a new
        compute_dtype array (*ids.shape, K): unpack()[ids] without unpacking
        the rest (an embedding lookup from a packed table)."""
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"PackedWeight.rows: ids must be integers, got dtype {ids.dtype}")
        N, K = self._shape
        if ids.size and (ids.min() < 0 or ids.max() >= N):
            raise ValueError(f"PackedWeight.rows: ids must lie in [0, {N}), got "
                             f"[{ids.min()}, {ids.max()}]")
        flat = ids.reshape(-1).astype(np.int64)
        out = self._format.rows(self._data, self._shape, self._kc, self._extra, flat)
        return np.ascontiguousarray(out, self._format.compute).reshape(*ids.shape, K)

    def unpack(self):
        """The (N, K) weight the kernel computes with, as a new array in
        compute_dtype: the values (float32/float64, NaN and inf included),
        the bfloat16 values, or int8's qw * sw[j]."""
        return self._format.unpack(self._data, self._shape, self._kc, self._extra)


def _block_arrays(fmt, d, shape, kc, where):
    """(packed data, the other arrays by name) of a block of rows given as
    values or as a to_arrays() dict (from_row_blocks), checked to be rows
    of shape `shape` in fmt with this build's KC."""
    if not isinstance(d, dict):                        # values: packed here
        d = _rows_alone(fmt, np.asarray(d).reshape(shape), where)
    got = (str(np.asarray(d["format"])), tuple(int(v) for v in np.asarray(d["shape"])),
           int(np.asarray(d["kc"])))
    if got != (fmt, shape, kc):
        raise ValueError(f"{where} came as a {got[0]} {got[1]} weight with KC = {got[2]}; "
                         f"expected {fmt} {shape} with KC = {kc}")
    return np.asarray(d["data"]), {k: np.asarray(v) for k, v in d.items()
                                   if k not in ("format", "shape", "kc", "data")}


def _rows_alone(fmt, w, op):
    """The to_arrays() dict of w (n, K) packed alone in fmt, in ordinary
    memory: a packed weight's own is carved from shared huge-page blocks
    that a freed block of rows would hold on to."""
    size, kc = fmt.layout(*w.shape)
    data = np.empty(size, fmt.stored)
    extra = fmt.pack(as_float_array(w, "w", op), data, op)
    return {"format": np.array(str(fmt)), "shape": np.array(w.shape, np.int64),
            "kc": np.array(kc, np.int64), "data": data, **fmt.saved_extra(extra, w.shape)}


def pack_weight(w, dtype="float32"):
    """Pack a linear layer's weight w (N, K) (torch's layout: out_features x
    in_features) once, for cattn.linear(x, packed, bias, activation=...).

    dtype (the format; cattn/ops/formats.py says what each stores):
    - "float32" (the default; float64 weights are rounded) or "float64": the
      same bits as cattn.linear(x, w) with w in that dtype, for any number
      of rows, without packing w on each call;
    - "bfloat16": w rounded to bfloat16, computed in float32 (x float32);
    - "int8": w quantized per output channel (w must be finite), x
      quantized per row at call time; computed in exact int32;
    - "int4" / "int8g" / "int6g" / "int5g": w quantized per group of 32
      inputs (4 bits with a float16 scale and min, or 8, 6 or 5 bits with a
      scale), x
      quantized per group of 32 at call time; exact int32 group sums (GGUF's blocks load into
      these exactly: cattn.models.GGUFFile.weight).
    Every format gives a row the same bits alone or among any other rows,
    on any thread count.
    """
    op = "pack_weight"
    fmt = FORMATS.get(dtype) if isinstance(dtype, str) else None
    if fmt is None:
        raise ValueError(f"{op}: dtype must be one of {', '.join(map(repr, FORMATS))}, got "
                         f"{show(dtype)}")
    w = as_float_array(w, "w", op)
    if w.ndim != 2:
        raise ValueError(f"{op}: w must be 2-D (out_features, in_features), got shape {w.shape}")
    N, K = w.shape
    size, kc = fmt.layout(N, K)
    data = weight_memory.empty(size, fmt.stored, op, "the packed weight")
    extra = fmt.pack(w, data, op)
    return PackedWeight._new(data, (N, K), fmt, kc, extra)
