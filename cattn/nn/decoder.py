"""cattn.nn.decoder — the layers of today's decoder-only LLMs (Llama, Qwen2,
GPT-2, Gemma 3), exported from cattn.nn: RMSNorm, GatedMLP (SwiGLU,
GeGLU), MLP, rotary grouped-query causal self-attention with a KV cache
(optionally over a sliding window of keys), and the decoder block that
composes them (pre-norm, optionally with norms after attention and MLP).

What this file is: inference layers over cattn's ops (cattn.linear for every
product, the fused scaled_dot_product_attention / KVCache.attend, cattn's
rms_norm and activations), with fused weights where that saves calls on the
decode path: one (q, k, v) projection, one (gate, up) projection. What it is
not: a model (cattn.models builds Llama, Qwen2 and GPT-2 from these) or a
training library (no dropout, no autograd).

Shape legend: B batch, L new (query) positions, S keys (cached + new),
E model dim, H query heads, Hk key/value heads (H a multiple of Hk: GQA),
D head dim, F feed-forward dim.

Masks: `attn_mask` is None (plain causal attention, the fast path) or a bool
(B, 1, L, S) array, True = attend, built once per forward by causal_mask()
from the real (non-padding) keys and shared by every layer; a layer with a
sliding window narrows it to the band of its last `window` positions
(window_mask()).
"""
import numpy as np

from .._validate import as_float_dtype, as_int, as_real
from ..ops.attention import KVCache, scaled_dot_product_attention
from ..ops.rows import gelu, relu, rms_norm, silu
from .layers import LayerNorm, Linear
from .module import Module, as_input, check_activation, make_rng
from .positional import RotaryEmbedding

__all__ = ["RMSNorm", "GatedMLP", "MLP", "CausalSelfAttention", "DecoderBlock", "causal_mask",
           "window_mask"]


# the GEMM-epilogue activation names as elementwise ops (GatedMLP's gate)
_ACT_FN = {"silu": silu, "relu": relu, "gelu": gelu,
           "gelu_tanh": lambda x: gelu(x, approximate="tanh")}


def causal_mask(key_real, L):
    """Bool (B, 1, L, S) attention mask, True = attend: query row i (the last
    L of the S positions) sees key s iff s <= S - L + i (causal, aligned to
    the end as a KV cache is) and key s is real (key_real (B, S) bool).
    None when no key is padding (plain causal attention then)."""
    key_real = np.asarray(key_real, dtype=bool)
    if key_real.all():
        return None
    S = key_real.shape[1]
    causal = np.arange(S)[None, :] <= np.arange(S - L, S)[:, None]       # (L, S)
    return causal[None, None] & key_real[:, None, None, :]


def window_mask(attn_mask, L, S, window):
    """Bool (B or 1, 1, L, S) mask, True = attend: attn_mask (None: causal,
    aligned to the end as a KV cache is) narrowed to a sliding window, query
    row i (key position S - L + i) seeing only the keys s with
    S - L + i - window < s (its last `window` positions, itself included)."""
    qpos = np.arange(S - L, S)[:, None]
    s = np.arange(S)[None, :]
    band = (s <= qpos) & (s > qpos - window)                             # (L, S)
    return band[None, None] if attn_mask is None else attn_mask & band[None, None]


