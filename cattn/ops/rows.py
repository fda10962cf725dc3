"""cattn.ops.rows — the row-wise ops: softmax, log_softmax, layer_norm,
rms_norm, gelu, silu and relu. Validate and describe the arrays here,
compute in C (csrc/rows.c) with the GIL released.

Conventions (as cattn.ops.gemm): float32 and float64 are computed natively
and mixed inputs promote as NumPy does; any other dtype raises TypeError
naming it; bad shapes raise ValueError naming them. Inputs are never copied
unless the kernels cannot read them in place (unaligned data, or dims that
cannot be described by one stride). ``out=`` must have the exact result
shape and dtype; it may be the input array itself (same memory and strides:
the op then runs in place) but must not overlap it or any other input
otherwise.

Shape legend: x is (..., n), n the length of the normalised / softmaxed
axis; softmax along any axis sees x as (outer, n, inner).
"""
import math

import numpy as np

from .. import _ext
from .._threads import get_num_threads
from .._validate import (FLOAT_DTYPES, as_float_array, as_int, as_real, check_out, collapse, contiguous,
                         estrides, readable, result_dtype, show)

try:  # NumPy >= 1.25
    from numpy.exceptions import AxisError
except ImportError:  # pragma: no cover
    AxisError = np.AxisError

__all__ = ["softmax", "log_softmax", "layer_norm", "rms_norm", "gelu", "silu", "relu"]

_ACT = _ext.ACT_CODES


# ---------------------------------------------------------------- helpers

