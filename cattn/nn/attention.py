"""cattn.nn.attention — torch's MultiheadAttention over the fused
cattn.scaled_dot_product_attention, the real-tokens layout (RealTokens) it
and the encoder layers share, and the mask helpers
(generate_square_subsequent_mask). Legend: cattn.nn's.
"""


import numpy as np

from .._validate import as_flag, as_float_dtype, as_int, check_size, show
from ..ops.attention import attention_weights, scaled_dot_product_attention
from ..ops.gemm import linear, matmul
from ..ops.packed import PackedWeight
from .layers import Linear
from .module import (
    Module,
    as_input,
    check_dropout,
    make_rng,
    positive_int,
    xavier_uniform,
)
from .packed_params import PackedRows


def split_heads(y, n, heads, batch_first):
    """Projected activations y (B, L, n*E) — or (L, B, n*E) if not batch_first —
    as n views (B, H, L, D), one per projection (q, k, v). No copy."""
    if not batch_first:
        y = y.swapaxes(0, 1)
    B, L, nE = y.shape
    D = nE // (n * heads)
    v = y.reshape(B, L, n, heads, D).transpose(2, 0, 3, 1, 4)
    return [v[i] for i in range(n)]


def generate_square_subsequent_mask(sz, dtype=np.float32):
    """torch's causal float mask (sz, sz): 0 on and below the diagonal, -inf above."""
    op = "generate_square_subsequent_mask"
    sz = as_int(sz, "sz", op)
    check_size((sz, sz), dtype, op, f"the mask (sz={show(sz)})", eager=True,
               extra_bytes_per_item=8)
    m = np.zeros((sz, sz), dtype=dtype)
    m[np.triu_indices(sz, 1)] = -np.inf
    return m


def is_causal_mask(mask, L):
    """True when mask is torch's causal mask of size L (bool: True above the
    diagonal; float: -inf above, 0 elsewhere) — torch's _detect_is_causal_mask."""
    if mask is None:
        return False
    m = np.asarray(mask)
    if m.shape != (L, L):
        return False
    upper = np.triu(np.ones((L, L), dtype=bool), 1)
    if m.dtype == np.bool_:
        return bool(np.array_equal(m, upper))
    if m.dtype.kind == "f":
        return bool(np.all(np.where(upper, np.isneginf(m), m == 0)))
    return False


# ----------------------------------------------------------------------------
# Module: parameters, sub-modules, state_dict




