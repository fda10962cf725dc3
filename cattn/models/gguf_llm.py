"""cattn.models.gguf_llm — a decoder-only LLM's config and weights from a
GGUF file (cattn.models.gguf), in the terms CausalLM loads a Hugging Face
folder in: a config.json-shaped dict and a checkpoint under Hugging Face's
tensor names.

What this file is: the map from GGUF metadata keys and llama.cpp's tensor
names (token_embd, blk.N.attn_q, ...) to config.json fields and Hugging
Face names, and the one layout difference: llama.cpp's converter stores a
`llama` model's q and k rows permuted for ggml's interleaved rotary pairs,
undone here (`qwen2` files use the half-split rotation Hugging Face uses,
as stored). What it is not: the GGUF parser, the model, or a tokenizer
(the file's own tokenizer is not read yet: text needs token ids).

Architectures: llama, qwen2, qwen3 (q/k head norms), gpt2 (learned
positions, LayerNorm, fused qkv; its Conv1D weights stored transposed).
Legend: E hidden size, H query heads, Hk key/value heads, D head dim.
"""

import warnings
from collections.abc import Sequence

import numpy as np

from ..ops.packed import PackedWeight, pack_weight
from ..ops.stacked import stack_weights
from .gguf_types import GGML_TYPES, Parts
from .heap import trim_heap
from .llm_config import LLMConfig

__all__ = ["gguf_config", "gguf_llm_config", "GGUFCheckpoint", "GGUF_ARCHITECTURES"]

# general.architecture -> the Hugging Face architecture CausalLM builds
GGUF_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                      "qwen3": "Qwen3ForCausalLM", "gemma3": "Gemma3ForCausalLM",
                      "smollm3": "SmolLM3ForCausalLM", "granite": "GraniteForCausalLM",
                      "gpt2": "GPT2LMHeadModel"}
# the architectures whose q and k rows llama.cpp's converter permutes (its
# LlamaModel and the models built on it)
_PERMUTED = ("llama", "smollm3", "granite")
# Granite's multipliers: config.json's name <- the GGUF key (1 when absent)
_GRANITE = (("embedding_multiplier", "granite.embedding_scale"),
            ("residual_multiplier", "granite.residual_scale"),
            ("attention_multiplier", "granite.attention.scale"),
            ("logits_scaling", "granite.logit_scale"))

# GPT-2 (Hugging Face GPT2LMHeadModel names, per layer "transformer.h.{i}." +
# key) -> llama.cpp's; its converter stores the Conv1D weights transposed,
# (out, in) as nn.Linear, where the Hugging Face file holds (in, out)
_GPT2_LAYER = {"ln_1.weight": "attn_norm.weight", "ln_1.bias": "attn_norm.bias",
               "attn.c_attn.weight": "attn_qkv.weight", "attn.c_attn.bias": "attn_qkv.bias",
               "attn.c_proj.weight": "attn_output.weight", "attn.c_proj.bias": "attn_output.bias",
               "ln_2.weight": "ffn_norm.weight", "ln_2.bias": "ffn_norm.bias",
               "mlp.c_fc.weight": "ffn_up.weight", "mlp.c_fc.bias": "ffn_up.bias",
               "mlp.c_proj.weight": "ffn_down.weight", "mlp.c_proj.bias": "ffn_down.bias"}
_GPT2_GLOBAL = {"transformer.wte.weight": "token_embd.weight",
                "transformer.wpe.weight": "position_embd.weight",
                "transformer.ln_f.weight": "output_norm.weight",
                "transformer.ln_f.bias": "output_norm.bias"}

# Hugging Face name (per layer: "model.layers.{i}." + key) -> llama.cpp's
_LAYER = {"input_layernorm.weight": "attn_norm.weight",
          "post_attention_layernorm.weight": "ffn_norm.weight",
          "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
          "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
          "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
          "self_attn.o_proj.weight": "attn_output.weight",
          "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
          "mlp.down_proj.weight": "ffn_down.weight",
          "self_attn.q_norm.weight": "attn_q_norm.weight",
          "self_attn.k_norm.weight": "attn_k_norm.weight"}
