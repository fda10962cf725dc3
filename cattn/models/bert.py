"""cattn.models.bert — a BERT encoder (the MiniLM / all-MiniLM-L6-v2 family)
built from cattn.nn layers: nn.Embedding and nn.LayerNorm for the
embeddings, nn.TransformerEncoder of post-LN nn.TransformerEncoderLayer
(erf GELU, LayerNorm eps from the config) for the encoder.

What this file is: the network of Hugging Face's `BertModel` up to the last
hidden state, for inference (no dropout, no pooler head, no cross-attention,
absolute position embeddings only), and the key map from Hugging Face's
parameter names to cattn.nn's. What it is not: a layer implementation (those
are cattn.nn's), a tokenizer or a pooling layer (see cattn.models.sentence);
it never imports torch.

Legend: B batch, L tokens per sequence (padded), T real (unpadded) tokens
of a batch, E hidden size, H heads, F intermediate (FFN) size, V vocabulary.

Padding: the model runs nn's real-tokens-only path (nn.RealTokens,
TransformerEncoder.forward_tokens): embeddings, GEMMs, norms and GELU run on
the T real tokens only, stacked as (T, E) rows; only attention sees the
padded (B, L) layout, with the padding keys masked.

Per layer (post-LN, as BERT; nn.TransformerEncoderLayer with norm_first=False):
    qkv  = x W_qkv^T + b_qkv                 one GEMM: W_qkv (3E, E) is the
                                              query, key, value weights stacked
                                              (in_proj_weight, as torch)
    ctx  = softmax(q k^T / sqrt(D) + mask) v per head, fused (no score tensor)
    x    = LayerNorm(x + ctx W_o^T + b_o)
    x    = LayerNorm(x + GELU_erf(x W_1^T + b_1) W_2^T + b_2)
"""
import json
import os
from dataclasses import dataclass, fields

import numpy as np

from .. import nn
from .._validate import as_float_dtype, as_int, as_real


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


# Hugging Face hidden_act names -> cattn.nn activation names (fused in the GEMM epilogue).
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


# The key map: Hugging Face BERT names -> cattn.nn names (BertModel's
# modules). Layer i's names are prefixed "encoder.layer.{i}." on the left and
# "encoder.layers.{i}." on the right; its query, key and value weights and
# biases are stacked, in that order, into self_attn.in_proj_weight (3E, E)
# and in_proj_bias (3E,), as torch's MultiheadAttention holds them.
_EMBEDDING_KEYS = {
    "embeddings.word_embeddings.weight": "word_embeddings.weight",              # (V, E)
    "embeddings.position_embeddings.weight": "position_embeddings.weight",      # (P, E)
    "embeddings.token_type_embeddings.weight": "token_type_embeddings.weight",  # (2, E)
    "embeddings.LayerNorm.weight": "norm.weight",
    "embeddings.LayerNorm.bias": "norm.bias",
}
_LAYER_KEYS = {
    "attention.output.dense.weight": "self_attn.out_proj.weight",   # (E, E)
    "attention.output.dense.bias": "self_attn.out_proj.bias",
    "attention.output.LayerNorm.weight": "norm1.weight",
    "attention.output.LayerNorm.bias": "norm1.bias",
    "intermediate.dense.weight": "linear1.weight",                  # (F, E)
    "intermediate.dense.bias": "linear1.bias",
    "output.dense.weight": "linear2.weight",                        # (E, F)
    "output.dense.bias": "linear2.bias",
    "output.LayerNorm.weight": "norm2.weight",
    "output.LayerNorm.bias": "norm2.bias",
}
_QKV = ("query", "key", "value")


def nn_state_dict(weights, num_layers):
    """A Hugging Face BERT checkpoint {name: array} (an optional "bert."
    style prefix is stripped) -> BertModel's cattn.nn state dict, through
    the key map above. KeyError naming the missing checkpoint tensor."""
    w = _strip_prefix(weights)

    def get(name):
        if name not in w:
            raise KeyError(f"BERT checkpoint: missing tensor {name!r}")
        return np.asarray(w[name])

    sd = {ours: get(theirs) for theirs, ours in _EMBEDDING_KEYS.items()}
    for i in range(num_layers):
        hf, ours = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        sd.update({ours + o: get(hf + t) for t, o in _LAYER_KEYS.items()})
        for part in ("weight", "bias"):
            sd[f"{ours}self_attn.in_proj_{part}"] = np.concatenate(
                [get(f"{hf}attention.self.{n}.{part}") for n in _QKV])
    return sd


