"""cattn.nn.packed_params — what a module's parameter can be when packed:
a PackedWeight (cattn.pack_weight) or a PackedRows (a weight packed as
blocks of rows: MultiheadAttention's in_proj_weight), with compute_dtype()
and repack() for the module base. What it is not: the formats (cattn.ops.
formats) or the choice of which weights to pack (quantize.py).
"""

import numpy as np

from .. import _ext
from ..ops.gemm import linear
from ..ops.packed import PackedWeight, pack_weight
from ..ops.stacked import restack

__all__ = ["PackedRows", "PACKED", "compute_dtype", "repack", "weight_entry"]


class PackedRows:
    """A weight W (N, K) packed as blocks of consecutive rows, one
    PackedWeight each (`pieces`, cut before the row indices `cuts`): the
    in_proj_weight (3E, E) of a packed MultiheadAttention. Cut at E
    (MultiheadAttention.split_in_proj, the default), the query rows (E, E)
    and the key/value rows (2E, E) are two pieces, so cross-attention
    projects the query and the memory with their own rows; uncut (the
    layers' self-attention), one piece, one GEMM per call. The bits are
    those of one fused weight: a packed linear computes each output column
    alone, the same way for any N. Attributes as PackedWeight: shape, dtype,
    format, nbytes, unpack()."""

    def __init__(self, w, fmt, cuts=()):
        """Pack w (N, K) in format fmt, cut before each row index in cuts."""
        self.cuts = tuple(cuts)
        bounds = (0, *self.cuts, w.shape[0])
        self.starts = bounds[:-1]
        self.pieces = tuple(pack_weight(w[a:b], fmt) for a, b in zip(bounds, bounds[1:]))

    @property
    def shape(self):
        return (sum(p.shape[0] for p in self.pieces), self.pieces[0].shape[1])

    @property
    def dtype(self):
        return self.pieces[0].dtype

    @property
    def compute_dtype(self):
        return self.pieces[0].compute_dtype

    @property
    def format(self):
        return self.pieces[0].format

    @property
    def nbytes(self):
        return sum(p.nbytes for p in self.pieces)

    def __repr__(self):
        return (f"PackedRows(shape={self.shape}, format={self.format!r}, "
                f"cuts={self.cuts}, nbytes={self.nbytes})")

    def unpack(self):
        """W (N, K) as a new array of the values the kernels use."""
        return np.concatenate([p.unpack() for p in self.pieces])

    def repack(self, w):
        """New values w (N, K), packed in this format and cut at the same rows."""
        return PackedRows(w, self.format, self.cuts)

    def linear(self, x, bias=None, rows=None):
        """x @ W[lo:hi].T + bias[lo:hi] for rows = (lo, hi) (default: all of
        W), bias (N,) or None -> (..., hi - lo). Each piece holding some of
        those rows runs whole (a range that cuts a piece computes the
        piece's other columns too, then drops them)."""
        N = self.shape[0]
        lo, hi = (0, N) if rows is None else rows
        if not 0 <= lo < hi <= N:
            raise ValueError(f"PackedRows.linear: rows must be (lo, hi) with 0 <= lo < hi <= "
                             f"{N}, got {rows!r}")
        ys, first = [], None
        for a, p in zip(self.starts, self.pieces):
            z = a + p.shape[0]
            if a < hi and z > lo:
                first = a if first is None else first
                ys.append(linear(x, p, None if bias is None else bias[a:z]))
        y = ys[0] if len(ys) == 1 else np.concatenate(ys, axis=-1)
        return y[..., lo - first:hi - first]


PACKED = (PackedWeight, PackedRows)


def compute_dtype(p):
    """The NumPy dtype a parameter computes in: an array's dtype, a packed
    weight's compute_dtype (its dtype names its format)."""
    return p.compute_dtype if isinstance(p, PACKED) else p.dtype


def repack(old, w):
    """New values w (an array of old's shape and dtype) in the packed
    parameter old's format (for PackedRows its row cuts; for a stack each
    block of rows in its part's format)."""
    if isinstance(old, PackedRows):
        return old.repack(w)
    return restack(old, w) if len(old.parts) > 1 or old.format == "stack" else pack_weight(w, old.format)




_F32 = np.dtype(np.float32)


def _f32_vector(b, n):
    return b is None or (type(b) is np.ndarray and b.dtype == _F32 and b.shape == (n,)
                         and b.flags.c_contiguous and b.flags.aligned)


def weight_entry(W, b, N, K):
    """A float32 linear weight W (N, K) with bias b ((N,) or None) as the C
    programs take it, (kind, data, scale, colsum, bias, N, K, rsw, csw):
    a PackedWeight (or a one-piece PackedRows) by its format's kernel entry,
    a plain float32 array through its strides. None when W or b is in
    another form (float64, a cut PackedRows, an odd bias)."""
    if not _f32_vector(b, N):
        return None
    if type(W) is PackedRows:
        if len(W.pieces) != 1:
            return None
        W = W.pieces[0]
    if type(W) is PackedWeight:
        if W.shape != (N, K) or W.compute_dtype != _F32:
            return None
        return W.kernel_entry(b)
    if not (type(W) is np.ndarray and W.dtype == _F32 and W.shape == (N, K) and W.flags.aligned
            and not (W.strides[0] % 4 or W.strides[1] % 4)):
        return None
    return (_ext.WEIGHT_KINDS["plain"], W, None, None, b, N, K, W.strides[0] // 4,
            W.strides[1] // 4)
