"""Decoder families that are the Llama block with one option, each a tiny
random transformers model saved as a Hugging Face folder and loaded by
CausalLM.from_pretrained, against transformers itself (logits within 1e-4
of its scale in float32, the same greedy tokens; prompts past the window):
- MistralForCausalLM: sliding-window attention on every layer;
- SmolLM3ForCausalLM: no RoPE on every 4th layer (NoPE);
- GraniteForCausalLM: embedding, residual, attention and logits multipliers.
(Gemma 3: test_gemma3.py.) Skipped without torch and transformers.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="transformers runs on torch")
transformers = pytest.importorskip("transformers", reason="the reference models")

from cattn.models import CausalLM  # noqa: E402

SIZES = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=5,
             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
             rms_norm_eps=1e-6, bos_token_id=2, eos_token_id=1, pad_token_id=0)
MODELS = {
    "mistral": ("MistralForCausalLM", "MistralConfig",
                dict(sliding_window=5, rope_theta=1e4, tie_word_embeddings=False)),
    "smollm3": ("SmolLM3ForCausalLM", "SmolLM3Config",
                dict(rope_theta=1e4, tie_word_embeddings=True, no_rope_layer_interval=2,
                     no_rope_layers=[1, 0, 1, 0, 1])),
    "granite": ("GraniteForCausalLM", "GraniteConfig",
                dict(rope_theta=1e4, embedding_multiplier=3.0, residual_multiplier=0.3,
                     attention_multiplier=0.11, logits_scaling=4.0, tie_word_embeddings=True)),
}
PROMPTS = [[5, 17, 33, 2, 60, 61, 9, 14, 90, 3, 44, 45, 71, 8, 30, 31, 7], [7, 8, 9, 10]]


@pytest.fixture(scope="module", params=sorted(MODELS))
def family(request, tmp_path_factory):
    cls, cfg_cls, extra = MODELS[request.param]
    torch.manual_seed(0)
    cfg = getattr(transformers, cfg_cls)(**SIZES, **extra)
    ref = getattr(transformers, cls)(cfg).eval()
    with torch.no_grad():
        for n, p in ref.named_parameters():
            (p.uniform_(0.5, 1.5) if "norm" in n else p.normal_(0, 0.2))
    path = tmp_path_factory.mktemp(request.param)
    ref.save_pretrained(str(path), safe_serialization=True)
    return request.param, ref, CausalLM.from_pretrained(str(path))


def test_logits_and_greedy_tokens_equal_transformers(family):
    name, ref, lm = family
    for p in PROMPTS:
        ids = np.array([p])
        with torch.no_grad():
            want = ref(torch.tensor(ids)).logits.numpy()
        got = lm(ids)
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), name
        with torch.no_grad():
            out = ref.generate(torch.tensor(ids), max_new_tokens=12, do_sample=False,
                               eos_token_id=None, pad_token_id=0)[0, len(p):].numpy()
        np.testing.assert_array_equal(lm.generate(p, max_new_tokens=12, eos_token_id=[]), out)


def test_options_reach_the_layers(family):
    name, _, lm = family
    c = lm.config
    if name == "mistral":
        assert [b.self_attn.window for b in lm.layers] == [5] * 5
    if name == "smollm3":
        assert [b.self_attn.rotary is not None for b in lm.layers] == [True, False] * 2 + [True]
    if name == "granite":
        assert (c.embed_scale, c.residual_scale, c.logits_scaling) == (3.0, 0.3, 4.0)
        assert lm.layers[0].self_attn.scale == pytest.approx(0.11)
