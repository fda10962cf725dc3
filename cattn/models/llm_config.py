"""cattn.models.llm_config — a decoder LLM's configuration: the fields of
a Hugging Face config.json (or a GGUF file's metadata, through
gguf_llm.gguf_config) that inference needs, one shape for the Llama, Qwen2,
Qwen3 and GPT-2 families, and the RoPE frequencies they imply.

What this file is: parsing and checking (a ValueError naming the field);
rope_frequencies (transformers' rope types, llama.cpp's frequency
factors). What it is not: the model (causal_lm.py), the checkpoint key maps
(llm_keys.py) or generation (generation.py).
"""
import json
import math

import numpy as np

from .._validate import as_int, as_real

__all__ = ["SUPPORTED_ARCHITECTURES", "ACTIVATIONS", "LLMConfig", "activation_name", "id_list",
           "rope_frequencies"]

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                           "GPT2LMHeadModel")

# Hugging Face hidden_act names -> cattn activation names
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu_new": "gelu_tanh",
                "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


class LLMConfig:
    """The fields of a config.json that inference needs, one shape for all
    three families. Attributes: architecture, vocab_size, hidden_size (E),
    num_layers, num_heads (H), num_kv_heads (Hk), head_dim (D),
    intermediate_size (F), norm ("rms" | "layer"), norm_eps, activation,
    qkv_bias, out_bias, mlp_bias, qk_norm (Qwen3: RMSNorm of each q and k
    head), rope_theta, rope_scaling (dict or None),
    max_positions (GPT-2's learned table; None for RoPE models),
    tie_word_embeddings, bos_token_id, eos_token_id (list), pad_token_id."""

    @classmethod
    def from_dict(cls, d):
        arch = (d.get("architectures") or [None])[0]
        if arch not in SUPPORTED_ARCHITECTURES:
            raise ValueError(f"unsupported architecture {arch!r} (config.json 'architectures'); "
                             f"cattn.models.CausalLM supports {', '.join(SUPPORTED_ARCHITECTURES)}")
        c = cls()
        c.architecture = arch
        owner = f"config.json ({arch})"
        c.qk_norm = arch == "Qwen3ForCausalLM"
        if arch == "GPT2LMHeadModel":
            c._gpt2(d, owner)
        else:
            c._llama(d, owner, qwen2=arch == "Qwen2ForCausalLM")
        c.vocab_size = as_int(d.get("vocab_size"), "vocab_size", owner, lo=1)
        c.bos_token_id = d.get("bos_token_id")
        c.eos_token_id = id_list(d.get("eos_token_id"))
        c.pad_token_id = d.get("pad_token_id")
        if c.num_heads % c.num_kv_heads:
            raise ValueError(f"{owner}: num_attention_heads={c.num_heads} is not a multiple of "
                             f"num_key_value_heads={c.num_kv_heads}")
        return c

    def _llama(self, d, owner, qwen2):
        self.hidden_size = E = as_int(d.get("hidden_size"), "hidden_size", owner, lo=1)
        self.num_layers = as_int(d.get("num_hidden_layers"), "num_hidden_layers", owner)
        self.num_heads = H = as_int(d.get("num_attention_heads"), "num_attention_heads", owner,
                                    lo=1)
        self.num_kv_heads = as_int(d.get("num_key_value_heads") or H, "num_key_value_heads",
                                   owner, lo=1)
        self.head_dim = as_int(d.get("head_dim") or E // H, "head_dim", owner, lo=1)
        self.intermediate_size = as_int(d.get("intermediate_size"), "intermediate_size", owner,
                                        lo=1)
        self.norm, self.norm_eps = "rms", as_real(d.get("rms_norm_eps", 1e-6), "rms_norm_eps",
                                                  owner, lo=0.0)
        self.activation = activation_name(d.get("hidden_act", "silu"), owner)
        bias = bool(d.get("attention_bias", False))
        self.qkv_bias, self.out_bias = (True, False) if qwen2 else (bias, bias)
        self.mlp_bias = bool(d.get("mlp_bias", False))
        if qwen2 and d.get("use_sliding_window"):
            raise ValueError(f"{owner}: use_sliding_window=true is not supported")
        rope = d.get("rope_parameters") or {}                  # transformers >= 5
        self.rope_theta = as_real(rope.get("rope_theta", d.get("rope_theta", 10000.0)),
                                  "rope_theta", owner, lo=0.0, lo_open=True)
        scaling = d.get("rope_scaling") or rope
        kind = scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"
        if kind not in ("default", "llama3", "linear", "freq_factors"):
            raise ValueError(f"{owner}: rope_scaling type {kind!r} is not supported "
                             "(supported: llama3, linear, or none)")
        self.rope_scaling = None if kind == "default" else dict(scaling, rope_type=kind)
        self.max_positions = None
        self.tie_word_embeddings = bool(d.get("tie_word_embeddings", False))

    def _gpt2(self, d, owner):
        self.hidden_size = E = as_int(d.get("n_embd"), "n_embd", owner, lo=1)
        self.num_layers = as_int(d.get("n_layer"), "n_layer", owner)
        self.num_heads = self.num_kv_heads = H = as_int(d.get("n_head"), "n_head", owner, lo=1)
        if E % H:
            raise ValueError(f"{owner}: n_embd={E} is not a multiple of n_head={H}")
        self.head_dim = E // H
        self.intermediate_size = as_int(d.get("n_inner") or 4 * E, "n_inner", owner, lo=1)
        self.norm, self.norm_eps = "layer", as_real(d.get("layer_norm_epsilon", 1e-5),
                                                    "layer_norm_epsilon", owner, lo=0.0)
        self.activation = activation_name(d.get("activation_function", "gelu_new"), owner)
        self.qkv_bias = self.out_bias = self.mlp_bias = True
        if not d.get("scale_attn_weights", True) or d.get("scale_attn_by_inverse_layer_idx"):
            raise ValueError(f"{owner}: only scale_attn_weights=true and "
                             "scale_attn_by_inverse_layer_idx=false are supported")
        self.rope_theta = self.rope_scaling = None
        self.max_positions = as_int(d.get("n_positions", 1024), "n_positions", owner, lo=1)
        self.tie_word_embeddings = True                # GPT2LMHeadModel's lm_head is wte

    @classmethod
    def from_json(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))


def activation_name(name, owner):
    if name not in ACTIVATIONS:
        raise ValueError(f"{owner}: activation {name!r} is not supported; expected one of "
                         f"{sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def id_list(v):
    """An id, a list of ids or None -> a list of ints."""
    if v is None:
        return []
    return [int(i) for i in (v if isinstance(v, (list, tuple)) else [v])]


def rope_frequencies(head_dim, theta, scaling):
    """The (D/2,) RoPE frequencies theta^(-2i/D), rescaled as transformers'
    rope types "linear" (all / factor) and "llama3" (long wavelengths /
    factor, short ones kept, a smooth blend between), or, "freq_factors"
    (a GGUF file's rope_freqs.weight, as llama.cpp applies it), each
    divided by its factor."""
    inv = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    if scaling is None:
        return inv
    if scaling["rope_type"] == "freq_factors":
        f = np.asarray(scaling["factors"], np.float64)
        if f.shape != inv.shape or not np.all(np.isfinite(f) & (f > 0)):
            raise ValueError(f"rope frequency factors: expected {inv.size} finite values > 0 "
                             f"(head_dim / 2), got shape {f.shape}")
        return inv / f
    factor = float(scaling["factor"])
    if scaling["rope_type"] == "linear":
        return inv / factor
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    old = float(scaling["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return np.where(medium, blended, scaled)
