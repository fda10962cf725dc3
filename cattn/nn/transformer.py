"""cattn.nn.transformer — the stacks: TransformerEncoder (its real-tokens
forward runs as fastpath's programs), TransformerDecoder, and DecoderOnly
(a GPT-style stack of the LLM decoder blocks of cattn.nn.decoder, with
per-layer KV caches, run as one program: cattn.nn.program).

What this file is: the stacks, composed of layers defined elsewhere
(transformer_layers.py, decoder.py); no layer is written here.
"""

import copy

import numpy as np

from .._validate import as_flag, as_float_dtype, show
from ..ops.attention import KVCache
from .attention import RealTokens, is_causal_mask, on_real_tokens
from .decoder import MLP, CausalSelfAttention, DecoderBlock
from .fastpath import encoder_tokens
from .layers import LayerNorm
from .module import (
    IncompatibleKeys,
    Module,
    ModuleList,
    StateDictKeyError,
    as_input,
    check_stack,
    make_rng,
    positive_int,
)
from .positional import RotaryEmbedding
from .program import decoder_program
from .transformer_layers import (
    TransformerDecoderLayer,
    TransformerEncoderLayer,
    apply_final_norm,
)


class TransformerEncoder(Module):
    """num_layers deep copies of encoder_layer (identical initial weights, as
    in torch), then an optional final norm. Names: layers.0.self_attn...,
    norm.weight. enable_nested_tensor and mask_check are accepted for torch
    compatibility and ignored."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a cattn.nn."
                            f"TransformerEncoderLayer, got {type(encoder_layer).__name__}")
        n = positive_int(num_layers, "num_layers", "TransformerEncoder")
        check_stack("TransformerEncoder", n, encoder_layer)
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(n)])
        self.num_layers = n
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None, *,
                skip_padding=False):
        """src (B, L, E) -> (B, L, E). is_causal=None: detected from `mask`
        (torch's causal mask, bool or float), as torch does.
        skip_padding (keyword-only, default False): with a
        src_key_padding_mask, the real-tokens-only path through the whole
        stack (forward_tokens: packed once, unpacked once); real positions as
        the full path, padding positions 0 (see TransformerEncoderLayer)."""
        first = self.layers[0]
        if is_causal is None:
            x0 = np.asarray(src)
            ax = 1 if (first.batch_first and x0.ndim == 3) else 0
            is_causal = is_causal_mask(mask, x0.shape[ax]) if x0.ndim >= 2 else False
        if skip_padding and src_key_padding_mask is not None:
            return on_real_tokens(
                lambda x, tokens: self.forward_tokens(x, tokens, mask, is_causal)[0],
                src, src_key_padding_mask, first.batch_first, first.dtype, type(self).__name__)
        x = src
        for layer in self.layers:
            x = layer(x, mask, src_key_padding_mask, is_causal)
        return apply_final_norm(self.norm, x)

    def forward_tokens(self, x, tokens, mask=None, is_causal=False, *, need_weights=False):
        """The stack on the real tokens of a padded batch (see RealTokens):
        x (T, E) -> (out (T, E), a list of each layer's attention weights
        (B, H, L, L) if need_weights else None)."""
        owner = "MultiheadAttention"              # the flags as the layers check them
        need_weights = as_flag(need_weights, "need_weights", owner)
        is_causal = False if is_causal is None else as_flag(is_causal, "is_causal", owner)
        if not need_weights and mask is None:
            lengths = tokens.real_lengths() if isinstance(tokens, RealTokens) else None
            y = None if lengths is None else encoder_tokens(self.layers, x, lengths, is_causal)
            if y is not None:                 # the same kernel calls, without the Python
                return apply_final_norm(self.norm, y), None
        weights = [] if need_weights else None
        for layer in self.layers:
            x, w = layer.forward_tokens(x, tokens, mask, is_causal, need_weights=need_weights)
            if need_weights:
                weights.append(w)
        return apply_final_norm(self.norm, x), weights


class TransformerDecoder(Module):
    """num_layers deep copies of decoder_layer, then an optional final norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        if not isinstance(decoder_layer, TransformerDecoderLayer):
            raise TypeError(f"TransformerDecoder: decoder_layer must be a cattn.nn."
                            f"TransformerDecoderLayer, got {type(decoder_layer).__name__}")
        n = positive_int(num_layers, "num_layers", "TransformerDecoder")
        check_stack("TransformerDecoder", n, decoder_layer)
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(n)])
        self.num_layers = n
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        """tgt (B, L, E), memory (B, S, E) -> (B, L, E); tgt_is_causal=None:
        detected from tgt_mask."""
        if tgt_is_causal is None:
            t0 = np.asarray(tgt)
            ax = 1 if (self.layers[0].batch_first and t0.ndim == 3) else 0
            tgt_is_causal = is_causal_mask(tgt_mask, t0.shape[ax]) if t0.ndim >= 2 else False
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                      memory_key_padding_mask, tgt_is_causal, memory_is_causal)
        return apply_final_norm(self.norm, x)


