"""cattn.models.bert — a BERT encoder (the MiniLM / all-MiniLM-L6-v2 family)
built from cattn ops: `linear` (bias and GELU fused in the GEMM epilogue),
`layer_norm`, `scaled_dot_product_attention` and `attention_weights`.

What this file is: the network of Hugging Face's `BertModel` up to the last
hidden state, for inference (no dropout, no pooler head, no cross-attention,
absolute position embeddings only). What it is not: a tokenizer or a pooling
layer (see cattn.models.sentence), and it never imports torch.

Legend: B batch, L tokens per sequence (padded), T real (unpadded) tokens
of a batch, E hidden size, H heads, D = E / H head dim, F intermediate (FFN)
size, V vocabulary.

Padding: the GEMMs, norms and GELU run on the T real tokens only, stacked as
(T, E) rows; only attention sees the padded (B, L) layout (a key-padding
mask (B, 1, 1, L), True = real token), so padding costs nothing outside it.

Per layer (post-LN, as BERT):
    qkv  = x W_qkv^T + b_qkv                 one GEMM: W_qkv (3E, E) is the
                                              query, key, value weights stacked
    ctx  = softmax(q k^T / sqrt(D) + mask) v per head, fused (no score tensor)
    x    = LayerNorm(x + ctx W_o^T + b_o)
    x    = LayerNorm(x + GELU_erf(x W_1^T + b_1) W_2^T + b_2)
"""
import json
import os
from dataclasses import dataclass, fields

import numpy as np

from ..ops import attention as _attention
from .. import ops as _ops
from .._validate import as_int, as_real, contiguous
from ..ops.rows import layer_norm as _layer_norm_op


def _layer_norm(x, weight, bias, eps):
    """LayerNorm over the last axis, in place (x is a fresh temporary)."""
    return _layer_norm_op(x, weight, bias, eps, out=x)


@dataclass
class BertConfig:
    """The fields of a Hugging Face BERT config.json that inference needs."""
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    position_embedding_type: str = "absolute"

    @classmethod
    def from_dict(cls, d):
        known = {f.name for f in fields(cls)}
        cfg = cls(**{k: v for k, v in d.items() if k in known})
        cfg.validate()
        return cfg

    @classmethod
    def from_json(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))

    def validate(self):
        for name in ("vocab_size", "hidden_size", "num_attention_heads", "intermediate_size",
                     "max_position_embeddings", "type_vocab_size"):
            setattr(self, name, as_int(getattr(self, name), name, "BertConfig", lo=1))
        self.num_hidden_layers = as_int(self.num_hidden_layers, "num_hidden_layers",
                                        "BertConfig", lo=0)
        self.layer_norm_eps = as_real(self.layer_norm_eps, "layer_norm_eps", "BertConfig",
                                      finite=True, lo=0.0)
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"BertConfig: hidden_size {self.hidden_size} is not a multiple of "
                             f"num_attention_heads {self.num_attention_heads}")
        if self.hidden_act not in _ACTIVATIONS:
            raise ValueError(f"BertConfig: hidden_act {self.hidden_act!r} is not supported; "
                             f"expected one of {sorted(_ACTIVATIONS)}")
        if self.position_embedding_type != "absolute":
            raise ValueError("BertConfig: only position_embedding_type='absolute' is supported, "
                             f"got {self.position_embedding_type!r}")

    @property
    def head_dim(self):
        return self.hidden_size // self.num_attention_heads


# Hugging Face hidden_act names -> cattn.linear epilogue activations.
# BERT's "gelu" is the exact erf form.
_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                "relu": "relu", "silu": "silu", "swish": "silu"}


def _strip_prefix(weights):
    """Checkpoint keys without a leading model prefix ("bert.", "model.", ...)."""
    anchor = "embeddings.word_embeddings.weight"
    for k in weights:
        if k.endswith(anchor):
            prefix = k[:-len(anchor)]
            break
    else:
        raise KeyError(f"BERT checkpoint: no '{anchor}' tensor found "
                       f"(keys start with {sorted(weights)[:3]} ...)")
    return {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}


