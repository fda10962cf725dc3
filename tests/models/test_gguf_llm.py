"""CausalLM.from_pretrained("model.gguf") against transformers: tiny Llama
(GQA, untied) and Qwen2 (q/k/v biases, tied) models are written here as
GGUF files the way llama.cpp's convert_hf_to_gguf.py writes them (its
tensor names and metadata keys; a llama model's q and k rows permuted for
ggml's interleaved rotary pairs), in F32 and with Q8_0 / Q4_0 / Q4_1 /
Q5_0 / Q5_1 weights quantized by the `gguf` package. The reference is the
transformers model holding the same values (gguf's dequantization of each
quantized weight: blocks run along rows, so quantizing the permuted rows
is permuting the quantized ones). Tolerance: float32 sums over <= 128
terms of O(1) values on two layers, 1e-4 (the float32 Hugging Face tests
use the same)."""
import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf package (llama.cpp's gguf-py) writes the files")
torch = pytest.importorskip("torch", reason="torch is needed for the transformers reference")
transformers = pytest.importorskip("transformers", reason="transformers is the reference")

from cattn.models import CausalLM  # noqa: E402
from cattn.ops.formats import preferred_bfloat16  # noqa: E402

V = 96


def permute(w, n_head):
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute (rows of q or k)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def hf_model(arch, hidden=64, intermediate=128):
    torch.manual_seed(0)
    common = dict(vocab_size=V, hidden_size=hidden, intermediate_size=intermediate,
                  num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, rope_theta=5000.0,
                  rms_norm_eps=1e-5, max_position_embeddings=256, initializer_range=0.15,
                  bos_token_id=1, eos_token_id=2)
    if arch == "llama":
        cfg = transformers.LlamaConfig(**common, tie_word_embeddings=False)
        return transformers.LlamaForCausalLM(cfg).eval()
    if arch == "qwen3":                         # q/k head norms, head dim != E / H
        cfg = transformers.Qwen3Config(**common, head_dim=32, tie_word_embeddings=True)
        m = transformers.Qwen3ForCausalLM(cfg).eval()
    else:
        cfg = transformers.Qwen2Config(**common, tie_word_embeddings=True)
        m = transformers.Qwen2ForCausalLM(cfg).eval()
    with torch.no_grad():      # biases are zeros and norms ones at init: make them count
        for n, p in m.named_parameters():
            if n.endswith("bias"):
                p.normal_(0, 0.3)
            elif "norm" in n:
                p.uniform_(0.5, 1.5)
    return m


NAMES = {"input_layernorm.weight": "attn_norm.weight",
         "post_attention_layernorm.weight": "ffn_norm.weight",
         "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
         "self_attn.o_proj.weight": "attn_output.weight", "mlp.gate_proj.weight": "ffn_gate.weight",
         "mlp.up_proj.weight": "ffn_up.weight", "mlp.down_proj.weight": "ffn_down.weight",
         "self_attn.q_norm.weight": "attn_q_norm.weight",
         "self_attn.k_norm.weight": "attn_k_norm.weight"}


def gguf_name(hf):
    if hf == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf == "model.norm.weight":
        return "output_norm.weight"
    if hf == "lm_head.weight":
        return "output.weight"
    i, rest = hf[len("model.layers."):].split(".", 1)
    for a, b in NAMES.items():
        if rest.startswith(a):
            return f"blk.{i}.{b}{rest[len(a):]}"
    raise KeyError(hf)


def unpermute(w, n_head):
    return (w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def q4k_blocks(shape, rng):
    """Random Q4_K blocks (rows of shape[1] / 256 blocks of 144 bytes) with
    small finite scales: values O(0.1). gguf-py has no Q4_K quantizer."""
    nb = shape[0] * shape[1] // 256
    raw = rng.integers(0, 256, (nb, 144), dtype=np.uint8)
    scales = np.abs(rng.standard_normal((nb, 2)) * 4e-4).astype(np.float16)
    raw[:, :4] = scales.view(np.uint8)
    return raw.reshape(shape[0], -1)


def q6k_blocks(shape, rng):
    """Random Q6_K blocks (210 bytes a 256: ql, qh, int8 sub-scales, a
    float16 d) with a small finite d: values O(0.1)."""
    nb = shape[0] * shape[1] // 256
    raw = rng.integers(0, 256, (nb, 210), dtype=np.uint8)
    raw[:, 208:] = np.abs(rng.standard_normal((nb, 1)) * 1e-4).astype(np.float16).view(np.uint8)
    return raw.reshape(shape[0], -1)


def write_gguf(model, arch, path, qtype, embed=False, types=None, extra=(), meta=()):
    """-> the state dict (float32 arrays) the file holds, in HF's layout.
    qtype: the 2-D weights' type (the embedding's too when embed); types:
    {substring of the HF name: type} overriding it."""
    c = model.config
    rng = np.random.default_rng(11)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(256)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    if getattr(c, "head_dim", None):
        w.add_key_length(c.head_dim)
        w.add_value_length(c.head_dim)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_freq_base(5000.0)                # hf_model's rope_theta
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for add, key, value in meta:                # extra metadata, e.g. rope scaling keys
        getattr(w, add)(key, value)
    for name, value in extra:                   # extra tensors, e.g. rope_freqs.weight
        w.add_tensor(name, value)
    held = {}
    for hf, t in model.state_dict().items():
        if hf == "lm_head.weight" and c.tie_word_embeddings:
            continue
        a = t.detach().numpy().astype(np.float32)
        heads = None
        if arch == "llama" and (".q_proj." in hf or ".k_proj." in hf):
            heads = c.num_attention_heads if ".q_proj." in hf else c.num_key_value_heads
            stored = permute(a, heads)
        else:
            stored = a
        tname = next((v for k, v in (types or {}).items() if k in hf), qtype)
        if a.ndim == 2 and tname != "F32" and (embed or hf != "model.embed_tokens.weight"):
            qt = gguf.GGMLQuantizationType[tname]
            blocks = {"Q4_K": q4k_blocks, "Q6_K": q6k_blocks}.get(tname)
            q = blocks(stored.shape, rng) if blocks else gguf.quants.quantize(stored, qt)
            w.add_tensor(gguf_name(hf), q, raw_shape=q.shape, raw_dtype=qt)
            a = gguf.quants.dequantize(q, qt).astype(np.float32)
            if heads is not None:
                a = unpermute(a, heads)
        else:
            w.add_tensor(gguf_name(hf), stored)
        held[hf] = a
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return held


@pytest.mark.parametrize("qtype", ["F32", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_gguf_model_matches_transformers(tmp_path, arch, qtype):
    ref = hf_model(arch)
    path = tmp_path / "m.gguf"
    held = write_gguf(ref, arch, path, qtype)
    ref.load_state_dict({k: torch.from_numpy(v) for k, v in held.items()}, strict=False)
    lm = CausalLM.from_pretrained(str(path), weights="float32")   # the values, in float32
    assert lm.config.architecture == type(ref).__name__
    assert (lm.lm_head is None) == (arch != "llama")
    ids = np.array([[1, 5, 9, 17, 33, 65, 3, 7]])
    with torch.no_grad():
        want = ref(torch.from_numpy(ids)).logits.numpy()
    np.testing.assert_allclose(lm(ids), want, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        hf_ids = ref.generate(torch.from_numpy(ids), max_new_tokens=8, do_sample=False,
                              eos_token_id=None, pad_token_id=0)[0, ids.shape[1]:].tolist()
    assert list(lm.generate(ids[0].tolist(), max_new_tokens=8, eos_token_id=[])) == hf_ids


def hf_state(lm):
    """cattn's state dict under HF names: q|k|v and gate|up split."""
    c, out = lm.config, {}
    glob = {"embed.weight": "model.embed_tokens.weight", "norm.weight": "model.norm.weight"}
    for k, v in lm.state_dict().items():
        hf = glob.get(k, k).replace("layers.", "model.layers.").replace("norm1", "input_layernorm")
        hf = hf.replace("norm2", "post_attention_layernorm")
        if ".qkv_proj." in k:
            sizes = [c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim]
            for n, part in zip("qkv", np.split(v, np.cumsum(sizes))):
                out[hf.replace("qkv_proj", f"{n}_proj")] = part
        elif ".gate_up_proj." in k:
            for n, part in zip(("gate_proj", "up_proj"), np.split(v, 2)):
                out[hf.replace("gate_up_proj", n)] = part
        else:
            out[hf] = v
    return out


@pytest.mark.parametrize("arch,qtype,types,sizes", [
    ("llama", "Q4_0", None, (64, 128)), ("qwen2", "Q4_1", None, (64, 128)),
    ("llama", "Q4_0", {"v_proj": "Q4_1", "up_proj": "Q4_1"}, (64, 128)),
    ("qwen2", "Q4_K", {"o_proj": "Q4_0"}, (256, 256)),
    ("qwen3", "Q4_K", {"v_proj": "Q6_K", "down_proj": "Q6_K", "o_proj": "Q4_0"}, (256, 256)),
    ("qwen2", "Q4_0", {"k_proj": "Q8_0", "down_proj": "BF16"}, (64, 128)),
    ("llama", "Q8_0", {"q_proj": "Q4_0", "v_proj": "Q5_1", "gate_proj": "Q5_0"}, (64, 128)),
    ("qwen2", "Q4_0", {"v_proj": "Q5_1", "gate_proj": "Q5_0", "down_proj": "Q5_0"}, (64, 128))])
def test_gguf_default_formats_hold_the_file_exactly(tmp_path, arch, qtype, types, sizes):
    """weights=None: every 4-bit weight in int4, 5-bit ones in int5g, Q6_K in
    int6g, Q8_0 in int8g, BF16 in bfloat16dot where the CPU runs vdpbf16ps
    (else bfloat16), a fused q|k|v or gate|up of
    pieces of different types as a "stack" of one part per run of one type
    (each in its type's format); the values are the file's, bit for bit (state_dict
    unpacks them); a tied 4-bit embedding's output projection is int4 while
    the lookup keeps float32. The logits are within the 8-bit activations'
    error of transformers holding the same values."""
    ref = hf_model(arch, *sizes)
    path = tmp_path / "m.gguf"
    held = write_gguf(ref, arch, path, qtype, embed=True, types=types)
    lm = CausalLM.from_pretrained(str(path))
    got = hf_state(lm)
    for k, v in held.items():
        if k != "lm_head.weight":
            np.testing.assert_array_equal(got[k], v, err_msg=k)
    fmts = {k: tuple(str(q.format) for q in p.parts)
            for k, p in ((k, getattr(getattr(lm.layers[0], k.split(".")[0]), k.split(".")[1]).weight)
                         for k in ("self_attn.qkv_proj", "self_attn.o_proj",
                                   "mlp.gate_up_proj", "mlp.down_proj"))}
    mixed = types or {}
    of_type = {"Q4_0": "int4", "Q4_1": "int4", "Q4_K": "int4", "Q5_0": "int5g", "Q5_1": "int5g",
               "Q6_K": "int6g", "Q8_0": "int8g", "BF16": str(preferred_bfloat16())}

    def want(pieces):             # a run of pieces of one type: one part in that type's format
        t = [mixed.get(n, qtype) for n in pieces]
        return tuple(of_type[x] for i, x in enumerate(t) if i == 0 or x != t[i - 1])
    assert fmts["self_attn.qkv_proj"] == want(["q_proj", "k_proj", "v_proj"])
    assert fmts["mlp.gate_up_proj"] == want(["gate_proj", "up_proj"])
    assert fmts["mlp.down_proj"] == want(["down_proj"])
    assert fmts["self_attn.o_proj"] == want(["o_proj"])
    if arch in ("qwen2", "qwen3"):                         # tied
        assert lm.output_format == "int4" and lm.lm_head_weight.format == "int4"
        np.testing.assert_array_equal(lm.lm_head_weight.unpack(), held["model.embed_tokens.weight"])
        assert lm.embed.weight is lm.lm_head_weight        # one packed table: lookup and output
        ids = np.array([[0, 5, V - 1], [7, 7, 3]])
        np.testing.assert_array_equal(lm.embed(ids), held["model.embed_tokens.weight"][ids])
        lm.pack_output("int8")                           # repacked from the table's values
        assert lm.lm_head_weight.format == "int8"
    else:
        assert lm.lm_head.weight.format == of_type[qtype]
    ref.load_state_dict({k: torch.from_numpy(v) for k, v in held.items()}, strict=False)
    ids = np.array([[1, 5, 9, 17, 33, 65, 3, 7]])
    with torch.no_grad():
        want = ref(torch.from_numpy(ids)).logits.numpy()[0].astype(np.float64)
    have = lm(ids)[0].astype(np.float64)
    # random weights of std 0.1 give logits of norm ~150, but at some
    # positions ~16 (cancellation): the 8-bit activations' absolute error
    # is then a larger share there, hence a per-position 0.98
    cos = (have * want).sum(1) / np.linalg.norm(have, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() > 0.98, cos
    assert (have * want).sum() / np.linalg.norm(have) / np.linalg.norm(want) > 0.999
    assert np.linalg.norm(have - want) / np.linalg.norm(want) < 0.06


def test_gguf_model_int8_weights(tmp_path):
    ref = hf_model("qwen2")
    path = tmp_path / "m.gguf"
    write_gguf(ref, "qwen2", path, "F32")
    f32 = CausalLM.from_pretrained(str(path))
    i8 = CausalLM.from_pretrained(str(path), weights="int8")
    assert i8.lm_head_weight.format == "int8"
    ids = np.array([[1, 5, 9, 17]])
    want = f32(ids)
    assert np.linalg.norm(i8(ids) - want) / np.linalg.norm(want) < 5e-2


def bare_file(path, arch):
    """A file with an embedding and the architecture key alone."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_gguf_model_errors(tmp_path):
    with pytest.raises(ValueError, match=r"x.gguf: general.architecture 'falcon' is not supported"):
        CausalLM.from_pretrained(bare_file(tmp_path / "x.gguf", "falcon"))
    with pytest.raises(ValueError, match=r"metadata 'llama.embedding_length' is missing"):
        CausalLM.from_pretrained(bare_file(tmp_path / "y.gguf", "llama"))
    ref = hf_model("llama")
    write_gguf(ref, "llama", tmp_path / "z.gguf", "F32")
    f = tmp_path / "z.gguf"
    data = f.read_bytes().replace(b"llama.feed_forward_length", b"llama.feed_forward_lengtX")
    f.write_bytes(data)
    with pytest.raises(ValueError, match=r"metadata 'llama.feed_forward_length' is missing"):
        CausalLM.from_pretrained(str(f))
    with pytest.raises(FileNotFoundError, match="neither a checkpoint folder nor a GGUF file"):
        CausalLM.from_pretrained(str(tmp_path / "absent.gguf"))


def llama3_rope_factors(theta, dim, scaling):
    """rope_freqs.weight as llama.cpp's convert_hf_to_gguf.py computes it."""
    import math
    freqs = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old = scaling["original_max_position_embeddings"]
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < old / high:
            out.append(1)
        elif wavelen > old / low:
            out.append(factor)
        else:
            smooth = (old / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


def test_gguf_llama3_rope_freqs_matches_transformers(tmp_path):
    """A llama file with rope_freqs.weight (Llama 3.x's rope scaling, as
    llama.cpp's converter writes it) against transformers' llama3 rope type,
    over 40 positions (past the scaled wavelengths); a linear-scaled file
    against transformers' linear type; other scalings are refused."""
    scaling = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 16}
    for kind in ("llama3", "linear"):
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(
            vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, rope_theta=5000.0, rms_norm_eps=1e-5,
            max_position_embeddings=256, initializer_range=0.15, tie_word_embeddings=False,
            rope_scaling=scaling if kind == "llama3" else {"rope_type": "linear", "factor": 4.0})
        ref = transformers.LlamaForCausalLM(cfg).eval()
        path = tmp_path / f"{kind}.gguf"
        held = write_gguf(ref, "llama", path, "F32", extra=(
            [("rope_freqs.weight", llama3_rope_factors(5000.0, 16, scaling))] if kind == "llama3"
            else []), meta=([] if kind == "llama3" else [
                ("add_string", "llama.rope.scaling.type", "linear"),
                ("add_float32", "llama.rope.scaling.factor", 4.0)]))
        ref.load_state_dict({k: torch.from_numpy(v) for k, v in held.items()}, strict=False)
        lm = CausalLM.from_pretrained(str(path))
        ids = np.random.default_rng(1).integers(0, V, (1, 40))
        with torch.no_grad():
            want = ref(torch.from_numpy(ids)).logits.numpy()
        np.testing.assert_allclose(lm(ids), want, rtol=1e-4, atol=1e-4)
    bad = tmp_path / "yarn.gguf"
    write_gguf(hf_model("llama"), "llama", bad, "F32",
               meta=[("add_string", "llama.rope.scaling.type", "yarn")])
    with pytest.raises(ValueError, match="rope.scaling.type 'yarn' is not supported"):
        CausalLM.from_pretrained(str(bad))


def test_qwen3_folder_matches_transformers(tmp_path):
    """Qwen3ForCausalLM from its Hugging Face folder (q_norm / k_norm of
    each head): logits within 1e-4 and the same greedy tokens."""
    ref = hf_model("qwen3")
    ref.save_pretrained(str(tmp_path))
    lm = CausalLM.from_pretrained(str(tmp_path))
    assert lm.config.architecture == "Qwen3ForCausalLM" and lm.config.qk_norm
    ids = np.array([[1, 5, 9, 17, 33, 65, 3, 7]])
    with torch.no_grad():
        want = ref(torch.from_numpy(ids)).logits.numpy()
        hf_ids = ref.generate(torch.from_numpy(ids), max_new_tokens=8, do_sample=False,
                              eos_token_id=None, pad_token_id=0)[0, ids.shape[1]:].tolist()
    np.testing.assert_allclose(lm(ids), want, rtol=1e-4, atol=1e-4)
    assert list(lm.generate(ids[0].tolist(), max_new_tokens=8, eos_token_id=[])) == hf_ids
    # int4 at load: on these random N(0, 0.15) rows of 64 (two groups each) the
    # logits move ~30% (int8: ~4%): wired, not garbage (unrelated logits: ~140%)
    i4 = CausalLM.from_pretrained(str(tmp_path), weights="int4")
    assert np.linalg.norm(i4(ids) - want) / np.linalg.norm(want) < 0.4


@pytest.mark.parametrize("qtype", ["F32", "Q8_0", "Q4_0"])
def test_gguf_gpt2_matches_transformers(tmp_path, qtype):
    """A GPT-2 file as llama.cpp's converter writes it (the Conv1D weights
    transposed to (out, in), attn_qkv fused, output.weight a copy of
    token_embd, learned positions): logits within 1e-4 of transformers'
    GPT2LMHeadModel holding the same values (F32), the same greedy tokens;
    a quantized file's linear weights stay in their exact formats (the
    values bit for bit), its logits within the 8-bit activations' error."""
    torch.manual_seed(0)
    cfg = transformers.GPT2Config(vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                                  initializer_range=0.15)
    ref = transformers.GPT2LMHeadModel(cfg).eval()
    with torch.no_grad():
        for n, p in ref.named_parameters():
            if n.endswith("bias"):
                p.normal_(0, 0.3)
    w = gguf.GGUFWriter(str(tmp_path / "g.gguf"), "gpt2")
    w.add_context_length(64)
    w.add_embedding_length(64)
    w.add_feed_forward_length(256)
    w.add_block_count(2)
    w.add_head_count(4)
    w.add_layer_norm_eps(1e-5)
    names = {"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
             "ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down"}
    for hf, t in ref.state_dict().items():
        a = t.detach().numpy().astype(np.float32)
        if hf.endswith(".attn.bias") or hf.endswith("masked_bias") or hf == "lm_head.weight":
            continue
        if hf == "transformer.wte.weight":
            w.add_tensor("token_embd.weight", a)
            w.add_tensor("output.weight", a)
            continue
        if hf == "transformer.wpe.weight":
            w.add_tensor("position_embd.weight", a)
            continue
        if hf.startswith("transformer.ln_f."):
            w.add_tensor("output_norm." + hf.rsplit(".", 1)[1], a)
            continue
        i, rest = hf[len("transformer.h."):].split(".", 1)
        base, part = rest.rsplit(".", 1)
        if part == "weight" and not base.startswith("ln"):
            a = np.ascontiguousarray(a.T)                 # Conv1D (in, out) -> (out, in)
            if qtype != "F32":                            # the reference holds the file's values
                qt = gguf.GGMLQuantizationType[qtype]
                q = gguf.quants.quantize(a, qt)
                w.add_tensor(f"blk.{i}.{names[base]}.{part}", q, raw_shape=q.shape, raw_dtype=qt)
                held = gguf.quants.dequantize(q, qt).astype(np.float32)
                with torch.no_grad():
                    t.copy_(torch.from_numpy(np.ascontiguousarray(held.T)))
                continue
        w.add_tensor(f"blk.{i}.{names[base]}.{part}", a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    lm = CausalLM.from_pretrained(str(tmp_path / "g.gguf"))
    assert lm.config.architecture == "GPT2LMHeadModel"
    want_fmt = {"F32": "float32", "Q8_0": "int8g", "Q4_0": "int4"}[qtype]
    for mod in (lm.layers[0].self_attn.qkv_proj, lm.layers[1].mlp.fc2):
        assert mod.weight.format == want_fmt
    ids = np.array([[1, 5, 9, 17, 33, 65, 3, 7]])
    with torch.no_grad():
        want = ref(torch.from_numpy(ids)).logits.numpy()
        hf_ids = ref.generate(torch.from_numpy(ids), max_new_tokens=8, do_sample=False,
                              eos_token_id=None, pad_token_id=0)[0, ids.shape[1]:].tolist()
    if qtype == "F32":
        np.testing.assert_allclose(lm(ids), want, rtol=1e-4, atol=1e-4)
        assert list(lm.generate(ids[0].tolist(), max_new_tokens=8, eos_token_id=[])) == hf_ids
    else:                     # the activations quantized per 32 at 8 bits: cosine as above
        have = lm(ids)[0].astype(np.float64)
        ref_l = want[0].astype(np.float64)
        cos = (have * ref_l).sum(1) / np.linalg.norm(have, axis=1) / np.linalg.norm(ref_l, axis=1)
        assert cos.min() > 0.98, cos