# DecoderOnly's parameter names as torch's pre-LN TransformerEncoder has them
# <-> the DecoderBlock's own (per layer, after "layers.{i}.")
_TORCH_NAMES = (("self_attn.in_proj_weight", "self_attn.qkv_proj.weight"),
                ("self_attn.in_proj_bias", "self_attn.qkv_proj.bias"),
                ("self_attn.out_proj.weight", "self_attn.o_proj.weight"),
                ("self_attn.out_proj.bias", "self_attn.o_proj.bias"),
                ("linear1.weight", "mlp.fc1.weight"), ("linear1.bias", "mlp.fc1.bias"),
                ("linear2.weight", "mlp.fc2.weight"), ("linear2.bias", "mlp.fc2.bias"))


def _renamed(name, pairs):
    """A dotted parameter name with its layer-relative part mapped by pairs
    ((from, to), ...); other names unchanged."""
    head, sep, rest = name.partition(".")
    if head == "layers" and sep:
        idx, sep2, tail = rest.partition(".")
        for a, b in pairs:
            if tail == a:
                return f"layers.{idx}.{b}"
    return name


# a layer's parameters in the order torch's TransformerEncoderLayer registers them
_TORCH_ORDER = {name: i for i, name in enumerate(
    [a for a, _ in _TORCH_NAMES] + ["norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"])}


def _torch_order(name):
    """Sort key of a DecoderOnly parameter name in torch's state_dict order:
    layers by index, each layer's as torch registers them, then the final norm."""
    head, _, rest = name.partition(".")
    if head != "layers":
        return (1, 0, 0, "")                    # the final norm: weight, bias as registered
    idx, _, tail = rest.partition(".")
    return (0, int(idx), _TORCH_ORDER.get(tail, len(_TORCH_ORDER)), tail)


