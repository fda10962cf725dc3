"""Gemma 3 (Gemma3ForCausalLM, GGUF `gemma3`): norms before and after
attention and MLP, q/k head norms, sliding-window attention on 5 of every
6 layers with their own RoPE base, GeGLU (tanh), embeddings x sqrt(E),
RMSNorm as x * (1 + w) in Hugging Face checkpoints (w + 1 in GGUF files),
the attention scale from query_pre_attn_scalar.

One tiny random model is written twice, as a Hugging Face folder
(config.json + model.safetensors, by hand: no torch) and as a GGUF file
(llama.cpp's names, the 1 folded into the norms); the references are
transformers' Gemma3ForCausalLM on the folder (skipped without torch and
transformers) and each other. Prompts run up to ~4x the window (4).
"""
import json

import numpy as np
import pytest

from cattn.models import CausalLM
from cattn_testing.llm_files import gguf_names
from cattn.ops.attention import KVCache

V, E, F, H, HK, D, LAYERS, WINDOW = 96, 32, 48, 4, 2, 16, 7, 4
SCALAR = 12                              # query_pre_attn_scalar (the scale 1/sqrt(12), not 1/sqrt(D))
PROMPTS = [[5, 17, 33, 2, 60, 61, 9, 14, 90, 3, 44, 45, 71, 8, 30], [7, 8, 9, 10, 11, 12, 13]]


def _weights(seed=0):
    """Hugging Face name -> float32 array (norm weights are Gemma's w, used as 1 + w)."""
    rng = np.random.default_rng(seed)
    t = {"model.embed_tokens.weight": rng.normal(0, 0.5, (V, E)),
         "model.norm.weight": rng.uniform(-0.5, 0.5, E)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        for n in ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
                  "post_feedforward_layernorm"):
            t[p + n + ".weight"] = rng.uniform(-0.5, 0.5, E)
        for n in ("q_norm", "k_norm"):
            t[p + f"self_attn.{n}.weight"] = rng.uniform(-0.5, 0.5, D)
        for n, shape in (("q", (H * D, E)), ("k", (HK * D, E)), ("v", (HK * D, E)),
                         ("o", (E, H * D))):
            t[p + f"self_attn.{n}_proj.weight"] = rng.normal(0, 0.2, shape)
        for n, shape in (("gate", (F, E)), ("up", (F, E)), ("down", (E, F))):
            t[p + f"mlp.{n}_proj.weight"] = rng.normal(0, 0.2, shape)
    return {k: v.astype(np.float32) for k, v in t.items()}


