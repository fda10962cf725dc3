"""cattn.nn.fastpath — TransformerEncoder.forward_tokens' inference loop:
the kernel calls of the layer-by-layer path, issued straight to the
extension.

What this file is: for a stack of standard encoder layers on the real
tokens of a batch (nn.RealTokens, no attention mask, no weights asked
for), each layer runs as the same sequence of kernel calls as
TransformerEncoderLayer.forward_tokens makes (the same arguments: same
rows, weights, bias, activation, thread count), without the Python between
them (argument checks already done once, views, plans): a MiniLM sentence
spent ~0.5 ms of its ~2 ms there. A float32 stack with packed weights
(what from_pretrained builds) runs the loop itself in C (_ext.encoder_f32,
cattn/_encoder.pxi: the same calls, ~0.1 ms less per MiniLM sentence);
the layer programs are built once per stack and reused while no Module
attribute is assigned. Results are the same bits as the general path
(tests/test_nn_fastpath.py checks it). What it is not: new kernels,
or a second implementation of any layer: anything unusual (a cut packed
in_proj, rotary embeddings, an attn_mask, odd parameter layouts) returns
None and the caller takes the general path.

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
from ..ops.packed import PackedWeight
from .attention import MultiheadAttention
from .layers import LayerNorm, Linear
from .module import mutation_count
from .packed_params import PackedRows
from .transformer_layers import TransformerEncoderLayer

_ACT = _ext.ACT_CODES
_plans = {}          # (b, n, E, H, dtype, causal) -> the fused attention plan of a run
# a stack's layer programs (or None: not of the standard form), valid while
# no Module attribute was assigned since (nn._MUTATIONS) for that E, dtype
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


# float32 stacks with packed weights run the loop in C (_ext.encoder_f32):
# the same kernel calls; False runs them from Python (tests log the calls)
_C_LOOP = True


def _weight_call(W, b, N, K, dt):
    """A function (x (M, K), y (M, N), act, nt) computing y = act(x W^T + b)
    by the kernel cattn.linear uses for W, or None if W or b is not in a
    form the hot path of cattn.linear takes as is."""
    if b is not None and not (type(b) is np.ndarray and b.dtype == dt and b.shape == (N,)
                              and b.flags.c_contiguous and b.flags.aligned):
        return None
    if type(W) is PackedRows:
        if len(W.pieces) != 1:
            return None
        W = W.pieces[0]
    if type(W) is PackedWeight:
        if W.shape != (N, K) or W.compute_dtype != dt:
            return None

        def call(x, y, act, nt):
            W.linear(y, x, len(x), b, act, nt)
        return call
    if not (type(W) is np.ndarray and W.dtype == dt and W.shape == (N, K) and W.flags.aligned
            and not (W.strides[0] % W.itemsize or W.strides[1] % W.itemsize)):
        return None
    sw0, sw1 = W.strides[0] // W.itemsize, W.strides[1] // W.itemsize

    def call(x, y, act, nt):
        _ext.gemm(y, N, 1, x, K, 1, W, sw1, sw0, len(x), N, K, b, act, nt)
    return call


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


def _c_linear(W, b):
    """The weight as _ext.encoder_f32 takes it (PackedWeight.kernel_entry)
    for a float32 PackedWeight (or a one-piece PackedRows), or None."""
    if type(W) is PackedRows:
        W = W.pieces[0] if len(W.pieces) == 1 else None
    if type(W) is not PackedWeight or W.compute_dtype != np.float32:
        return None
    return W.kernel_entry(b)


def _c_layer(layer, prog):
    """The layer as _ext.encoder_f32 takes it (float32, packed weights), or
    None. prog: its checked program (_layer_program)."""
    sa = layer.self_attn
    lins = (_c_linear(sa.in_proj_weight, sa.in_proj_bias),
            _c_linear(sa.out_proj.weight, sa.out_proj.bias),
            _c_linear(layer.linear1.weight, layer.linear1.bias),
            _c_linear(layer.linear2.weight, layer.linear2.bias))
    if any(w is None for w in lins):
        return None
    (w1, b1, e1), (w2, b2, e2) = prog[4], prog[5]
    return (*lins, w1, b1, e1, w2, b2, e2, prog[8], int(prog[9]))


def _layer_program(layer, E, dt):
    """The kernel calls of one TransformerEncoderLayer, or None."""
    if type(layer) is not TransformerEncoderLayer or layer.dtype != dt:
        return None
    sa = layer.self_attn
    # exact types: a subclass may override forward (the general path calls it)
    if (type(sa) is not MultiheadAttention or type(layer.linear1) is not Linear
            or type(layer.linear2) is not Linear):
        return None
    if sa.rotary is not None or not sa._qkv_same_embed_dim or sa.embed_dim != E:
        return None
    F = layer.linear1.out_features
    steps = (_weight_call(sa.in_proj_weight, sa.in_proj_bias, 3 * E, E, dt),
             _weight_call(sa.out_proj.weight, sa.out_proj.bias, E, E, dt),
             _weight_call(layer.linear1.weight, layer.linear1.bias, F, E, dt),
             _weight_call(layer.linear2.weight, layer.linear2.bias, E, F, dt),
             _norm_params(layer.norm1, E, dt), _norm_params(layer.norm2, E, dt))
    if any(s is None for s in steps) or layer.linear2.out_features != E:
        return None
    return (*steps, F, sa.num_heads, _ACT[layer.activation], layer.norm_first)


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
            and x.flags.aligned and x.dtype in (np.float32, np.float64)):
        return None
    T, E = x.shape
    dt = x.dtype
    if T == 0 or int(lengths.sum()) != T:
        return None
    key = (mutation_count(), E, dt)
    cached = _programs.get(layers)
    if cached is not None and cached[0] == key:
        progs = cached[1]
    else:
        progs = [_layer_program(layer, E, dt) for layer in layers]
        progs = None if any(p is None for p in progs) else progs
        clayers = None
        if progs is not None and dt == np.float32:
            clayers = [_c_layer(layer, p) for layer, p in zip(layers, progs)]
            clayers = None if any(c is None for c in clayers) else clayers
        _programs[layers] = (key, progs, clayers)
        cached = _programs[layers]
    if progs is None:
        return None
    clayers = cached[2]
    H = progs[0][7]
    if E % H or any(p[7] != H for p in progs):
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
    nt = get_num_threads()
    pre = any(p[9] for p in progs)
    Fs = {p[6] for p in progs}
    F0 = max(Fs)
    qkv, ctx, A, f, Hb = _buffers([(T, 3 * E), (T, E), (T, E), (T, F0),
                                   (T, E) if pre else (0,)], dt)
    none = _ACT["none"]
    attn = []
    for r0, b, n in runs:
        rows = slice(r0, r0 + b * n)
        plan = _plan(b, n, E, H, dt, causal, qkv[rows], ctx[rows])
        if plan is None:
            return None
        attn.append((plan, rows))
    if clayers is not None and _C_LOOP and len(Fs) == 1:   # the loop in one C call
        Y = _result(T, E, dt)                  # the result: a new array (or kept)
        _ext.encoder_f32(clayers, x, qkv, ctx, A, Y, Hb if pre else None, f,
                         [(plan, rows.start, rows) for plan, rows in attn], none, nt)
        return Y
    # buffers reused by every layer (fresh large arrays cost page faults):
    # a (the attention block's sum) in A, the layer's output y in Y, which
    # may be the previous layer's output x (dead once a = x + SA(...) is
    # formed) but never the caller's x
    Y, Hn, fs = None, (Hb if pre else None), {F0: f}
    for in_proj, out_proj, lin1, lin2, (w1, b1, e1), (w2, b2, e2), F, _, act, pre in progs:
        if pre:
            if Hn is None:
                Hn = np.empty((T, E), dt)
            h = Hn
            _ext.layer_norm(h, E, x, E, w1, b1, T, E, e1, nt)
        else:
            h = x
        in_proj(h, qkv, none, nt)
        _attend(qkv, ctx, attn, E, nt)
        a = A
        out_proj(ctx, a, none, nt)
        np.add(a, x, out=a)
        if pre:
            _ext.layer_norm(h, E, a, E, w2, b2, T, E, e2, nt)
        else:
            _ext.layer_norm(a, E, a, E, w1, b1, T, E, e1, nt)
            h = a
        f = fs.get(F)
        if f is None:
            f = fs[F] = np.empty((T, F), dt)
        lin1(h, f, act, nt)
        if Y is None:
            Y = np.empty((T, E), dt)
        y = Y
        lin2(f, y, none, nt)
        np.add(y, a, out=y)
        if not pre:
            _ext.layer_norm(y, E, y, E, w2, b2, T, E, e2, nt)
        x = y
    return x


def _attend(qkv, ctx, attn, E, nt):
    """ctx rows = attention of each run's q over its k, v (views of qkv)."""
    for plan, rows in attn:
        q = qkv[rows]
        _ext.attention(plan, ctx[rows], q, q[:, E:], q[:, 2 * E:], None, nt)
