"""cattn.models.causal_lm — decoder-only LLMs from Hugging Face checkpoint
folders (Llama, Qwen2, GPT-2 families), built from cattn.nn layers, with
KV-cache generation. Never imports torch, transformers or safetensors.

What this file is: the config reader, the key maps from Hugging Face's
parameter names to cattn.nn's, the model (embeddings -> nn.DecoderBlock
stack -> final norm -> lm_head) and `generate` (greedy / sampling, batched
with left padding, streaming). What it is not: a layer implementation
(RMSNorm, GatedMLP, CausalSelfAttention, DecoderBlock are cattn.nn's), a
checkpoint parser (cattn.models.safetensors) or a tokenizer
(cattn.models.tokenizer, optional).

Legend: B batch, L new positions of a call, P prompt length (padded),
S keys (cached + new), E hidden size, H query heads, Hk key/value heads,
D head dim, F intermediate size, V vocabulary.

Per layer (pre-norm; Llama / Qwen2: RMSNorm, RoPE, SwiGLU; GPT-2:
LayerNorm, learned positions added to the embeddings, tanh GELU):
    x = x + o_proj(attention(rope(q), rope(k), v))   q, k, v = one GEMM of norm1(x)
    x = x + down(silu(gate(h)) * up(h)), h = norm2(x)  gate, up = one GEMM

Generation: prompts are left-padded to P; positions count real tokens only
(position_ids = cumsum(mask) - 1, as transformers' generate); the prompt
runs once through every layer, filling a preallocated KVCache per layer
(P + max_new_tokens positions), and only its last position goes through
the lm_head; then each new token is one decode step: one query row per
sequence per layer against the cache, each weight read once per token.
"""
import json
import math
import os
import time

import numpy as np

from .. import nn
from ..nn.program import decoder_program
from .._validate import as_flag, as_int, as_real, show
from ..ops.attention import KVCache
from ..ops.gemm import linear
from ..ops.packed import pack_weight
from .chat import chat_prompt, chat_reply, folder_chat_template
from .gguf import GGUFFile
from .gguf_llm import GGUFCheckpoint, gguf_config
from .gguf_tokenizer import GGUFTokenizer
from .safetensors import Checkpoint, CheckpointError
from ._weights import check_weights, pack
from .tokenizer import StreamDecoder, TextTokenizer

__all__ = ["CausalLM", "LLMConfig", "SUPPORTED_ARCHITECTURES"]

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                           "GPT2LMHeadModel")

# Hugging Face hidden_act names -> cattn activation names
_ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu_new": "gelu_tanh",
                "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu", "relu": "relu"}


# ----------------------------------------------------------------------------
# config


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
        c.eos_token_id = _id_list(d.get("eos_token_id"))
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
        self.activation = _activation(d.get("hidden_act", "silu"), owner)
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
        self.activation = _activation(d.get("activation_function", "gelu_new"), owner)
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


