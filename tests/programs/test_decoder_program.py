"""cattn.nn.program: a decoder stack run as one program (one C call per
forward step on the KV caches) gives the bits of its layers run one by one
(nn.decoder.DecoderBlock on a KVCache: the reference the program must
equal, itself tested against transformers in test_llm.py), for every
weight format (plain float32 arrays, packed float32, bfloat16, int8),
every family's block (RMSNorm + rotary + GQA + SwiGLU with q/k/v biases;
Qwen3's q/k head norms;
LayerNorm + learned positions + GELU MLP), padded and unpadded batches,
prefill and decode, and any thread count; stacks it does not take run
their layers. Re-run on every kernel path (test_kernel_paths.py).

Random-initialised models from a config dict: no checkpoint, no torch.
"""
import numpy as np
import pytest

import cattn
from cattn import nn
from cattn.models import CausalLM
from cattn.models import causal_lm
from cattn.models.llm_config import LLMConfig
from cattn.nn.program import decoder_program
from cattn.ops.attention import KVCache

V = 64
PROMPTS = [[1, 5, 9, 14, 3, 7, 22, 30, 31], [1, 40, 8], [1, 11, 12, 13, 60]]
CONFIGS = {
    # GQA (4 query heads on 2 kv heads), q/k/v biases, SwiGLU, RoPE
    "qwen2": dict(architectures=["Qwen2ForCausalLM"], vocab_size=V, hidden_size=32,
                  num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                  intermediate_size=48, rope_theta=1e4, max_position_embeddings=128),
    # no GQA, a head dim that is not E / H, llama3 rope scaling
    "llama": dict(architectures=["LlamaForCausalLM"], vocab_size=V, hidden_size=32,
                  num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                  head_dim=24, intermediate_size=40, rope_theta=5e5,
                  max_position_embeddings=128, rope_scaling=dict(
                      rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                      high_freq_factor=4.0, original_max_position_embeddings=16)),
    # Qwen3: RMSNorm of each q and k head before the rotation, head dim != E / H
    "qwen3": dict(architectures=["Qwen3ForCausalLM"], vocab_size=V, hidden_size=32,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=16, intermediate_size=48, rope_theta=1e4,
                  max_position_embeddings=128),
    # LayerNorm, learned positions, GELU (tanh) MLP with biases
    "gpt2": dict(architectures=["GPT2LMHeadModel"], vocab_size=V, n_embd=32, n_layer=3,
                 n_head=4, n_positions=128),
}
FORMATS = [None, "float32", "bfloat16", "int8", "int4", "int8g", "int6g", "int5g",
           "bfloat16dot"]   # None: plain arrays


def _model(name, fmt):
    lm = CausalLM(LLMConfig.from_dict(dict(CONFIGS[name], eos_token_id=2)))
    rng = np.random.default_rng(7)
    for layer in lm.layers:          # larger, varied norm weights and biases than the init
        norms = [layer.norm1, layer.norm2]
        if layer.self_attn.qk_norm:
            norms += [layer.self_attn.q_norm, layer.self_attn.k_norm]
        for norm in norms:
            norm.weight[...] = rng.uniform(0.5, 1.5, norm.weight.shape)
    return lm if fmt is None else nn.quantize(lm, fmt)


@pytest.fixture
def program_steps(monkeypatch):
    """Counts the positions the program wrote (KVCache.mark_filled calls):
    the layers' own path appends instead."""
    calls = []
    orig = KVCache.mark_filled

    def spy(self, t):
        calls.append(t)
        return orig(self, t)
    monkeypatch.setattr(KVCache, "mark_filled", spy)
    return calls


def _run(lm, use_program, monkeypatch):
    """Greedy tokens (padded batch), and logits of a prefill and of two
    decode steps through forward(caches=), on the program or the layers."""
    with monkeypatch.context() as m:
        if not use_program:
            m.setattr(causal_lm, "decoder_program", lambda layers: None)
        tokens = lm.generate(PROMPTS, max_new_tokens=6, eos_token_id=[])
        caches = lm.new_caches(2, 16)
        ids = np.array([PROMPTS[0][:6], PROMPTS[0][3:9]])
        out = [lm.forward(ids, caches=caches)]
        for t in ([[4], [9]], [[17], [2]]):
            out.append(lm.forward(np.array(t), caches=caches))
        out.append(lm.generate(PROMPTS[1], max_new_tokens=4, eos_token_id=[]))
    return [np.asarray(t) for t in tokens], out, [c.keys.copy() for c in caches]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f or "plain")
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_program_equals_the_layers_bit_for_bit(name, fmt, program_steps, monkeypatch):
    lm = _model(name, fmt)
    assert decoder_program(lm.layers) is not None
    ref = _run(lm, False, monkeypatch)
    assert not program_steps
    got = _run(lm, True, monkeypatch)
    assert program_steps                       # the program ran (prefill and decode)
    for a, b in zip(got[0], ref[0]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got[1], ref[1]):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got[2], ref[2]):           # the caches hold the same keys
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("fmt", [None, "int4"], ids=lambda f: f or "plain")
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_float16_caches_program_equals_the_layers_bit_for_bit(name, fmt, program_steps,
                                                              monkeypatch):
    """kv_dtype="float16": the program's C append (cattn_kv_append_f32_h)
    rounds as NumPy's astype(float16) does in KVCache.append, and its
    attention over the float16 caches gives what the layers' (SDPA on the
    float16 keys and values) gives; tokens, logits and cached keys alike."""
    lm = _model(name, fmt)
    lm.kv_dtype = "float16"
    ref = _run(lm, False, monkeypatch)
    assert not program_steps
    got = _run(lm, True, monkeypatch)
    assert program_steps
    for a, b in zip(got[0], ref[0]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got[1], ref[1]):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(got[2], ref[2]):
        assert a.dtype == b.dtype == np.float16
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))