class RealTokens:
    """Where the real (non-padding) tokens of a padded batch (B, L) sit: the
    layout of the real-tokens-only path (`forward_tokens` of
    MultiheadAttention, TransformerEncoderLayer and TransformerEncoder, and
    their forward(..., skip_padding=True)).

    On that path the token-wise work — the Q/K/V and output projections,
    the norms, the feed-forward network — runs on the T real tokens stacked
    as rows (T, E), sequence 0's tokens first, each in position order; only
    attention sees the padded (B, L) layout (its query/key/value rows spread
    there, padding rows zero, padding keys masked). Padding costs nothing
    outside attention, and the real rows get the values of the full path.

    key_padding_mask: (B, L), torch's convention — bool True = padding, or
    float with -inf = padding (added to the scores as given) — or None.
    Attributes: B, L, T; key_padding_mask (None when nothing is padded);
    real (B, L) bool, True = a real token; rows (T,) the flat positions
    b * L + l of the real tokens, ascending, or None when nothing is padded
    (T = B * L: the token rows are every position and packing a reshape).
    A sequence that is all padding has no token rows.
    """

    def __init__(self, B, L, key_padding_mask=None):
        owner = "RealTokens"
        self.B, self.L = as_int(B, "B", owner), as_int(L, "L", owner)
        self.key_padding_mask = self.rows = None
        self.real = np.ones((self.B, self.L), bool)
        if key_padding_mask is not None:
            m = np.asarray(key_padding_mask)
            if m.shape != (self.B, self.L):
                raise ValueError(f"{owner}: key_padding_mask has shape {m.shape}, expected "
                                 f"(B, L) = {(self.B, self.L)}")
            if m.dtype == np.bool_:
                pad = m
            elif m.dtype.kind == "f":
                pad = np.isneginf(m)
            else:
                raise TypeError(f"{owner}: key_padding_mask has dtype {m.dtype}; expected bool "
                                "(True = padding) or float (-inf = padding)")
            if pad.any():
                self.real = ~pad
                self.rows = np.flatnonzero(self.real)
            if pad.any() or m.dtype != np.bool_:
                self.key_padding_mask = m
        self.T = self.B * self.L if self.rows is None else self.rows.size
        self._buf = None

    def pack(self, x):
        """x (B, L, ...) -> the real tokens' rows (T, ...) (a new array, or a
        view when nothing is padded and x is contiguous)."""
        x = np.asarray(x)
        flat = x.reshape((self.B * self.L,) + x.shape[2:])
        return flat if self.rows is None else flat[self.rows]

    def unpack(self, y):
        """Token rows y (T, ...) -> (B, L, ...), zeros at padding positions
        (a reshaped view of y when nothing is padded)."""
        if self.rows is None:
            return y.reshape((self.B, self.L) + y.shape[1:])
        out = np.zeros((self.B * self.L,) + y.shape[1:], y.dtype)
        out[self.rows] = y
        return out.reshape((self.B, self.L) + y.shape[1:])

    def spread(self, y):
        """Token rows y (T, n) -> (B * L, n) with zero padding rows (y itself
        when nothing is padded). The buffer is kept and reused by the next
        call of the same width and dtype (each layer of a stack): only its
        real rows are ever written, so its padding rows stay zero."""
        if self.rows is None:
            return y
        b = self._buf
        if b is None or b.shape[1:] != y.shape[1:] or b.dtype != y.dtype:
            b = self._buf = np.zeros((self.B * self.L,) + y.shape[1:], y.dtype)
        b[self.rows] = y
        return b

    def gather(self, y):
        """Padded rows y (B * L, n) -> the real tokens' rows (T, n)."""
        return y if self.rows is None else y.take(self.rows, axis=0)

    def real_lengths(self):
        """(B,) int64: each sequence's number of real tokens (its rows are
        consecutive among the T token rows); None when the key padding mask
        is a float mask that also adds finite values (not pure padding)."""
        m = self.key_padding_mask
        if m is not None and m.dtype != np.bool_ and not np.all(np.isneginf(m) | (m == 0)):
            return None
        return self.real.sum(axis=1)

    def right_padded(self):
        """True when each sequence's real tokens are a prefix of its row
        (their positions 0..n-1 are the same as in the padded layout)."""
        n = self.real.sum(axis=1)
        return bool(np.array_equal(self.real, np.arange(self.L)[None, :] < n[:, None]))


def on_real_tokens(run, src, tokens_kpm, batch_first, dtype, owner):
    """run(x (T, E), tokens) -> (T, E) applied to the real tokens of src
    (B, L, E) — (L, B, E) if not batch_first, (L, E) unbatched with a (L,)
    mask — under key padding mask tokens_kpm (True = padding). Returns the
    input's layout, zeros at padding positions."""
    x = as_input(src, "src", dtype, owner)
    if x.ndim not in (2, 3):
        raise ValueError(f"{owner}: src has shape {x.shape}; expected (B, L, E), "
                         "(L, B, E) or unbatched (L, E)")
    batched = x.ndim == 3
    if not batched:
        x, tokens_kpm = x[None], np.asarray(tokens_kpm)[None]
    elif not batch_first:
        x = x.swapaxes(0, 1)
    tokens = RealTokens(x.shape[0], x.shape[1], tokens_kpm)
    y = tokens.unpack(run(tokens.pack(x), tokens))
    if not batched:
        return y[0]
    return y if batch_first else np.ascontiguousarray(y.swapaxes(0, 1))


# ----------------------------------------------------------------------------
# Multi-head attention


