"""cattn.ops.gemm — matmul and linear: validate, broadcast, allocate the
result, then call the packed GEMM (csrc/gemm.c) through cattn._ext.

Shape legend (as everywhere in cattn): M/N/K for matrix products
(C[M, N] = A[M, K] B[K, N]), "..." for free leading (batch) dims.
"""
import functools
import math

import numpy as np

from .. import _ext
from .._threads import get_num_threads
from .._validate import (FLOAT_DTYPES, alloc, as_float_array, check_out, collapse, contiguous,
                         estrides, readable, result_dtype)
from .packed import PackedWeight

# The epilogue activations cattn.linear (and cattn.nn) accept, in code order.
ACTIVATIONS = tuple(name for name in _ext.ACT_CODES if name != "none")
_ACT_CODES = {None: _ext.ACT_CODES["none"], **_ext.ACT_CODES}


def _act_code(activation, op):
    try:
        return _ACT_CODES[activation]
    except (KeyError, TypeError):
        raise ValueError(
            f"{op}: unknown activation {activation!r}; expected one of "
            "None, " + ", ".join(repr(a) for a in ACTIVATIONS)) from None


@functools.lru_cache(maxsize=256)
def batch_offsets(batch, shape_b, strides_b):
    """Element offsets of every batch item: operand dims `shape_b` (right-aligned
    to the broadcast `batch`) with element strides `strides_b`; 0 where broadcast.
    Cached by shape (inference repeats shapes); the array is read-only."""
    batch, shape_b, strides_b = tuple(batch), tuple(shape_b), tuple(strides_b)
    off = np.zeros(batch, dtype=np.int64)
    pad = len(batch) - len(shape_b)
    for d, n in enumerate(batch):
        if d < pad:
            continue
        nd, sd = shape_b[d - pad], strides_b[d - pad]
        if nd == 1 or sd == 0:
            continue
        idx = [1] * len(batch)
        idx[d] = n
        off = off + (np.arange(n, dtype=np.int64) * sd).reshape(idx)
    off = np.ascontiguousarray(off.reshape(-1))
    off.flags.writeable = False
    return off


def _gemm_nd(A, B, C, bias=None, act=_ACT_CODES[None]):
    """C[..., M, N] = A[..., M, K] @ B[..., K, N] (+ bias[N], act).
    A and B batch dims broadcast to C's; all three readable (see _validate)."""
    M, N = C.shape[-2:]
    K = A.shape[-1]
    batch = C.shape[:-2]
    nt = get_num_threads()
    sa, sb, sc = estrides(A), estrides(B), estrides(C)
    nb = math.prod(batch)
    if nb == 0 or M == 0 or N == 0:
        return C
    b_shared = all(n == 1 or s == 0 for n, s in zip(B.shape[:-2], sb[:-2]))
    if b_shared and len(A.shape) - 2 == len(batch) and A.shape[:-2] == batch:
        # fold batch into M when A and C rows are evenly spaced: one big GEMM
        ra = collapse(A.shape[:-1], sa[:-1])
        rc = collapse(C.shape[:-1], sc[:-1])
        if ra is not None and rc is not None:
            _ext.gemm(C, rc, sc[-1], A, ra, sa[-1], B, sb[-2], sb[-1],
                      nb * M, N, K, bias, act, nt)
            return C
    if nb == 1:
        _ext.gemm(C, sc[-2], sc[-1], A, sa[-2], sa[-1], B, sb[-2], sb[-1],
                  M, N, K, bias, act, nt)
        return C
    offa = batch_offsets(batch, A.shape[:-2], sa[:-2])
    offb = batch_offsets(batch, B.shape[:-2], sb[:-2])
    offc = batch_offsets(batch, C.shape[:-2], sc[:-2])
    _ext.gemm_batched(C, offc, sc[-2], sc[-1], A, offa, sa[-2], sa[-1],
                      B, offb, sb[-2], sb[-1], M, N, K, bias, act, nt)
    return C


