"""cattn.models.causal_lm — decoder-only LLMs from Hugging Face checkpoint
folders (Llama, Qwen2, Qwen3, Gemma 3, GPT-2 families), built from cattn.nn layers, with
KV-cache generation. Never imports torch, transformers or safetensors.

What this file is: the model (embeddings -> nn.DecoderBlock stack -> final
norm -> lm_head), its loading from a folder or a GGUF file, its forward
steps on KV caches (the whole stack one program call: cattn.nn.program),
and the steps continuous batching calls (prefill, decode_ragged). What it
is not: the config (llm_config.py), the checkpoint key maps (llm_keys.py),
the generation loop (generation.py) and token rule (sampling.py), a layer
implementation (RMSNorm, GatedMLP, CausalSelfAttention, DecoderBlock are
cattn.nn's), a checkpoint parser (safetensors.py, gguf.py) or a tokenizer
(tokenizer.py, gguf_tokenizer.py).

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
import os

import numpy as np

from .. import nn
from ..nn.program import decoder_program
from .._validate import show
from ..ops.attention import KVCache
from ..ops.gemm import linear
from ..ops.packed import pack_weight
from .chat import builtin_chat_template, chat_prompt, chat_reply, folder_chat_template
from .generation import generate, positions as token_positions
from .gguf import GGUFFile
from .gguf_llm import GGUFCheckpoint, gguf_llm_config
from .gguf_tokenizer import GGUFTokenizer
from .llm_config import SUPPORTED_ARCHITECTURES, LLMConfig, rope_frequencies
from .llm_keys import check_tensors, gpt2_keys, llama_keys, load_params, param_owner
from .safetensors import Checkpoint
from ._weights import check_weights, pack
from .tokenizer import TextTokenizer

__all__ = ["CausalLM", "LLMConfig", "SUPPORTED_ARCHITECTURES"]

# the KV caches' dtypes (CausalLM.kv_dtype)
KV_DTYPES = ("float32", "float16")
# prompt positions a prefill step runs at a time (generate, prefill): longer
# prompts go through the caches in steps of this many
PREFILL_CHUNK = 256

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
        rope = local = None
        if c.rope_theta is not None:
            rope = nn.RotaryEmbedding(c.head_dim, c.rope_theta, inv_freq=rope_frequencies(
                c.head_dim, c.rope_theta, c.rope_scaling))
        if c.rope_local_theta is not None:             # sliding layers' own base, unscaled
            local = nn.RotaryEmbedding(c.head_dim, c.rope_local_theta, inv_freq=rope_frequencies(
                c.head_dim, c.rope_local_theta, None))
        self.layers = nn.ModuleList([self._block(i, rope, local) for i in range(c.num_layers)])
        self.norm = self._norm()
        self.lm_head = None if c.tie_word_embeddings else nn.Linear(E, c.vocab_size, False)
        self.output_format = "float32"
        self._output = self._output_source = None   # tied: packed copy, the array it copies
        self.tokenizer = self.tokenizer_path = None
        self.tokenizer_gguf = False      # tokenizer_path is a GGUF file with a tokenizer
        self.chat_template, self.chat_special = None, {}      # chat.py renders the template
        self.generation_config = {}
        self.stats = {}
        self._kv_dtype = np.dtype(np.float32)

    def _norm(self):
        c = self.config
        if c.norm == "rms":
            return nn.RMSNorm(c.hidden_size, c.norm_eps)
        return nn.LayerNorm(c.hidden_size, c.norm_eps)

    def _block(self, i, rope, local):
        c = self.config
        sliding = c.layer_types is not None and c.layer_types[i] == "sliding_attention"
        if c.rope_layers is not None and not c.rope_layers[i]:
            rope = None                                 # SmolLM3's NoPE layers
        elif sliding and local is not None:
            rope = local
        attn = nn.CausalSelfAttention(c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim,
                                      qkv_bias=c.qkv_bias, out_bias=c.out_bias, rotary=rope,
                                      qk_norm_eps=c.norm_eps if c.qk_norm else None,
                                      scale=c.attn_scale,
                                      window=c.sliding_window if sliding else None)
        mlp_cls = nn.GatedMLP if c.norm == "rms" else nn.MLP
        mlp = mlp_cls(c.hidden_size, c.intermediate_size, c.activation, c.mlp_bias)
        post = (self._norm(), self._norm()) if c.post_norms else (None, None)
        return nn.DecoderBlock(self._norm(), attn, self._norm(), mlp, *post,
                               residual_scale=c.residual_scale)

    # -- loading

    @classmethod
    def from_pretrained(cls, path, weights=None, kv_dtype="float32", tokenizer_first=False):
        """Load a GGUF file (llama.cpp's format: `llama`, `qwen2`, `qwen3`,
        `gemma3` and `gpt2` architectures, every tensor type cattn.models.GGUFFile
        reads, its values exactly as ggml dequantizes them; the file's own
        tokenizer for text) or a Hugging Face checkpoint folder: config.json, model.safetensors
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
        "int4", BF16 in "bfloat16dot" where the kernel path runs vdpbf16ps
        (AVX512_BF16; its own rounding: cattn.ops.formats) else "bfloat16"
        (weights="bfloat16" keeps the float32 linear's bits), the others in "float32" (a fused weight,
        q|k|v or gate|up, takes the narrowest format holding all its pieces).
        kv_dtype: the KV caches' dtype, "float32" or "float16" (kv_dtype).
        tokenizer_first: False (the default) builds the tokenizer when text
        is first given (token ids alone never pay for it); True builds it
        before the weights are read, so its build's transient memory (~45
        MiB for the 151936-token qwen2 vocabulary) is gone before the
        weights are resident: for a program that takes text anyway (cattn generate,
        chat and serve pass True), a lower peak."""
        if not isinstance(tokenizer_first, bool):
            raise TypeError(f"CausalLM.from_pretrained: tokenizer_first must be True or False, "
                            f"got {show(tokenizer_first)}")
        if not isinstance(kv_dtype, str) or kv_dtype not in KV_DTYPES:
            raise ValueError(f"CausalLM.from_pretrained: kv_dtype must be one of "
                             f"{', '.join(map(repr, KV_DTYPES))}, got {show(kv_dtype)}")
        keep_file = weights is None and os.path.isfile(os.fspath(path))
        weights = check_weights("float32" if weights is None else weights,
                                "CausalLM.from_pretrained")
        path = os.fspath(path)
        first = None                               # tokenizer_first's tokenizer
        if os.path.isfile(path):                   # a GGUF file (llama.cpp's format)
            gguf = GGUFFile(path)
            config = gguf_llm_config(gguf)    # errors in the file's words: its path, keys
            meta = gguf.metadata.subset("tokenizer.ggml.") if tokenizer_first else None
            first = GGUFTokenizer(meta, path) if meta else None
            ckpt = GGUFCheckpoint(gguf, config)
        elif os.path.isdir(path):
            config = LLMConfig.from_json(os.path.join(path, "config.json"))
            tok = os.path.join(path, "tokenizer.json")
            first = TextTokenizer(tok) if tokenizer_first and os.path.isfile(tok) else None
            ckpt = Checkpoint(path)
        else:
            raise FileNotFoundError(f"CausalLM.from_pretrained: {path} is neither a checkpoint "
                                    "folder nor a GGUF file")
        model = nn.skip_init(cls, config)         # weights allocated, not drawn: read next
        keys = (gpt2_keys if config.architecture == "GPT2LMHeadModel" else llama_keys)(
            config, ckpt)
        if keep_file:                              # the file's formats: never read into float32
            keys = model._pack_exact(ckpt, keys)
        load_params(model, ckpt, keys)
        if config.norm_offset:                    # Gemma's x * (1 + w): w + 1 stored once
            stack = [model]
            while stack:
                m = stack.pop()
                stack.extend(m.children())
                if isinstance(m, nn.RMSNorm):
                    m.weight += np.float32(config.norm_offset)
        if os.path.isfile(path):
            # the tokenizer is built when text is first given (its arrays of
            # strings stay compact until then: GGUFMetadata); built already
            # (tokenizer_first), the metadata (~9 MiB for 151936 tokens) goes
            model.tokenizer_meta = (gguf.metadata.subset("tokenizer.ggml.") or None
                                    if first is None else None)
            has = "tokenizer.ggml.model" in gguf.metadata
            model.tokenizer_path = path if has else None
            model.tokenizer_gguf = has
            model.chat_template = (gguf.metadata.get("tokenizer.chat_template")
                                   or builtin_chat_template(
                                       gguf.metadata.get("general.architecture")))
            tokens = (gguf.metadata.strings("tokenizer.ggml.tokens")
                      if "tokenizer.ggml.tokens" in gguf.metadata else [])
            for name in ("bos", "eos"):
                i = gguf.metadata.get(f"tokenizer.ggml.{name}_token_id")
                if isinstance(i, int) and 0 <= i < len(tokens):
                    model.chat_special[f"{name}_token"] = tokens[i]
            ckpt.close()                           # every tensor is read: the map goes
        # every nn.Linear packed once (float32: the same bits): a decode step's
        # one-row GEMMs stream the packed panels; a tied output projection too
        pack(model, weights)
        if not keep_file:
            model.pack_output(weights)
        model.kv_dtype = kv_dtype
        model.tokenizer = first
        return model._with_generation_files(path)

    def _pack_exact(self, ckpt, keys):
        """Each linear weight and the embedding table as ckpt.packed gives
        them: the file's values exactly in the narrowest format, set in place
        of the (untouched, so never resident) float32 parameters; a tied
        output projection is the packed table itself. Returns the keys still
        to read."""
        rest = []
        for ours, pieces, transposed in keys:
            check_tensors(self, ckpt, ours, pieces, transposed)    # present, in their shapes
            owner, leaf = param_owner(self, ours)
            pw = None
            linear = ours.endswith(("_proj.weight", ".fc1.weight", ".fc2.weight"))
            if ((not transposed or ckpt.stores_as_linear([name for name, _ in pieces]))
                    and (linear or ours == "lm_head.weight")
                    and all(name in ckpt for name, _ in pieces)):
                pw = ckpt.packed([name for name, _ in pieces])
            if pw is None or pw.shape != getattr(owner, leaf).shape:
                rest.append((ours, pieces, transposed))     # read (and checked) by _load
                continue
            setattr(owner, leaf, pw)
        self.output_format = "float32"
        self._output = self._output_source = None
        table = next((k[1][0][0] for k in keys if k[0] == "embed.weight"), None)
        if table is not None and table in ckpt:
            pw = ckpt.packed([table])
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
        path = getattr(self, "tokenizer_path", None)
        if self.tokenizer is None and meta:            # a GGUF file's own tokenizer
            self.tokenizer = GGUFTokenizer(meta, path)
            self.tokenizer_meta = None                 # built: its metadata is not needed
        if self.tokenizer is None and self.tokenizer_gguf:
            self.tokenizer = GGUFFile(path).tokenizer()    # let go (tokenizer = None): read again
        if self.tokenizer is None:
            if path is None:
                raise FileNotFoundError("this checkpoint has no tokenizer (tokenizer.json, or a "
                                        "GGUF file's tokenizer.ggml metadata): pass token ids "
                                        "instead of text")
            self.tokenizer = TextTokenizer(path)
        return self.tokenizer

    # -- forward

    def check_ids(self, input_ids, attention_mask):
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
        if self.config.embed_scale is not None:           # Gemma: x sqrt(E); Granite's factor
            x *= np.float32(self.config.embed_scale)
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

    def _prefill_layers(self, x, positions, mask, caches):
        """x (B, L, E), the prompt's rows, into the caches PREFILL_CHUNK
        positions at a time (a step's scratch grows with its rows: ~18 K
        floats a row for a 0.5B model, 150 MiB for a 2048-token prompt in
        one step) -> the last chunk's outputs (B, <= PREFILL_CHUNK, E), whose
        last row is the prompt's last position. mask: None or the prompt's
        (B, 1, L, S) causal_mask over the cache's S = start + L keys."""
        B, L, _ = x.shape
        if L <= PREFILL_CHUNK:
            return self._layers(x, positions, mask, caches)
        start = caches[0].length
        for c0 in range(0, L, PREFILL_CHUNK):
            c1 = min(L, c0 + PREFILL_CHUNK)
            out = self._layers(np.ascontiguousarray(x[:, c0:c1]),
                               None if positions is None else positions[:, c0:c1],
                               None if mask is None else mask[:, :, c0:c1, :start + c1], caches)
        return out

    def forward(self, input_ids, attention_mask=None, *, caches=None):
        """input_ids (B, L) ints; attention_mask (B, L) 1 = token, 0 = padding
        (None: no padding) -> logits (B, L, V) float32. Positions count real
        tokens only (left padding gives the same logits as no padding);
        logits at padding positions are meaningless.

        caches (keyword-only; from new_caches, no padding): input_ids are the
        L positions that follow the cached ones; their keys and values are
        appended and their logits returned (equal to the full forward's
        last L rows)."""
        ids, real = self.check_ids(input_ids, attention_mask)
        positions = None if real.all() else token_positions(real)
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
        return self._scaled(linear(x, self.lm_head_weight))

    def _scaled(self, logits):
        """logits / logits_scaling (Granite's), in place."""
        if self.config.logits_scaling != 1.0:
            logits /= np.float32(self.config.logits_scaling)
        return logits

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
        """One empty cattn.KVCache (batch, Hk, max_len, D) per layer, of
        kv_dtype."""
        return [layer.self_attn.new_cache(batch, max_len, self.kv_dtype)
                for layer in self.layers]

    @property
    def kv_dtype(self):
        """The KV caches' dtype (new_caches, generate, chat, cattn serve's
        slots): "float32" (the default) or "float16" — half the cache's
        memory and half the bytes a decode step reads from it (llama.cpp's
        default), each key and value rounded to float16 (relative error <=
        2^-11) and attended as its widened float32 value; a key or value
        that overflows float16 (|x| >= 65520) is an error, not an inf."""
        return str(self._kv_dtype)

    @kv_dtype.setter
    def kv_dtype(self, value):
        if not isinstance(value, str) or value not in KV_DTYPES:
            raise ValueError(f"CausalLM: kv_dtype must be one of "
                             f"{', '.join(map(repr, KV_DTYPES))}, got {show(value)}")
        self._kv_dtype = np.dtype(value)

    def step_logits(self, ids, positions, caches, mask=None, *, padded=False):
        """One forward step on KV caches, as generate runs it (the prompt,
        then one token per sequence): ids (B, L) int64 token ids (checked by
        check_ids), positions (B, L) each token's position or None (0..L-1);
        mask None (causal) or nn.causal_mask's bool (B, 1, L, S); the caches
        get the L positions -> the last position's logits (B, V) float32.
        Learned position embeddings (GPT-2) read `positions`; the rotary
        embedding and the attention take them only with padded=True (else
        they follow the cache: the same values for an unpadded batch)."""
        x = self._embed(ids, positions)
        x = self._prefill_layers(x, positions if padded else None, mask, caches)
        return self._last_logits(x)

    def _last_logits(self, x):
        """Hidden states x (B, L, E) -> the last position's logits (B, V)."""
        h = self.norm(np.ascontiguousarray(x[:, -1]))
        return self._scaled(linear(h, self.lm_head_weight))

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
        ids, real = self.check_ids(ids.astype(np.int64)[None], None)
        self._check_caches(caches, ids.shape)
        if caches[0].length != 0:
            raise ValueError(f"CausalLM.prefill: the caches hold {caches[0].length} positions; "
                             "prefill takes empty ones")
        x = self._embed(ids, None)
        x = self._prefill_layers(x, None, nn.causal_mask(real, ids.shape[1]), caches)
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
        self.check_ids(tok[:, None], None)
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

    # -- generation (generation.py)

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
        return generate(self, inputs, max_new_tokens, do_sample, temperature, top_k, top_p, seed,
                        eos_token_id, stream, attention_mask)