CONFIG = dict(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", vocab_size=V,
              hidden_size=E, intermediate_size=F, num_hidden_layers=LAYERS,
              num_attention_heads=H, num_key_value_heads=HK, head_dim=D,
              query_pre_attn_scalar=SCALAR, sliding_window=WINDOW, sliding_window_pattern=6,
              rope_theta=1e6, rope_local_base_freq=1e4, rms_norm_eps=1e-6,
              max_position_embeddings=128, hidden_activation="gelu_pytorch_tanh",
              bos_token_id=2, eos_token_id=1, pad_token_id=0, tie_word_embeddings=True)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(folder, gguf path, folder with the attention scale of the GGUF file):
    the same model (a GGUF gemma3 file's scale is 1/sqrt(key_length), as
    llama.cpp reads it)."""
    st = pytest.importorskip("safetensors.numpy", reason="safetensors writes the folder")
    gguf = pytest.importorskip("gguf", reason="the gguf package writes the file")
    tmp = tmp_path_factory.mktemp("gemma3")
    w = _weights()
    folders = []
    for name, scalar in (("hf", SCALAR), ("hf-d", D)):
        folder = tmp / name
        folder.mkdir()
        st.save_file(w, str(folder / "model.safetensors"))
        (folder / "config.json").write_text(json.dumps(dict(CONFIG,
                                                            query_pre_attn_scalar=scalar)))
        folders.append(str(folder))
    path = str(tmp / "m.gguf")
    g = gguf.GGUFWriter(path, "gemma3")
    for add, v in ((g.add_context_length, 128), (g.add_embedding_length, E),
                   (g.add_block_count, LAYERS), (g.add_feed_forward_length, F),
                   (g.add_head_count, H), (g.add_head_count_kv, HK), (g.add_key_length, D),
                   (g.add_value_length, D), (g.add_layer_norm_rms_eps, 1e-6),
                   (g.add_rope_freq_base, 1e6), (g.add_sliding_window, WINDOW)):
        add(v)
    names = gguf_names(LAYERS, {
        "post_attention_layernorm": "post_attention_norm", "pre_feedforward_layernorm": "ffn_norm",
        "post_feedforward_layernorm": "post_ffw_norm", "self_attn.q_norm": "attn_q_norm",
        "self_attn.k_norm": "attn_k_norm"})
    for hf, ours in names.items():
        a = w[hf]
        g.add_tensor(ours, a + np.float32(1) if "norm" in hf else a)    # llama.cpp's 1 + w
    g.write_header_to_file()
    g.write_kv_data_to_file()
    g.write_tensors_to_file()
    g.close()
    # (a 4-row window with the pattern 6: layers 0-4 and 6 local, layer 5 global)
    return folders[0], path, folders[1]


def test_config_layers(files):
    lm = CausalLM.from_pretrained(files[0])
    c = lm.config
    assert c.layer_types == ["sliding_attention"] * 5 + ["full_attention", "sliding_attention"]
    assert [b.self_attn.window for b in lm.layers] == [4] * 5 + [None, 4]
    local, full = lm.layers[0].self_attn.rotary, lm.layers[5].self_attn.rotary
    assert (local.base, full.base) == (1e4, 1e6)
    assert lm.layers[0].self_attn.scale == pytest.approx(SCALAR ** -0.5)
    assert c.embed_scale == np.float32(E ** 0.5) and c.tie_word_embeddings


def test_gguf_equals_folder(files):
    """The GGUF file (llama.cpp's names and norms) gives the folder's logits
    and greedy tokens: the same model."""
    a, b = CausalLM.from_pretrained(files[2]), CausalLM.from_pretrained(files[1])
    assert b.layers[0].self_attn.scale == pytest.approx(D ** -0.5)
    ids = np.array([PROMPTS[0]])
    la, lb = a(ids), b(ids)
    np.testing.assert_allclose(lb, la, rtol=0, atol=1e-5 * np.abs(la).max())
    ga = a.generate(PROMPTS, max_new_tokens=12, eos_token_id=[])
    gb = b.generate(PROMPTS, max_new_tokens=12, eos_token_id=[])
    for x, y in zip(ga, gb):
        np.testing.assert_array_equal(x, y)


def test_cached_steps_and_slots_equal_the_full_forward(files):
    """Past the window, the prefill + one-token steps on KV caches, and the
    ragged decode of a server's slots, give the full forward's logits."""
    lm = CausalLM.from_pretrained(files[0])
    ids = np.array([PROMPTS[0]])
    full = lm(ids)[0]
    caches = lm.new_caches(1, 32)
    steps = [lm.forward(ids[:, :6], caches=caches)[0]]
    steps += [lm.forward(ids[:, t:t + 1], caches=caches)[0] for t in range(6, ids.shape[1])]
    np.testing.assert_allclose(np.concatenate(steps), full, rtol=0,
                               atol=1e-5 * np.abs(full).max())
    caches = lm.new_caches(2, 32)                   # two slots of a server's batch
    kc, vc = [c.k for c in caches], [c.v for c in caches]
    lens = []
    for b, p in enumerate(PROMPTS):
        lm.prefill(p[:-1], [KVCache.of(x[b:b + 1], y[b:b + 1]) for x, y in zip(kc, vc)])
        lens.append(len(p) - 1)
    got = lm.decode_ragged([PROMPTS[0][-1], PROMPTS[1][-1]], kc, vc, lens)
    np.testing.assert_allclose(got[0], full[-1], rtol=0, atol=1e-5 * np.abs(full).max())
    alone = lm(np.array([PROMPTS[1]]))[0, -1]
    np.testing.assert_allclose(got[1], alone, rtol=0, atol=1e-5 * np.abs(alone).max())


def test_equals_transformers(files):
    """Logits within 1e-4 of transformers' scale in float32 and the same
    greedy tokens, for prompts past the window (padded batch included)."""
    torch = pytest.importorskip("torch", reason="transformers runs on torch")
    transformers = pytest.importorskip("transformers", reason="the reference model")
    ref = transformers.Gemma3ForCausalLM.from_pretrained(files[0], torch_dtype=torch.float32)
    ref.eval()
    lm = CausalLM.from_pretrained(files[0])
    ids = np.array([PROMPTS[0]])
    with torch.no_grad():
        want = ref(torch.tensor(ids)).logits.numpy()
    got = lm(ids)
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    with torch.no_grad():
        for p in PROMPTS:
            out = ref.generate(torch.tensor([p]), max_new_tokens=16, do_sample=False,
                               eos_token_id=None, pad_token_id=0)[0, len(p):].numpy()
            np.testing.assert_array_equal(lm.generate(p, max_new_tokens=16, eos_token_id=[]), out)


def test_unsupported_gemma3_options_are_named():
    from cattn.models.llm_config import LLMConfig
    with pytest.raises(ValueError, match="final_logit_softcapping"):
        LLMConfig.from_dict(dict(CONFIG, final_logit_softcapping=30.0))
    with pytest.raises(ValueError, match="layer_types"):
        LLMConfig.from_dict(dict(CONFIG, layer_types=["full_attention"] * 3))
    with pytest.raises(ValueError, match="sliding_window"):
        LLMConfig.from_dict(dict(CONFIG, sliding_window=0))


def test_builtin_chat_template_of_a_file_without_one(files):
    """A gemma3 file without tokenizer.chat_template chats in llama.cpp's
    built-in Gemma format: no system role (its text goes before the first
    user message), "assistant" as "model", contents trimmed."""
    pytest.importorskip("jinja2", reason="jinja2 renders chat templates")
    lm = CausalLM.from_pretrained(files[1])
    lm.chat_special["bos_token"] = "<bos>"
    msgs = [{"role": "system", "content": " Be brief. "}, {"role": "user", "content": "Hi "},
            {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Bye"}]
    assert lm.apply_chat_template(msgs) == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello."
        "<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n")
    assert lm.apply_chat_template(msgs[1:2], add_generation_prompt=False) == \
        "<bos><start_of_turn>user\nHi<end_of_turn>\n"
