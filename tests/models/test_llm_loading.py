"""Checkpoint reading without torch or transformers: cattn.models.safetensors
on files written here byte by byte (float32, float16, bfloat16, sharded),
config errors, and a random Llama-shaped checkpoint that loads, runs and
generates (KV-cache decoding equal to full recomputation), also with
bfloat16 and int8 weights. The parity tests
against transformers are tests/test_llm.py."""
import json
import os
import struct

import numpy as np
import pytest

import cattn
from cattn import nn
from cattn.models import CausalLM, LLMConfig
from cattn.models.safetensors import Checkpoint, CheckpointError, SafetensorsFile


def write_safetensors(path, tensors, dtype="F32"):
    """{name: float32 array} -> a .safetensors file, stored as F32, F16 or
    BF16 (BF16: the top 16 bits, truncated)."""
    header, blobs, off = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, np.float32)
        if dtype == "F32":
            raw = a.tobytes()
        elif dtype == "F16":
            raw = a.astype("<f2").tobytes()
        else:
            raw = (a.view(np.uint32) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


CONFIG = dict(architectures=["LlamaForCausalLM"], vocab_size=50, hidden_size=32,
              intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, rms_norm_eps=1e-5, rope_theta=10000.0, eos_token_id=2,
              tie_word_embeddings=False)


def llama_tensors(cfg, rng):
    E, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    D = E // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * D
    t = {"model.embed_tokens.weight": rng.standard_normal((V, E)),
         "model.norm.weight": 1 + 0.1 * rng.standard_normal(E),
         "lm_head.weight": rng.standard_normal((V, E)) * 0.2}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        for name, shape in (("self_attn.q_proj", (E, E)), ("self_attn.k_proj", (kv, E)),
                            ("self_attn.v_proj", (kv, E)), ("self_attn.o_proj", (E, E)),
                            ("mlp.gate_proj", (F, E)), ("mlp.up_proj", (F, E)),
                            ("mlp.down_proj", (E, F))):
            t[p + name + ".weight"] = rng.standard_normal(shape) * 0.2
        t[p + "input_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(E)
        t[p + "post_attention_layernorm.weight"] = 1 + 0.1 * rng.standard_normal(E)
    return {k: v.astype(np.float32) for k, v in t.items()}


def make_checkpoint(folder, cfg=CONFIG, dtype="F32", shards=1, seed=0):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f)
    tensors = llama_tensors(cfg, np.random.default_rng(seed))
    if shards == 1:
        write_safetensors(os.path.join(folder, "model.safetensors"), tensors, dtype)
        return tensors
    names = sorted(tensors)
    weight_map = {}
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s::shards]}
        write_safetensors(os.path.join(folder, file), part, dtype)
        weight_map.update({n: file for n in part})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return tensors


@pytest.mark.parametrize("dtype", ["F32", "F16", "BF16"])
def test_reader_widens_to_float32(tmp_path, dtype):
    a = np.random.default_rng(1).standard_normal((7, 5)).astype(np.float32)
    path = str(tmp_path / "t.safetensors")
    write_safetensors(path, {"a": a, "b": a[0]}, dtype)
    f = SafetensorsFile(path)
    assert f.info("a") == (dtype, (7, 5))
    got = f.read("a")
    want = {"F32": a, "F16": a.astype(np.float16).astype(np.float32),
            "BF16": (a.view(np.uint32) & 0xFFFF0000).view(np.float32)}[dtype]
    assert got.dtype == np.float32 and np.array_equal(got, want)
    out = np.zeros((5, 7), np.float32)
    f.read("a", out=out.T)                                  # into a transposed view
    assert np.array_equal(out.T, want)
    with pytest.raises(CheckpointError, match="'b' has shape"):
        f.read("b", out=np.zeros(4, np.float32))


def test_not_a_safetensors_file(tmp_path):
    p = tmp_path / "x.safetensors"
    p.write_bytes(b"\xff" * 4)
    with pytest.raises(CheckpointError, match="not a safetensors file"):
        SafetensorsFile(str(p))
    p.write_bytes(struct.pack("<Q", 3) + b"{x}")
    with pytest.raises(CheckpointError, match="bad JSON"):
        SafetensorsFile(str(p))
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        Checkpoint(str(tmp_path))


def test_sharded_bf16_loads_the_same_weights(tmp_path):
    make_checkpoint(str(tmp_path / "a"), dtype="BF16")
    make_checkpoint(str(tmp_path / "b"), dtype="BF16", shards=3)
    a = CausalLM.from_pretrained(str(tmp_path / "a")).state_dict()
    b = CausalLM.from_pretrained(str(tmp_path / "b")).state_dict()
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_fused_weights_hold_the_checkpoint_tensors(tmp_path):
    t = make_checkpoint(str(tmp_path))
    m = CausalLM.from_pretrained(str(tmp_path))
    # the Linear weights are packed once at load (nn.pack_weights); state_dict unpacks
    qkv = m.layers[1].self_attn.qkv_proj.weight
    assert isinstance(qkv, cattn.PackedWeight)
    want = np.concatenate([t[f"model.layers.1.self_attn.{n}_proj.weight"] for n in "qkv"])
    assert np.array_equal(qkv.unpack(), want)
    assert np.array_equal(m.state_dict()["layers.1.self_attn.qkv_proj.weight"], want)
    gu = m.layers[0].mlp.gate_up_proj.weight.unpack()
    assert np.array_equal(gu, np.concatenate([t["model.layers.0.mlp.gate_proj.weight"],
                                              t["model.layers.0.mlp.up_proj.weight"]]))