def _same_view(a, b):
    """True when a and b are the same elements in the same layout."""
    return (a.shape == b.shape and a.strides == b.strides and a.dtype == b.dtype
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def _prepare_out(out, shape, dtype, op, x, others=(), order="C"):
    """A new array, or the user's out checked (it may be x itself; it must
    not overlap anything else)."""
    if out is None:
        return np.empty(shape, dtype=dtype, order=order)
    same = isinstance(out, np.ndarray) and _same_view(out, x)
    inputs = tuple(a for a in others if a is not None)
    check_out(out, shape, dtype, op, inputs if same else (x,) + inputs)
    return out


def _axis(axis, ndim, op):
    axis = as_int(axis, "axis", op, lo=None)
    if not -ndim <= axis < ndim:
        # AxisError is a ValueError (and an IndexError), as NumPy raises it
        raise AxisError(f"{op}: axis {show(axis)} is out of bounds for array of dimension {ndim}")
    return axis % ndim


def _eps(eps, op):
    """eps: a finite real number >= 0 (0 is allowed, as in torch; a negative,
    NaN or infinite eps raises ValueError, a non-number TypeError)."""
    if type(eps) is float and eps >= 0.0 and eps != math.inf:   # the common case, fast
        return eps
    return as_real(eps, "eps", op, finite=True, lo=0.0)


def _param(p, name, x, op):
    """weight / bias: None or an array of shape (n,) for x of shape (..., n)."""
    if p is None:
        return None
    p = as_float_array(p, name, op)
    n = x.shape[-1]
    if p.shape != (n,):
        raise ValueError(f"{op}: {name} has shape {p.shape}, expected ({n},) to match the "
                         f"last dim of x with shape {x.shape}")
    return p


def _fast_param(p, x):
    """weight / bias usable as they are by the fast paths: None, or a
    contiguous aligned (n,) array of x's dtype."""
    return p is None or (type(p) is np.ndarray and p.dtype == x.dtype
                         and p.shape == x.shape[-1:] and (f := p.flags).c_contiguous
                         and f.aligned)


def _rows(a):
    """(rows, row stride) of `a` seen as (prod(shape[:-1]), shape[-1]) with unit
    element stride, or None when that view is not expressible by one stride."""
    if a.ndim == 0:
        return 1, 1
    if a.flags.c_contiguous:
        return math.prod(a.shape[:-1]), a.shape[-1]
    st = estrides(a)
    if a.shape[-1] > 1 and st[-1] != 1:
        return None
    rs = collapse(a.shape[:-1], st[:-1])
    if rs is None:
        return None
    return math.prod(a.shape[:-1]), rs


def _row_views(X, out, describe=_rows):
    """Descriptions (`describe`: _rows, or softmax's (outer, n, inner) view)
    of the input X and the output: (X, xdesc, Y, ydesc) with X made
    contiguous and Y a temporary when they cannot be described."""
    xd = describe(X)
    if xd is None:
        X = np.ascontiguousarray(X)
        xd = describe(X)
    Y, yd = out, describe(out)
    if yd is None:
        Y = np.empty(out.shape, dtype=out.dtype)
        yd = describe(Y)
    return X, xd, Y, yd


# ---------------------------------------------------------------- softmax

def _softmax(x, axis, out, log, op):
    x = as_float_array(x, "x", op)
    ax = _axis(axis, x.ndim, op)
    dtype = x.dtype
    out = _prepare_out(out, x.shape, dtype, op, x)
    if x.size == 0:
        return out
    shape = x.shape
    outer = math.prod(shape[:ax])
    inner = math.prod(shape[ax + 1:])

    def view3(a):  # (outer, n, inner) element strides, or None
        if a.flags.c_contiguous:
            return shape[ax] * inner, inner, 1
        st = estrides(a)
        so = collapse(a.shape[:ax], st[:ax])
        si = collapse(a.shape[ax + 1:], st[ax + 1:])
        return None if so is None or si is None else (so, st[ax], si)

    X, xs, Y, ys = _row_views(readable(x, dtype), out, view3)
    _ext.softmax(Y, ys[0], ys[1], ys[2], X, xs[0], xs[1], xs[2],
                 outer, shape[ax], inner, log, get_num_threads())
    if Y is not out:
        out[...] = Y
    return out


def softmax(x, axis=-1, *, out=None):
    """exp(x - max) / sum(exp(x - max)) along `axis` (any axis, no transpose
    copy), float32 / float64.

    A slice of all -inf gives zeros; a NaN (or +inf) in a slice makes that
    slice NaN and no other. `out` may be x itself (in place)."""
    return _softmax(x, axis, out, False, "softmax")


def log_softmax(x, axis=-1, *, out=None):
    """(x - max) - log(sum(exp(x - max))) along `axis`; a slice of all -inf
    gives -inf, a NaN makes its slice NaN. `out` may be x itself."""
    return _softmax(x, axis, out, True, "log_softmax")


# ---------------------------------------------------------------- norms

def layer_norm(x, weight=None, bias=None, eps=1e-5, *, out=None):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis
    (biased variance, as torch.nn.functional.layer_norm).

    x: (..., n); weight, bias: (n,) or None. Two-pass mean and centered
    variance (stable for rows with a large mean). `out` may be x itself."""
    op = "layer_norm"
    if (type(x) is np.ndarray and (out is None or out is x) and x.dtype in FLOAT_DTYPES
            and x.ndim and x.size and (fx := x.flags).c_contiguous and fx.aligned
            and (out is None or fx.writeable) and type(eps) is float and 0.0 <= eps < math.inf
            and _fast_param(weight, x) and _fast_param(bias, x)):
        # fast path (inference hot loop): contiguous x, in place or a new array
        y = np.empty(x.shape, x.dtype) if out is None else x
        n = x.shape[-1]
        _ext.layer_norm(y, n, x, n, weight, bias, x.size // n, n, eps, get_num_threads())
        return y
    x = as_float_array(x, "x", op)
    if x.ndim == 0:
        raise ValueError(f"{op}: x must have at least 1 dimension, got shape {x.shape}")
    weight = _param(weight, "weight", x, op)
    bias = _param(bias, "bias", x, op)
    eps = _eps(eps, op)
    dtype = result_dtype(*[a for a in (x, weight, bias) if a is not None])
    out = _prepare_out(out, x.shape, dtype, op, x, (weight, bias))
    if x.size == 0:
        return out
    w = None if weight is None else contiguous(weight, dtype)
    b = None if bias is None else contiguous(bias, dtype)
    X, (rows, xs), Y, (_, ys) = _row_views(readable(x, dtype), out)
    _ext.layer_norm(Y, ys, X, xs, w, b, rows, x.shape[-1], eps, get_num_threads())
    if Y is not out:
        out[...] = Y
    return out


def rms_norm(x, weight=None, eps=1e-6, *, out=None):
    """x / sqrt(mean(x**2) + eps) * weight over the last axis.

    x: (..., n); weight: (n,) or None. `out` may be x itself."""
    op = "rms_norm"
    x = as_float_array(x, "x", op)
    if x.ndim == 0:
        raise ValueError(f"{op}: x must have at least 1 dimension, got shape {x.shape}")
    weight = _param(weight, "weight", x, op)
    eps = _eps(eps, op)
    dtype = result_dtype(*[a for a in (x, weight) if a is not None])
    out = _prepare_out(out, x.shape, dtype, op, x, (weight,))
    if x.size == 0:
        return out
    w = None if weight is None else contiguous(weight, dtype)
    X, (rows, xs), Y, (_, ys) = _row_views(readable(x, dtype), out)
    _ext.rms_norm(Y, ys, X, xs, w, rows, x.shape[-1], eps, get_num_threads())
    if Y is not out:
        out[...] = Y
    return out


# ---------------------------------------------------------------- activations

def _elementwise(x, act, out, op):
    x = as_float_array(x, "x", op)
    dtype = x.dtype
    fortran = x.ndim > 1 and x.flags.f_contiguous and not x.flags.c_contiguous
    out = _prepare_out(out, x.shape, dtype, op, x, order="F" if fortran else "C")
    if x.size == 0:
        return out
    X = readable(x, dtype)
    if X.flags.c_contiguous and out.flags.c_contiguous:      # one flat row
        X2, Y2 = X.reshape(1, -1), out.reshape(1, -1)
    elif X.flags.f_contiguous and out.flags.f_contiguous:
        X2, Y2 = X.T.reshape(1, -1), out.T.reshape(1, -1)
    else:
        X2, Y2 = X.reshape(1, 1) if X.ndim == 0 else X, out
    X2, (rows, xs), Y, (_, ys) = _row_views(X2, Y2)
    n = X2.shape[-1] if X2.ndim else 1
    _ext.activation(Y, ys, X2, xs, rows, n, act, get_num_threads())
    if Y is not Y2:
        Y2[...] = Y
    return out


def gelu(x, approximate="none", *, out=None):
    """GELU: x * Phi(x) (approximate="none", erf form) or GPT-2's
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (approximate="tanh").

    Elementwise, float32 / float64; float32 results are within ~0.5 ulp of
    the exact function (computed in double internally). gelu(-inf) = -0,
    gelu(inf) = inf, NaN stays NaN. `out` may be x itself."""
    if not isinstance(approximate, str):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {show(approximate)}")
    if approximate == "none":
        act = _ACT["gelu"]
    elif approximate == "tanh":
        act = _ACT["gelu_tanh"]
    else:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _elementwise(x, act, out, "gelu")


def silu(x, *, out=None):
    """SiLU (swish): x * sigmoid(x), elementwise; silu(-inf) = -0.
    `out` may be x itself."""
    return _elementwise(x, _ACT["silu"], out, "silu")


def relu(x, *, out=None):
    """max(x, 0) elementwise (NaN stays NaN, -0.0 stays -0.0).
    `out` may be x itself."""
    return _elementwise(x, _ACT["relu"], out, "relu")