class BertLayer:
    """One post-LN encoder layer; parameters are NumPy arrays (see module doc)."""

    def __init__(self, cfg, w, i, dtype):
        p = f"encoder.layer.{i}."

        def get(name):
            key = p + name
            if key not in w:
                raise KeyError(f"BERT checkpoint: missing tensor {key!r}")
            return contiguous(np.asarray(w[key]), dtype)   # C order and aligned

        def t(w):
            # (out, in) kept row-major, torch's layout: short inputs (<= 12
            # tokens) run on the small-M GEMM that reads these rows in place,
            # longer ones pack them with register transposes
            return contiguous(w, w.dtype)

        E = cfg.hidden_size
        self.num_heads = cfg.num_attention_heads
        self.eps = float(cfg.layer_norm_eps)
        self.act = _ACTIVATIONS[cfg.hidden_act]
        # (3E, E): query, key, value stacked once at load time -> one GEMM
        self.qkv_weight = t(np.concatenate([get(f"attention.self.{n}.weight")
                                            for n in ("query", "key", "value")]))
        self.qkv_bias = np.concatenate([get(f"attention.self.{n}.bias")
                                        for n in ("query", "key", "value")])
        self.out_weight = t(get("attention.output.dense.weight"))        # (E, E)
        self.out_bias = get("attention.output.dense.bias")
        self.norm1_weight = get("attention.output.LayerNorm.weight")    # (E,)
        self.norm1_bias = get("attention.output.LayerNorm.bias")
        self.ffn1_weight = t(get("intermediate.dense.weight"))           # (F, E)
        self.ffn1_bias = get("intermediate.dense.bias")
        self.ffn2_weight = t(get("output.dense.weight"))                 # (E, F)
        self.ffn2_bias = get("output.dense.bias")
        self.norm2_weight = get("output.LayerNorm.weight")
        self.norm2_bias = get("output.LayerNorm.bias")
        if self.qkv_weight.shape != (3 * E, E):
            raise ValueError(f"BERT checkpoint: layer {i} query/key/value weights stack to "
                             f"{self.qkv_weight.shape}, expected ({3 * E}, {E})")

    def torch_state_dict(self):
        """These parameters under torch.nn.TransformerEncoderLayer's names
        (self_attn.in_proj_weight, linear1.weight, norm1.weight, ...), for
        cattn.nn.TransformerEncoderLayer(E, H, F, activation="gelu",
        layer_norm_eps=eps) or torch itself (norm_first=False)."""
        return {"self_attn.in_proj_weight": self.qkv_weight,
                "self_attn.in_proj_bias": self.qkv_bias,
                "self_attn.out_proj.weight": self.out_weight,
                "self_attn.out_proj.bias": self.out_bias,
                "linear1.weight": self.ffn1_weight, "linear1.bias": self.ffn1_bias,
                "linear2.weight": self.ffn2_weight, "linear2.bias": self.ffn2_bias,
                "norm1.weight": self.norm1_weight, "norm1.bias": self.norm1_bias,
                "norm2.weight": self.norm2_weight, "norm2.bias": self.norm2_bias}

    def __call__(self, x, mask=None, need_weights=False):
        """x (B, L, E); mask None or bool (B, 1, 1, L), True = real token.
        Returns the new x (B, L, E), and the attention probabilities
        (B, H, L, L) when need_weights (else None)."""
        B, L, E = x.shape
        y, w = self.forward_tokens(x.reshape(B * L, E), B, L, None, mask, need_weights)
        return y.reshape(B, L, E), w

    def forward_tokens(self, x, B, L, rows=None, mask=None, need_weights=False, scratch=None):
        """The layer on token rows: x (T, E) -> (T, E).

        rows None: x holds all B*L positions (B, L) in order. Otherwise rows
        (T,) are the flat positions b*L + l of the T real tokens (ascending)
        and the GEMMs, norms and GELU run on those rows only: only attention
        sees the padded (B, L) layout, through a (B*L, 3E) buffer whose
        padding rows are zeros (scratch: such a buffer to reuse).
        mask: bool (B, 1, 1, L) key-padding mask or None."""
        T, E = x.shape
        H = self.num_heads
        D = E // H
        qkv = _ops.linear(x, self.qkv_weight, self.qkv_bias)                  # (T, 3E)
        if rows is not None:
            buf = scratch if scratch is not None else np.zeros((B * L, 3 * E), x.dtype)
            buf[rows] = qkv
            qkv = buf
        qkv = qkv.reshape(B, L, 3, H, D).transpose(2, 0, 3, 1, 4)             # (3, B, H, L, D)
        q, k, v = qkv[0], qkv[1], qkv[2]
        ctx = np.empty((B, L, H, D), dtype=x.dtype)
        _attention.scaled_dot_product_attention(q, k, v, attn_mask=mask,
                                                out=ctx.transpose(0, 2, 1, 3))
        weights = _attention.attention_weights(q, k, attn_mask=mask) if need_weights else None
        ctx = ctx.reshape(B * L, E)
        if rows is not None:
            ctx = ctx.take(rows, axis=0)                                          # (T, E)
        a = _ops.linear(ctx, self.out_weight, self.out_bias)
        a += x
        x = _layer_norm(a, self.norm1_weight, self.norm1_bias, self.eps)
        h = _ops.linear(x, self.ffn1_weight, self.ffn1_bias, activation=self.act)  # (T, F)
        y = _ops.linear(h, self.ffn2_weight, self.ffn2_bias)
        y += x
        return _layer_norm(y, self.norm2_weight, self.norm2_bias, self.eps), weights