def test_forward_generate_and_cache(tmp_path):
    make_checkpoint(str(tmp_path))
    m = CausalLM.from_pretrained(str(tmp_path))
    ids = np.array([[1, 4, 9, 16, 25], [3, 3, 7, 8, 1]])
    logits = m(ids)
    assert logits.shape == (2, 5, 50) and logits.dtype == np.float32
    # left padding does not change a sequence's logits (positions count real tokens)
    padded = np.array([[0, 0, 4, 9, 16, 25]])
    lp = m(padded, attention_mask=np.array([[0, 0, 1, 1, 1, 1]]))
    ref = m(np.array([[4, 9, 16, 25]]))
    assert np.allclose(lp[0, 2:], ref[0], atol=1e-5 * np.abs(ref).max())
    # KV-cache decoding = full recomputation
    caches = m.new_caches(2, 8)
    step = m(ids[:, :3], caches=caches)
    for t in range(3, 5):
        step = m(ids[:, t:t + 1], caches=caches)
        assert np.allclose(step[:, -1], logits[:, t], atol=1e-5 * np.abs(logits).max())
    out = m.generate([[1, 4, 9], [3]], max_new_tokens=6, eos_token_id=[])
    assert [len(o) for o in out] == [6, 6]
    assert np.array_equal(out[0], m.generate([1, 4, 9], max_new_tokens=6, eos_token_id=[]))
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        m.generate("text needs a tokenizer")


@pytest.mark.parametrize("change, match", [
    (dict(architectures=["FalconForCausalLM"]), "unsupported architecture 'FalconForCausalLM'"),
    (dict(architectures=None), "unsupported architecture None"),
    (dict(rope_scaling={"type": "dynamic", "factor": 2.0}), "rope_scaling type 'dynamic'"),
    (dict(num_key_value_heads=3), "not a multiple"),
    (dict(hidden_act="tanh"), "activation 'tanh'"),
    (dict(hidden_size=-1), "hidden_size"),
    # a folder's errors keep config.json's words (a GGUF file's: tests/models/test_gguf_errors.py)
    (dict(num_attention_heads=0), r"config\.json \(LlamaForCausalLM\): num_attention_heads "
                                  "must be >= 1, got 0"),
    (dict(num_key_value_heads=0), r"config\.json .*num_key_value_heads must be >= 1"),
    (dict(hidden_size=2), r"config\.json .*hidden_size=2 is smaller than num_attention_heads=4"),
    (dict(head_dim=7), r"config\.json .*head dim 7 \(head_dim\) must be even"),
    (dict(max_position_embeddings=-1), r"config\.json .*max_position_embeddings must be >= 1"),
    (dict(rope_scaling={"rope_type": "linear", "factor": 0}), "rope_scaling.factor must be > 0"),
    (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                        "high_freq_factor": 4.0, "original_max_position_embeddings": 64}),
     "rope_scaling.high_freq_factor must exceed rope_scaling.low_freq_factor"),
    (dict(rope_scaling={"rope_type": "linear", "factor": 1e-320}),
     "rope_theta=10000.0 with rope_scaling gives RoPE frequencies that are not finite"),
    (dict(eos_token_id="2"), "eos_token_id must be an int"),
])
def test_config_errors(change, match):
    with pytest.raises((ValueError, TypeError), match=match):
        LLMConfig.from_dict(dict(CONFIG, **change))


def test_folder_tensor_errors_keep_hugging_face_names(tmp_path):
    t = make_checkpoint(str(tmp_path))
    del t["model.layers.1.mlp.up_proj.weight"]
    t["model.layers.0.input_layernorm.weight"] = t["model.layers.0.input_layernorm.weight"][:-1]
    write_safetensors(str(tmp_path / "model.safetensors"), t)
    with pytest.raises(CheckpointError, match=r"LlamaForCausalLM checkpoint: tensor "
                       r"'model\.layers\.0\.input_layernorm\.weight' has shape \[31\], "
                       r"expected \[32\] from config\.json"):
        CausalLM.from_pretrained(str(tmp_path))
    t["model.layers.0.input_layernorm.weight"] = np.ones(32, np.float32)
    write_safetensors(str(tmp_path / "model.safetensors"), t)
    with pytest.raises(CheckpointError, match=r"LlamaForCausalLM checkpoint: missing tensor "
                       r"'model\.layers\.1\.mlp\.up_proj\.weight' \(for layers\.1\."):
        CausalLM.from_pretrained(str(tmp_path))