# Gemma 3's norms: before and after attention, before and after the MLP
_GEMMA3_LAYER = dict(_LAYER, **{"post_attention_layernorm.weight": "post_attention_norm.weight",
                                "pre_feedforward_layernorm.weight": "ffn_norm.weight",
                                "post_feedforward_layernorm.weight": "post_ffw_norm.weight"})
_GLOBAL = {"model.embed_tokens.weight": "token_embd.weight",
           "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


# LLMConfig.from_dict's fields (config.json's names) <- the GGUF metadata key
# each comes from ("{a}": general.architecture), its default (KeyError:
# required; None: absent stays absent, from_dict's default) and kind
_TOKEN_IDS = (("bos_token_id", "tokenizer.ggml.bos_token_id", None, int),
              ("eos_token_id", "tokenizer.ggml.eos_token_id", None, int),
              ("pad_token_id", "tokenizer.ggml.padding_token_id", None, int))
_CONFIG = {
    "llama": (("hidden_size", "{a}.embedding_length", KeyError, int),
              ("num_hidden_layers", "{a}.block_count", KeyError, int),
              ("num_attention_heads", "{a}.attention.head_count", KeyError, int),
              ("num_key_value_heads", "{a}.attention.head_count_kv", None, int),
              ("intermediate_size", "{a}.feed_forward_length", KeyError, int),
              ("rms_norm_eps", "{a}.attention.layer_norm_rms_epsilon", 1e-5, float),
              ("rope_theta", "{a}.rope.freq_base", 10000.0, float),
              ("head_dim", "{a}.attention.key_length", None, int),
              ("max_position_embeddings", "{a}.context_length", None, int)) + _TOKEN_IDS,
    "gpt2": (("n_embd", "{a}.embedding_length", KeyError, int),
             ("n_layer", "{a}.block_count", KeyError, int),
             ("n_head", "{a}.attention.head_count", KeyError, int),
             ("n_inner", "{a}.feed_forward_length", KeyError, int),
             ("n_positions", "{a}.context_length", KeyError, int),
             ("layer_norm_epsilon", "{a}.attention.layer_norm_epsilon", 1e-5, float)) + _TOKEN_IDS}


def _meta(f, key, default=KeyError, kind=int):
    """Metadata `key` of kind int, float or bool (ValueError naming the file
    and the key when missing without a default, or of another kind); the
    default when absent."""
    if key not in f.metadata and default is not KeyError:
        return default
    v = f.metadata.get(key, default)
    if v is KeyError:
        raise ValueError(f"GGUF file {f.path}: metadata {key!r} is missing")
    ok = (isinstance(v, bool) if kind is bool else
          isinstance(v, (int, float)) and not isinstance(v, bool) if kind is float else
          isinstance(v, int) and not isinstance(v, bool))
    if not ok:
        raise ValueError(f"GGUF file {f.path}: metadata {key!r} is {v!r}, expected "
                         f"{kind.__name__}")
    return v


def gguf_config(f):
    """GGUFFile f -> a config.json-shaped dict (cattn.models.LLMConfig.from_dict).
    ValueError naming the key for an unsupported architecture, a missing or
    mistyped field, or a rope scaling cattn does not take yet."""
    arch = f.metadata.get("general.architecture")
    if arch not in GGUF_ARCHITECTURES:
        raise ValueError(f"GGUF file {f.path}: general.architecture {arch!r} is not supported "
                         f"(supported: {', '.join(GGUF_ARCHITECTURES)})")
    if "token_embd.weight" not in f.tensors:
        raise ValueError(f"GGUF file {f.path}: no tensor 'token_embd.weight' (a vocabulary-only "
                         "file has no model)")
    scaling = f.metadata.get(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", "linear"):
        raise ValueError(f"GGUF file {f.path}: rope scaling {arch}.rope.scaling.type "
                         f"{scaling!r} is not supported (supported: none, linear, and "
                         "llama3's rope_freqs.weight)")
    d = dict(architectures=[GGUF_ARCHITECTURES[arch]],
             vocab_size=f.tensors["token_embd.weight"][1][0])
    for field, key, default, kind in _CONFIG["gpt2" if arch == "gpt2" else "llama"]:
        v = _meta(f, key.format(a=arch), default, kind)
        if v is not None:
            d[field] = v
    if arch == "gpt2":
        d["activation_function"] = "gelu_new"
        return d
    d.update(tie_word_embeddings="output.weight" not in f.tensors,
             attention_bias="blk.0.attn_q.bias" in f.tensors)
    if scaling == "linear":
        d["rope_scaling"] = {"rope_type": "linear",
                             "factor": _meta(f, f"{arch}.rope.scaling.factor", kind=float)}
    if arch == "gemma3":
        d.update(_gemma3_config(f, d))
    if arch == "smollm3":
        d["no_rope_layer_interval"] = 4                  # llama.cpp's: every 4th layer NoPE
    if arch == "granite":
        for field, key in _GRANITE:
            if key in f.metadata:
                d[field] = _meta(f, key, kind=float)
    if "rope_freqs.weight" in f.tensors:            # llama3: per-frequency factors
        factors = f.dequantize("rope_freqs.weight").reshape(-1)
        if not np.all(np.isfinite(factors) & (factors > 0)):  # their count: from_dict
            raise ValueError(f"GGUF file {f.path}: tensor 'rope_freqs.weight' holds values "
                             "that are not finite and > 0")
        if scaling == "linear":
            raise ValueError(f"GGUF file {f.path}: both rope_freqs.weight and linear rope "
                             "scaling: not supported")
        d["rope_scaling"] = {"rope_type": "freq_factors", "factors": factors.tolist()}
    return d


def _gemma3_config(f, d):
    """A gemma3 file's config.json fields beyond Llama's, as llama.cpp reads
    them: the sliding window (none without {a}.attention.sliding_window),
    every 6th layer global ({a}.attention.sliding_window_pattern: a count or
    a bool per layer), the local layers' RoPE base ({a}.rope.freq_base_swa,
    10000), the attention scale 1/sqrt(key_length) (1/sqrt(E / H) for the
    62-layer 27B), GeGLU, norm weights stored with Gemma's 1 folded in."""
    a, n = "gemma3", d["num_hidden_layers"]
    out = dict(hidden_activation="gelu_pytorch_tanh", norm_weight_offset=0.0)
    softcap = _meta(f, f"{a}.final_logit_softcapping", 0.0, float)
    if softcap:
        out["final_logit_softcapping"] = softcap
    head = d.get("head_dim") or d["hidden_size"] // d["num_attention_heads"]
    out["query_pre_attn_scalar"] = (d["hidden_size"] // d["num_attention_heads"] if n == 62
                                    else head)
    window = _meta(f, f"{a}.attention.sliding_window", 0, int)
    if window <= 0:
        out["layer_types"] = ["full_attention"] * n
        return out
    pattern = f.metadata.get(f"{a}.attention.sliding_window_pattern", 6)
    if isinstance(pattern, list):
        if len(pattern) != n or not all(isinstance(p, bool) for p in pattern):
            raise ValueError(f"GGUF file {f.path}: {a}.attention.sliding_window_pattern must "
                             f"hold {n} bools (one per block), got {pattern!r}")
        out["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    else:
        pattern = _meta(f, f"{a}.attention.sliding_window_pattern", 6, int)
        out["layer_types"] = ["sliding_attention" if pattern == 0 or i % pattern < pattern - 1
                              else "full_attention" for i in range(n)]
    out["sliding_window"] = window
    out["rope_local_base_freq"] = _meta(f, f"{a}.rope.freq_base_swa", 10000.0, float)
    return out


def _config_names(f):
    """LLMConfig.from_dict's field -> the GGUF key or tensor it comes from,
    so that its errors speak the file's words."""
    arch = f.metadata["general.architecture"]
    names = {field: key.format(a=arch)
             for field, key, _, _ in _CONFIG["gpt2" if arch == "gpt2" else "llama"]}
    names.update(architectures="general.architecture",
                 vocab_size="the rows of tensor 'token_embd.weight'",
                 rope_scaling=("rope_freqs.weight" if "rope_freqs.weight" in f.tensors else
                               f"{arch}.rope.scaling.type"),
                 **{"rope_scaling.factor": f"{arch}.rope.scaling.factor"})
    if arch == "gpt2":               # its config.json's names, and the others' for _check_sizes
        names.update({ours: names[theirs] for ours, theirs in (
            ("hidden_size", "n_embd"), ("num_hidden_layers", "n_layer"),
            ("num_attention_heads", "n_head"), ("intermediate_size", "n_inner"))})
    if arch != "gpt2" and names["head_dim"] not in f.metadata:          # absent: E / H
        names["head_dim"] = f"{arch}.embedding_length / {arch}.attention.head_count"
    if arch != "gpt2" and names["num_key_value_heads"] not in f.metadata:  # absent: H
        names["num_key_value_heads"] = f"{arch}.attention.head_count"
    names.update({field: key for field, key in _GRANITE})
    names.update(sliding_window=f"{arch}.attention.sliding_window",
                 sliding_window_pattern=f"{arch}.attention.sliding_window_pattern",
                 layer_types=f"{arch}.attention.sliding_window_pattern",
                 rope_local_base_freq=f"{arch}.rope.freq_base_swa",
                 final_logit_softcapping=f"{arch}.final_logit_softcapping",
                 query_pre_attn_scalar=f"{arch}.attention.key_length")
    return names


def gguf_llm_config(f):
    """GGUFFile f -> its LLMConfig: gguf_config's dict checked by
    LLMConfig.from_dict, and held against the file's tensors, every error
    (ValueError) naming the file and the GGUF key or tensor."""
    d = gguf_config(f)                      # the architecture checked: _config_names reads it
    names = _config_names(f)
    config = LLMConfig.from_dict(d, f"GGUF file {f.path}", names)
    _check_sizes(f, config, names)
    return config


def _check_sizes(f, c, names):
    """Each size the model allocates (E, V, F, H D, Hk D, the layers, GPT-2's
    positions) held against the tensor that has it, before the model is
    built (a flipped byte must not allocate a terabyte); the token ids and
    the vocabulary against token_embd.weight's rows. ValueError naming the
    file, the key and the tensor."""
    who = f"GGUF file {f.path}"

    def rows(t, want, what):
        if t not in f.tensors:
            raise ValueError(f"{who}: missing tensor {t!r}")
        shape = f.tensors[t][1]
        if shape[0] != want:
            raise ValueError(f"{who}: tensor {t!r} has shape {list(shape)}; {what} = {want} "
                             "rows expected")

    E, V = c.hidden_size, c.vocab_size
    shape = f.tensors["token_embd.weight"][1]
    if len(shape) != 2 or shape[1] != E:
        raise ValueError(f"{who}: tensor 'token_embd.weight' has shape {list(shape)}; "
                         f"{names['hidden_size']} = {E} columns expected")
    blocks = {int(n.split(".")[1]) for n in f.tensors
              if n.startswith("blk.") and n.split(".")[1].isdigit()}
    gap = next((i for i in range(c.num_layers) if i not in blocks), None)
    if gap is not None:
        raise ValueError(f"{who}: {names['num_hidden_layers']} is {c.num_layers}, but the file "
                         f"has no tensor of block {gap} (blk.{gap}.*)")
    past = min((i for i in blocks if i >= c.num_layers), default=None)
    if past is not None:                             # llama.cpp: "wrong number of tensors"
        raise ValueError(f"{who}: {names['num_hidden_layers']} is {c.num_layers}, but the file "
                         f"has tensors of block {past} (blk.{past}.*)")
    if c.num_layers:
        rows("blk.0.ffn_up.weight", c.intermediate_size, names["intermediate_size"])
        # (F, H D, Hk D bound here, each layer's shapes are load_params'; E, V: token_embd)
        if c.architecture == "GPT2LMHeadModel":
            rows("blk.0.attn_qkv.weight", 3 * E, f"3 x {names['hidden_size']} {E}")
        else:
            D, head = c.head_dim, f"head dim {c.head_dim} ({names['head_dim']})"
            rows("blk.0.attn_q.weight", c.num_heads * D,
                 f"{names['num_attention_heads']} {c.num_heads} x {head}")
            rows("blk.0.attn_k.weight", c.num_kv_heads * D,
                 f"{names['num_key_value_heads']} {c.num_kv_heads} x {head}")
    if c.max_positions is not None:
        rows("position_embd.weight", c.max_positions, names["n_positions"])
    for field in ("bos_token_id", "eos_token_id", "pad_token_id"):
        i = getattr(c, field)                       # llama.cpp: "bad special token", ignored
        ids = i if isinstance(i, list) else [i]
        bad = [x for x in ids if x is not None and not 0 <= x < V]
        if bad:
            warnings.warn(f"{who}: {names[field]} is {bad[0]}, outside the vocabulary [0, {V}) "
                          "(the rows of tensor 'token_embd.weight'); ignored", stacklevel=3)
            setattr(c, field, [x for x in ids if x not in bad] if isinstance(i, list) else None)
    tokens = f.metadata.strings("tokenizer.ggml.tokens") if "tokenizer.ggml.tokens" in \
        f.metadata else None
    if isinstance(tokens, Sequence) and not isinstance(tokens, str) and len(tokens) != V:
        raise ValueError(f"{who}: tokenizer.ggml.tokens has {len(tokens)} tokens, but tensor "
                         f"'token_embd.weight' has {V} rows (one per token)")


class GGUFCheckpoint:
    """The tensors of a GGUFFile under Hugging Face names, with the
    interface CausalLM's loader reads a safetensors Checkpoint through:
    `name in ckpt`, info(name) -> ("F32", shape), read(name, out) (the
    values ggml's dequantization gives, exactly; a llama file's q and k
    rows put back in Hugging Face's order). Errors speak the file's words:
    owner ("GGUF file <path>"), own_name(name) (llama.cpp's tensor name),
    own_shape(name, shape) (a shape as the file stores it)."""

    def __init__(self, f, config):
        self.file = f
        self.owner = f"GGUF file {f.path}"
        gpt2 = f.metadata.get("general.architecture") == "gpt2"
        self._names = dict(_GPT2_GLOBAL if gpt2 else _GLOBAL)
        self._transposed = set()                   # HF Conv1D names: stored (out, in) here
        for i in range(config.num_layers):
            if gpt2:
                for hf, g in _GPT2_LAYER.items():
                    self._names[f"transformer.h.{i}.{hf}"] = f"blk.{i}.{g}"
                    if hf.endswith("weight") and not hf.startswith("ln"):
                        self._transposed.add(f"transformer.h.{i}.{hf}")
            else:
                layer = _GEMMA3_LAYER if config.post_norms else _LAYER
                for hf, g in layer.items():
                    self._names[f"model.layers.{i}.{hf}"] = f"blk.{i}.{g}"
        permuted = f.metadata.get("general.architecture") in _PERMUTED
        H, Hk = config.num_heads, config.num_kv_heads
        self._heads = {}                                   # hf name -> heads to un-permute
        if permuted:
            for i in range(config.num_layers):
                for n, h in (("q", H), ("k", Hk)):
                    for part in ("weight", "bias"):
                        self._heads[f"model.layers.{i}.self_attn.{n}_proj.{part}"] = h

    def close(self):
        """Close the file (its map goes) and give the C heap's freed pages
        back to the system (trim_heap)."""
        self.file.close()
        trim_heap()

    def stores_as_linear(self, names):
        """Whether the tensors `names` (Hugging Face names) are stored as a
        linear weight, rows = outputs, although Hugging Face's layout is
        transposed (GPT-2's Conv1D weights: llama.cpp's converter writes
        them (out, in)), so packed(names) gives them as they are."""
        return all(n in self._transposed for n in names)

    def own_name(self, name):
        """The file's own (llama.cpp's) name of the tensor Hugging Face calls `name`."""
        return self._names.get(name, name)

    def own_shape(self, name, shape):
        """A shape of tensor `name` in Hugging Face's layout (info's) as the file
        stores it (a GPT-2 Conv1D weight's reversed)."""
        return tuple(reversed(shape)) if name in self._transposed else tuple(shape)

    def __contains__(self, name):
        return self._names.get(name) in self.file.tensors

    def info(self, name):
        shape = self.file.tensors[self._names[name]][1]
        return "F32", tuple(reversed(shape)) if name in self._transposed else shape

    def read(self, name, out):
        # a llama file's q, k rows (h, D/2, 2) as stored -> (h, 2, D/2) as in HF;
        # a GPT-2 Conv1D weight back to Hugging Face's (in, out)
        w = self._unpermute(name, self.file.dequantize(self._names[name]))
        np.copyto(out, w.T if name in self._transposed else w)
        self.file.release(self._names[name])
        return out

    def packed(self, names):
        """The PackedWeight holding the rows of the tensors `names` (Hugging
        Face names, stacked in order: one linear weight, or a fused one like
        q|k|v) exactly: pieces of different types (but F32 beside F16) as a
        "stack" of runs of one type (_stacked); pieces of one type in the
        format GGUFFile.weight gives it ("int4" for Q4_0, Q4_1, Q4_K, with
        Q4_K's two-level scales; "int5g" for Q5_0, Q5_1, Q5_K; "int6g" for
        Q6_K; "int8g" for Q8_0; preferred_bfloat16() for BF16; "float32" for F32 and F16; one
        tensor alone: GGUFFile.weight itself, which builds it a block of rows
        at a time); None when a piece has no exact form (a scale that is not
        finite: the float32 values the loader read hold them). The pieces'
        pages of the file's map are let go after."""
        gnames = [self._names[n] for n in names]
        try:
            return self._packed(names, gnames)
        finally:
            for g in gnames:                      # built: the file's pages of it can go
                self.file.release(g)
            trim_heap()                          # and the builder's freed temporaries

    def _packed(self, names, gnames):
        if len(names) == 1 and names[0] not in self._heads:
            return self.file.weight(gnames[0])     # built a block of rows at a time
        types = [GGML_TYPES[self.file.tensors[g][0]] for g in gnames]
        # one format holds the pieces together: float values (F32 beside F16)
        # in the format their types name, or the parts of one quantized type
        if len({t.name if t.exact.arrays else t.exact.format for t in types}) > 1:
            return self._stacked(names, gnames, [t.name for t in types])
        if types[0].exact.arrays is None:
            rows = [self._unpermute(n, self.file.dequantize(g)) for n, g in zip(names, gnames)]
            return pack_weight(np.concatenate(rows), types[0].exact.format)
        return self._stack(names, gnames, types[0].exact)

    def _stacked(self, names, gnames, kinds):
        """Pieces of different types (kinds: their names): each run of one
        type in its own exact format, the runs one "stack" weight (a Q4_K_M
        file's q|k|v with a Q6_K v: q|k in int4 with Q4_K's scales, v in
        int6g, the file's bytes; one format for all would widen q and k to
        8.5 bits)."""
        cuts = [0] + [i for i in range(1, len(kinds)) if kinds[i] != kinds[i - 1]] + [len(kinds)]
        parts = [self._packed(names[a:b], gnames[a:b]) for a, b in zip(cuts, cuts[1:])]
        return None if any(p is None for p in parts) else stack_weights(parts)

    def _stack(self, names, gnames, exact):
        """Pieces of one quantized type, rows stacked: their parts
        (GGUFFile.parts, a llama file's q, k rows put back) joined and held
        exactly in the type's format (gguf_types.Exact, as GGUFFile.weight
        holds one tensor); None when a scale is not finite."""
        parts = Parts.concatenate([self.file.parts(g).map(lambda a, n=n: self._unpermute(n, a))
                                   for n, g in zip(names, gnames)])
        return PackedWeight.from_arrays(exact.arrays(parts)) if parts.finite() else None

    def _unpermute(self, name, a):
        """a's rows put back in Hugging Face's order (a llama file's q, k)."""
        h = self._heads.get(name)
        if h is None:
            return a
        n = a.shape[0]
        return a.reshape(h, n // h // 2, 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)
