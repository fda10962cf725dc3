"""Input checks shared by every op: one place that turns user input into
arrays the C kernels can read, and raises clear errors otherwise.

Rules: float32 and float64 are computed natively; mixed inputs promote as
NumPy does (to float64); any other dtype raises TypeError naming it.
Arrays are never copied unless the kernel cannot read them as they are
(unaligned data, strides that are not whole elements, a dtype to promote).
"""
import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def as_float_array(x, name, op):
    """x as an ndarray of float32/float64 (no copy for ndarrays of those)."""
    if isinstance(x, np.ndarray):
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except Exception as e:  # ragged lists, objects NumPy rejects
            raise TypeError(f"{op}: {name} could not be converted to an array: {e}") from None
        if arr.dtype.kind in "iub" and arr.dtype != np.bool_:
            # Python scalars / int lists: let them become float64 only if the
            # user passed plain Python numbers, never silently for ndarrays
            arr = arr.astype(np.float64)
    if arr.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{op}: {name} has dtype {arr.dtype}; only float32 and float64 are supported")
    return arr


def result_dtype(*arrays):
    return np.result_type(*[a.dtype for a in arrays])


def readable(arr, dtype):
    """arr cast to dtype, and made aligned with whole-element strides if needed."""
    if arr.dtype != dtype:
        arr = arr.astype(dtype)
    item = arr.itemsize
    if not arr.flags.aligned or any(s % item for s in arr.strides):
        arr = np.ascontiguousarray(arr)
    return arr


def estrides(arr):
    """Strides in elements."""
    item = arr.itemsize
    return tuple(s // item for s in arr.strides)


def check_out(out, shape, dtype, op, inputs=()):
    """Validate a user `out=` array: ndarray, exact dtype and shape, writeable,
    aligned, not overlapping any input."""
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{op}: out must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype != dtype:
        raise TypeError(f"{op}: out has dtype {out.dtype}, expected {np.dtype(dtype)}")
    if out.shape != tuple(shape):
        raise ValueError(f"{op}: out has shape {out.shape}, expected {tuple(shape)}")
    if not out.flags.writeable:
        raise ValueError(f"{op}: out is read-only")
    if not out.flags.aligned or any(s % out.itemsize for s in out.strides):
        raise ValueError(f"{op}: out must be aligned with whole-element strides")
    if any(st == 0 and n > 1 for n, st in zip(out.shape, out.strides)):
        raise ValueError(f"{op}: out has overlapping elements (a zero stride, as from "
                         "broadcast_to); pass an array with distinct elements")
    for x in inputs:
        if x is not None and np.shares_memory(out, x):
            raise ValueError(f"{op}: out overlaps an input; pass a separate array")
    return out


def collapse(shape, strides):
    """Stride of the dims `shape` seen as one flat dim, or None when they are
    not evenly spaced in memory (size-1 dims are ignored)."""
    dims = [(n, s) for n, s in zip(shape, strides) if n != 1]
    if not dims:
        return 0
    for (n0, s0), (n1, s1) in zip(dims, dims[1:]):
        if s0 != s1 * n1:
            return None
    return dims[-1][1]