def test_rope_scaling_linear_and_llama3_frequencies():
    from cattn.models.llm_config import rope_frequencies
    base = rope_frequencies(64, 10000.0, None)
    assert np.allclose(rope_frequencies(64, 10000.0, {"rope_type": "linear", "factor": 4.0}),
                       base / 4)
    l3 = rope_frequencies(64, 500000.0, {"rope_type": "llama3", "factor": 8.0,
                                          "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 8192})
    b = rope_frequencies(64, 500000.0, None)
    assert l3[0] == b[0] and np.isclose(l3[-1], b[-1] / 8)   # short kept, long / factor
    assert np.all(l3 <= b)


@pytest.mark.parametrize("weights", ["bfloat16", "int8"])
@pytest.mark.parametrize("tied", [False, True])
def test_weights_formats(tmp_path, weights, tied):
    """weights= packs every nn.Linear in that format (cattn.nn.quantize) and
    the output projection too: a tied one as a packed copy of the embedding
    matrix, whose lookup stays float32. bfloat16: the float32 model on the
    rounded weights (output projection included), bit for bit; both within
    their rounding of the float32 logits (tests/test_nn_quantize.py derives the tolerances; this
    model's weights are N(0, 0.2), whose outliers widen int8's steps)."""
    make_checkpoint(str(tmp_path), dict(CONFIG, tie_word_embeddings=tied))
    ref = CausalLM.from_pretrained(str(tmp_path))
    m = CausalLM.from_pretrained(str(tmp_path), weights=weights)
    assert m.layers[1].self_attn.qkv_proj.weight.format == weights
    assert m.layers[0].mlp.down_proj.weight.format == weights
    if tied:
        assert m.lm_head is None and type(m.embed.weight) is np.ndarray
        assert m.lm_head_weight.format == weights and m.output_format == weights
        np.testing.assert_array_equal(m.embed.weight, ref.embed.weight)   # lookup: float32
    else:
        assert m.lm_head.weight.format == weights
    assert "lm_head.weight" in m.state_dict() or tied and not any(
        k.startswith("lm_head") for k in m.state_dict())
    ids = np.array([[1, 4, 9, 16, 25], [3, 3, 7, 8, 1]])
    want = ref(ids)
    err = np.linalg.norm(m(ids) - want) / np.linalg.norm(want)
    assert err < (1e-2 if weights == "bfloat16" else 5e-2)
    if weights == "bfloat16":
        ref.load_state_dict(m.state_dict())
        if tied:            # the float32 lookup, then the bfloat16-rounded values as lm_head
            rounded = m.lm_head_weight.unpack()
            assert not np.array_equal(rounded, ref.embed.weight)
            assert ref.lm_head_weight is ref.embed.weight           # ref stays float32
            h = ref.norm(ref._layers(ref._embed(ids, None), None,
                                     nn.causal_mask(np.ones(ids.shape, bool), ids.shape[1])))
            np.testing.assert_array_equal(m(ids), cattn.linear(h, rounded))
        else:
            np.testing.assert_array_equal(m(ids), ref(ids))
    assert [len(o) for o in m.generate(ids.tolist(), max_new_tokens=3, eos_token_id=[])] == [3, 3]


def test_weights_argument():
    with pytest.raises(ValueError, match="weights must be one of 'float32', 'bfloat16', "
                                         "'int8', 'int4', 'bfloat16dot', got 'int3'"):
        CausalLM.from_pretrained(".", weights="int3")


def test_pack_output(tmp_path):
    """pack_output: a tied output projection in each format, packed once and
    again after a new embedding is assigned; an untied lm_head is left to
    nn.quantize; a bad format is refused naming it."""
    make_checkpoint(str(tmp_path), dict(CONFIG, tie_word_embeddings=True))
    m = CausalLM.from_pretrained(str(tmp_path), weights="int8")
    head = m.lm_head_weight
    assert head is m.lm_head_weight and head.format == "int8"      # packed once
    assert head.nbytes < m.embed.weight.nbytes / 2        # int8 + scales (rows padded)
    m.embed.weight = m.embed.weight * 2
    assert m.lm_head_weight is not head
    np.testing.assert_allclose(m.lm_head_weight.unpack(), 2 * head.unpack(), rtol=1e-6)
    assert m.pack_output("float32").lm_head_weight is m.embed.weight
    with pytest.raises(ValueError, match="pack_output: weights must be one of .*got 'int3'"):
        m.pack_output("int3")
    make_checkpoint(str(tmp_path), dict(CONFIG, tie_word_embeddings=False))
    u = CausalLM.from_pretrained(str(tmp_path), weights="int8")
    assert u.pack_output("bfloat16").lm_head_weight is u.lm_head.weight   # nn.quantize's
