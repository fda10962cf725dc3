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

import numpy as np

from ..ops.formats import int4_arrays, int4_k_arrays, int5g_arrays, int6g_arrays, int8g_arrays
from ..ops.packed import PackedWeight, pack_weight
from .heap import trim_heap

__all__ = ["gguf_config", "GGUFCheckpoint", "GGUF_ARCHITECTURES"]

# general.architecture -> the Hugging Face architecture CausalLM builds
GGUF_ARCHITECTURES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM",
                      "qwen3": "Qwen3ForCausalLM", "gpt2": "GPT2LMHeadModel"}

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
_GLOBAL = {"model.embed_tokens.weight": "token_embd.weight",
           "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


def _meta(f, key, default=KeyError, kind=int):
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
    if arch == "gpt2":
        d = dict(architectures=["GPT2LMHeadModel"], n_embd=_meta(f, "gpt2.embedding_length"),
                 n_layer=_meta(f, "gpt2.block_count"), n_head=_meta(f, "gpt2.attention.head_count"),
                 n_inner=_meta(f, "gpt2.feed_forward_length"),
                 n_positions=_meta(f, "gpt2.context_length"),
                 layer_norm_epsilon=_meta(f, "gpt2.attention.layer_norm_epsilon", 1e-5, float),
                 activation_function="gelu_new",
                 vocab_size=f.tensors["token_embd.weight"][1][0])
        for ours, key in (("bos_token_id", "tokenizer.ggml.bos_token_id"),
                          ("eos_token_id", "tokenizer.ggml.eos_token_id")):
            if key in f.metadata:
                d[ours] = _meta(f, key)
        return d
    E = _meta(f, f"{arch}.embedding_length")
    H = _meta(f, f"{arch}.attention.head_count")
    d = dict(architectures=[GGUF_ARCHITECTURES[arch]], hidden_size=E,
             num_hidden_layers=_meta(f, f"{arch}.block_count"),
             num_attention_heads=H,
             num_key_value_heads=_meta(f, f"{arch}.attention.head_count_kv", H),
             intermediate_size=_meta(f, f"{arch}.feed_forward_length"),
             rms_norm_eps=_meta(f, f"{arch}.attention.layer_norm_rms_epsilon", 1e-5, float),
             rope_theta=_meta(f, f"{arch}.rope.freq_base", 10000.0, float),
             head_dim=_meta(f, f"{arch}.attention.key_length", E // max(H, 1)),
             vocab_size=f.tensors["token_embd.weight"][1][0],
             tie_word_embeddings="output.weight" not in f.tensors,
             attention_bias="blk.0.attn_q.bias" in f.tensors)
    if scaling == "linear":
        d["rope_scaling"] = {"rope_type": "linear",
                             "factor": _meta(f, f"{arch}.rope.scaling.factor", kind=float)}
    if "rope_freqs.weight" in f.tensors:            # llama3: per-frequency factors
        factors = f.dequantize("rope_freqs.weight").reshape(-1)
        if factors.size != d["head_dim"] // 2 or not np.all(np.isfinite(factors) & (factors > 0)):
            raise ValueError(f"GGUF file {f.path}: tensor 'rope_freqs.weight' has "
                             f"{factors.size} values; expected {d['head_dim'] // 2} finite ones > 0")
        if scaling == "linear":
            raise ValueError(f"GGUF file {f.path}: both rope_freqs.weight and linear rope "
                             "scaling: not supported")
        d["rope_scaling"] = {"rope_type": "freq_factors", "factors": factors.tolist()}
    for ours, key in (("bos_token_id", "tokenizer.ggml.bos_token_id"),
                      ("eos_token_id", "tokenizer.ggml.eos_token_id"),
                      ("pad_token_id", "tokenizer.ggml.padding_token_id")):
        if key in f.metadata:
            d[ours] = _meta(f, key)
    return d


class GGUFCheckpoint:
    """The tensors of a GGUFFile under Hugging Face names, with the
    interface CausalLM's loader reads a safetensors Checkpoint through:
    `name in ckpt`, info(name) -> ("F32", shape), read(name, out) (the
    values ggml's dequantization gives, exactly; a llama file's q and k
    rows put back in Hugging Face's order)."""

    def __init__(self, f, config):
        self.file = f
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
                for hf, g in _LAYER.items():
                    self._names[f"model.layers.{i}.{hf}"] = f"blk.{i}.{g}"
        llama = f.metadata.get("general.architecture") == "llama"
        H, Hk = config.num_heads, config.num_kv_heads
        self._heads = {}                                   # hf name -> heads to un-permute
        if llama:
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
        q|k|v) exactly in the narrowest format that holds them all: "int4"
        when every piece is Q4_0, Q4_1 or Q4_K (Q4_K's two-level scales
        when every piece is Q4_K); "int5g" when every piece is one of those
        or Q5_0, Q5_1, Q5_K (values < 32); "int6g" when every piece is one
        of those or Q6_K (values < 64), else "int8g" when every
        piece is one of those or Q8_0 (pieces with different zero points
        take mins -z d, exact; beside Q6_K pieces' sub-scales the others
        take u + 32: _stack); "bfloat16" when every piece is BF16;
        "float32" when every piece is F32 or F16 (one tensor alone:
        GGUFFile.weight, which builds it a block of rows at a time); None
        otherwise (the float32 values the loader read hold them). The
        pieces' pages of the file's map are let go after.
        Scales are float16 when every piece has them, else float32 (an exact
        widening)."""
        gnames = [self._names[n] for n in names]
        try:
            return self._packed(names, gnames)
        finally:
            for g in gnames:                      # built: the file's pages of it can go
                self.file.release(g)
            trim_heap()                          # and the builder's freed temporaries

    def _packed(self, names, gnames):
        types = {self.file.tensors[g][0] for g in gnames}
        if len(names) == 1 and names[0] not in self._heads:
            return self.file.weight(gnames[0])     # built a block of rows at a time
        if types <= {"F32", "F16"}:
            rows = [self._unpermute(n, self.file.dequantize(self._names[n])) for n in names]
            return pack_weight(np.concatenate(rows), "float32")
        if types == {"BF16"}:
            rows = [self._unpermute(n, self.file.dequantize(self._names[n])) for n in names]
            return pack_weight(np.concatenate(rows), "bfloat16")
        if types == {"Q4_K"}:                          # two-level scales, as stored
            k = [self.file.int4_k_parts(g) for g in gnames]
            if all(p is not None for p in k):
                return PackedWeight.from_arrays(int4_k_arrays(*(
                    np.concatenate([self._unpermute(n, p[i]) for n, p in zip(names, k)])
                    for i in range(5))))
        four = [self.file.int4_parts(g) for g in gnames]
        if all(p is not None for p in four):
            parts = [(q, d, mn, None, z) for q, d, mn, z in four]
            return self._stack(names, parts, int4_arrays, four=True)
        parts = []
        for g, p4 in zip(gnames, four):
            p = self.file.int8g_parts(g) if p4 is None else (p4[0], p4[1], p4[2], None, p4[3])
            if p is None:
                return None
            parts.append(p)
        return self._stack(names, parts, int8g_arrays, four=False)

    def _stack(self, names, parts, arrays, four):
        """Pieces (u, d, mn, sub, z) in one format, rows stacked, values
        exact: a common zero point; or mins -z d (z a power of 2: exact) and
        zero point 0; or, beside sub-scaled pieces (Q6_K among Q4_K rows: one
        zero point zs for those), u + zs, sub-scales 1 and mins -z d for the
        others (d (u + zs - zs) - z d). None when no such form exists."""
        f16 = all(d.dtype == np.float16 and (mn is None or mn.dtype == np.float16)
                  for _, d, mn, _, _ in parts)
        zs = {z for _, _, mn, _, z in parts if mn is None}
        has_min = any(mn is not None for _, _, mn, _, _ in parts)
        has_sub = any(sub is not None for _, _, _, sub, _ in parts)
        mins = len(zs) > 1 or bool(has_min and zs - {0})
        shift = 0                                  # the common zero point beside sub-scales
        if mins and has_sub:
            subz = {z for _, _, mn, sub, z in parts if sub is not None}
            if len(subz) > 1 or any(mn is not None for _, _, mn, sub, _ in parts if sub is not None):
                return None
            shift = subz.pop()
            if any(sub is None and ((mn is not None and z) or int(u.max(initial=0)) + shift > 255)
                   for u, _, mn, sub, z in parts):
                return None
        if mins and any(z & (z - 1) for _, _, mn, sub, z in parts
                        if mn is None and not (shift and sub is not None)):
            return None                            # -z d would round
        if mins and f16:                           # -z d in float16 unless it overflows
            with np.errstate(over="ignore"):
                f16 = all(np.isfinite(np.float16(-z) * d).all()
                          for _, d, mn, _, z in parts if mn is None)
        dtype = np.float16 if f16 else np.float32
        cols = {k: [] for k in "udms"}
        for n, (u, d, mn, sub, z) in zip(names, parts):
            d = d.astype(dtype)
            if shift and sub is not None:          # keeps its zero point: a min of 0
                mn = np.zeros_like(d)
            elif shift:                            # d (u + shift - shift) + mn - z d
                u = u + np.uint8(shift)
                mn = (dtype(-z) * d).astype(dtype) if mn is None else mn.astype(dtype)
            elif mins or has_min:
                mn = (dtype(-z) * d).astype(dtype) if mn is None else mn.astype(dtype)
            if mn is not None:
                cols["m"].append(self._unpermute(n, mn))
            if has_sub:
                sub = np.ones(u.shape[0:1] + (2 * d.shape[1],), np.int8) if sub is None else sub
                cols["s"].append(self._unpermute(n, sub))
            cols["u"].append(self._unpermute(n, u))
            cols["d"].append(self._unpermute(n, d))
        z = shift if shift else 0 if (mins or has_min) else zs.pop()
        mn = np.concatenate(cols["m"]) if cols["m"] else None
        if four:
            return PackedWeight.from_arrays(arrays(np.concatenate(cols["u"]),
                                                   np.concatenate(cols["d"]), mn, z))
        sub = np.concatenate(cols["s"]) if cols["s"] else None
        u = np.concatenate(cols["u"])
        top = int(u.max()) if u.size else 0
        if top < 32:                                    # 5-bit values: in 5 bits
            arrays = int5g_arrays
        elif top < 64:                                  # 6-bit values: in 6 bits
            arrays = int6g_arrays
        return PackedWeight.from_arrays(arrays(u, np.concatenate(cols["d"]), mn, sub, z))

    def _unpermute(self, name, a):
        """a's rows put back in Hugging Face's order (a llama file's q, k)."""
        h = self._heads.get(name)
        if h is None:
            return a
        n = a.shape[0]
        return a.reshape(h, n // h // 2, 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)
