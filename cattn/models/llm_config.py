"""cattn.models.llm_config — a decoder LLM's configuration: the fields of
a Hugging Face config.json (or a GGUF file's metadata, through
gguf_llm.gguf_config) that inference needs, one shape for the Llama, Qwen2,
Qwen3 and GPT-2 families, and the RoPE frequencies they imply.

What this file is: parsing and checking (a ValueError naming the field in
its source's words: config.json's keys, or a GGUF file's path and metadata
keys through `owner` and `names`);
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

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
                           "Qwen3ForCausalLM", "SmolLM3ForCausalLM", "GraniteForCausalLM",
                           "Gemma3ForCausalLM", "GPT2LMHeadModel")
# a layer's attention in config.json's "layer_types"
LAYER_TYPES = ("full_attention", "sliding_attention")

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
    tie_word_embeddings, bos_token_id, eos_token_id (list), pad_token_id;
    Gemma 3's, None / False / 0 for the others: post_norms (norms after
    attention and MLP too), embed_scale (the embeddings' factor),
    norm_offset (added to every RMSNorm weight at load: a Hugging Face
    Gemma checkpoint stores w for x * (1 + w)), attn_scale (the scores'
    factor; None: 1/sqrt(D)), layer_types (per layer "full_attention" or
    "sliding_attention"), sliding_window, rope_local_theta (the sliding
    layers' RoPE base; they take no rope scaling; None: the global rope);
    Mistral's sliding window (every layer); SmolLM3's rope_layers (per layer
    whether it rotates q and k: every 4th does not, NoPE); Granite's
    embed_scale, attn_scale, residual_scale (each sublayer's output's factor
    before the residual add) and logits_scaling (the logits' divisor)."""

    post_norms, embed_scale, norm_offset, attn_scale = False, None, 0.0, None
    layer_types = sliding_window = rope_local_theta = rope_layers = None
    residual_scale, logits_scaling = 1.0, 1.0

    @classmethod
    def from_dict(cls, d, owner=None, names=None):
        """d: a config.json's dict (or gguf_llm.gguf_config's). owner: who
        the errors blame (default "config.json (<architecture>)"); names: a
        field of d -> the name its source gives it (a GGUF file's metadata
        key, e.g. "hidden_size" -> "qwen2.embedding_length"; default: the
        field itself), so that an error speaks the source's words."""
        names = names or {}
        arch = (d.get("architectures") or [None])[0]
        if arch not in SUPPORTED_ARCHITECTURES:
            where = ("config.json 'architectures'" if owner is None else
                     f"{owner}: {names.get('architectures', 'architectures')}")
            raise ValueError(f"unsupported architecture {arch!r} ({where}); "
                             f"cattn.models.CausalLM supports {', '.join(SUPPORTED_ARCHITECTURES)}")
        c = cls()
        c.architecture = arch
        src = _Source(d, f"config.json ({arch})" if owner is None else owner, names)
        c.qk_norm = arch in ("Qwen3ForCausalLM", "Gemma3ForCausalLM")
        if arch == "GPT2LMHeadModel":
            c._gpt2(src)
        else:
            c._llama(src, qwen2=arch == "Qwen2ForCausalLM")
        if arch == "Gemma3ForCausalLM":
            c._gemma3(src)
        elif arch == "MistralForCausalLM" and src.given("sliding_window"):
            c.sliding_window = src.int("sliding_window")
            c.layer_types = ["sliding_attention"] * c.num_layers
        elif arch == "SmolLM3ForCausalLM":
            c._smollm3(src)
        elif arch == "GraniteForCausalLM":
            c.embed_scale = src.real("embedding_multiplier", 1.0)
            c.attn_scale = src.real("attention_multiplier", c.head_dim ** -0.5)
            c.residual_scale = src.real("residual_multiplier", 1.0)
            c.logits_scaling = as_real(d.get("logits_scaling", 1.0), src.name("logits_scaling"),
                                       src.owner, lo=0.0, lo_open=True)
        c.vocab_size = src.int("vocab_size")
        c.bos_token_id = d.get("bos_token_id")
        c.eos_token_id = id_list(d.get("eos_token_id"), src.name("eos_token_id"), src.owner)
        c.pad_token_id = d.get("pad_token_id")
        if c.num_heads % c.num_kv_heads:
            raise ValueError(f"{src.owner}: {src.name('num_attention_heads')}={c.num_heads} is not "
                             f"a multiple of {src.name('num_key_value_heads')}={c.num_kv_heads}")
        return c

    def _llama(self, src, qwen2):
        d, owner, name = src.d, src.owner, src.name
        self.hidden_size = E = src.int("hidden_size")
        self.num_layers = src.int("num_hidden_layers", lo=0)
        self.num_heads = H = src.int("num_attention_heads")
        self.num_kv_heads = src.int("num_key_value_heads", H)
        if src.given("head_dim"):
            self.head_dim = src.int("head_dim")
        elif E < H:                                   # the default E // H would be 0
            raise ValueError(f"{owner}: {name('hidden_size')}={E} is smaller than "
                             f"{name('num_attention_heads')}={H}: the head dim, their quotient, "
                             "would be 0")
        else:
            self.head_dim = E // H
        if self.head_dim % 2:
            raise ValueError(f"{owner}: the head dim {self.head_dim} ({name('head_dim')}) must "
                             "be even (RoPE rotates pairs)")
        self.intermediate_size = src.int("intermediate_size")
        self.norm, self.norm_eps = "rms", src.real("rms_norm_eps", 1e-6)
        self.activation = activation_name(d.get("hidden_act", "silu"), owner)
        bias = bool(d.get("attention_bias", False))
        self.qkv_bias, self.out_bias = (True, False) if qwen2 else (bias, bias)
        self.mlp_bias = bool(d.get("mlp_bias", False))
        if src.given("max_position_embeddings"):     # the trained context: RoPE has no table
            src.int("max_position_embeddings")
        if qwen2 and d.get("use_sliding_window"):
            raise ValueError(f"{owner}: {name('use_sliding_window')}=true is not supported")
        rope = d.get("rope_parameters") or {}                  # transformers >= 5
        if isinstance(rope.get("full_attention"), dict):      # per layer type (Gemma 3)
            rope = rope["full_attention"]
        self.rope_theta = as_real(rope.get("rope_theta", d.get("rope_theta", 10000.0)),
                                  name("rope_theta"), owner, lo=0.0, lo_open=True)
        scaling = d.get("rope_scaling") or rope
        kind = scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"
        if kind not in ("default", "llama3", "linear", "freq_factors"):
            raise ValueError(f"{owner}: {name('rope_scaling')} type {kind!r} is not supported "
                             "(supported: llama3, linear, or none)")
        self.rope_scaling = None if kind == "default" else dict(scaling, rope_type=kind)
        if kind in ("linear", "llama3"):
            llama3 = ("low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
            for k in ("factor",) + (llama3 if kind == "llama3" else ()):
                as_real(scaling.get(k), name(f"rope_scaling.{k}"), owner, lo=0.0, lo_open=True)
            if kind == "llama3" and not scaling["high_freq_factor"] > scaling["low_freq_factor"]:
                raise ValueError(f"{owner}: {name('rope_scaling.high_freq_factor')} must exceed "
                                 f"{name('rope_scaling.low_freq_factor')}, got "
                                 f"{scaling['high_freq_factor']!r} and "
                                 f"{scaling['low_freq_factor']!r}")
        if kind == "freq_factors":         # a GGUF file's rope_freqs.weight: one per pair
            n = len(scaling.get("factors") or ())
            if n != self.head_dim // 2:
                raise ValueError(f"{owner}: {name('rope_scaling')} has {n} frequency factors; "
                                 f"expected {self.head_dim // 2}, half the head dim "
                                 f"({name('head_dim')})")
        if _rope_overflows(self.head_dim, self.rope_theta, self.rope_scaling):
            raise ValueError(f"{owner}: {name('rope_theta')}={self.rope_theta!r}"
                             + ("" if kind == "default" else f" with {name('rope_scaling')}")
                             + " gives RoPE frequencies that are not finite")
        self.max_positions = None
        self.tie_word_embeddings = bool(d.get("tie_word_embeddings", False))

    def _gemma3(self, src):
        d, owner, name = src.d, src.owner, src.name
        self.activation = activation_name(d.get("hidden_activation") or d.get("hidden_act")
                                          or "gelu_pytorch_tanh", owner)
        for key in ("final_logit_softcapping", "attn_logit_softcapping"):
            if d.get(key) not in (None, 0, 0.0):
                raise ValueError(f"{owner}: {name(key)}={d[key]!r} is not supported")
        self.post_norms = True
        self.embed_scale = float(np.float32(self.hidden_size ** 0.5))
        self.norm_offset = src.real("norm_weight_offset", 1.0)
        self.attn_scale = src.real("query_pre_attn_scalar", self.head_dim) ** -0.5
        n = self.num_layers
        types = d.get("layer_types")
        if types is None:
            pattern = src.int("sliding_window_pattern", 6)
            types = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                     for i in range(n)]
        if (not isinstance(types, (list, tuple)) or len(types) != n
                or any(t not in LAYER_TYPES for t in types)):
            raise ValueError(f"{owner}: {name('layer_types')} must list {n} of "
                             f"{', '.join(LAYER_TYPES)}, got {types!r}")
        self.layer_types = list(types)
        if "sliding_attention" in self.layer_types:
            self.sliding_window = src.int("sliding_window")
            local = (d.get("rope_parameters") or {}).get("sliding_attention") or {}
            self.rope_local_theta = as_real(local.get("rope_theta",
                                                      d.get("rope_local_base_freq", 10000.0)),
                                            name("rope_local_base_freq"), owner, lo=0.0,
                                            lo_open=True)
        self.tie_word_embeddings = bool(d.get("tie_word_embeddings", True))

    def _smollm3(self, src):
        d, owner, name, n = src.d, src.owner, src.name, self.num_layers
        layers = d.get("no_rope_layers")           # 1: the layer uses RoPE, 0: NoPE
        if layers is None:
            step = src.int("no_rope_layer_interval", 4)
            layers = [int((i + 1) % step != 0) for i in range(n)]
        if (not isinstance(layers, (list, tuple)) or len(layers) != n
                or any(v not in (0, 1) for v in layers)):
            raise ValueError(f"{owner}: {name('no_rope_layers')} must list {n} values of 0 or 1, "
                             f"got {layers!r}")
        self.rope_layers = [bool(v) for v in layers]
        if d.get("use_sliding_window") and d.get("sliding_window"):
            raise ValueError(f"{owner}: {name('use_sliding_window')}=true is not supported")

    def _gpt2(self, src):
        d, owner, name = src.d, src.owner, src.name
        self.hidden_size = E = src.int("n_embd")
        self.num_layers = src.int("n_layer", lo=0)
        self.num_heads = self.num_kv_heads = H = src.int("n_head")
        if E % H:
            raise ValueError(f"{owner}: {name('n_embd')}={E} is not a multiple of "
                             f"{name('n_head')}={H}")
        self.head_dim = E // H
        self.intermediate_size = src.int("n_inner", 4 * E)
        self.norm, self.norm_eps = "layer", src.real("layer_norm_epsilon", 1e-5)
        self.activation = activation_name(d.get("activation_function", "gelu_new"), owner)
        self.qkv_bias = self.out_bias = self.mlp_bias = True
        if not d.get("scale_attn_weights", True) or d.get("scale_attn_by_inverse_layer_idx"):
            raise ValueError(f"{owner}: only scale_attn_weights=true and "
                             "scale_attn_by_inverse_layer_idx=false are supported")
        self.rope_theta = self.rope_scaling = None
        self.max_positions = src.int("n_positions", 1024)
        self.tie_word_embeddings = True                # GPT2LMHeadModel's lm_head is wte

    @classmethod
    def from_json(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls.from_dict(json.load(f))


class _Source:
    """A config dict and how its errors name things: owner (the file) and
    name(field) (the source's own key for the field)."""

    def __init__(self, d, owner, names):
        self.d, self.owner, self._names = d, owner, names

    def name(self, field):
        return self._names.get(field, field)

    def given(self, field):
        return self.d.get(field) is not None

    def int(self, field, default=None, lo=1):
        """d[field] (default when absent or null) as an int >= lo."""
        v = self.d.get(field)
        return as_int(default if v is None else v, self.name(field), self.owner, lo=lo)

    def real(self, field, default):
        """d[field] (default when absent) as a finite float >= 0."""
        return as_real(self.d.get(field, default), self.name(field), self.owner, lo=0.0)


def _rope_overflows(D, theta, scaling):
    """Whether a RoPE frequency (rope_frequencies) would overflow, from the
    extremes alone (no (D/2,) array: D may not be held against a file's
    tensors yet): theta^(-2i/D) lies between 1 and theta^(-(D-2)/D), and
    each scaling divides it by a factor between its extremes (llama3: by
    `factor` or 1, or a blend of the two)."""
    top = max(0.0, -(D - 2) / D * math.log(theta))        # log of the largest theta^(-2i/D)
    if scaling is not None:
        kind, factor = scaling["rope_type"], scaling.get("factor")
        least = (min(scaling["factors"]) if kind == "freq_factors" else
                 float(factor) if kind == "linear" else min(float(factor), 1.0))
        top -= math.log(least)
    return top >= math.log(np.finfo(np.float64).max)


def activation_name(name, owner):
    if name not in ACTIVATIONS:
        raise ValueError(f"{owner}: activation {name!r} is not supported; expected one of "
                         f"{sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


def id_list(v, name="eos_token_id", owner="generate"):
    """An id, a list of ids or None -> a list of ints (TypeError naming
    `name` for anything else; the defaults: generate's argument)."""
    if v is None:
        return []
    return [as_int(i, name, owner, lo=None) for i in (v if isinstance(v, (list, tuple)) else [v])]


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
