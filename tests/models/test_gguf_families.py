"""GGUF files of the families built on the Llama block (`smollm3`,
`granite`) as llama.cpp's converter writes them, against the same tiny
random model as a Hugging Face folder (whose loading test_llm_families.py
holds against transformers): the same logits. The file is written here
with the `gguf` package the way convert_hf_to_gguf.py writes it (its
LlamaModel permutes the q and k rows for ggml's rotation; SmolLM3's NoPE
step is llama.cpp's fixed 4; Granite's multipliers as
granite.embedding_scale, residual_scale, attention.scale, logit_scale),
checked once against llama.cpp itself on files its converter made
(benchmarks/results, session 24).
"""
import json

import numpy as np
import pytest

from cattn.models import CausalLM
from cattn_testing.llm_files import gguf_names

V, E, F, H, HK, LAYERS = 64, 32, 48, 4, 2, 5
D = E // H
GRANITE = dict(embedding_multiplier=3.0, residual_multiplier=0.25, attention_multiplier=0.125,
               logits_scaling=4.0)


def _permute(w, heads):
    """llama.cpp's converter's q / k row order (LlamaModel.permute)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(
        w.shape)


def _write(tmp, arch):
    st = pytest.importorskip("safetensors.numpy", reason="safetensors writes the folder")
    gguf = pytest.importorskip("gguf", reason="the gguf package writes the file")
    rng = np.random.default_rng(5)
    hf = {"model.embed_tokens.weight": rng.normal(0, 0.5, (V, E)),
          "model.norm.weight": rng.uniform(0.5, 1.5, E)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm"):
            hf[p + n + ".weight"] = rng.uniform(0.5, 1.5, E)
        for n, shape in (("q", (H * D, E)), ("k", (HK * D, E)), ("v", (HK * D, E)),
                         ("o", (E, H * D))):
            hf[p + f"self_attn.{n}_proj.weight"] = rng.normal(0, 0.2, shape)
        for n, shape in (("gate", (F, E)), ("up", (F, E)), ("down", (E, F))):
            hf[p + f"mlp.{n}_proj.weight"] = rng.normal(0, 0.2, shape)
    hf = {k: v.astype(np.float32) for k, v in hf.items()}
    folder = tmp / arch
    folder.mkdir()
    st.save_file(hf, str(folder / "model.safetensors"))
    cls = {"smollm3": "SmolLM3ForCausalLM", "granite": "GraniteForCausalLM"}[arch]
    config = dict(architectures=[cls], vocab_size=V, hidden_size=E, intermediate_size=F,
                  num_hidden_layers=LAYERS, num_attention_heads=H, num_key_value_heads=HK,
                  rope_theta=1e4, rms_norm_eps=1e-6, tie_word_embeddings=True,
                  max_position_embeddings=128, **(GRANITE if arch == "granite" else
                                                  dict(no_rope_layer_interval=4)))
    (folder / "config.json").write_text(json.dumps(config))
    path = str(tmp / f"{arch}.gguf")
    g = gguf.GGUFWriter(path, arch)
    for add, v in ((g.add_context_length, 128), (g.add_embedding_length, E),
                   (g.add_block_count, LAYERS), (g.add_feed_forward_length, F),
                   (g.add_head_count, H), (g.add_head_count_kv, HK),
                   (g.add_layer_norm_rms_eps, 1e-6), (g.add_rope_freq_base, 1e4)):
        add(v)
    if arch == "granite":
        g.add_float32("granite.embedding_scale", GRANITE["embedding_multiplier"])
        g.add_float32("granite.residual_scale", GRANITE["residual_multiplier"])
        g.add_float32("granite.attention.scale", GRANITE["attention_multiplier"])
        g.add_float32("granite.logit_scale", GRANITE["logits_scaling"])
    names = gguf_names(LAYERS, {"post_attention_layernorm": "ffn_norm"})
    for a, b in names.items():
        w = hf[a]
        if a.endswith("q_proj.weight"):
            w = _permute(w, H)
        elif a.endswith("k_proj.weight"):
            w = _permute(w, HK)
        g.add_tensor(b, w)
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()
    return str(folder), path


@pytest.mark.parametrize("arch", ["smollm3", "granite"])
def test_file_equals_folder(arch, tmp_path):
    folder, path = _write(tmp_path, arch)
    a, b = CausalLM.from_pretrained(folder), CausalLM.from_pretrained(path)
    if arch == "smollm3":
        assert [x.self_attn.rotary is None for x in b.layers] == [False] * 3 + [True, False]
    else:
        assert (b.config.embed_scale, b.config.residual_scale, b.config.logits_scaling) == (
            3.0, 0.25, 4.0)
    ids = np.random.default_rng(1).integers(0, V, (1, 20))
    la, lb = a(ids), b(ids)
    np.testing.assert_allclose(lb, la, rtol=0, atol=1e-5 * np.abs(la).max())
    np.testing.assert_array_equal(b.generate(ids[0], max_new_tokens=8, eos_token_id=[]),
                                  a.generate(ids[0], max_new_tokens=8, eos_token_id=[]))