class MultiheadAttention(Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W^O,
    head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(D)) V W_i^V   (paper, section 3.2).

    Parameters (torch's names and shapes): in_proj_weight (3E, E) — rows
    [W^Q; W^K; W^V], torch's y = x W^T convention — and in_proj_bias (3E,);
    when kdim or vdim differ from E, q_proj_weight (E, E), k_proj_weight
    (E, kdim), v_proj_weight (E, vdim) instead; out_proj.weight (E, E),
    out_proj.bias (E,). Initialised as torch: xavier-uniform projections,
    zero biases, out_proj.weight like nn.Linear; reproducible from `seed`.
    nn.quantize / nn.pack_weights pack in_proj_weight as a PackedRows (same
    bits as the array): with split_in_proj=True (the default) two row
    blocks, the query rows and the key/value rows, so cross-attention
    projects each input by its own rows; the encoder and decoder layers set
    their self_attn's split_in_proj=False (one block: self-attention's q, k
    and v in one GEMM). A projection that cuts a block computes the whole
    block (a key that is not the value: twice the work of those two; cross-
    attention on one block: 3x for the query, 1.5x for the memory).

    Constructor order is torch's (embed_dim, num_heads, dropout, bias); the
    rest is keyword-only. dropout is ignored (inference). batch_first=True by
    default (torch: False).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, *, kdim=None, vdim=None,
                 batch_first=True, dtype=np.float32, seed=None):
        super().__init__()
        owner = "MultiheadAttention"
        E = positive_int(embed_dim, "embed_dim", owner)
        H = positive_int(num_heads, "num_heads", owner)
        if E % H:
            raise ValueError(f"{owner}: embed_dim={E} is not divisible by num_heads={H}")
        self.dtype = dtype = as_float_dtype(dtype, owner)
        self.embed_dim, self.num_heads, self.head_dim = E, H, E // H
        self.kdim = E if kdim is None else positive_int(kdim, "kdim", owner)
        self.vdim = E if vdim is None else positive_int(vdim, "vdim", owner)
        self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
        self.dropout = check_dropout(dropout, owner)
        self.batch_first = bool(batch_first)
        self.split_in_proj = True  # how nn.quantize packs in_proj_weight (see above)
        rng = make_rng(seed)
        if self._qkv_same_embed_dim:
            self.register_parameter("in_proj_weight", xavier_uniform(
                rng, (3 * E, E), dtype, owner, f"in_proj_weight (embed_dim={show(E)})"))
        else:
            self.register_parameter("q_proj_weight", xavier_uniform(
                rng, (E, E), dtype, owner, f"q_proj_weight (embed_dim={show(E)})"))
            self.register_parameter("k_proj_weight", xavier_uniform(
                rng, (E, self.kdim), dtype, owner, f"k_proj_weight (kdim={show(self.kdim)})"))
            self.register_parameter("v_proj_weight", xavier_uniform(
                rng, (E, self.vdim), dtype, owner, f"v_proj_weight (vdim={show(self.vdim)})"))
        self.register_parameter("in_proj_bias", np.zeros(3 * E, dtype) if bias else None)
        self.out_proj = Linear(E, E, bias, dtype=dtype, seed=rng)
        if bias:
            self.out_proj.bias[...] = 0

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"batch_first={self.batch_first}")

    def __setattr__(self, name, value):
        if name == "in_proj_weight" and isinstance(value, PackedWeight):
            raise ValueError("MultiheadAttention: in_proj_weight is used by rows (query | key, "
                             "value), a single PackedWeight cannot be; assign an array (packed "
                             "again in the layer's format) or use nn.quantize(layer, dtype)")
        super().__setattr__(name, value)

    # -- projections: Q, K, V as (B, H, L|S, D) views of the GEMM outputs
    def _in_proj(self, x, lo, hi):
        """x (..., E) @ in_proj_weight[lo:hi].T + in_proj_bias[lo:hi]: one
        GEMM, or per packed row block (nn.quantize: PackedRows)."""
        W, b = self.in_proj_weight, self.in_proj_bias
        if isinstance(W, PackedRows):
            return W.linear(x, b, (lo, hi))
        return linear(x, W[lo:hi], None if b is None else b[lo:hi])

    def _qkv(self, x):
        """Self-attention's projections of x (..., E): (q (..., E), kv
        (..., 2E)), views of one GEMM's (..., 3E) result, or one GEMM per
        packed row block (PackedRows cut at E: query | key, value), no copy."""
        E, W = self.embed_dim, self.in_proj_weight
        if isinstance(W, PackedRows) and W.cuts:
            return self._in_proj(x, 0, E), self._in_proj(x, E, 3 * E)
        y = self._in_proj(x, 0, 3 * E)
        return y[..., :E], y[..., E:]

    def _project(self, q_in, k_in, v_in, shared_qkv, shared_kv, bf):
        E, H = self.embed_dim, self.num_heads
        if not self._qkv_same_embed_dim:
            b = self.in_proj_bias
            ws = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
            bs = (None,) * 3 if b is None else (b[:E], b[E:2 * E], b[2 * E:])
            return [split_heads(linear(x, w, c), 1, H, bf)[0]
                    for x, w, c in zip((q_in, k_in, v_in), ws, bs)]
        if shared_qkv:  # self-attention: the whole (3E, E) weight on one input
            q, kv = self._qkv(q_in)
            return (split_heads(q, 1, H, bf)[0], *split_heads(kv, 2, H, bf))
        q = split_heads(self._in_proj(q_in, 0, E), 1, H, bf)[0]
        if shared_kv:   # cross-attention: K, V together
            k, v = split_heads(self._in_proj(k_in, E, 3 * E), 2, H, bf)
        else:
            k = split_heads(self._in_proj(k_in, E, 2 * E), 1, H, bf)[0]
            v = split_heads(self._in_proj(v_in, 2 * E, 3 * E), 1, H, bf)[0]
        return q, k, v

    # -- torch MHA masks (True = masked out, float = added) -> cattn SDPA masks
    def _sdpa_mask(self, attn_mask, key_padding_mask, is_causal, B, L, S, batched):
        """Returns (mask, causal): mask for cattn's SDPA (bool True = attend,
        or float added), broadcastable to (B, H, L, S) without expanding what
        need not be; causal=True means "use the kernel's causal masking"."""
        owner, H, dtype = "MultiheadAttention", self.num_heads, self.dtype
        kpm = am = None
        if key_padding_mask is not None:
            kpm = mask_array(key_padding_mask, "key_padding_mask", dtype, owner)
            want = (B, S) if batched else (S,)
            if kpm.shape != want:
                raise ValueError(f"{owner}: key_padding_mask has shape {kpm.shape}, expected "
                                 f"{'(B, S) = ' if batched else '(S,) = '}{want}")
            kpm = kpm.reshape(B, 1, 1, S)
        if attn_mask is not None:
            am = mask_array(attn_mask, "attn_mask", dtype, owner)
            if am.shape == (L, S):
                pass
            elif am.shape == (B * H, L, S):
                am = am.reshape(B, H, L, S)
            else:
                raise ValueError(f"{owner}: attn_mask has shape {am.shape}, expected (L, S) = "
                                 f"{(L, S)} or (B*num_heads, L, S) = {(B * H, L, S)}")
        if is_causal:
            if kpm is None:
                return None, True
            causal = np.tri(L, S, dtype=bool)  # row i sees keys 0..i (torch, upper-left)
            if kpm.dtype == np.bool_:
                return causal & ~kpm, False
            return np.where(causal, kpm, dtype.type(-np.inf)).astype(dtype, copy=False), False
        if am is None and kpm is None:
            return None, False
        if am is None or kpm is None:
            m = kpm if am is None else am
            return (~m if m.dtype == np.bool_ else m), False
        if am.dtype == np.bool_ and kpm.dtype == np.bool_:
            return ~(am | kpm), False
        return to_float_mask(am, dtype) + to_float_mask(kpm, dtype), False

    def forward(self, query, key=None, value=None, *, key_padding_mask=None, attn_mask=None,
                need_weights=False, average_attn_weights=True, is_causal=False):
        """query (B, L, E), key (B, S, kdim), value (B, S, vdim) — (L, B, E) ...
        if batch_first=False; (L, E) unbatched. key=None means key=query,
        value=None means value=key. Returns (out (B, L, E), weights or None).

        key_padding_mask (B, S): True / -inf = ignore that key (torch).
        attn_mask (L, S) or (B*H, L, S): bool True = not allowed, float added.
        is_causal: query i sees keys 0..i (a mask, if given, is not read).
        need_weights: also return the attention probabilities, averaged over
        heads (B, L, S) if average_attn_weights else (B, H, L, S).
        (Incremental decoding with a KV cache is the LLM layers' concern:
        cattn.nn.CausalSelfAttention, DecoderBlock, DecoderOnly.)
        """
        owner = "MultiheadAttention"
        need_weights = as_flag(need_weights, "need_weights", owner)
        average_attn_weights = as_flag(average_attn_weights, "average_attn_weights", owner)
        is_causal = False if is_causal is None else as_flag(is_causal, "is_causal", owner)
        shared_qkv = (key is None or key is query) and (value is None or value is key)
        shared_kv = value is None or value is key
        dtype, E = self.dtype, self.embed_dim
        q_in = as_input(query, "query", dtype, owner)
        k_in = q_in if key is None or key is query else as_input(key, "key", dtype, owner)
        if value is None or value is key:
            v_in = k_in
        else:
            v_in = as_input(value, "value", dtype, owner)
        batched = q_in.ndim == 3
        for name, x, d in (("query", q_in, E), ("key", k_in, self.kdim), ("value", v_in, self.vdim)):
            if x.ndim != q_in.ndim or x.ndim not in (2, 3) or x.shape[-1] != d:
                lay = "(B, L, " if self.batch_first else "(L, B, "
                raise ValueError(
                    f"{owner}: {name} has shape {x.shape}; expected {lay}{d}) or unbatched (L, {d}) "
                    f"(query {q_in.shape}, key {k_in.shape}, value {v_in.shape})")
        if not batched:  # unbatched: a batch of one, batch-first
            q_in, k_in, v_in = q_in[None], k_in[None], v_in[None]
            if shared_qkv:
                k_in = v_in = q_in
            elif shared_kv:
                v_in = k_in
        bf = self.batch_first or not batched
        ax_b, ax_l = (0, 1) if bf else (1, 0)
        B, L, S = q_in.shape[ax_b], q_in.shape[ax_l], k_in.shape[ax_l]
        if k_in.shape[ax_b] != B or v_in.shape[ax_b] != B or v_in.shape[ax_l] != S:
            raise ValueError(f"{owner}: batch or sequence dims disagree: query {q_in.shape}, "
                             f"key {k_in.shape}, value {v_in.shape}")

        q, k, v = self._project(q_in, k_in, v_in, shared_qkv, shared_kv, bf)

        ctx = np.empty(q_in.shape[:-1] + (E,), dtype)       # heads concatenated, input layout
        ctx_h = split_heads(ctx, 1, self.num_heads, bf)[0]  # (B, H, L, D) view of ctx
        mask, causal = self._sdpa_mask(attn_mask, key_padding_mask, is_causal, B, L, S, batched)
        if need_weights:
            weights = attention_weights(q, k, mask, is_causal=causal)  # (B, H, L, S)
            matmul(weights, v, out=ctx_h)
            if average_attn_weights:
                weights = weights.mean(axis=1)
            if not batched:
                weights = weights[0]
        else:
            scaled_dot_product_attention(q, k, v, mask, is_causal=causal, out=ctx_h)
            weights = None
        out = linear(ctx, self.out_proj.weight, self.out_proj.bias)
        return (out if batched else out[0]), weights

    def forward_tokens(self, x, tokens, attn_mask=None, is_causal=False, *, need_weights=False):
        """Self-attention on the real tokens of a padded batch (the
        real-tokens-only path, see RealTokens): x (T, E) their rows, tokens
        a RealTokens (B, L). Returns (out (T, E), weights or None).

        Q, K and V are projected for the T rows only (in_proj_weight).
        Without attn_mask, each sequence then attends over its own real
        tokens alone (one fused attention call per sequence; no
        padding enters it, so a sequence's rows have the same bits whatever
        else is in the batch: batch invariance). With an attn_mask (L, L) or
        (B*H, L, L), the rows are spread into the padded layout (padding
        rows zero) where the fused attention runs with
        tokens.key_padding_mask masking the padding keys. The output
        projection runs on the T rows again. Real rows equal
        forward(..., key_padding_mask=tokens.key_padding_mask)'s (to rounding).
        need_weights: also the per-head probabilities (B, H, L, L), computed
        beside the fused attention (the output does not depend on it)."""
        owner = "MultiheadAttention"
        if not isinstance(tokens, RealTokens):
            raise TypeError(f"{owner}: tokens must be a cattn.nn.RealTokens, got {show(tokens)}")
        if not self._qkv_same_embed_dim:
            raise ValueError(f"{owner}: forward_tokens is self-attention: it needs kdim = vdim "
                             f"= embed_dim, got kdim={self.kdim}, vdim={self.vdim}")
        x = as_input(x, "x", self.dtype, owner)
        is_causal = False if is_causal is None else as_flag(is_causal, "is_causal", owner)
        need_weights = as_flag(need_weights, "need_weights", owner)
        B, L, E, H = tokens.B, tokens.L, self.embed_dim, self.num_heads
        if x.shape != (tokens.T, E):
            raise ValueError(f"{owner}: x has shape {x.shape}; expected the (T, E) = "
                             f"{(tokens.T, E)} rows of the real tokens")
        q_rows, kv_rows = self._qkv(x)                                       # (T, E), (T, 2E)
        lengths = tokens.real_lengths() if attn_mask is None else None
        each = lengths is not None
        if each:
            ctx = self._attend_each(q_rows, kv_rows, lengths, is_causal)        # (T, E)
        weights = None
        if need_weights or not each:
            qkv = tokens.spread(np.concatenate((q_rows, kv_rows), axis=1))    # (B*L, 3E)
            q, k, v = split_heads(qkv.reshape(B, L, 3 * E), 3, H, True)      # (B, H, L, D)
            mask, causal = self._sdpa_mask(attn_mask, tokens.key_padding_mask, is_causal,
                                           B, L, L, True)
            if need_weights:
                weights = attention_weights(q, k, mask, is_causal=causal)
            if not each:
                ctx = np.empty((B, L, E), self.dtype)
                scaled_dot_product_attention(q, k, v, mask, is_causal=causal,
                                             out=split_heads(ctx, 1, H, True)[0])
                ctx = tokens.gather(ctx.reshape(B * L, E))                     # (T, E)
        return linear(ctx, self.out_proj.weight, self.out_proj.bias), weights

    def _attend_each(self, q_rows, kv_rows, lengths, is_causal):
        """Attention of each sequence over its own real tokens only: q_rows
        (T, E) and kv_rows (T, 2E) the projected real tokens (sequence-major,
        in position order), lengths (B,) their counts -> ctx (T, E). No padding enters
        the kernel, so a sequence's result has the same bits whatever else
        is in the batch and however long the batch is padded (batch
        invariance); masked-out padding keys contribute nothing either way."""
        E, H = self.embed_dim, self.num_heads
        ctx = np.empty((q_rows.shape[0], E), self.dtype)
        # consecutive sequences of one length are consecutive row blocks:
        # one call for each such run (units are independent in the kernel,
        # so a run gives each sequence the bits it gets alone)
        if lengths.size == 0:
            return ctx
        if lengths.size == 1 or (lengths == lengths[0]).all():
            runs = (lengths,)                       # one run (e.g. one sentence)
        else:
            runs = np.split(lengths, np.flatnonzero(np.diff(lengths)) + 1)
        start = 0
        for run in runs:
            b, n = run.size, int(run[0])
            if n:
                rows = slice(start, start + b * n)
                q = split_heads(q_rows[rows].reshape(b, n, E), 1, H, True)[0]
                k, v = split_heads(kv_rows[rows].reshape(b, n, 2 * E), 2, H, True)
                scaled_dot_product_attention(
                    q, k, v, None, is_causal=is_causal,
                    out=split_heads(ctx[rows].reshape(b, n, E), 1, H, True)[0])
            start += b * n
        return ctx


def mask_array(m, name, dtype, owner):
    m = np.asarray(m)
    if m.dtype == np.bool_:
        return m
    if m.dtype.kind == "f":
        return m.astype(dtype, copy=False)
    raise TypeError(f"{owner}: {name} has dtype {m.dtype}; expected bool (True = masked out) "
                    "or float (added to the scores)")


def to_float_mask(m, dtype):
    if m.dtype == np.bool_:
        return np.where(m, dtype.type(-np.inf), dtype.type(0))
    return m


# ----------------------------------------------------------------------------
# Encoder and decoder layers


