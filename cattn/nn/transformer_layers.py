"""cattn.nn.transformer_layers — the paper's encoder and decoder layers
(post-LN or pre-LN: norm_first), as torch's TransformerEncoderLayer /
TransformerDecoderLayer, and the stacks' optional final norm.
"""


import numpy as np

from .._validate import as_float_dtype
from .attention import MultiheadAttention, on_real_tokens
from .layers import LayerNorm, Linear
from .module import Module, as_input, check_activation, check_dropout, make_rng


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward network, each in a residual block:

        post-LN (norm_first=False, the paper): x = norm1(x + SA(x)); x = norm2(x + FF(x))
        pre-LN  (norm_first=True):             x = x + SA(norm1(x)); x = x + FF(norm2(x))

    with FF(x) = linear2(act(linear1(x))), bias and activation fused in the
    GEMM epilogue. torch's constructor (dropout ignored) and parameter names:
    self_attn.*, linear1.*, linear2.*, norm1.*, norm2.*.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True, *,
                 dtype=np.float32, seed=None):
        super().__init__()
        owner = type(self).__name__
        self.dtype = as_float_dtype(dtype, owner)
        self.activation = check_activation(activation, owner)
        self.dropout = check_dropout(dropout, owner)
        self.norm_first, self.batch_first = bool(norm_first), bool(batch_first)
        rng = make_rng(seed)
        kw = dict(dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, bias=bias, batch_first=batch_first,
                                            seed=rng, **kw)
        self.self_attn.split_in_proj = False   # self-attention only: packed as one block
        self.linear1 = Linear(d_model, dim_feedforward, bias, seed=rng, **kw)
        self.linear2 = Linear(dim_feedforward, d_model, bias, seed=rng, **kw)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias, **kw)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias, **kw)

    def _ff(self, x):
        return self.linear2(self.linear1(x, self.activation))

    def _blocks(self, x, attend):
        """The two residual blocks around attend(x) -> SA(x) (a new array)."""
        if self.norm_first:
            a = attend(self.norm1(x))
            x = np.add(a, x, out=a)                 # x + SA(norm1(x)), into SA's buffer
            f = self._ff(self.norm2(x))
            return np.add(f, x, out=f)
        a = attend(x)
        x = self.norm1(np.add(a, x, out=a), out=a)  # norm1(x + SA(x)), all in SA's buffer
        f = self._ff(x)
        return self.norm2(np.add(f, x, out=f), out=f)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False, *,
                skip_padding=False):
        """src (B, L, E) -> (B, L, E). src_mask / src_key_padding_mask /
        is_causal as MultiheadAttention's attn_mask / key_padding_mask /
        is_causal.

        skip_padding (cattn extension, keyword-only; default False = torch's
        full computation): with a src_key_padding_mask, run the real-tokens-
        only path (forward_tokens): the projections, norms and feed-forward
        network skip the padding positions. Real positions get the values of
        the full path (same ops on the same rows); padding positions are 0
        (as torch's nested-tensor fast path returns), and a sequence that is
        all padding is all 0. Without a key padding mask it changes nothing."""
        owner = type(self).__name__
        if skip_padding and src_key_padding_mask is not None:
            return on_real_tokens(
                lambda x, tokens: self.forward_tokens(x, tokens, src_mask, is_causal)[0],
                src, src_key_padding_mask, self.batch_first, self.dtype, owner)
        x = as_input(src, "src", self.dtype, owner)
        kw = dict(attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                  is_causal=is_causal)
        return self._blocks(x, lambda y: self.self_attn(y, **kw)[0])

    def forward_tokens(self, x, tokens, src_mask=None, is_causal=False, *, need_weights=False):
        """The layer on the real tokens of a padded batch (see RealTokens):
        x (T, E) -> (out (T, E), attention weights (B, H, L, L) or None).
        Attention runs on the padded layout (MultiheadAttention.
        forward_tokens), everything else on the T rows only."""
        weights = []

        def attend(y):
            a, w = self.self_attn.forward_tokens(y, tokens, src_mask, is_causal,
                                                 need_weights=need_weights)
            weights.append(w)
            return a
        return self._blocks(x, attend), weights[0]


class TransformerDecoderLayer(Module):
    """Masked self-attention, cross-attention over the encoder's `memory`, and
    a feed-forward network, each in a residual block (post-LN or pre-LN as in
    TransformerEncoderLayer). Parameter names: self_attn.*, multihead_attn.*,
    linear1.*, linear2.*, norm1.*, norm2.*, norm3.*.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True, *,
                 dtype=np.float32, seed=None):
        super().__init__()
        owner = type(self).__name__
        self.dtype = as_float_dtype(dtype, owner)
        self.activation = check_activation(activation, owner)
        self.dropout = check_dropout(dropout, owner)
        self.norm_first, self.batch_first = bool(norm_first), bool(batch_first)
        rng = make_rng(seed)
        kw = dict(dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, bias=bias, batch_first=batch_first,
                                            seed=rng, **kw)
        self.self_attn.split_in_proj = False   # self-attention only: packed as one block
        self.multihead_attn = MultiheadAttention(d_model, nhead, bias=bias,
                                                 batch_first=batch_first, seed=rng, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias, seed=rng, **kw)
        self.linear2 = Linear(dim_feedforward, d_model, bias, seed=rng, **kw)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias, **kw)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias, **kw)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias, **kw)

    def _ff(self, x):
        return self.linear2(self.linear1(x, self.activation))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        """tgt (B, L, E), memory (B, S, E) -> (B, L, E). tgt_* masks go to the
        self-attention ((L, L) masks), memory_* masks to the cross-attention
        ((L, S) masks, (B, S) padding)."""
        owner = type(self).__name__
        x = as_input(tgt, "tgt", self.dtype, owner)
        mem = as_input(memory, "memory", self.dtype, owner)
        sa = dict(attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask,
                  is_causal=tgt_is_causal)
        ca = dict(attn_mask=memory_mask, key_padding_mask=memory_key_padding_mask,
                  is_causal=memory_is_causal)
        if self.norm_first:
            a = self.self_attn(self.norm1(x), **sa)[0]
            x = np.add(a, x, out=a)
            c = self.multihead_attn(self.norm2(x), mem, mem, **ca)[0]
            x = np.add(c, x, out=c)
            f = self._ff(self.norm3(x))
            return np.add(f, x, out=f)
        a = self.self_attn(x, **sa)[0]
        x = self.norm1(np.add(a, x, out=a), out=a)
        c = self.multihead_attn(x, mem, mem, **ca)[0]
        x = self.norm2(np.add(c, x, out=c), out=c)
        f = self._ff(x)
        return self.norm3(np.add(f, x, out=f), out=f)


# ----------------------------------------------------------------------------
# Stacks


def apply_final_norm(norm, x):
    """norm(x) for a stack's optional final norm; in place for a LayerNorm
    (x is the last layer's own output buffer)."""
    if norm is None:
        return x
    return norm(x, out=x) if isinstance(norm, LayerNorm) else norm(x)


