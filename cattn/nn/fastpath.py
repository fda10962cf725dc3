"""cattn.nn.fastpath — TransformerEncoder.forward_tokens' inference
program: a stack of encoder layers on the real tokens of a batch in one C
call (_ext.encoder_f32, cattn/_encoder.pxi).

What this file is: for a float32 stack of standard encoder layers on the
real tokens of a batch (nn.RealTokens, no attention mask, no weights asked
for), the description of its layers (weights of any float32 format or
plain float32 arrays through their strides, norms, flags), built once per
stack and reused while no Module attribute is assigned; each call runs
every layer as the same sequence of kernel calls as
TransformerEncoderLayer.forward_tokens makes (the same rows, weights, bias,
activation, thread count) inside one nogil call. Results are the same bits
as the layer-by-layer path (tests/programs/test_encoder_program.py checks it). What it
is not: new kernels, or a second implementation of any layer: anything
unusual (float64, a cut packed in_proj, an attn_mask)
returns None and the caller runs the layers themselves.

Legend: T real tokens (rows), E model width, H heads, D = E / H, F the
feed-forward width, b sequences of one length n in a run (b * n rows).

Per layer, post-LN (norm_first=False):
    qkv = x W_in^T + b_in                         (T, 3E)   one GEMM
    ctx = softmax(q k^T / sqrt(D)) v per sequence  (T, E)    fused attention per run
    a   = LN1(x + ctx W_o^T + b_o)                (T, E)
    y   = LN2(a + act(a W_1^T + b_1) W_2^T + b_2) (T, E)
pre-LN (norm_first=True): a = x + SA(LN1(x)); y = a + FF(LN2(a)).
"""
import contextlib
import threading
import weakref

import numpy as np

from .. import _ext
from .._threads import get_num_threads
from ..ops.attention import fast_plan
from .attention import MultiheadAttention
from .layers import LayerNorm, Linear
from .module import current
from .packed_params import weight_entry
from .transformer_layers import TransformerEncoderLayer

_ACT = _ext.ACT_CODES
_plans = {}          # (b, n, E, H, dtype, causal) -> the fused attention plan of a run
# a stack's layer programs by E (or None: not of the standard form), kept
# while the stack's modules are unchanged (module.current)
_programs = weakref.WeakKeyDictionary()
# scratch arrays kept per Python thread for its next calls (as views when large enough)
# (fresh large arrays cost page faults and zeroing): at most KEEP_BYTES
_scratch = threading.local()
KEEP_BYTES = 64 << 20


def _buffers(shapes, dt):
    """Scratch arrays of these shapes (never returned to the caller): views
    of this thread's flat arrays from its previous calls when each is large
    enough (a batch no longer than the last: SentenceEncoder runs its
    longest batch first, so one encode allocates once), else new ones."""
    sizes = [int(np.prod(sh)) for sh in shapes]
    kept = getattr(_scratch, "kept", None)
    if (kept is None or kept[0] != dt.str or len(kept[1]) != len(sizes)
            or any(f.size < n for f, n in zip(kept[1], sizes))):
        flats = [np.empty(n, dt) for n in sizes]
        if sum(f.nbytes for f in flats) <= KEEP_BYTES:
            _scratch.kept = (dt.str, flats)
    else:
        flats = kept[1]
    return [f[:n].reshape(sh) for f, n, sh in zip(flats, sizes, shapes)]


@contextlib.contextmanager
def result_in_scratch():
    """Within this block (on this thread) the fast path's result, the
    stack's output (T, E), is a view of a kept array that this thread's
    next call overwrites: for callers that consume each result at once
    (SentenceEncoder.encode pools every batch before the next), so that a
    batch writes no fresh pages (first touches of new memory: page faults,
    zeroing, and for arrays of 4 MB or more transparent huge pages)."""
    prev = getattr(_scratch, "borrow", False)
    _scratch.borrow = True
    try:
        yield
    finally:
        _scratch.borrow = prev


def _result(T, E, dt):
    """The array the stack's output goes into: new, or in result_in_scratch
    a view of this thread's kept result array (replaced when too small)."""
    if not getattr(_scratch, "borrow", False):
        return np.empty((T, E), dt)
    r = getattr(_scratch, "result", None)
    if r is None or r.dtype != dt or r.size < T * E:
        r = np.empty(T * E, dt)
        _scratch.result = r if r.nbytes <= KEEP_BYTES else None
    return r[:T * E].reshape(T, E)


def _norm_params(norm, E, dt):
    """(weight, bias, eps) of an nn.LayerNorm usable as they are by the
    layer_norm kernel, or None."""
    if type(norm) is not LayerNorm or norm.normalized_shape != (E,):
        return None
    for p in (norm.weight, norm.bias):
        if p is not None and not (type(p) is np.ndarray and p.dtype == dt and p.shape == (E,)
                                  and p.flags.c_contiguous and p.flags.aligned):
            return None
    eps = float(norm.eps)
    return norm.weight, norm.bias, eps


