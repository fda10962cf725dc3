"""cattn.ops.stacked — the "stack" weight format: a (N, K) weight whose
blocks of consecutive rows are PackedWeights in different formats, run as
one weight. A GGUF Q4_K_M file stores a layer's v projection in Q6_K beside
q and k in Q4_K: one fused q|k|v weight in a single format would widen q
and k to the 6-bit form with float32 scales (8.5 bits a weight against the
file's 4.5), a stack keeps each block in its own format (the file's
bytes). Make one with stack_weights(parts).

    y[:, n_i : n_i + N_i] = act(x · W_i^T + bias[n_i : n_i + N_i])   part i (N_i, K)

Each part's kernel writes its columns of y (csrc/weights.c, CATTN_W_STACK):
every output has the bits of its part's linear called alone, on any thread
count and for any rows beside it. What this file is not: any format's
values (each part's format holds them) or the registry (formats.py's
FORMATS, which this module adds "stack" to).
"""
import numpy as np

from .. import _ext
from .._validate import show
from .formats import FORMATS, WeightFormat
from .packed import PackedWeight, pack_weight

__all__ = ["stack_weights", "restack"]

MAX_PARTS = 64


class _Stack(WeightFormat):
    """stack: extra = {"parts": the PackedWeights, "starts": their first rows}."""

    def layout(self, N, K):
        return 0, 0

    def pack(self, w, data, op):
        raise ValueError(f"{op}: a 'stack' weight is made of weights already packed, one per "
                         "block of rows: cattn.ops.stack_weights(parts)")

    def unpack(self, data, shape, kc, extra):
        return np.concatenate([p.unpack() for p in extra["parts"]])

    def rows(self, data, shape, kc, extra, ids):
        out = np.empty((len(ids), shape[1]), np.float32)
        which = np.searchsorted(extra["starts"], ids, side="right") - 1
        for i, (a, p) in enumerate(zip(extra["starts"], extra["parts"])):
            sel = which == i
            if sel.any():
                out[sel] = p.rows(ids[sel] - a)
        return out

    def extra_nbytes(self, extra):
        return sum(p.nbytes for p in extra["parts"])

    def stacked_parts(self, extra):
        return extra["parts"]

    def saved_extra(self, extra, shape):
        out = {"parts": np.array(len(extra["parts"]), np.int64)}
        for i, p in enumerate(extra["parts"]):
            out.update({f"part{i}.{k}": v for k, v in p.to_arrays().items()})
        return out

    def loaded_extra(self, d, data, shape, op, take=False):
        try:
            n = d["parts"]
            keys = list(d.keys())
        except (KeyError, TypeError, IndexError, AttributeError):
            raise ValueError(f"{op}: a stack weight needs 'parts' (how many) and its parts' "
                             f"arrays 'part<i>.<name>', got {show(d)}") from None
        if isinstance(n, (list, tuple)):                # stack_weights: the parts themselves
            return _extra(list(n), shape, op)
        n = np.asarray(n)
        if n.shape != () or n.dtype.kind not in "iu" or not 1 <= int(n) <= MAX_PARTS:
            raise ValueError(f"{op}: a stack weight's 'parts' must be 1 to {MAX_PARTS}, "
                             f"got {show(n)}")
        parts = []
        for i in range(int(n)):
            pre = f"part{i}."
            sub = {k[len(pre):]: d[k] for k in keys if k.startswith(pre)}
            parts.append(PackedWeight.from_arrays(sub))
        return _extra(parts, shape, op)

    def entry(self, data, extra, shape, bias):
        parts, starts = extra["parts"], extra["starts"]
        ends = list(starts[1:]) + [shape[0]]
        entries = tuple(p.kernel_entry(None if bias is None else bias[a:b])
                        for p, a, b in zip(parts, starts, ends))
        buf = np.zeros(len(parts) * _ext.weight_struct_bytes(), np.uint8)   # the parts' structs
        return (self.kind, buf, entries, None, None, shape[0], shape[1], 0, 0)


def _extra(parts, shape, op):
    """The stack's extra for `parts` making up `shape`, checked."""
    if not 1 <= len(parts) <= MAX_PARTS:
        raise ValueError(f"{op}: a stack holds 1 to {MAX_PARTS} parts, got {len(parts)}")
    for i, p in enumerate(parts):
        if type(p) is not PackedWeight:
            raise ValueError(f"{op}: part {i} must be a PackedWeight, got {type(p).__name__}")
        if p.format == "stack" or p.format.kind is None or p.compute_dtype != np.float32:
            raise ValueError(f"{op}: part {i} is a {str(p.format)!r} weight; a stack's parts are "
                             "float32-computing formats the programs run (not float64, not a stack)")
        if p.shape[1] != shape[1]:
            raise ValueError(f"{op}: part {i} has K = {p.shape[1]}, part 0 has {shape[1]}: "
                             "the parts must share K")
    if sum(p.shape[0] for p in parts) != shape[0]:
        raise ValueError(f"{op}: the parts' rows add up to {sum(p.shape[0] for p in parts)}, "
                         f"the shape says {shape[0]}")
    starts = np.cumsum([0] + [p.shape[0] for p in parts[:-1]]).astype(np.int64)
    return {"parts": tuple(parts), "starts": starts}


def stack_weights(parts):
    """One PackedWeight (format "stack") of the rows of `parts` (PackedWeights
    sharing K, each in a float32-computing format: float32, bfloat16, int8,
    int4, int8g, int6g, int5g) stacked in order: cattn.linear by it gives
    each part's linear bits in its columns, unpack() their rows stacked,
    nbytes their sum. to_arrays / from_arrays and pickle keep the parts."""
    parts = list(parts)
    for i, p in enumerate(parts):
        if type(p) is not PackedWeight:
            raise TypeError(f"stack_weights: part {i} must be a PackedWeight, got "
                            f"{type(p).__name__}")
    if not parts:
        raise ValueError("stack_weights: a stack needs at least one part")
    shape = (sum(p.shape[0] for p in parts), parts[0].shape[1])
    return PackedWeight.from_arrays({"format": np.array("stack"), "shape": np.array(shape),
                                     "kc": np.array(0), "data": np.zeros(0, np.uint8),
                                     "parts": parts})


def restack(old, w):
    """New values w (N, K) packed as the stack `old` is: each block of rows
    in its part's format (module assignment and load_state_dict)."""
    ends = np.cumsum([p.shape[0] for p in old.parts])
    return stack_weights([pack_weight(w[b - p.shape[0]:b], p.format)
                          for p, b in zip(old.parts, ends)])


def _register():
    f = _Stack("stack")
    f.compute, f.stored = np.dtype(np.float32), np.dtype(np.uint8)
    f.kind = _ext.WEIGHT_KINDS["stack"]
    FORMATS.setdefault("stack", f)


_register()
