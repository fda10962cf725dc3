"""cattn.reference — a float64 NumPy oracle for every cattn op, written
straight from the formulas. Slow on purpose: tests and docs compare against
it; no forward path of cattn calls it.

Shape legend: B batch, H heads (Hq query heads), L query length,
S key length, E head dim, Ev value head dim.
"""
import math

import numpy as np
from scipy import special as _sp


def _f64(x):
    return np.asarray(x, dtype=np.float64)


def matmul(a, b):
    return np.matmul(_f64(a), _f64(b))


def linear(x, weight, bias=None, activation=None):
    y = _f64(x) @ _f64(weight).T
    if bias is not None:
        y = y + _f64(bias)
    return ACTIVATIONS[activation](y)


def softmax(x, axis=-1):
    """exp(x - max) / sum; a row of all -inf gives 0 (not NaN)."""
    x = _f64(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(s == 0, 0.0, e / np.where(s == 0, 1.0, s))


def log_softmax(x, axis=-1):
    """x - max - log(sum exp(x - max)); a row of all -inf gives -inf."""
    x = _f64(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    with np.errstate(divide="ignore"):
        return x - m - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis."""
    x = _f64(x)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if weight is not None:
        y = y * _f64(weight)
    if bias is not None:
        y = y + _f64(bias)
    return y


def rms_norm(x, weight=None, eps=1e-6):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    x = _f64(x)
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y * _f64(weight) if weight is not None else y


def relu(x):
    x = _f64(x)
    return np.where(x < 0, 0.0, x)


def gelu(x):
    x = _f64(x)
    return 0.5 * x * (1.0 + _sp.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    x = _f64(x)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    x = _f64(x)
    return x * _sp.expit(x)


ACTIVATIONS = {None: lambda x: x, "none": lambda x: x, "relu": relu, "gelu": gelu,
               "gelu_tanh": gelu_tanh, "silu": silu}


def causal_mask(L, S, alignment="upper_left"):
    """(L, S) bool, True = may attend. upper_left: row i sees keys 0..i;
    lower_right: row i sees keys 0..i+S-L."""
    i = np.arange(L)[:, None]
    j = np.arange(S)[None, :]
    shift = 0 if alignment == "upper_left" else S - L
    return j <= i + shift


def attention_weights(query, key, attn_mask=None, is_causal=False, scale=None,
                      enable_gqa=False, causal_alignment="upper_left"):
    """A = softmax(Q K^T * scale + mask): (..., Hq, L, S) in float64.

    Masked entries get exactly 0 weight even if the score is NaN; a row with
    no key to attend to is all zeros."""
    q, k = _f64(query), _f64(key)
    E = q.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    if enable_gqa and q.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
    L, S = q.shape[-2], k.shape[-2]
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    allowed = np.ones(s.shape, dtype=bool)
    if is_causal:
        allowed = allowed & causal_mask(L, S, causal_alignment)
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        if m.dtype == np.bool_:
            allowed = allowed & m
        else:
            s = s + _f64(m)
            allowed = allowed & ~np.isneginf(np.broadcast_to(_f64(m), s.shape))
    allowed = np.broadcast_to(allowed, s.shape)
    s = np.where(allowed, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    with np.errstate(invalid="ignore"):
        e = np.where(allowed, np.exp(s - m), 0.0)
    tot = e.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        # masked entries stay exactly 0 even when the row's sum is NaN
        return np.where(allowed & (tot != 0), e / np.where(tot == 0, 1.0, tot), 0.0)


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False,
                                 scale=None, enable_gqa=False,
                                 causal_alignment="upper_left"):
    """Z = A V with A from attention_weights: (..., Hq, L, Ev) in float64.
    Values at keys with zero weight do not contribute (NaN there is ignored)."""
    A = attention_weights(query, key, attn_mask, is_causal, scale, enable_gqa,
                          causal_alignment)
    v = _f64(value)
    if enable_gqa and v.ndim >= 3 and A.shape[-3] != v.shape[-3]:
        v = np.repeat(v, A.shape[-3] // v.shape[-3], axis=-3)
    # Only keys with nonzero weight contribute: a NaN / inf value at a key a
    # row does not attend to must not reach that row (NaN * 0 must not leak,
    # neither through a column another row uses). Finite values go through
    # one matmul; each non-finite value is added only to the rows that give
    # its key a nonzero weight.
    v_b = np.broadcast_to(v, A.shape[:-2] + v.shape[-2:])
    finite = np.isfinite(v_b)
    out = np.matmul(A, np.where(finite, v_b, 0.0))
    for idx in zip(*np.nonzero(~finite)):
        b, s, j = idx[:-2], idx[-2], idx[-1]
        a = A[b + (slice(None), s)]
        with np.errstate(invalid="ignore"):
            out[b + (slice(None), j)] += np.where(a != 0, a * v_b[idx], 0.0)
    return out
