"""cattn.models.llm_keys — where a checkpoint's tensors go in a CausalLM:
the key maps from Hugging Face's parameter names (Llama / Qwen2 / Qwen3's
and GPT-2's) to cattn.nn's, and the reader that fills the parameters from
them, whose errors name a tensor in the checkpoint's own words (a GGUF
file's path and llama.cpp's name; a folder's Hugging Face name).

A key map is a list of (our parameter, [(checkpoint tensor, rows of ours it
fills)], transposed): fused parameters (q|k|v, gate|up) take several
tensors, one block of rows each; GPT-2's Conv1D weights are stored
transposed. What this file is not: the config (llm_config.py), the model
(causal_lm.py) or a checkpoint parser (safetensors.py, gguf_llm.py).
"""
from .safetensors import CheckpointError

__all__ = ["llama_keys", "gpt2_keys", "param_owner", "check_tensors", "load_params"]


def llama_keys(c, ckpt):
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
        if c.post_norms:                    # Gemma 3: a norm after attention and after the MLP
            for mine, theirs in (("post_attn_norm", "post_attention_layernorm"),
                                 ("norm2", "pre_feedforward_layernorm"),
                                 ("post_mlp_norm", "post_feedforward_layernorm")):
                keys.append((ours + f"{mine}.weight", [(hf + f"{theirs}.weight", None)], False))
        else:
            keys.append((ours + "norm2.weight", [(hf + "post_attention_layernorm.weight", None)],
                         False))
    return keys


def gpt2_keys(c, ckpt):
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


def param_owner(model, dotted):
    """(module, name) holding the parameter `dotted` ("layers.3.mlp.down_proj.weight")."""
    *path, leaf = dotted.split(".")
    owner = model
    for part in path:
        owner = owner[int(part)] if part.isdigit() else getattr(owner, part)
    return owner, leaf


def _words(model, ckpt):
    """(who, name(tensor), shape(tensor, shape), where shapes come from,
    folder?): how errors name a checkpoint and its tensors in its own
    words. A GGUF file (gguf_llm.GGUFCheckpoint, which has own_name): its
    path, llama.cpp's tensor names and shapes as stored, its metadata; a
    Hugging Face folder: the architecture, Hugging Face's names,
    config.json."""
    if not hasattr(ckpt, "own_name"):
        return (f"{model.config.architecture} checkpoint", lambda n: n, lambda n, s: s,
                "config.json", True)
    return ckpt.owner, ckpt.own_name, ckpt.own_shape, "its metadata", False


def check_tensors(model, ckpt, ours, pieces, transposed):
    """CheckpointError (naming the checkpoint and the tensor in its own
    words) unless the checkpoint holds every tensor of one key-map entry
    in the shape its block of rows of parameter `ours` takes. Returns
    [(tensor, the parameter's rows it fills)]."""
    who, name_of, shape_of, source, folder = _words(model, ckpt)
    owner, leaf = param_owner(model, ours)
    dst, r, views = getattr(owner, leaf), 0, []
    for name, rows in pieces:
        if name not in ckpt:
            raise CheckpointError(f"{who}: missing tensor {name_of(name)!r}"
                                  + (f" (for {ours})" if folder else ""))
        n = dst.shape[0] - r if rows is None else rows
        view = dst[r:r + n]
        want = view.T.shape if transposed else view.shape
        dtype, shape = ckpt.info(name)
        if shape != want:
            raise CheckpointError(f"{who}: tensor {name_of(name)!r} has shape "
                                  f"{list(shape_of(name, shape))}, expected "
                                  f"{list(shape_of(name, want))} from {source}")
        if dtype not in ("F32", "F16", "BF16", "F64"):
            where = "checkpoint" if folder else f"{who}:"
            raise CheckpointError(f"{where} tensor {name_of(name)!r} has dtype {dtype}; "
                                  "expected a float type")
        views.append((name, view))
        r += n
    return views


def load_params(model, ckpt, keys):
    """Read every checkpoint tensor of the key map straight into the model's
    parameters (fused ones piece by piece, Conv1D weights through a
    transposed view): one tensor in flight at a time (the parameters are
    looked up by name: named_parameters() would unpack packed ones). Each
    tensor checked first (check_tensors)."""
    for ours, pieces, transposed in keys:
        for name, view in check_tensors(model, ckpt, ours, pieces, transposed):
            ckpt.read(name, out=view.T if transposed else view)
