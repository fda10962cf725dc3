"""Input checks shared by every op: one place that turns user input into
arrays the C kernels can read, and raises clear errors otherwise.

Rules: float32 and float64 (FLOAT_DTYPES, the one set every op checks
against: `as_float_array` for arrays, `as_float_dtype` for dtype
arguments) are computed natively; mixed inputs promote as
NumPy does (to float64); any other dtype raises TypeError naming it.
Arrays are never copied unless the kernel cannot read them as they are
(unaligned data, strides that are not whole elements, a dtype to promote):
every array handed to cattn._ext goes through `readable` or `contiguous`,
which guarantee `flags.aligned` and whole-element strides.

Scalars: `as_int`, `as_real` and `as_flag` turn the Python numbers of the
API (sizes, thread counts, eps, scale, flags) into checked ints, floats and
bools, so that no Python value can reach C as an OverflowError: a wrong type
raises TypeError, a value out of range ValueError, and both name the
argument and its value. bool is never accepted as a number (True is not a
size, a thread count or an eps), although Python treats it as an int.
"""
import math
import numbers
import operator
import os

import numpy as np

FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
INTP_MAX = int(np.iinfo(np.intp).max)  # the largest array size / byte count NumPy can describe


# ---------------------------------------------------------------- scalars

def show(x, limit=60):
    """repr(x) cut to about `limit` characters (a 400-digit int stays readable)."""
    r = repr(x)
    if len(r) <= limit:
        return r
    if isinstance(x, numbers.Integral):
        return f"{r[:12]}...{r[-4:]} ({len(r.lstrip('-'))} digits)"
    return f"{r[:max(limit - 20, 12)]}...{r[-8:]} ({len(r)} characters)"


def as_int(n, name, op, lo=0, hi=None, hi_why=""):
    """n as a Python int in [lo, hi]: TypeError unless n is an integer (bool,
    float and str are refused), ValueError naming `name` when out of range."""
    if isinstance(n, (bool, np.bool_)):
        raise TypeError(f"{op}: {name} must be an int, got bool {n!r}")
    try:
        v = operator.index(n)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int, got {type(n).__name__} {show(n)}") from None
    if lo is not None and v < lo:
        raise ValueError(f"{op}: {name} must be >= {lo}, got {show(v)}")
    if hi is not None and v > hi:
        raise ValueError(f"{op}: {name} must be <= {hi}{hi_why}, got {show(v)}")
    return v


def as_real(x, name, op, finite=True, lo=None, lo_open=False):
    """x as a Python float: TypeError unless x is a real number (bool,
    complex, str and arrays of more than one element are refused);
    ValueError naming `name` when it does not fit a double, is not finite
    (finite=True) or lies below lo (or at lo with lo_open)."""
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf":
        x = x[()]
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise TypeError(f"{op}: {name} must be a real number, got {type(x).__name__} {show(x)}")
    try:
        v = float(x)
    except OverflowError:
        raise ValueError(f"{op}: {name}={show(x)} is too large for a float") from None
    except (TypeError, ValueError):
        raise TypeError(f"{op}: {name} must be a real number, got {type(x).__name__} "
                        f"{show(x)}") from None
    if finite and not math.isfinite(v):
        raise ValueError(f"{op}: {name} must be finite, got {v!r}")
    if lo is not None and not (v > lo if lo_open else v >= lo):
        raise ValueError(f"{op}: {name} must be {'>' if lo_open else '>='} {lo}, got {show(x)}")
    return v


def as_flag(b, name, op):
    """b as a bool: True/False (also NumPy bools and the ints 0 and 1);
    TypeError otherwise (an array's truth value is ambiguous)."""
    if b is True or b is False:
        return b
    if isinstance(b, np.bool_):
        return bool(b)
    if isinstance(b, numbers.Integral) and not isinstance(b, np.ndarray) and b in (0, 1):
        return bool(b)
    raise TypeError(f"{op}: {name} must be a bool, got {type(b).__name__} {show(b)}")


def alloc(shape, dtype, op, what, init=np.empty):
    """A new array (init: np.empty, np.zeros or np.ones) whose failure to fit in
    memory is reported by naming `what` and the shape: ValueError when the
    size cannot even be described by NumPy, MemoryError when it cannot be
    allocated now. (Checks run only after NumPy refused: no cost per call.)"""
    try:
        return init(shape, dtype)
    except (MemoryError, ValueError) as e:
        dtype = np.dtype(dtype)
        shape = tuple(shape)
        nbytes = check_size(shape, dtype, op, what)   # ValueError past NumPy's limits
        if not isinstance(e, MemoryError):
            raise                                     # not about the size: NumPy's own words
        raise MemoryError(f"{op}: cannot allocate {what} of shape {shape} and dtype {dtype} "
                          f"({_human(nbytes)}): {e}") from None