def test_float16_cache_overflow_is_an_error(monkeypatch):
    """A key that overflows float16 is a ValueError on both paths, and the
    caches' lengths do not count the failed step."""
    lm = _model("gpt2", None)
    lm.kv_dtype = "float16"
    lm.layers[0].self_attn.qkv_proj.bias[...] = 1e5           # every key / value
    for use_program in (True, False):
        with monkeypatch.context() as m:
            if not use_program:
                m.setattr(causal_lm, "decoder_program", lambda layers: None)
            caches = lm.new_caches(1, 8)
            with pytest.raises(ValueError, match="overflow"):
                lm.forward(np.array([[1, 2, 3]]), caches=caches)
            assert caches[0].length == 0


@pytest.mark.parametrize("fmt", ["float32", "int8"])
def test_program_bits_do_not_depend_on_threads(fmt, monkeypatch):
    lm = _model("qwen2", fmt)
    before = cattn.get_num_threads()
    try:
        runs = []
        for n in (1, 2, 3):
            cattn.set_num_threads(n)
            runs.append(_run(lm, True, monkeypatch))
    finally:
        cattn.set_num_threads(before)
    for other in runs[1:]:
        for a, b in zip(other[1], runs[0][1]):
            np.testing.assert_array_equal(a, b)


def test_decode_step_appends_one_position_per_layer(program_steps):
    lm = _model("qwen2", "float32")
    caches = lm.new_caches(1, 8)
    lm.forward(np.array([[1, 2, 3]]), caches=caches)
    lm.forward(np.array([[4]]), caches=caches)
    assert [c.length for c in caches] == [4] * len(caches)
    assert program_steps == [3] * len(caches) + [1] * len(caches)


def test_stacks_it_does_not_take_run_their_layers(program_steps):
    lm = _model("qwen2", "float32")

    class Block(nn.DecoderBlock):             # a subclass may override forward
        pass
    b0 = lm.layers[0]
    assert decoder_program(lm.layers) is not None
    setattr(lm.layers, "0", Block(b0.norm1, b0.self_attn, b0.norm2, b0.mlp))  # rebuilt
    assert decoder_program(lm.layers) is None
    lm.generate(PROMPTS[0], max_new_tokens=3, eos_token_id=[])
    assert not program_steps
    assert decoder_program([]) is None


def test_program_is_rebuilt_after_a_weight_is_assigned(monkeypatch):
    lm = _model("qwen2", None)
    p0 = decoder_program(lm.layers)
    assert decoder_program(lm.layers) is p0                # cached while nothing changes
    lin = lm.layers[1].mlp.down_proj
    lin.weight = -lin.weight                               # a new array: rebuilt
    assert decoder_program(lm.layers) is not p0
    ref = _run(lm, False, monkeypatch)[0]
    after = lm.generate(PROMPTS, max_new_tokens=6, eos_token_id=[])
    for a, b in zip(after, ref):
        np.testing.assert_array_equal(a, b)


def test_program_is_built_once_per_model(monkeypatch):
    """generate() builds the stack's program once per model, not once per
    call: assignments outside the stack (the model's own attributes, another
    model) leave it; one inside the stack (a layer's setting) rebuilds it."""
    from cattn.nn import program
    builds = []
    orig = program.DecoderProgram._build.__func__

    def counting(cls, layers):
        builds.append(len(layers))
        return orig(cls, layers)
    monkeypatch.setattr(program.DecoderProgram, "_build", classmethod(counting))
    lm, other = _model("qwen2", None), _model("llama", None)
    first = lm.generate(PROMPTS[0], max_new_tokens=4, eos_token_id=[])
    for _ in range(3):
        assert np.array_equal(lm.generate(PROMPTS[0], max_new_tokens=4, eos_token_id=[]), first)
        other.generate(PROMPTS[1], max_new_tokens=2, eos_token_id=[])   # another stack's
        lm.note = "an attribute of the model, outside its layers"
    assert len(builds) == 2                                 # one per model
    lm.layers[0].self_attn.note = "inside the stack"
    lm.generate(PROMPTS[0], max_new_tokens=2, eos_token_id=[])
    assert len(builds) == 3