def matmul(a, b, *, out=None):
    """Matrix product with numpy.matmul semantics.

    a: (..., M, K) or (K,); b: (..., K, N) or (K,); batch dims broadcast.
    float32 and float64 (mixed promotes to float64); any strides.
    out: optional array of the exact result shape and dtype, not
    overlapping a or b.
    """
    if (out is None and type(a) is np.ndarray and type(b) is np.ndarray
            and a.ndim == 2 and b.ndim == 2 and a.dtype == b.dtype and a.dtype in FLOAT_DTYPES
            and a.shape[1] == b.shape[0] and (fa := a.flags).c_contiguous
            and (fb := b.flags).c_contiguous and fa.aligned and fb.aligned):
        # fast path: 2-D contiguous aligned operands of one dtype, no out=
        (M, K), N = a.shape, b.shape[1]
        c = np.empty((M, N), dtype=a.dtype)
        if c.size:
            _ext.gemm(c, N, 1, a, K, 1, b, N, 1, M, N, K, None, _ACT_CODES[None],
                      get_num_threads())
        return c
    a = as_float_array(a, "a", "matmul")
    b = as_float_array(b, "b", "matmul")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError(
            f"matmul: operands must have at least 1 dimension, got shapes {a.shape} and {b.shape}")
    dtype = result_dtype(a, b)
    A = a[None, :] if a.ndim == 1 else a
    B = b[:, None] if b.ndim == 1 else b
    M, K = A.shape[-2:]
    K2, N = B.shape[-2:]
    if K != K2:
        raise ValueError(
            f"matmul: inner dimensions differ: a has shape {a.shape}, b has shape {b.shape} "
            f"({K} != {K2})")
    try:
        batch = np.broadcast_shapes(A.shape[:-2], B.shape[:-2])
    except ValueError:
        raise ValueError(
            f"matmul: batch dimensions of shapes {a.shape} and {b.shape} do not broadcast") from None
    shape = batch + ((M,) if a.ndim > 1 else ()) + ((N,) if b.ndim > 1 else ())
    if out is None:
        out = alloc(shape, dtype, "matmul", "the result")
    else:
        check_out(out, shape, dtype, "matmul", (a, b))
    C = out
    if a.ndim == 1:
        C = C[..., None, :] if b.ndim > 1 else C[..., None]
    if b.ndim == 1:
        C = C[..., None]
    _gemm_nd(readable(A, dtype), readable(B, dtype), C)
    return out


def _linear_packed(x, packed, bias, activation, out):
    """linear on a PackedWeight: x and bias in the packed dtype."""
    op = "linear"
    x = as_float_array(x, "x", op)
    act = _act_code(activation, op)
    N, K = packed.shape
    dtype = packed.compute_dtype
    if x.ndim == 0 or x.shape[-1] != K:
        raise ValueError(f"{op}: x has shape {x.shape} but the packed weight has shape "
                         f"{packed.shape}: last dim of x must equal in_features={K}")
    arrays = [x]
    if bias is not None:
        bias = as_float_array(bias, "bias", op)
        if bias.shape != (N,):
            raise ValueError(f"{op}: bias has shape {bias.shape}, expected ({N},)")
        arrays.append(bias)
    for name, a in zip(("x", "bias"), arrays):
        if a.dtype != dtype:
            if str(packed.format) != dtype.name:
                raise TypeError(f"{op}: {name} is {a.dtype} but the packed weight is "
                                f"{packed.format}, which computes in {dtype}: cast {name} "
                                f"to {dtype}")
            raise TypeError(f"{op}: {name} is {a.dtype} but the packed weight is {dtype}: "
                            f"cast {name}, or pack the weight as {a.dtype.name}")
    shape = x.shape[:-1] + (N,)
    if out is None:
        out = alloc(shape, dtype, op, "the result")
    else:
        check_out(out, shape, dtype, op, arrays)
    M = math.prod(x.shape[:-1])
    if M == 0 or N == 0:
        return out
    X = np.ascontiguousarray(readable(x, dtype)).reshape(M, K)
    C = out if out.flags.c_contiguous else np.empty(shape, dtype)
    b = contiguous(bias, dtype) if bias is not None else None
    packed.linear(C.reshape(M, N), X, M, b, act, get_num_threads())
    if C is not out:
        out[...] = C
    return out