def _layer_entry(layer, E):
    """One TransformerEncoderLayer as _ext.encoder_f32 takes it (in_proj,
    out_proj, linear1, linear2, ln1_w, ln1_b, eps1, ln2_w, ln2_b, eps2, act,
    pre) and its (F, heads), or None when it is not of the standard form."""
    dt = np.dtype(np.float32)
    if type(layer) is not TransformerEncoderLayer or layer.dtype != dt:
        return None
    sa = layer.self_attn
    # exact types: a subclass may override forward (the general path calls it)
    if (type(sa) is not MultiheadAttention or type(layer.linear1) is not Linear
            or type(layer.linear2) is not Linear):
        return None
    if not sa._qkv_same_embed_dim or sa.embed_dim != E:
        return None
    F = layer.linear1.out_features
    lins = (weight_entry(sa.in_proj_weight, sa.in_proj_bias, 3 * E, E),
            weight_entry(sa.out_proj.weight, sa.out_proj.bias, E, E),
            weight_entry(layer.linear1.weight, layer.linear1.bias, F, E),
            weight_entry(layer.linear2.weight, layer.linear2.bias, E, F))
    norms = (_norm_params(layer.norm1, E, dt), _norm_params(layer.norm2, E, dt))
    if any(s is None for s in lins + norms) or layer.linear2.out_features != E:
        return None
    (w1, b1, e1), (w2, b2, e2) = norms
    return ((*lins, w1, b1, e1, w2, b2, e2, _ACT[layer.activation], int(layer.norm_first)),
            (F, sa.num_heads))


def _plan(b, n, E, H, dt, causal, qkv, ctx):
    """The fused attention plan of b sequences of n tokens whose rows are
    consecutive in qkv (b*n, 3E) and ctx (b*n, E); plans hold offsets and
    strides only, so one serves every call of that layout."""
    key = (b, n, E, H, dt.str, causal)
    p = _plans.get(key)
    if p is None:
        D = E // H
        q, k, v = (qkv[:, i * E:(i + 1) * E].reshape(b, n, H, D).transpose(0, 2, 1, 3)
                   for i in range(3))
        o = ctx.reshape(b, n, H, D).transpose(0, 2, 1, 3)
        fast = fast_plan(q, k, v, causal, o)
        if fast is None:
            return None
        if len(_plans) > 4096:
            _plans.clear()
        p = _plans[key] = fast[0]
    return p


def encoder_tokens(layers, x, lengths, is_causal):
    """The layers on token rows x (T, E) of sequences of `lengths` (B,)
    (each sequence's rows consecutive, in position order), each attending
    over its own tokens (causally if is_causal, a bool) -> (T, E) as a new array;
    None when a layer or x is not of the standard form (the caller then runs
    the layer-by-layer path)."""
    if not (type(x) is np.ndarray and x.ndim == 2 and x.flags.c_contiguous
            and x.flags.aligned and x.dtype == np.float32):
        return None
    T, E = x.shape
    dt = x.dtype
    if T == 0 or int(lengths.sum()) != T:
        return None
    by_width = current(_programs, layers, lambda stack: {})
    if E not in by_width:
        got = [_layer_entry(layer, E) for layer in layers]
        by_width[E] = None if any(g is None for g in got) else got
    entries = by_width[E]
    if entries is None:
        return None
    H = entries[0][1][1]
    if E % H or any(g[1][1] != H for g in entries):
        return None
    # runs of consecutive sequences of one length: (first row, b, n)
    runs, start = [], 0
    bounds = np.flatnonzero(np.diff(lengths)) + 1 if lengths.size > 1 else ()
    for seg in np.split(lengths, bounds) if len(bounds) else (lengths,):
        b, n = seg.size, int(seg[0])
        if n:
            runs.append((start, b, n))
        start += b * n
    causal = is_causal is True
    pre = any(g[0][11] for g in entries)
    F0 = max(g[1][0] for g in entries)
    qkv, ctx, A, f, Hb = _buffers([(T, 3 * E), (T, E), (T, E), (T, F0),
                                   (T, E) if pre else (0,)], dt)
    attn = []
    for r0, b, n in runs:
        rows = slice(r0, r0 + b * n)
        plan = _plan(b, n, E, H, dt, causal, qkv[rows], ctx[rows])
        if plan is None:
            return None
        attn.append((plan, r0, rows))
    Y = _result(T, E, dt)                      # the result: a new array (or kept)
    _ext.encoder_f32([g[0] for g in entries], x, qkv, ctx, A, Y, Hb if pre else None, f, attn,
                     _ACT["none"], get_num_threads())
    return Y