class DecoderOnly(Module):
    """A GPT-style decoder-only stack on embeddings (B, L, E) -> (B, L, E)
    (token embedding and output head are the caller's): num_layers
    pre-norm blocks of cattn.nn.DecoderBlock (LayerNorm, causal
    self-attention, LayerNorm, MLP), then a final LayerNorm:
        x = x + self_attn(norm1(x));  x = x + mlp(norm2(x))
    the one decoder block cattn's LLMs (CausalLM) are built of, so a float32
    stack runs as one program (cattn.nn.program: one C call per forward
    step on a cache).

    Parameter names (state_dict / load_state_dict) are those of torch's
    TransformerEncoder(TransformerEncoderLayer(..., norm_first=True), N,
    norm=LayerNorm(E)) — layers.0.self_attn.in_proj_weight, ...,
    layers.0.linear1.weight, norm.weight — so such a torch stack run with a
    causal mask is the reference and its weights load unchanged. The
    modules underneath keep the block's names: self_attn.qkv_proj
    (= in_proj), self_attn.o_proj (= out_proj), mlp.fc1 / mlp.fc2
    (= linear1 / linear2), norm1, norm2.

    Incremental decoding: `cache = model.new_cache(B, max_len)` (one
    cattn.KVCache per layer), then `model(x_new, cache=cache)` for each chunk
    of new positions (a prompt, then one token at a time): only the new
    positions are projected, their K and V appended to each layer's cache,
    and their queries attend to the cached keys — O(S) per new token.
    rotary=True applies RotaryEmbedding(head_dim) to q and k in every layer
    (positions continue from the cache length).
    Layers get distinct random initial weights (from `seed`).
    """

    def __init__(self, d_model, nhead, num_layers, dim_feedforward=None, activation="gelu_tanh",
                 layer_norm_eps=1e-5, bias=True, *, rotary=False, dtype=np.float32, seed=None):
        super().__init__()
        owner = "DecoderOnly"
        self.dtype = as_float_dtype(dtype, owner)
        E = positive_int(d_model, "d_model", owner)
        H = positive_int(nhead, "nhead", owner)
        if E % H:
            raise ValueError(f"{owner}: d_model={E} is not divisible by nhead={H}")
        n = positive_int(num_layers, "num_layers", owner)
        ff = 4 * E if dim_feedforward is None else dim_feedforward
        rng = make_rng(seed)
        rope = RotaryEmbedding(E // H) if rotary else None

        def block():
            return DecoderBlock(
                LayerNorm(E, layer_norm_eps, bias, dtype=dtype),
                CausalSelfAttention(E, H, qkv_bias=bias, out_bias=bias, rotary=rope, dtype=dtype,
                                    seed=rng),
                LayerNorm(E, layer_norm_eps, bias, dtype=dtype),
                MLP(E, ff, activation, bias, dtype=dtype, seed=rng))
        first = block()
        check_stack(owner, n, first)
        self.layers = ModuleList([first] + [block() for _ in range(n - 1)])
        self.norm = LayerNorm(E, layer_norm_eps, bias, dtype=dtype)
        self.d_model, self.nhead, self.num_layers = E, H, n

    def state_dict(self):
        """torch's names (see the class) -> parameter arrays, in torch's order."""
        back = [(b, a) for a, b in _TORCH_NAMES]
        items = [(_renamed(k, back), v) for k, v in super().state_dict().items()]
        return type(super().state_dict())(sorted(items, key=lambda kv: _torch_order(kv[0])))

    def load_state_dict(self, state_dict, strict=True):
        """Module.load_state_dict by torch's names (see the class); missing
        and unexpected keys are reported in those names."""
        given = {_renamed(k, _TORCH_NAMES): v for k, v in dict(state_dict).items()}
        try:
            missing, unexpected = super().load_state_dict(given, strict)
        except StateDictKeyError as e:
            msg = str(e)
            for a, b in _TORCH_NAMES:
                msg = msg.replace("." + b, "." + a)
            raise StateDictKeyError(msg) from None
        back = [(b, a) for a, b in _TORCH_NAMES]
        return IncompatibleKeys([_renamed(k, back) for k in missing],
                                [_renamed(k, back) for k in unexpected])

    def new_cache(self, batch, max_len):
        """One empty cattn.KVCache (batch, nhead, max_len, head_dim) per layer."""
        return [layer.self_attn.new_cache(batch, max_len) for layer in self.layers]

    def _check_cache(self, cache, x):
        """Every layer's cache fits x before any is extended: a bad cache
        raises TypeError / ValueError and leaves all caches unchanged."""
        owner = "DecoderOnly"
        if not isinstance(cache, (list, tuple)) or not all(isinstance(c, KVCache) for c in cache):
            raise TypeError(f"{owner}: cache must be the list of cattn.KVCache from new_cache(), "
                            f"got {show(cache)}")
        if len(cache) != len(self.layers):
            raise ValueError(f"{owner}: cache has {len(cache)} entries for "
                             f"{len(self.layers)} layers; use new_cache()")
        B, T = x.shape[0], x.shape[1]
        want = (B, self.nhead, self.d_model // self.nhead)
        for i, c in enumerate(cache):
            b, h, _, d = c.k.shape
            if (b, h, d) != want or c.v.shape[-1] != want[2] or c.k.dtype != self.dtype:
                raise ValueError(f"{owner}: cache[{i}] holds {c.k.dtype} keys of shape "
                                 f"{c.k.shape}; this input needs (batch, heads, max_len, "
                                 f"head_dim) = ({B}, {want[1]}, max_len, {want[2]}) "
                                 f"in {self.dtype}: use new_cache({B}, max_len)")
            if c.length + T > c.max_len:
                raise ValueError(f"{owner}: cache[{i}] holds {c.length} of {c.max_len} "
                                 f"positions; {T} more exceed max_len")
        if len({c.length for c in cache}) > 1:
            raise ValueError(f"{owner}: the caches hold different numbers of positions "
                             f"{[c.length for c in cache]}; use new_cache()")

    def forward(self, x, cache=None):
        """x (B, T, E) -> (B, T, E) (a new array). Without cache: the full
        causal forward over the T positions. With cache (from new_cache): x
        holds the T positions that follow the cached ones; returns their
        outputs and extends the caches (the full forward's last T rows, to
        rounding), in one program call where the stack is float32."""
        x = as_input(x, "x", self.dtype, "DecoderOnly")
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"DecoderOnly: x has shape {x.shape}; expected (B, T, {self.d_model})")
        if cache is None:
            for layer in self.layers:
                x = layer(x)
        else:
            self._check_cache(cache, x)
            prog = decoder_program(self.layers)
            if prog is not None:
                x = prog.run(np.array(x, order="C"), cache)   # a copy: run() works in place
            else:
                for layer, kv in zip(self.layers, cache):
                    x = layer(x, kv_cache=kv)
        return self.norm(x, out=x)