class BertModel:
    """BERT encoder: token ids -> last hidden state.

    Build with `BertModel(config, weights)` where weights maps Hugging Face
    parameter names (an optional "bert." style prefix is stripped) to NumPy
    arrays, or `BertModel.from_pretrained(directory)` (config.json +
    model.safetensors). dtype float32 (default) or float64."""

    def __init__(self, config, weights, dtype=np.float32):
        dtype = np.dtype(dtype)
        if dtype not in (np.float32, np.float64):
            raise TypeError(f"BertModel: dtype {dtype} not supported; use float32 or float64")
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        config.validate()
        self.config = config
        self.dtype = dtype
        w = _strip_prefix(weights)

        def get(name):
            if name not in w:
                raise KeyError(f"BERT checkpoint: missing tensor {name!r}")
            return contiguous(np.asarray(w[name]), dtype)

        E = config.hidden_size
        self.word_embeddings = get("embeddings.word_embeddings.weight")           # (V, E)
        self.position_embeddings = get("embeddings.position_embeddings.weight")   # (P, E)
        self.token_type_embeddings = get("embeddings.token_type_embeddings.weight")
        self.norm_weight = get("embeddings.LayerNorm.weight")
        self.norm_bias = get("embeddings.LayerNorm.bias")
        if self.word_embeddings.shape != (config.vocab_size, E):
            raise ValueError(f"BERT checkpoint: word embeddings have shape "
                             f"{self.word_embeddings.shape}, config says "
                             f"({config.vocab_size}, {E})")
        self.layers = [BertLayer(config, w, i, dtype) for i in range(config.num_hidden_layers)]

    @classmethod
    def from_pretrained(cls, path, dtype=np.float32):
        """Load config.json and model.safetensors from a directory (needs the
        `safetensors` package; torch is not used)."""
        config = BertConfig.from_json(os.path.join(path, "config.json"))
        return cls(config, load_safetensors(os.path.join(path, "model.safetensors")), dtype)

    @property
    def max_length(self):
        return self.position_embeddings.shape[0]

    def embed(self, input_ids, token_type_ids=None, positions=None):
        """LayerNorm(word + token type + position embeddings).

        input_ids (B, L) -> (B, L, E), positions 0..L-1; or flat token ids
        (T,) with their positions (T,) -> (T, E)."""
        x = self.word_embeddings[input_ids]                      # a copy
        if token_type_ids is None:
            x += self.token_type_embeddings[0]
        else:
            x += self.token_type_embeddings[token_type_ids]
        if positions is None:
            x += self.position_embeddings[:input_ids.shape[-1]]
        else:
            x += self.position_embeddings[positions]
        return _layer_norm(x, self.norm_weight, self.norm_bias, float(self.config.layer_norm_eps))

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None,
                 output_attentions=False):
        return self.forward(input_ids, attention_mask, token_type_ids, output_attentions)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                output_attentions=False):
        """input_ids (B, L) ints; attention_mask (B, L), 1/True = real token,
        0/False = padding (None: no padding); token_type_ids (B, L) or None (all 0).

        Returns the last hidden state (B, L, E), zeros at padding positions;
        with output_attentions, also a list of per-layer attention
        probabilities (B, H, L, L) whose padding columns are exactly 0."""
        x, rows, atts = self.forward_tokens(input_ids, attention_mask, token_type_ids,
                                            output_attentions)
        B, L = np.shape(input_ids)
        if rows is not None:
            full = np.zeros((B * L, x.shape[-1]), self.dtype)
            full[rows] = x
            x = full
        x = x.reshape(B, L, self.config.hidden_size)
        return (x, atts) if output_attentions else x

    def forward_tokens(self, input_ids, attention_mask=None, token_type_ids=None,
                       output_attentions=False):
        """Like forward, but returns the hidden states of the real tokens only:
        (x (T, E), rows, attentions) where rows (T,) are the flat positions
        b*L + l of the real tokens in ascending order (None when nothing is
        padded: x then holds all B*L positions), attentions a list of
        (B, H, L, L) or None. Padding positions are never computed except
        inside attention (as masked keys / ignored queries)."""
        input_ids = np.asarray(input_ids)
        if input_ids.ndim != 2 or input_ids.dtype.kind not in "iu":
            raise ValueError(f"BertModel: input_ids must be a 2-D integer array (B, L), got "
                             f"shape {input_ids.shape} dtype {input_ids.dtype}")
        B, L = input_ids.shape
        E, H = self.config.hidden_size, self.config.num_attention_heads
        if L > self.max_length:
            raise ValueError(f"BertModel: sequence length {L} exceeds the model's "
                             f"{self.max_length} position embeddings")
        if B and L and (input_ids.min() < 0 or input_ids.max() >= self.config.vocab_size):
            raise ValueError(f"BertModel: token ids must lie in [0, {self.config.vocab_size})")
        if token_type_ids is not None:
            token_type_ids = np.asarray(token_type_ids)
            if token_type_ids.shape != (B, L):
                raise ValueError(f"BertModel: token_type_ids has shape {token_type_ids.shape}, "
                                 f"expected {(B, L)}")
            if B and L and (token_type_ids.min() < 0
                            or token_type_ids.max() >= self.config.type_vocab_size):
                raise ValueError("BertModel: token_type_ids must lie in "
                                 f"[0, {self.config.type_vocab_size})")
        mask = rows = None
        if attention_mask is not None:
            am = np.asarray(attention_mask)
            if am.shape != (B, L):
                raise ValueError(f"BertModel: attention_mask has shape {am.shape}, "
                                 f"expected {(B, L)}")
            am = am.astype(bool, copy=False)
            if not am.all():
                mask = am[:, None, None, :]                        # (B, 1, 1, S) key padding
                rows = np.flatnonzero(am)                          # real tokens, (T,)
        atts = [] if output_attentions else None
        if B == 0 or L == 0:
            if output_attentions:
                atts = [np.zeros((B, H, L, L), self.dtype) for _ in self.layers]
            return np.zeros((0, E), self.dtype), None, atts
        if rows is None:
            x = self.embed(input_ids.reshape(-1),
                           None if token_type_ids is None else token_type_ids.reshape(-1),
                           np.tile(np.arange(L), B))
        else:
            x = self.embed(input_ids.reshape(-1)[rows],
                           None if token_type_ids is None else token_type_ids.reshape(-1)[rows],
                           rows % L)
        scratch = None if rows is None else np.zeros((B * L, 3 * E), self.dtype)
        for layer in self.layers:
            x, w = layer.forward_tokens(x, B, L, rows, mask, output_attentions, scratch)
            if output_attentions:
                atts.append(w)
        return x, rows, atts


def load_safetensors(path):
    """{name: ndarray} from a .safetensors file via `safetensors.numpy` (no torch)."""
    try:
        from safetensors.numpy import load_file
    except ImportError:
        raise ImportError("cattn.models needs the 'safetensors' package to read model weights: "
                          "pip install 'cattn[models]' (or: pip install safetensors tokenizers)"
                          ) from None
    if not os.path.isfile(path):
        raise FileNotFoundError(f"model weights not found: {path}")
    return load_file(path)