def _activation(name, owner):
    if name not in _ACTIVATIONS:
        raise ValueError(f"{owner}: activation {name!r} is not supported; expected one of "
                         f"{sorted(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]


def _id_list(v):
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


# ----------------------------------------------------------------------------
# the key maps: (our parameter, [(checkpoint tensor, rows of ours it fills)], transposed)


def _llama_keys(c, ckpt):
    H, Hk, D, F = c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size
    keys = [("embed.weight", [("model.embed_tokens.weight", None)], False),
            ("norm.weight", [("model.norm.weight", None)], False)]
    if not c.tie_word_embeddings:
        keys.append(("lm_head.weight", [("lm_head.weight", None)], False))
    for i in range(c.num_layers):
        hf, ours = f"model.layers.{i}.", f"layers.{i}."
        parts = ["weight"] + (["bias"] if c.qkv_bias else [])
        for part in parts:
            keys.append((ours + f"self_attn.qkv_proj.{part}",
                         [(hf + f"self_attn.{n}_proj.{part}", rows)
                          for n, rows in (("q", H * D), ("k", Hk * D), ("v", Hk * D))], False))
        for part in ["weight"] + (["bias"] if c.out_bias else []):
            keys.append((ours + f"self_attn.o_proj.{part}",
                         [(hf + f"self_attn.o_proj.{part}", None)], False))
        for part in ["weight"] + (["bias"] if c.mlp_bias else []):
            keys.append((ours + f"mlp.gate_up_proj.{part}",
                         [(hf + f"mlp.gate_proj.{part}", F), (hf + f"mlp.up_proj.{part}", F)],
                         False))
            keys.append((ours + f"mlp.down_proj.{part}", [(hf + f"mlp.down_proj.{part}", None)],
                         False))
        if c.qk_norm:
            for n in ("q_norm", "k_norm"):
                keys.append((ours + f"self_attn.{n}.weight", [(hf + f"self_attn.{n}.weight", None)],
                             False))
        keys.append((ours + "norm1.weight", [(hf + "input_layernorm.weight", None)], False))
        keys.append((ours + "norm2.weight", [(hf + "post_attention_layernorm.weight", None)],
                     False))
    return keys


def _gpt2_keys(c, ckpt):
    # two layouts in the wild: GPT2LMHeadModel's ("transformer.h.0...") and the
    # original Hub files of GPT2Model ("h.0...", with attn.bias mask buffers)
    pre = "transformer." if "transformer.wte.weight" in ckpt else ""
    keys = [("embed.weight", [(pre + "wte.weight", None)], False),
            ("pos_embed.weight", [(pre + "wpe.weight", None)], False)]
    for p in ("weight", "bias"):
        keys.append((f"norm.{p}", [(pre + f"ln_f.{p}", None)], False))
    for i in range(c.num_layers):
        hf, ours = f"{pre}h.{i}.", f"layers.{i}."
        for theirs, mine in (("ln_1", "norm1"), ("ln_2", "norm2"),
                             ("attn.c_attn", "self_attn.qkv_proj"),
                             ("attn.c_proj", "self_attn.o_proj"),
                             ("mlp.c_fc", "mlp.fc1"), ("mlp.c_proj", "mlp.fc2")):
            conv1d = not theirs.startswith("ln")    # Conv1D weights are stored (in, out)
            keys.append((ours + mine + ".weight", [(hf + theirs + ".weight", None)], conv1d))
            keys.append((ours + mine + ".bias", [(hf + theirs + ".bias", None)], False))
    return keys


def _param_owner(model, dotted):
    """(module, name) holding the parameter `dotted` ("layers.3.mlp.down_proj.weight")."""
    *path, leaf = dotted.split(".")
    owner = model
    for part in path:
        owner = owner[int(part)] if part.isdigit() else getattr(owner, part)
    return owner, leaf


def _load(model, ckpt, keys):
    """Read every checkpoint tensor of the key map straight into the model's
    parameters (fused ones piece by piece, Conv1D weights through a
    transposed view): one tensor in flight at a time (the parameters are
    looked up by name: named_parameters() would unpack packed ones)."""
    for ours, pieces, transposed in keys:
        owner, leaf = _param_owner(model, ours)
        dst, r = getattr(owner, leaf), 0
        for name, rows in pieces:
            if name not in ckpt:
                raise CheckpointError(f"{model.config.architecture} checkpoint: missing tensor "
                                      f"{name!r} (for {ours})")
            n = dst.shape[0] - r if rows is None else rows
            view = dst[r:r + n]
            want = view.T.shape if transposed else view.shape
            dtype, shape = ckpt.info(name)
            if shape != want:
                raise CheckpointError(f"{model.config.architecture} checkpoint: tensor {name!r} "
                                      f"has shape {list(shape)}, expected {list(want)} from "
                                      "config.json")
            if dtype not in ("F32", "F16", "BF16", "F64"):
                raise CheckpointError(f"checkpoint tensor {name!r} has dtype {dtype}; expected "
                                      "a float type")
            ckpt.read(name, out=view.T if transposed else view)
            r += n


# ----------------------------------------------------------------------------
# the model


class CausalLM(nn.Module):
    """A decoder-only language model: token ids -> next-token logits, and
    generation. Build with `CausalLM.from_pretrained(folder)`.

        lm = CausalLM.from_pretrained("path/to/Qwen2.5-0.5B")
        logits = lm(ids)                            # (B, L, V) float32
        lm.generate("Once upon a time", max_new_tokens=32)          # -> str
        for piece in lm.generate("Hi", stream=True): print(piece, end="")

    Modules (cattn.nn, names as in state_dict()): embed (nn.Embedding),
    pos_embed (GPT-2), layers (nn.DecoderBlock each), norm, lm_head
    (nn.Linear; absent with tied embeddings: the output projection is
    embed.weight itself in float32, or a copy of it packed in the model's
    weight format, see pack_output; not in state_dict())."""

    def __init__(self, config):
        super().__init__()
        c = self.config = config
        E, dtype = c.hidden_size, np.float32
        self.dtype = dtype
        self.embed = nn.Embedding(c.vocab_size, E, dtype=dtype)
        self.pos_embed = (nn.Embedding(c.max_positions, E, dtype=dtype)
                          if c.max_positions is not None else None)
        rope = None
        if c.rope_theta is not None:
            rope = nn.RotaryEmbedding(c.head_dim, c.rope_theta, inv_freq=rope_frequencies(
                c.head_dim, c.rope_theta, c.rope_scaling))
        self.layers = nn.ModuleList([self._block(rope) for _ in range(c.num_layers)])
        self.norm = self._norm()
        self.lm_head = None if c.tie_word_embeddings else nn.Linear(E, c.vocab_size, False)
        self.output_format = "float32"
        self._output = self._output_source = None   # tied: packed copy, the array it copies
        self.tokenizer = self.tokenizer_path = None
        self.chat_template, self.chat_special = None, {}      # chat.py renders the template
        self.generation_config = {}
        self.stats = {}

    def _norm(self):
        c = self.config
        if c.norm == "rms":
            return nn.RMSNorm(c.hidden_size, c.norm_eps)
        return nn.LayerNorm(c.hidden_size, c.norm_eps)

    def _block(self, rope):
        c = self.config
        attn = nn.CausalSelfAttention(c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
                                      qkv_bias=c.qkv_bias, out_bias=c.out_bias, rotary=rope,
                                      qk_norm_eps=c.norm_eps if c.qk_norm else None)
        mlp_cls = nn.GatedMLP if c.norm == "rms" else nn.MLP
        mlp = mlp_cls(c.hidden_size, c.intermediate_size, c.activation, c.mlp_bias)
        return nn.DecoderBlock(self._norm(), attn, self._norm(), mlp)

    # -- loading

    @classmethod
    def from_pretrained(cls, path, weights=None):
        """Load a GGUF file (llama.cpp's format: `llama` and `qwen2`
        architectures, every tensor type cattn.models.GGUFFile reads, its
        values exactly as ggml dequantizes them; no tokenizer yet: token ids
        in and out) or a Hugging Face checkpoint folder: config.json, model.safetensors
        (or its shards and model.safetensors.index.json; float32, float16 or
        bfloat16, read per tensor into float32), generation_config.json and
        tokenizer.json when present. weights: the format every nn.Linear's
        weight is packed in once, "float32" (the checkpoint's values, read
        into float32), "bfloat16", "int8" or "int4" (cattn.nn.quantize),
        the output projection included: a tied one is packed as a copy of the
        embedding matrix (pack_output), which the lookup keeps in float32.
        None (the default): "float32" for a folder; for a GGUF file each
        linear weight (and a tied output projection) in the narrowest format
        holding the file's values exactly: Q4_0 / Q4_1 / Q4_K tensors in
        "int4", BF16 in "bfloat16", the others in "float32" (a fused weight,
        q|k|v or gate|up, takes the narrowest format holding all its pieces)."""
        keep_file = weights is None and os.path.isfile(os.fspath(path))
        weights = check_weights("float32" if weights is None else weights,
                                "CausalLM.from_pretrained")
        path = os.fspath(path)
        if os.path.isfile(path):                   # a GGUF file (llama.cpp's format)
            gguf = GGUFFile(path)
            config = LLMConfig.from_dict(gguf_config(gguf))
            ckpt = GGUFCheckpoint(gguf, config)
        elif os.path.isdir(path):
            config = LLMConfig.from_json(os.path.join(path, "config.json"))
            ckpt = Checkpoint(path)
        else:
            raise FileNotFoundError(f"CausalLM.from_pretrained: {path} is neither a checkpoint "
                                    "folder nor a GGUF file")
        model = nn.skip_init(cls, config)         # weights allocated, not drawn: read next
        keys = (_gpt2_keys if config.architecture == "GPT2LMHeadModel" else _llama_keys)(
            config, ckpt)
        if keep_file:                              # the file's formats: never read into float32
            keys = model._pack_exact(ckpt, keys)
        _load(model, ckpt, keys)
        if os.path.isfile(path):
            model.tokenizer_meta = {k: v for k, v in gguf.metadata.items()
                                    if k.startswith("tokenizer.ggml.")} or None
            model.tokenizer_path = path
            model.chat_template = gguf.metadata.get("tokenizer.chat_template")
            tokens = gguf.metadata.get("tokenizer.ggml.tokens") or []
            for name in ("bos", "eos"):
                i = gguf.metadata.get(f"tokenizer.ggml.{name}_token_id")
                if isinstance(i, int) and 0 <= i < len(tokens):
                    model.chat_special[f"{name}_token"] = tokens[i]
            gguf.close()                           # every tensor is read: the map goes
        # every nn.Linear packed once (float32: the same bits): a decode step's
        # one-row GEMMs stream the packed panels; a tied output projection too
        pack(model, weights)
        if not keep_file:
            model.pack_output(weights)
        return model._with_generation_files(path)

    def _pack_exact(self, ckpt, keys):
        """Each linear weight and the embedding table as ckpt.packed gives
        them: the file's values exactly in the narrowest format, set in place
        of the (untouched, so never resident) float32 parameters; a tied
        output projection is the packed table itself. Returns the keys still
        to read."""
        rest = []
        for ours, pieces, transposed in keys:
            owner, leaf = _param_owner(self, ours)
            pw = None
            if (not transposed and (ours.endswith("_proj.weight") or ours == "lm_head.weight")
                    and all(name in ckpt for name, _ in pieces)):
                pw = ckpt.packed([name for name, _ in pieces])
            if pw is None or pw.shape != getattr(owner, leaf).shape:
                rest.append((ours, pieces, transposed))     # read (and checked) by _load
                continue
            setattr(owner, leaf, pw)
        self.output_format = "float32"
        self._output = self._output_source = None
        if "model.embed_tokens.weight" in ckpt:
            pw = ckpt.packed(["model.embed_tokens.weight"])
            if pw is not None and pw.shape == self.embed.weight.shape:
                self.embed.weight = pw                 # the lookup unpacks its rows
                if self.lm_head is None:
                    self.output_format = str(pw.format)      # and it is the output projection
                rest = [k for k in rest if k[0] != "embed.weight"]
        return rest

    def _with_generation_files(self, path):
        """generation_config.json and tokenizer.json of a checkpoint folder."""
        model = self
        if os.path.isdir(path):
            gen = os.path.join(path, "generation_config.json")
            if os.path.isfile(gen):
                with open(gen, encoding="utf-8") as f:
                    model.generation_config = json.load(f)
            tok = os.path.join(path, "tokenizer.json")
            model.tokenizer_path = tok if os.path.isfile(tok) else None
            model.chat_template, model.chat_special = folder_chat_template(path)
        return model

    def pack_output(self, weights):
        """Pack a tied output projection in format `weights` ("float32",
        "bfloat16" or "int8"; an untied lm_head is an nn.Linear, packed by
        nn.quantize with the layers) and return the model. "float32": the
        embedding matrix is read in place (no copy); "bfloat16" / "int8":
        a packed copy of it (V*E*2 bytes, or V*E + 4V), so every weight a
        token reads is in that format while the lookup keeps its float32
        rows. Assigning a new embed.weight (load_state_dict) packs the copy
        again at the next call; after writing into embed.weight in place,
        call pack_output again."""
        weights = check_weights(weights, "CausalLM.pack_output", self.dtype)
        self.output_format = weights
        self._output = self._output_source = None
        if self.lm_head is None:
            self.lm_head_weight                            # packed now, not at the first token
        return self

    @property
    def lm_head_weight(self):
        """(V, E) the output projection: lm_head.weight; when tied, the
        embedding matrix itself (output_format "float32") or its packed copy
        (pack_output)."""
        if self.lm_head is not None:
            return self.lm_head.weight
        w = self.embed.weight
        if self.output_format == "float32" or getattr(w, "format", None) == self.output_format:
            return w                                   # the array, or a packed table itself
        if self._output_source is not w:               # first use, or a new embedding
            self._output = pack_weight(w.unpack() if hasattr(w, "unpack") else w,
                                       self.output_format)
            self._output_source = w
        return self._output

    def text_tokenizer(self):
        """The model's tokenizer (a GGUF file's own, or tokenizer.json's):
        encode(text, add_special=True), decode(ids). FileNotFoundError when
        the checkpoint has none; ImportError without the tokenizers package."""
        return self._tokenizer()

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=False,
                            **variables):
        """The prompt of `messages` ([{"role": "user", "content": "..."}, ...])
        through the model's chat template (the GGUF file's
        tokenizer.chat_template, or tokenizer_config.json's), rendered with
        jinja2 in a sandbox as transformers' apply_chat_template renders it:
        a str, or its token ids with tokenize=True. variables: extra template
        variables (tools=..., ...). Needs jinja2 (pip install 'cattn[chat]')."""
        return chat_prompt(self, messages, add_generation_prompt, tokenize, variables)

    def chat(self, messages, max_new_tokens=256, stream=False, **generate_kwargs):
        """The assistant's reply to `messages`: generation from
        apply_chat_template(messages, add_generation_prompt=True), stopping at
        the template's end-of-turn tokens (<|im_end|>, <|eot_id|>, EOS, ...).
        A str, or with stream=True a generator of its text pieces.
        generate_kwargs: do_sample, temperature, top_k, top_p, seed,
        eos_token_id (as generate takes them)."""
        return chat_reply(self, messages, max_new_tokens, stream, generate_kwargs)

    def _tokenizer(self):
        meta = getattr(self, "tokenizer_meta", None)
        if self.tokenizer is None and meta:            # a GGUF file's own tokenizer
            self.tokenizer = GGUFTokenizer(meta, self.tokenizer_path)
        if self.tokenizer is None:
            path = getattr(self, "tokenizer_path", None)
            if path is None:
                raise FileNotFoundError("this checkpoint has no tokenizer (tokenizer.json, or a "
                                        "GGUF file's tokenizer.ggml metadata): pass token ids "
                                        "instead of text")
            self.tokenizer = TextTokenizer(path)
        return self.tokenizer

    # -- forward

    def _check_ids(self, input_ids, attention_mask):
        """input_ids (B, L) ints in [0, V) -> (int64 ids, real (B, L) bool)."""
        ids = np.asarray(input_ids)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"CausalLM: input_ids must hold integer token ids, got dtype "
                            f"{ids.dtype}")
        if ids.ndim != 2 or 0 in ids.shape:
            raise ValueError(f"CausalLM: input_ids must be a non-empty (B, L) array, got shape "
                             f"{ids.shape}")
        V = self.config.vocab_size
        if ids.min() < 0 or ids.max() >= V:
            raise ValueError(f"CausalLM: token ids must lie in [0, {V}), got "
                             f"[{ids.min()}, {ids.max()}]")
        if attention_mask is None:
            real = np.ones(ids.shape, bool)
        else:
            am = np.asarray(attention_mask)
            if am.shape != ids.shape:
                raise ValueError(f"CausalLM: attention_mask has shape {am.shape}, expected "
                                 f"{ids.shape} (input_ids')")
            if am.dtype.kind not in "biu":
                raise TypeError(f"CausalLM: attention_mask must be bool or 0/1 integers, got "
                                f"dtype {am.dtype}")
            real = am.astype(bool)
        return ids.astype(np.int64, copy=False), real

    def _embed(self, ids, positions):
        """ids (B, L), positions (B, L) or None (0..L-1) -> x (B, L, E)."""
        x = self.embed(ids)                                            # a new array
        if self.pos_embed is not None:
            L = ids.shape[1]
            limit = self.pos_embed.num_embeddings
            top = L if positions is None else int(positions.max()) + 1
            if top > limit:
                raise ValueError(f"CausalLM: position {top - 1} exceeds the model's {limit} "
                                 "learned positions (n_positions)")
            x += (self.pos_embed.weight[:L] if positions is None
                  else self.pos_embed.weight[positions])
        return x

    def _layers(self, x, positions, mask, caches=None):
        """x (B, L, E) through every layer. On KV caches (prefill and decode)
        the stack runs as one program (cattn.nn.program: one C call, the
        layers' bits); without caches, and for a stack the program does not
        take, the layers run one by one."""
        if caches is not None:
            prog = decoder_program(self.layers)
            if prog is not None:
                return prog.run(x, caches, positions, mask)
        for i, layer in enumerate(self.layers):
            x = layer(x, positions, mask, None if caches is None else caches[i])
        return x

    def forward(self, input_ids, attention_mask=None, *, caches=None):
        """input_ids (B, L) ints; attention_mask (B, L) 1 = token, 0 = padding
        (None: no padding) -> logits (B, L, V) float32. Positions count real
        tokens only (left padding gives the same logits as no padding);
        logits at padding positions are meaningless.

        caches (keyword-only; from new_caches, no padding): input_ids are the
        L positions that follow the cached ones; their keys and values are
        appended and their logits returned (equal to the full forward's
        last L rows)."""
        ids, real = self._check_ids(input_ids, attention_mask)
        positions = None if real.all() else _positions(real)
        if caches is not None:
            self._check_caches(caches, ids.shape)
            if positions is not None:
                raise ValueError("CausalLM: caches= supports unpadded batches only "
                                 "(no attention_mask with padding)")
            if self.pos_embed is not None:         # learned positions follow the cache
                S0 = caches[0].length
                positions = np.broadcast_to(np.arange(S0, S0 + ids.shape[1]), ids.shape)
        x = self._embed(ids, positions)
        x = self._layers(x, positions, nn.causal_mask(real, ids.shape[1]), caches)
        x = self.norm(x, out=x)
        return linear(x, self.lm_head_weight)

    def _check_caches(self, caches, shape):
        """Every cache fits (B, L) new positions, before any is extended."""
        want = self.new_caches(0, 0)
        if (not isinstance(caches, (list, tuple)) or len(caches) != len(want)
                or not all(isinstance(c, KVCache) for c in caches)):
            raise TypeError(f"CausalLM: caches must be the list of {len(want)} cattn.KVCache "
                            f"from new_caches(), got {show(caches)}")
        for i, (c, w) in enumerate(zip(caches, want)):
            b, h, _, d = c.k.shape
            if (b, h, d) != (shape[0],) + w.k.shape[1:2] + w.k.shape[3:] or c.k.dtype != w.k.dtype:
                raise ValueError(f"CausalLM: caches[{i}] has keys of shape {c.k.shape}; "
                                 f"use new_caches({shape[0]}, max_len)")
            if c.length + shape[1] > c.max_len or c.length != caches[0].length:
                raise ValueError(f"CausalLM: caches[{i}] holds {c.length} of {c.max_len} "
                                 f"positions; {shape[1]} more do not fit")

    def new_caches(self, batch, max_len):
        """One empty cattn.KVCache (batch, Hk, max_len, D) per layer."""
        return [layer.self_attn.new_cache(batch, max_len) for layer in self.layers]

    def _last_logits(self, x):
        """Hidden states x (B, L, E) -> the last position's logits (B, V)."""
        h = self.norm(np.ascontiguousarray(x[:, -1]))
        return linear(h, self.lm_head_weight)

    # -- steps for a scheduler (cattn.models.slots: continuous batching)

    def prefill(self, ids, caches):
        """One prompt ids (a non-empty 1-D sequence of token ids) into
        empty batch-1 caches (new_caches(1, n), or KVCache.of over a slot)
        -> its last position's logits (V,) float32; the caches then hold
        its positions. The bits generate() computes for this prompt alone."""
        ids = np.asarray(ids)
        if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu":
            raise ValueError(f"CausalLM.prefill: ids must be a non-empty 1-D sequence of "
                             f"token ids, got {show(ids)}")
        ids, real = self._check_ids(ids.astype(np.int64)[None], None)
        self._check_caches(caches, ids.shape)
        if caches[0].length != 0:
            raise ValueError(f"CausalLM.prefill: the caches hold {caches[0].length} positions; "
                             "prefill takes empty ones")
        x = self._embed(ids, None)
        x = self._layers(x, None, nn.causal_mask(real, ids.shape[1]), caches)
        return self._last_logits(x)[0]

    def decode_ragged(self, tokens, kcache, vcache, lengths):
        """One decode step of B sequences of their own lengths: tokens (B,)
        ids; kcache, vcache: per layer the (B, Hk, max_len, D) key and value
        arrays of new_caches(B, max_len) (c.k, c.v); sequence b holds
        lengths[b] positions in row b and gets its token's keys and values
        there -> logits (B, V) float32. Each row gets the bits generate()
        gives its sequence alone, whatever else is in the step (one program
        call for the batch where the program takes it, else one per row)."""
        tok = np.asarray(tokens, np.int64)
        lens = np.asarray(lengths, np.int64)
        B = tok.shape[0] if tok.ndim == 1 else -1
        if B < 1 or lens.shape != (B,) or len(kcache) != len(self.layers) \
                or len(vcache) != len(self.layers):
            raise ValueError(f"CausalLM.decode_ragged: tokens {show(tokens)} and lengths "
                             f"{show(lengths)} must be (B,) and the caches one per layer")
        self._check_ids(tok[:, None], None)
        max_len = kcache[0].shape[2]
        if lens.min() < 1 or lens.max() >= max_len:
            raise ValueError(f"CausalLM.decode_ragged: lengths {lens.tolist()} must be in "
                             f"[1, {max_len}) (a prefilled sequence with room for one more)")
        x = self._embed(tok[:, None], lens[:, None])
        prog = decoder_program(self.layers)
        if prog is None or prog.run_ragged(x, kcache, vcache, lens) is None:
            for b in range(B):                      # each row alone on its slot's caches
                caches = [KVCache.of(k[b:b + 1], v[b:b + 1], int(lens[b]))
                          for k, v in zip(kcache, vcache)]
                x[b:b + 1] = self._layers(x[b:b + 1], None, None, caches)
        return self._last_logits(x)

    # -- generation

    def generate(self, inputs, max_new_tokens=32, do_sample=False, temperature=1.0, top_k=None,
                 top_p=None, seed=None, eos_token_id=None, stream=False, attention_mask=None):
        """Generate up to max_new_tokens tokens after each prompt.

        inputs: a str (needs tokenizer.json) or a list of str; a sequence of
        token ids (list or 1-D array); a list of such sequences (any
        lengths: left-padded) or a 2-D array (with attention_mask, 1 = token,
        for a batch padded by the caller, on the left).
        Greedy by default; do_sample=True draws from softmax(logits /
        temperature) restricted to the top_k tokens and to the smallest set
        of tokens whose probability reaches top_p, reproducibly for a seed.
        A sequence stops after an EOS token (eos_token_id: an id or list, []
        for none; default generation_config.json's, else config.json's);
        generation ends when all have stopped.

        Returns: for one prompt the new token ids (1-D int64 array, the EOS
        included) or the new text; for a batch a list of them. stream=True:
        a generator yielding each new token (an int, or a text piece for text
        input) as it comes; for a batch, a list per step (None for a
        sequence that has stopped). model.stats holds the last run's
        prefill / decode tokens and seconds."""
        prompts, text, single = self._prompts(inputs, attention_mask)
        n = as_int(max_new_tokens, "max_new_tokens", "CausalLM.generate", lo=1)
        choose = _chooser(do_sample, temperature, top_k, top_p, seed, self.config.vocab_size)
        eos = self._eos(eos_token_id)
        steps = self._steps(prompts, n, choose, eos)
        if stream:
            return self._stream(steps, len(prompts), text, single)
        out = [[] for _ in prompts]
        for tokens in steps:
            for seq, t in zip(out, tokens):
                if t is not None:
                    seq.append(t)
        if text:
            tok = self._tokenizer()
            out = [tok.decode(seq) for seq in out]
        else:
            out = [np.asarray(seq, dtype=np.int64) for seq in out]
        return out[0] if single else out

    def _stream(self, steps, B, text, single):
        decoders = [StreamDecoder(self._tokenizer()) for _ in range(B)] if text else None
        for tokens in steps:
            if text:
                tokens = [None if t is None else d.push(t) for d, t in zip(decoders, tokens)]
            yield tokens[0] if single else tokens
        if text:                        # an incomplete character held back at the end
            rest = [d.flush() for d in decoders]
            if any(rest):
                yield rest[0] if single else rest

    def _eos(self, eos_token_id):
        if eos_token_id is None:
            eos_token_id = self.generation_config.get("eos_token_id", self.config.eos_token_id)
        ids = _id_list(eos_token_id)
        V = self.config.vocab_size
        if any(not 0 <= i < V for i in ids):
            raise ValueError(f"CausalLM.generate: eos_token_id {ids} outside [0, {V})")
        return np.asarray(ids, dtype=np.int64)

    def _prompts(self, inputs, attention_mask):
        """-> (list of 1-D int64 prompts, text?, single?)."""
        owner = "CausalLM.generate"
        if isinstance(inputs, str) or (isinstance(inputs, (list, tuple)) and inputs
                                       and all(isinstance(s, str) for s in inputs)):
            single = isinstance(inputs, str)
            tok = self._tokenizer()
            texts = [inputs] if single else inputs
            prompts = [np.asarray(tok.encode(s), np.int64) for s in texts]
            if any(p.size == 0 for p in prompts):
                raise ValueError(f"{owner}: a prompt encodes to no tokens")
            return prompts, True, single
        if isinstance(inputs, np.ndarray):
            arr = inputs
            if arr.ndim == 2 and attention_mask is not None:
                ids, real = self._check_ids(arr, attention_mask)
                return [row[r] for row, r in zip(ids, real)], False, False
            seqs = [arr] if arr.ndim == 1 else list(arr) if arr.ndim == 2 else None
            single = arr.ndim == 1
        elif isinstance(inputs, (list, tuple)) and inputs:
            single = not isinstance(inputs[0], (list, tuple, np.ndarray))
            seqs = [inputs] if single else list(inputs)
        else:
            seqs = None
        if not seqs:
            raise TypeError(f"{owner}: inputs must be text, token ids or a batch of them, got "
                            f"{show(inputs)}")
        prompts = []
        for s in seqs:
            a = np.asarray(s)
            if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
                raise ValueError(f"{owner}: each prompt must be a non-empty 1-D sequence of "
                                 f"integer token ids, got {show(s)}")
            prompts.append(a.astype(np.int64))
        self._check_ids(np.concatenate(prompts)[None], None)          # ids in [0, V)
        return prompts, False, single

    def _steps(self, prompts, max_new, choose, eos):
        """Generator of the new tokens, one list (B,) per step (None for a
        sequence that has stopped). Prefill once, then one decode step per
        token on the per-layer KV caches."""
        B, P = len(prompts), max(p.size for p in prompts)
        ids = np.zeros((B, P), np.int64)
        real = np.zeros((B, P + max_new), bool)                         # keys that are tokens
        for b, p in enumerate(prompts):                                 # left padding
            ids[b, P - p.size:] = p
            real[b, P - p.size:] = True
        real[:, P:] = True
        padded = not real.all()
        pos = _positions(real[:, :P])                                   # (B, P)
        if self.pos_embed is not None and P + max_new > self.pos_embed.num_embeddings:
            raise ValueError(f"CausalLM.generate: {P} prompt + {max_new} new tokens exceed the "
                             f"model's {self.pos_embed.num_embeddings} positions")
        caches = self.new_caches(B, P + max_new)
        done = np.zeros(B, bool)
        t0 = time.perf_counter()
        x = self._embed(ids, pos if padded else None)
        x = self._layers(x, pos if padded else None, nn.causal_mask(real[:, :P], P), caches)
        logits = self._last_logits(x)                                   # (B, V)
        t1 = time.perf_counter()
        self.stats = dict(prefill_tokens=int(real[:, :P].sum()), prefill_s=t1 - t0,
                          decode_tokens=0, decode_s=0.0)
        last = pos[:, -1:]                                              # (B, 1)
        for step in range(max_new):
            tok = choose(logits)                                        # (B,) int64
            out = [None if d else int(t) for d, t in zip(done, tok)]
            done |= np.isin(tok, eos)
            yield out
            if done.all() or step == max_new - 1:
                break
            t = time.perf_counter()
            last = last + 1
            S = P + step + 1
            x = self._embed(tok[:, None], last)
            mask = real[:, None, None, :S] if padded else None          # (B, 1, 1, S)
            x = self._layers(x, last if padded else None, mask, caches)
            logits = self._last_logits(x)
            self.stats["decode_s"] += time.perf_counter() - t
            self.stats["decode_tokens"] += B