class BertModel(nn.Module):
    """BERT encoder: token ids -> last hidden state.

    Build with `BertModel(config, weights)` where weights maps Hugging Face
    parameter names (an optional "bert." style prefix is stripped) to NumPy
    arrays, or `BertModel.from_pretrained(directory)` (config.json +
    model.safetensors). dtype float32 (default) or float64.
    Modules (cattn.nn, names as in state_dict()): word_embeddings,
    position_embeddings, token_type_embeddings (nn.Embedding), norm (the
    embeddings' nn.LayerNorm), encoder (nn.TransformerEncoder; None when
    the config has no layers)."""

    def __init__(self, config, weights, dtype=np.float32):
        super().__init__()
        dtype = as_float_dtype(dtype, "BertModel")
        if isinstance(config, dict):
            config = BertConfig.from_dict(config)
        config.validate()
        self.config = config
        self.dtype = dtype
        E, eps = config.hidden_size, float(config.layer_norm_eps)
        # weights allocated, not drawn (skip_init): load_state_dict fills them
        self.word_embeddings = nn.skip_init(nn.Embedding, config.vocab_size, E, dtype=dtype)
        self.position_embeddings = nn.skip_init(nn.Embedding, config.max_position_embeddings,
                                                E, dtype=dtype)
        self.token_type_embeddings = nn.skip_init(nn.Embedding, config.type_vocab_size, E,
                                                  dtype=dtype)
        self.norm = nn.LayerNorm(E, eps, dtype=dtype)
        self.encoder = None
        if config.num_hidden_layers:
            layer = nn.skip_init(nn.TransformerEncoderLayer, E, config.num_attention_heads,
                                 config.intermediate_size, 0.0, _ACTIVATIONS[config.hidden_act],
                                 eps, batch_first=True, norm_first=False, dtype=dtype)
            self.encoder = nn.TransformerEncoder(layer, config.num_hidden_layers)
        try:
            self.load_state_dict(nn_state_dict(weights, config.num_hidden_layers))
        except ValueError as e:
            raise ValueError(f"BERT checkpoint does not fit its config: {e}") from None

    @classmethod
    def from_pretrained(cls, path, dtype=np.float32):
        """Load config.json and model.safetensors from a directory (needs the
        `safetensors` package; torch is not used)."""
        config = BertConfig.from_json(os.path.join(path, "config.json"))
        return cls(config, load_safetensors(os.path.join(path, "model.safetensors")), dtype)

    @property
    def max_length(self):
        return self.position_embeddings.num_embeddings

    def embed(self, input_ids, token_type_ids=None, positions=None):
        """LayerNorm(word + token type + position embeddings).

        input_ids (B, L) -> (B, L, E), positions 0..L-1; or flat token ids
        (T,) with their positions (T,) -> (T, E)."""
        x = self.word_embeddings(input_ids)                      # a copy
        if token_type_ids is None:
            x += self.token_type_embeddings.weight[0]
        else:
            x += self.token_type_embeddings(token_type_ids)
        if positions is None:
            x += self.position_embeddings.weight[:input_ids.shape[-1]]
        else:
            x += self.position_embeddings(positions)
        return self.norm(x, out=x)

    def _embed_valid(self, input_ids, token_type_ids, positions):
        """embed() for ids already checked by _run (flat (T,) ids and
        positions): the same gathers and sums, without the Embedding
        modules' checks."""
        x = self.word_embeddings.weight[input_ids]               # a copy
        if token_type_ids is None:
            x += self.token_type_embeddings.weight[0]
        else:
            x += self.token_type_embeddings.weight[token_type_ids]
        x += self.position_embeddings.weight[positions]
        return self.norm(x, out=x)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                output_attentions=False):
        """input_ids (B, L) ints; attention_mask (B, L), 1/True = real token,
        0/False = padding (None: no padding); token_type_ids (B, L) or None (all 0).

        Returns the last hidden state (B, L, E), zeros at padding positions;
        with output_attentions, also a list of per-layer attention
        probabilities (B, H, L, L) whose padding columns are exactly 0."""
        x, tokens, atts = self._run(input_ids, attention_mask, token_type_ids, output_attentions)
        x = tokens.unpack(x)
        return (x, atts) if output_attentions else x

    def forward_tokens(self, input_ids, attention_mask=None, token_type_ids=None,
                       output_attentions=False):
        """Like forward, but returns the hidden states of the real tokens only:
        (x (T, E), rows, attentions) where rows (T,) are the flat positions
        b*L + l of the real tokens in ascending order (None when nothing is
        padded: x then holds all B*L positions), attentions a list of
        (B, H, L, L) or None. Padding positions are never computed except
        inside attention (as masked keys / ignored queries)."""
        x, tokens, atts = self._run(input_ids, attention_mask, token_type_ids, output_attentions)
        return x, tokens.rows, atts

    def _run(self, input_ids, attention_mask, token_type_ids, output_attentions):
        """(x (T, E), nn.RealTokens, attentions or None): validate, embed the
        real tokens, run the encoder's real-tokens-only path."""
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
        padding = None
        if attention_mask is not None:
            am = np.asarray(attention_mask)
            if am.shape != (B, L):
                raise ValueError(f"BertModel: attention_mask has shape {am.shape}, "
                                 f"expected {(B, L)}")
            padding = ~am.astype(bool, copy=False)             # torch's key padding mask
        tokens = nn.RealTokens(B, L, padding)
        n_layers = self.config.num_hidden_layers
        if B == 0 or L == 0:
            atts = [np.zeros((B, H, L, L), self.dtype) for _ in range(n_layers)]
            return np.zeros((0, E), self.dtype), tokens, atts if output_attentions else None
        if tokens.rows is not None:
            positions = tokens.rows % L
        else:
            positions = np.arange(L) if B == 1 else np.tile(np.arange(L), B)
        x = self._embed_valid(tokens.pack(input_ids),
                              None if token_type_ids is None else tokens.pack(token_type_ids),
                              positions)
        if self.encoder is None:
            return x, tokens, [] if output_attentions else None
        x, atts = self.encoder.forward_tokens(x, tokens, need_weights=output_attentions)
        return x, tokens, atts


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