class RMSNorm(Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis (Llama's
    LlamaRMSNorm, cattn.rms_norm); weight (E,) initialised to ones."""

    def __init__(self, dim, eps=1e-6, *, dtype=np.float32):
        super().__init__()
        self.dtype = as_float_dtype(dtype, "RMSNorm")
        self.dim = as_int(dim, "dim", "RMSNorm", lo=1)
        self.eps = as_real(eps, "eps", "RMSNorm", finite=True, lo=0.0)
        self.register_parameter("weight", np.ones(self.dim, self.dtype))

    def forward(self, x, *, out=None):
        """x (..., E) -> (..., E); out may be x itself."""
        return rms_norm(x, self.weight, self.eps, out=out)

    def extra_repr(self):
        return f"{self.dim}, eps={self.eps}"


class GatedMLP(Module):
    """The gated feed-forward network of Llama / Qwen2 (SwiGLU):
        down_proj(act(x W_gate^T) * (x W_up^T))
    with W_gate and W_up stacked into one gate_up_proj.weight (2F, E) —
    gate rows first — so the pair is one GEMM (one pass over the weights).
    Parameters: gate_up_proj.weight (2F, E), down_proj.weight (E, F)
    (biases with bias=True)."""

    def __init__(self, dim, hidden_dim, activation="silu", bias=False, *, dtype=np.float32,
                 seed=None):
        super().__init__()
        self.activation = check_activation(activation, "GatedMLP")
        rng = make_rng(seed)
        self.hidden_dim = as_int(hidden_dim, "hidden_dim", "GatedMLP", lo=1)
        self.gate_up_proj = Linear(dim, 2 * self.hidden_dim, bias, dtype=dtype, seed=rng)
        self.down_proj = Linear(self.hidden_dim, dim, bias, dtype=dtype, seed=rng)

    def forward(self, x):
        """x (..., E) -> (..., E)."""
        F = self.hidden_dim
        gu = self.gate_up_proj(x)                               # (..., 2F)
        h = _ACT_FN[self.activation](gu[..., :F])              # (..., F), contiguous
        h *= gu[..., F:]
        return self.down_proj(h)


class MLP(Module):
    """The plain feed-forward network (GPT-2): fc2(act(fc1(x))), bias and
    activation fused into fc1's GEMM epilogue. Parameters fc1.* (F, E),
    fc2.* (E, F)."""

    def __init__(self, dim, hidden_dim, activation="gelu_tanh", bias=True, *, dtype=np.float32,
                 seed=None):
        super().__init__()
        self.activation = check_activation(activation, "MLP")
        rng = make_rng(seed)
        self.fc1 = Linear(dim, hidden_dim, bias, dtype=dtype, seed=rng)
        self.fc2 = Linear(hidden_dim, dim, bias, dtype=dtype, seed=rng)

    def forward(self, x):
        """x (..., E) -> (..., E)."""
        return self.fc2(self.fc1(x, self.activation))


class CausalSelfAttention(Module):
    """Causal multi-head self-attention with grouped-query heads (GQA: Hk
    key/value heads shared by H query heads), optional rotary positions and
    a KV cache for incremental decoding.

    Parameters: qkv_proj.weight ((H + 2 Hk) D, E) — the q, k and v
    projections stacked, in that order, so one GEMM (one pass over the
    weights) makes all three — qkv_proj.bias with qkv_bias (Qwen2, GPT-2);
    o_proj.weight (E, H D), o_proj.bias with out_bias (GPT-2).
    rotary: a cattn.nn.RotaryEmbedding(D) applied to q and k at each
    token's position (Llama, Qwen2), or None (GPT-2's learned positions are
    added to the embeddings by the model). qk_norm_eps: Qwen3's RMSNorm of
    each q and k head (q_norm, k_norm: weights (D,)) before the rotation,
    with this epsilon; None: none. scale: the scores' factor (None:
    1/sqrt(D)). window: each query attends its last `window` positions
    only, itself included (a sliding window: Gemma 3's local layers,
    Mistral); None: every earlier position."""

    def __init__(self, embed_dim, num_heads, num_kv_heads=None, head_dim=None, *,
                 qkv_bias=False, out_bias=False, rotary=None, qk_norm_eps=None,
                 scale=None, window=None, dtype=np.float32, seed=None):
        super().__init__()
        owner = "CausalSelfAttention"
        E = as_int(embed_dim, "embed_dim", owner, lo=1)
        H = as_int(num_heads, "num_heads", owner, lo=1)
        Hk = H if num_kv_heads is None else as_int(num_kv_heads, "num_kv_heads", owner, lo=1)
        if H % Hk:
            raise ValueError(f"{owner}: num_heads={H} is not a multiple of num_kv_heads={Hk}")
        if head_dim is None and E % H:
            raise ValueError(f"{owner}: embed_dim={E} is not divisible by num_heads={H}")
        D = E // H if head_dim is None else as_int(head_dim, "head_dim", owner, lo=1)
        if rotary is not None and (not isinstance(rotary, RotaryEmbedding)
                                   or rotary.head_dim != D):
            raise ValueError(f"{owner}: rotary must be a RotaryEmbedding({D}), got {rotary!r}")
        self.dtype = as_float_dtype(dtype, owner)
        self.embed_dim, self.num_heads, self.num_kv_heads, self.head_dim = E, H, Hk, D
        self.rotary = rotary
        self.scale = None if scale is None else as_real(scale, "scale", owner, lo=0.0,
                                                        lo_open=True)
        self.window = None if window is None else as_int(window, "window", owner, lo=1)
        rng = make_rng(seed)
        self.qkv_proj = Linear(E, (H + 2 * Hk) * D, qkv_bias, dtype=dtype, seed=rng)
        self.o_proj = Linear(H * D, E, out_bias, dtype=dtype, seed=rng)
        self.qk_norm = qk_norm_eps is not None
        if self.qk_norm:
            eps = as_real(qk_norm_eps, "qk_norm_eps", owner, lo=0.0)
            self.q_norm = RMSNorm(D, eps, dtype=dtype)
            self.k_norm = RMSNorm(D, eps, dtype=dtype)

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}"
                + ("" if self.window is None else f", window={self.window}"))

    def new_cache(self, batch, max_len, dtype=None):
        """An empty cattn.KVCache (batch, Hk, max_len, D) for this layer, in
        dtype (None: the layer's; float16 for a float32 layer: a float16
        cache, see KVCache)."""
        return KVCache(batch, self.num_kv_heads, max_len, self.head_dim,
                       self.dtype if dtype is None else dtype)

    def _qkv(self, x, positions, offset):
        """x (B, L, E) -> q (B, H, L, D), k, v (B, Hk, L, D) (views or, rotated,
        new arrays) from one GEMM; rotary positions `positions` (B, L), or
        offset..offset+L-1 for all when None."""
        B, L, _ = x.shape
        H, Hk, D = self.num_heads, self.num_kv_heads, self.head_dim
        qkv = self.qkv_proj(x).reshape(B, L, H + 2 * Hk, D)
        if self.qk_norm:                             # each head's q and k (Qwen3), in place
            qkv[:, :, :H] = self.q_norm(qkv[:, :, :H])
            qkv[:, :, H:H + Hk] = self.k_norm(qkv[:, :, H:H + Hk])
        qkv = qkv.transpose(0, 2, 1, 3)
        qk, v = qkv[:, :H + Hk], qkv[:, H + Hk:]
        if self.rotary is not None:                  # q and k rotated in one pass
            qk = (self.rotary.apply(qk, offset) if positions is None
                  else self.rotary.apply_positions(qk, positions))
        return qk[:, :H], qk[:, H:], v

    def forward(self, x, positions=None, attn_mask=None, kv_cache=None):
        """x (B, L, E) -> (B, L, E).

        positions (B, L) ints: each token's position for the rotary
        embedding (None: 0..L-1, or following the cache). attn_mask: None
        (causal) or bool (B, 1, L, S) from causal_mask(). kv_cache: a
        KVCache (new_cache) holding the S - L earlier positions; the new
        keys and values are appended to it and the L queries attend to all
        S (one decode step when L = 1)."""
        owner = "CausalSelfAttention"
        x = as_input(x, "x", self.dtype, owner)
        if x.ndim != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(f"{owner}: x has shape {x.shape}; expected (B, L, {self.embed_dim})")
        B, L, _ = x.shape
        H, D = self.num_heads, self.head_dim
        q, k, v = self._qkv(x, positions, 0 if kv_cache is None else kv_cache.length)
        ctx = np.empty((B, L, H * D), self.dtype)                       # heads concatenated
        ctx_h = ctx.reshape(B, L, H, D).transpose(0, 2, 1, 3)           # (B, H, L, D) view
        if kv_cache is not None:
            kv_cache.append(k, v)
            S, W = kv_cache.length, self.window
            if W is not None and L == 1 and S > W:      # a decode step reads its window only
                scaled_dot_product_attention(
                    q, kv_cache.keys[:, :, S - W:], kv_cache.values[:, :, S - W:],
                    None if attn_mask is None else attn_mask[..., S - W:], scale=self.scale,
                    enable_gqa=H != self.num_kv_heads, out=ctx_h)
                return self.o_proj(ctx)
            if W is not None and S > W:
                attn_mask = window_mask(attn_mask, L, S, W)
            kv_cache.attend(q, attn_mask, scale=self.scale, out=ctx_h)  # O(L * S)
        else:
            if self.window is not None and L > self.window:
                attn_mask = window_mask(attn_mask, L, L, self.window)
            scaled_dot_product_attention(q, k, v, attn_mask, is_causal=attn_mask is None,
                                         scale=self.scale, enable_gqa=H != self.num_kv_heads,
                                         out=ctx_h)
        return self.o_proj(ctx)


class DecoderBlock(Module):
    """The decoder block of GPT-2, Llama, Qwen2 (pre-norm, nanoGPT's Block):
        x = x + self_attn(norm1(x))
        x = x + mlp(norm2(x))
    and, with post_attn_norm and post_mlp_norm (Gemma 3: norms before and
    after each sublayer):
        x = x + post_attn_norm(self_attn(norm1(x)))
        x = x + post_mlp_norm(mlp(norm2(x)))
    residual_scale (Granite's residual_multiplier) multiplies each
    sublayer's output before its residual add. Built from given modules:
    norm1 / norm2 / post norms (RMSNorm or LayerNorm), self_attn
    (CausalSelfAttention), mlp (GatedMLP or MLP)."""

    def __init__(self, norm1, self_attn, norm2, mlp, post_attn_norm=None, post_mlp_norm=None,
                 residual_scale=1.0):
        super().__init__()
        self.residual_scale = as_real(residual_scale, "residual_scale", "DecoderBlock",
                                      lo=0.0, lo_open=True)
        norms = (RMSNorm, LayerNorm)
        for name, m, kinds in (("norm1", norm1, norms),
                               ("self_attn", self_attn, (CausalSelfAttention,)),
                               ("norm2", norm2, norms),
                               ("mlp", mlp, (GatedMLP, MLP)),
                               ("post_attn_norm", post_attn_norm, norms + (type(None),)),
                               ("post_mlp_norm", post_mlp_norm, norms + (type(None),))):
            if not isinstance(m, kinds):
                raise TypeError(f"DecoderBlock: {name} must be one of "
                                f"{[k.__name__ for k in kinds]}, got {type(m).__name__}")
        self.norm1, self.self_attn, self.norm2, self.mlp = norm1, self_attn, norm2, mlp
        self.post_attn_norm, self.post_mlp_norm = post_attn_norm, post_mlp_norm

    def forward(self, x, positions=None, attn_mask=None, kv_cache=None):
        """x (B, L, E) -> (B, L, E) (a new array); arguments as
        CausalSelfAttention.forward."""
        a = self.self_attn(self.norm1(x), positions, attn_mask, kv_cache)
        if self.post_attn_norm is not None:
            a = self.post_attn_norm(a, out=a)
        if self.residual_scale != 1.0:
            a *= self._residual_factor()
        x = np.add(a, x, out=a)
        f = self.mlp(self.norm2(x))
        if self.post_mlp_norm is not None:
            f = self.post_mlp_norm(f, out=f)
        if self.residual_scale != 1.0:
            f *= self._residual_factor()
        return np.add(f, x, out=f)

    def _residual_factor(self):
        """residual_scale in the layer's dtype."""
        return self.self_attn.dtype.type(self.residual_scale)