def _positions(real):
    """Each token's position: real tokens counted from 0 in each row, 0 at
    padding (transformers' position_ids = cumsum(mask) - 1 under generate)."""
    return np.maximum(np.cumsum(real, axis=1) - 1, 0)


def _chooser(do_sample, temperature, top_k, top_p, seed, V):
    """choose(logits (B, V)) -> token ids (B,): greedy (argmax, the first of
    ties) or a draw from the tempered, top-k / top-p filtered softmax."""
    owner = "CausalLM.generate"
    do_sample = as_flag(do_sample, "do_sample", owner)
    if not do_sample:
        return lambda logits: np.argmax(logits, axis=-1)
    temperature = as_real(temperature, "temperature", owner, lo=0.0, lo_open=True)
    k = None if top_k is None else as_int(top_k, "top_k", owner, lo=1)
    p = None if top_p is None else as_real(top_p, "top_p", owner, lo=0.0, lo_open=True)
    if p is not None and p > 1:
        raise ValueError(f"{owner}: top_p must be in (0, 1], got {p}")
    rng = np.random.default_rng(seed)

    def choose(logits):
        z = logits.astype(np.float64) / temperature                    # (B, V)
        if k is not None and k < V:
            kth = np.partition(z, V - k, axis=-1)[:, V - k:V - k + 1]   # k-th largest
            z = np.where(z >= kth, z, -np.inf)
        z -= z.max(axis=-1, keepdims=True)
        prob = np.exp(z)
        prob /= prob.sum(axis=-1, keepdims=True)
        if p is not None and p < 1:
            order = np.argsort(-prob, axis=-1, kind="stable")
            sorted_p = np.take_along_axis(prob, order, -1)
            keep = np.cumsum(sorted_p, axis=-1) - sorted_p < p          # the first reaching p
            drop = np.zeros_like(keep)
            np.put_along_axis(drop, order, ~keep, -1)
            prob[drop] = 0.0
            prob /= prob.sum(axis=-1, keepdims=True)
        u = rng.random(prob.shape[0])[:, None]
        cdf = np.cumsum(prob, axis=-1)
        return np.minimum((cdf < u * cdf[:, -1:]).sum(axis=-1), V - 1).astype(np.int64)
    return choose