def check_size(shape, dtype, op, what, eager=False, extra_bytes_per_item=0):
    """Bytes of an array of `shape` and `dtype`; ValueError naming `what` and
    the shape when NumPy cannot describe it. eager=True (arrays written in
    full right away, e.g. random initial weights): MemoryError when it is
    larger than the machine's physical memory, rather than an allocation
    that the OS may grant and then kill the process for."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    nbytes = math.prod(shape) * (dtype.itemsize + extra_bytes_per_item)
    if nbytes > INTP_MAX or any(n > INTP_MAX for n in shape):
        raise ValueError(f"{op}: {what} of shape {show(shape, 80)} and dtype {dtype} would need "
                         f"{show(nbytes, 40)} bytes, more than any array can hold "
                         f"({INTP_MAX} bytes)")
    if eager:
        ram = physical_memory()
        if ram is not None and nbytes > ram:
            raise MemoryError(f"{op}: {what} of shape {shape} and dtype {dtype} needs "
                              f"{_human(nbytes)}, more than this machine's memory "
                              f"({_human(ram)})")
    return nbytes


def physical_memory():
    """Bytes of physical memory, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _human(nbytes):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if nbytes < 1024 or unit == "EiB":
            return f"{nbytes:.4g} {unit}" if unit != "bytes" else f"{nbytes} bytes"
        nbytes /= 1024


def native(arr):
    """arr with a float dtype in native byte order (a copy for '>f4' data on a
    little-endian machine: the kernels read native floats only)."""
    dt = arr.dtype
    if dt.byteorder not in "=|" and dt.kind == "f":
        nat = dt.newbyteorder("=")
        if nat in FLOAT_DTYPES:
            return arr.astype(nat)
    return arr


def as_float_array(x, name, op):
    """x as an ndarray of float32/float64 (no copy for ndarrays of those;
    float32/float64 data in the other byte order is converted). Masked
    arrays are refused: the kernels would ignore the mask."""
    if isinstance(x, np.ndarray):
        arr = x
        if type(x) is not np.ndarray and isinstance(x, np.ma.MaskedArray):
            raise TypeError(f"{op}: {name} is a masked array; cattn would ignore its mask: "
                            f"pass {name}.filled(value) or {name}.data")
        if arr.dtype.byteorder not in "=|":
            arr = native(arr)
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


def as_float_dtype(dtype, op):
    """A dtype argument (anything numpy.dtype accepts) as float32 or float64;
    TypeError naming it otherwise."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: dtype {show(dtype)} is not a NumPy dtype; use float32 or "
                        "float64") from None
    if dt not in FLOAT_DTYPES:
        raise TypeError(f"{op}: dtype {dt} not supported; use float32 or float64")
    return dt


def result_dtype(*arrays):
    return np.result_type(*[a.dtype for a in arrays])


# ---------------------------------------------------------------- arrays for C
#
# np.ascontiguousarray returns a contiguous but unaligned array unchanged
# (e.g. np.frombuffer(buf, np.float32, offset=1)): a C kernel reading it
# through a float pointer is undefined behaviour. The helpers below copy such
# arrays once into fresh (aligned) memory; aligned inputs pass untouched.

def readable(arr, dtype, last_contig=False):
    """arr as `dtype`, aligned, with whole-element strides (and, with
    last_contig, a unit-stride last axis unless it has length 1): arr itself
    when it already is, otherwise one copy. The copy keeps the element order
    of arr's memory layout (order="K": a transposed view stays transposed,
    so the kernels take the same path) and keeps broadcast (stride-0) dims
    as views, so a stride-0 view of a huge axis never materialises."""
    if arr.dtype == dtype:
        f = arr.flags
        if f.aligned:
            if f.c_contiguous:       # the common case: nothing more to check
                return arr
            item = arr.itemsize
            ok = True
            for s in arr.strides:
                if s % item:
                    ok = False
                    break
            if ok and (not last_contig or arr.ndim == 0 or arr.shape[-1] <= 1
                       or arr.strides[-1] == item):
                return arr
    nd = arr.ndim
    bdims = [d for d in range(nd) if arr.strides[d] == 0 and arr.shape[d] > 1
             and not (last_contig and d == nd - 1)]
    order = "C" if last_contig else "K"
    if not bdims:
        return np.array(arr, dtype=dtype, order=order, copy=True)
    core = arr[tuple(slice(0, 1) if d in bdims else slice(None) for d in range(nd))]
    core = np.array(core, dtype=dtype, order=order, copy=True)
    return np.broadcast_to(core, arr.shape)


def contiguous(arr, dtype):
    """arr as a C-contiguous, aligned array of `dtype` (no copy when it is)."""
    f = arr.flags
    if arr.dtype == dtype and f.c_contiguous and f.aligned:
        return arr
    return np.array(arr, dtype=dtype, order="C", copy=True)


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
    if out.size and any(st == 0 and n > 1 for n, st in zip(out.shape, out.strides)):
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
