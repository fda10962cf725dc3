"""Tiny decoder LLM files for tests that need a real model without torch:
a qwen2 GGUF file (written by the `gguf` package) with a byte-level
vocabulary of its own and a chat template. Not a reference: tests compare
what runs these files with cattn's own independent paths or with
transformers elsewhere."""
import numpy as np
import pytest

# printable ASCII, the byte-level space (\u0120), "hi", the end token
CHARS = [chr(c) for c in range(33, 127)] + ["\u0120", "hi", "<|endoftext|>"]
TEMPLATE = ("{% for m in messages %}{{ m['role'] + ':' + m['content'] + '<|endoftext|>' }}"
            "{% endfor %}{% if add_generation_prompt %}{{ 'assistant:' }}{% endif %}")


def tiny_gguf(path, layers=1, E=32, heads=2, kv_heads=1, F=64, context=64, seed=0, scale=0.5):
    """Write the model to `path` (a str) -> (path, CHARS). Vocabulary
    V = len(CHARS) (the last id the EOS / end of turn)."""
    gguf = pytest.importorskip("gguf", reason="the gguf package writes the file")
    V, D = len(CHARS), E // heads
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, "qwen2")
    for add, v in ((w.add_context_length, context), (w.add_embedding_length, E),
                   (w.add_block_count, layers), (w.add_feed_forward_length, F),
                   (w.add_head_count, heads), (w.add_head_count_kv, kv_heads),
                   (w.add_layer_norm_rms_eps, 1e-6)):
        add(v)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(CHARS)
    w.add_token_types([1] * (V - 1) + [3])
    w.add_token_merges(["h i"])
    w.add_eos_token_id(V - 1)
    w.add_chat_template(TEMPLATE)
    K = kv_heads * D
    shapes = {"token_embd.weight": (V, E), "output_norm.weight": (E,)}
    for i in range(layers):
        b = f"blk.{i}."
        shapes.update({b + "attn_norm.weight": (E,), b + "ffn_norm.weight": (E,),
                       b + "attn_q.weight": (E, E), b + "attn_q.bias": (E,),
                       b + "attn_k.weight": (K, E), b + "attn_k.bias": (K,),
                       b + "attn_v.weight": (K, E), b + "attn_v.bias": (K,),
                       b + "attn_output.weight": (E, E), b + "ffn_gate.weight": (F, E),
                       b + "ffn_up.weight": (F, E), b + "ffn_down.weight": (E, F)})
    for n, s in shapes.items():
        w.add_tensor(n, (rng.standard_normal(s) * scale).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path, CHARS


# a Llama-style layer's weights: Hugging Face's name -> llama.cpp's
LAYER_NAMES = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
               "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate",
               "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def gguf_names(layers, norms):
    """Hugging Face tensor name -> llama.cpp's, for the embedding, the final
    norm and each layer's LAYER_NAMES and `norms` (the family's other
    per-layer weights, e.g. {"post_attention_layernorm": "ffn_norm"})."""
    names = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight"}
    for i in range(layers):
        for hf, ours in {**LAYER_NAMES, **norms}.items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{ours}.weight"
    return names