def linear(x, weight, bias=None, *, activation=None, out=None):
    """y = act(x @ weight.T + bias), torch.nn.functional.linear's convention.

    x: (..., in_features); weight: (out_features, in_features), or a
    cattn.PackedWeight (cattn.pack_weight: packed once, same results);
    bias: (out_features,) or None; activation: None, 'relu', 'gelu',
    'gelu_tanh' or 'silu', applied with the bias in the GEMM epilogue.
    Returns (..., out_features).
    """
    op = "linear"
    if type(weight) is PackedWeight:
        N, K = weight.shape
        dt = weight.compute_dtype
        if (out is None and type(x) is np.ndarray and x.dtype == dt and x.ndim >= 1
                and x.shape[-1] == K and (fx := x.flags).c_contiguous and fx.aligned
                and x.size and N and (act := _ACT_CODES.get(activation)) is not None
                and (bias is None or (type(bias) is np.ndarray and bias.dtype == dt
                                      and bias.shape == (N,)
                                      and (fb := bias.flags).c_contiguous and fb.aligned))):
            # fast path (inference hot loop): what _linear_packed does after
            # its checks, for a contiguous x, no out=
            y = np.empty(x.shape[:-1] + (N,), dt)
            weight.linear(y, x, x.size // K, bias, act, get_num_threads())
            return y
    if isinstance(weight, PackedWeight):
        return _linear_packed(x, weight, bias, activation, out)
    if (out is None and type(x) is np.ndarray and type(weight) is np.ndarray
            and x.dtype == weight.dtype and x.dtype in FLOAT_DTYPES and x.ndim >= 1
            and weight.ndim == 2 and x.shape[-1] == weight.shape[1]
            and (fx := x.flags).c_contiguous and fx.aligned and weight.flags.aligned
            and not (weight.strides[0] % weight.itemsize or weight.strides[1] % weight.itemsize)
            and (bias is None or (type(bias) is np.ndarray and bias.dtype == x.dtype
                                  and bias.shape == (weight.shape[0],)
                                  and (fb := bias.flags).c_contiguous and fb.aligned))):
        # fast path (inference hot loop): contiguous x, any weight layout
        # (e.g. stored transposed), one dtype, no out=
        N, K = weight.shape
        act = _act_code(activation, op)
        sw0, sw1 = (st // weight.itemsize for st in weight.strides)
        y = np.empty(x.shape[:-1] + (N,), dtype=x.dtype)
        if y.size:
            _ext.gemm(y, N, 1, x, K, 1, weight, sw1, sw0, y.size // N, N, K,
                      bias, act, get_num_threads())
        return y
    x = as_float_array(x, "x", op)
    weight = as_float_array(weight, "weight", op)
    act = _act_code(activation, op)
    if weight.ndim != 2:
        raise ValueError(f"{op}: weight must be 2-D (out_features, in_features), got shape {weight.shape}")
    if x.ndim == 0:
        raise ValueError(f"{op}: x must have at least 1 dimension, got shape {x.shape}")
    N, K = weight.shape
    if x.shape[-1] != K:
        raise ValueError(
            f"{op}: x has shape {x.shape} but weight has shape {weight.shape}: "
            f"last dim of x must equal in_features={K}")
    arrays = [x, weight]
    if bias is not None:
        bias = as_float_array(bias, "bias", op)
        if bias.shape != (N,):
            raise ValueError(f"{op}: bias has shape {bias.shape}, expected ({N},)")
        arrays.append(bias)
    dtype = result_dtype(*arrays)
    shape = x.shape[:-1] + (N,)
    if out is None:
        out = alloc(shape, dtype, op, "the result")
    else:
        check_out(out, shape, dtype, op, arrays)
    if bias is not None:
        bias = contiguous(bias, dtype)
    X = readable(x, dtype)
    X2 = X[None, :] if X.ndim == 1 else X
    C = out[None, :] if out.ndim == 1 else out
    _gemm_nd(X2, readable(weight, dtype).T, C, bias, act)
    return out
