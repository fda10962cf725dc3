"""cattn.models.CausalLM against transformers: tiny random-initialised
checkpoints of every supported architecture (Llama with GQA, with llama3
rope scaling and tied embeddings, Qwen2 with q/k/v biases, GPT-2 in both key
layouts), saved with save_pretrained (float32; once bfloat16; once sharded)
in a session fixture, then: logits on padded batches, 32 greedy tokens
single and batched, KV-cache decoding vs full recomputation, sampling,
EOS, streaming, text in and out, and the errors of broken checkpoints.

Needs torch and transformers to build the checkpoints (skipped otherwise,
naming the package); the model code under test uses neither.
"""
import json
import os
import shutil

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is needed to build the tiny checkpoints")
transformers = pytest.importorskip("transformers",
                                   reason="transformers is needed to build the tiny checkpoints")

from cattn.models import CausalLM  # noqa: E402
from cattn.models.safetensors import CheckpointError, SafetensorsFile  # noqa: E402

V = 96              # vocabulary of every tiny model (the tokenizer's fits in it)
EOS = 2
N_NEW = 32
SENTENCES = ["the cat sat on the mat", "a dog ran in the park", "the sun is warm today",
             "we read a book and the cat slept", "birds sing in the morning light"]


def _tokenizer_json(path):
    """A tiny BPE tokenizer.json trained on SENTENCES (ids < V)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=V, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet()[:60])
    tok.train_from_iterator(SENTENCES, trainer)
    assert tok.get_vocab_size() <= V
    tok.save(path)


def _configs():
    common = dict(vocab_size=V, bos_token_id=1, eos_token_id=EOS, pad_token_id=0,
                  initializer_range=0.15)
    llama = dict(common, hidden_size=64, intermediate_size=112, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, rope_theta=5000.0,
                 max_position_embeddings=256)
    L, Q, G = transformers.LlamaConfig, transformers.Qwen2Config, transformers.GPT2Config
    return {
        "llama": (transformers.LlamaForCausalLM, L(**llama), {}),
        "llama3_tied_bf16": (transformers.LlamaForCausalLM, L(**dict(
            llama, tie_word_embeddings=True, rope_scaling=dict(
                rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                original_max_position_embeddings=32))), dict(dtype=torch.bfloat16)),
        "qwen2_sharded": (transformers.Qwen2ForCausalLM, Q(**dict(
            llama, num_key_value_heads=1, tie_word_embeddings=True)),
            dict(max_shard_size="40KB")),
        "gpt2": (transformers.GPT2LMHeadModel, G(**dict(
            common, n_embd=64, n_layer=2, n_head=4, n_positions=128)), {}),
    }


def _hub_layout(src, dst):
    """GPT-2's original Hub layout: no "transformer." prefix, no lm_head,
    attn.bias mask buffers."""
    from safetensors.numpy import load_file, save_file
    shutil.copytree(src, dst)
    w = load_file(os.path.join(src, "model.safetensors"))
    out = {k[len("transformer."):]: v for k, v in w.items() if k.startswith("transformer.")}
    n_pos = out["wpe.weight"].shape[0]
    for i in range(2):
        out[f"h.{i}.attn.bias"] = np.tril(np.ones((n_pos, n_pos), np.float32))[None, None]
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})


@pytest.fixture(scope="session")
def ckpts(tmp_path_factory):
    """{name: (folder, the transformers model in float32)}."""
    root = tmp_path_factory.mktemp("llm")
    tok = str(root / "tokenizer.json")
    _tokenizer_json(tok)
    out = {}
    for name, (cls, cfg, save_kw) in _configs().items():
        torch.manual_seed(len(name))
        model = cls(cfg).eval()
        folder = str(root / name)
        if "dtype" in save_kw:               # round the weights to bfloat16, save those
            model.to(save_kw["dtype"]).save_pretrained(folder)
            # the reference: the saved weights in float32 (not model.float(), whose
            # rotary inv_freq buffer went through bfloat16 too)
            model = cls.from_pretrained(folder, dtype=torch.float32).eval()
        else:
            model.save_pretrained(folder, **save_kw)
        shutil.copy(tok, folder)
        out[name] = (folder, model)
    hub = str(root / "gpt2_hub")
    _hub_layout(out["gpt2"][0], hub)
    out["gpt2_hub"] = (hub, out["gpt2"][1])
    return out


NAMES = ["llama", "llama3_tied_bf16", "qwen2_sharded", "gpt2", "gpt2_hub"]


@pytest.fixture(scope="session")
def models(ckpts):
    return {name: CausalLM.from_pretrained(folder) for name, (folder, _) in ckpts.items()}


PROMPTS = [[1, 5, 9, 14, 3, 7, 22], [1, 40, 8], [1, 11, 12, 13, 60, 61, 62, 63, 9, 30]]


def _left_pad(prompts):
    P = max(map(len, prompts))
    ids = np.zeros((len(prompts), P), np.int64)
    mask = np.zeros((len(prompts), P), np.int64)
    for b, p in enumerate(prompts):
        ids[b, P - len(p):], mask[b, P - len(p):] = p, 1
    return ids, mask


def _hf_greedy(model, prompts, n=N_NEW):
    """transformers' greedy tokens per prompt, cut after the first EOS."""
    ids, mask = _left_pad(prompts)
    with torch.no_grad():
        out = model.generate(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                             do_sample=False, max_new_tokens=n, min_new_tokens=0,
                             pad_token_id=0, eos_token_id=EOS).numpy()[:, ids.shape[1]:]
    res = []
    for row in out:
        row = list(row)
        res.append(row[:row.index(EOS) + 1] if EOS in row else row)
    return res


# ---------------------------------------------------------------- parity with transformers

@pytest.mark.parametrize("name", NAMES)
def test_logits_match_transformers_with_padding(ckpts, models, name):
    ids, mask = _left_pad(PROMPTS)
    pos = np.maximum(np.cumsum(mask, 1) - 1, 0)
    with torch.no_grad():
        ref = ckpts[name][1](torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                             position_ids=torch.from_numpy(pos)).logits.numpy()
    got = models[name](ids, attention_mask=mask)
    assert got.shape == (3, ids.shape[1], V) and got.dtype == np.float32
    real = mask.astype(bool)
    scale = np.abs(ref[real]).max()
    assert np.abs(got[real] - ref[real]).max() <= 1e-4 * scale


@pytest.mark.parametrize("name", NAMES)
def test_greedy_matches_transformers_single_and_batched(ckpts, models, name):
    hf = ckpts[name][1]
    lm = models[name]
    single = lm.generate(PROMPTS[0], max_new_tokens=N_NEW, eos_token_id=EOS)
    assert single.tolist() == _hf_greedy(hf, PROMPTS[:1])[0]
    batched = lm.generate(PROMPTS, max_new_tokens=N_NEW, eos_token_id=EOS)
    assert [b.tolist() for b in batched] == _hf_greedy(hf, PROMPTS)
    assert max(len(b) for b in batched) > 8           # long enough to mean something


def test_bfloat16_and_sharded_checkpoints_were_exercised(ckpts):
    bf = ckpts["llama3_tied_bf16"][0]
    f = SafetensorsFile(os.path.join(bf, "model.safetensors"))
    assert {f.info(n)[0] for n in f.names} == {"BF16"}
    sh = ckpts["qwen2_sharded"][0]
    assert os.path.isfile(os.path.join(sh, "model.safetensors.index.json"))
    assert len([p for p in os.listdir(sh) if p.endswith(".safetensors")]) > 1


def test_tied_lm_head_is_the_embedding_not_a_copy(models):
    for name in ("llama3_tied_bf16", "qwen2_sharded", "gpt2"):
        assert models[name].lm_head_weight is models[name].embed.weight
    assert not np.shares_memory(models["llama"].lm_head_weight, models["llama"].embed.weight)


def test_gpt2_layouts_load_the_same_weights(models):
    a, b = models["gpt2"].state_dict(), models["gpt2_hub"].state_dict()
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------- KV cache, sampling, EOS

@pytest.mark.parametrize("name", ["llama", "qwen2_sharded", "gpt2"])
def test_kv_cache_decoding_equals_full_recomputation(models, name):
    lm = models[name]
    seq = np.array([[1, 5, 9, 14, 3], [1, 7, 7, 30, 2]])
    caches = lm.new_caches(2, 16)
    step = lm(seq, caches=caches)[:, -1]
    for _ in range(8):
        full = lm(seq)[:, -1]
        scale = np.abs(full).max()
        assert np.abs(step - full).max() <= 1e-5 * scale
        nxt = np.argmax(full, -1)[:, None]
        seq = np.concatenate([seq, nxt], 1)
        step = lm(nxt, caches=caches)[:, -1]
    assert caches[0].length == seq.shape[1]


@pytest.mark.parametrize("name", ["llama", "qwen2_sharded", "gpt2"])
def test_float16_kv_cache_decoding_near_transformers(ckpts, models, name):
    """kv_dtype="float16": every cached key and value rounded to float16
    (relative error <= 2^-11 = 4.9e-4). Prompt then 8 decode steps, each
    step's logits against transformers' full forward of the sequence:
    within 2e-3 of the logits' scale (the rounding carried through the
    layers measured 2.9e-4 to 9.6e-4 here, about 1-2 units of float16's
    rounding; the float32 cache's error is 0.6e-6 to 1.3e-6)."""
    lm = models[name]
    hf = ckpts[name][1]
    lm.kv_dtype = "float16"
    try:
        seq = np.array([[1, 5, 9, 14, 3], [1, 7, 7, 30, 2]])
        caches = lm.new_caches(2, 16)
        assert caches[0].k.dtype == np.float16
        step = lm(seq, caches=caches)[:, -1]
        for _ in range(8):
            with torch.no_grad():
                ref = hf(torch.from_numpy(seq)).logits.numpy()[:, -1]
            scale = np.abs(ref).max()
            assert np.abs(step - ref).max() <= 2e-3 * scale
            nxt = np.argmax(ref, -1)[:, None]
            seq = np.concatenate([seq, nxt], 1)
            step = lm(nxt, caches=caches)[:, -1]
    finally:
        lm.kv_dtype = "float32"
    with pytest.raises(ValueError, match="kv_dtype must be one of 'float32', 'float16'"):
        lm.kv_dtype = "bfloat16"


@pytest.mark.parametrize("name", ["llama", "qwen2_sharded", "gpt2"])
def test_prompts_run_in_chunks_match_transformers(ckpts, models, name, monkeypatch):
    """Prompts longer than PREFILL_CHUNK go through the caches a chunk at a
    time (here 3 positions: every prompt is cut, a padded batch too): the
    prompt's last logits are transformers' full forward's, within the float32
    bar, and greedy tokens equal transformers' single and batched; prefill()
    (the server's) gives generate's first logits bit for bit."""
    from cattn.models import causal_lm
    monkeypatch.setattr(causal_lm, "PREFILL_CHUNK", 3)
    widths = []
    layers = causal_lm.CausalLM._layers

    def spy(self, x, *args):
        widths.append(x.shape[1])
        return layers(self, x, *args)
    monkeypatch.setattr(causal_lm.CausalLM, "_layers", spy)
    lm, hf = models[name], ckpts[name][1]
    ids, mask = _left_pad(PROMPTS)
    pos = np.maximum(np.cumsum(mask, 1) - 1, 0)
    with torch.no_grad():
        ref = hf(torch.from_numpy(ids), attention_mask=torch.from_numpy(mask),
                 position_ids=torch.from_numpy(pos)).logits.numpy()[:, -1]
    caches = lm.new_caches(3, ids.shape[1] + 1)
    got = lm.step_logits(ids, pos, caches, causal_lm.nn.causal_mask(mask.astype(bool),
                                                                    ids.shape[1]), padded=True)
    assert caches[0].length == ids.shape[1] and widths == [3, 3, 3, 1]   # 10 positions
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()
    single = lm.generate(PROMPTS[0], max_new_tokens=N_NEW, eos_token_id=EOS)
    assert single.tolist() == _hf_greedy(hf, PROMPTS[:1])[0]
    batched = lm.generate(PROMPTS, max_new_tokens=N_NEW, eos_token_id=EOS)
    assert [b.tolist() for b in batched] == _hf_greedy(hf, PROMPTS)
    c1 = lm.new_caches(1, 16)
    first = lm.prefill(PROMPTS[2], c1)
    c2 = lm.new_caches(1, 16)
    want = lm.step_logits(np.asarray([PROMPTS[2]]), None, c2, None)[0]
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(c1[0].keys, c2[0].keys)


def test_greedy_equals_argmax_of_full_forward(models):
    lm = models["llama3_tied_bf16"]
    got = lm.generate(PROMPTS[1], max_new_tokens=12, eos_token_id=[])
    seq = list(PROMPTS[1])
    for _ in range(12):
        seq.append(int(np.argmax(lm(np.array([seq]))[0, -1])))
    assert got.tolist() == seq[len(PROMPTS[1]):]


def test_sampling_seeded_top_k_top_p(models):
    lm = models["qwen2_sharded"]
    kw = dict(max_new_tokens=16, do_sample=True, eos_token_id=[])
    a = lm.generate(PROMPTS, seed=7, temperature=1.5, **kw)
    b = lm.generate(PROMPTS, seed=7, temperature=1.5, **kw)
    c = lm.generate(PROMPTS, seed=8, temperature=1.5, **kw)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))
    greedy = lm.generate(PROMPTS, max_new_tokens=16, eos_token_id=[])
    for extra in (dict(top_k=1), dict(top_p=1e-9), dict(temperature=1e-4)):
        got = lm.generate(PROMPTS, seed=3, **dict(kw, **extra))
        assert all(np.array_equal(x, y) for x, y in zip(got, greedy)), extra
    tk = lm.generate(PROMPTS[0], seed=1, top_k=3, top_p=0.9, **dict(kw, max_new_tokens=24))
    assert tk.shape == (24,) and tk.min() >= 0 and tk.max() < V


def test_eos_stops_each_sequence(models):
    lm = models["llama"]
    free = lm.generate(PROMPTS, max_new_tokens=12, eos_token_id=[])
    eos = int(free[0][4])                               # the 5th token of the first prompt
    got = lm.generate(PROMPTS, max_new_tokens=12, eos_token_id=eos)
    for g, f in zip(got, free):
        f = f.tolist()
        want = f[:f.index(eos) + 1] if eos in f else f
        assert g.tolist() == want
    assert len(got[0]) <= 5 and got[0][-1] == eos


def test_streaming_yields_the_same_tokens(models):
    lm = models["gpt2"]
    want = lm.generate(PROMPTS, max_new_tokens=10, eos_token_id=EOS)
    steps = list(lm.generate(PROMPTS, max_new_tokens=10, eos_token_id=EOS, stream=True))
    for b, w in enumerate(want):
        assert [s[b] for s in steps if s[b] is not None] == w.tolist()
    single = list(lm.generate(PROMPTS[0], max_new_tokens=10, eos_token_id=EOS, stream=True))
    assert single == want[0].tolist()
    assert lm.stats["prefill_tokens"] == len(PROMPTS[0])


def test_text_in_and_out(models):
    lm = models["llama"]
    tok = lm._tokenizer()
    text = lm.generate("the cat sat", max_new_tokens=8, eos_token_id=[])
    ids = lm.generate(tok.encode("the cat sat"), max_new_tokens=8, eos_token_id=[])
    assert text == tok.decode(ids)
    pieces = list(lm.generate("the cat sat", max_new_tokens=8, eos_token_id=[], stream=True))
    assert "".join(pieces) == text
    two = lm.generate(["the cat sat", "a dog"], max_new_tokens=4, eos_token_id=[])
    assert isinstance(two, list) and len(two) == 2 and all(isinstance(t, str) for t in two)


def test_tokenizer_first_from_a_folder(ckpts):
    """tokenizer_first=True: tokenizer.json built while loading, the same text."""
    folder = ckpts["llama"][0]
    first = CausalLM.from_pretrained(folder, tokenizer_first=True)
    assert first.tokenizer is not None
    assert first.generate("the cat", max_new_tokens=4, eos_token_id=[]) == \
        CausalLM.from_pretrained(folder).generate("the cat", max_new_tokens=4, eos_token_id=[])


# ---------------------------------------------------------------- errors

def _copy(ckpts, name, tmp_path):
    dst = str(tmp_path / name)
    shutil.copytree(ckpts[name][0], dst)
    return dst


def _edit_config(folder, **changes):
    p = os.path.join(folder, "config.json")
    with open(p) as f:
        cfg = json.load(f)
    cfg.update(changes)
    with open(p, "w") as f:
        json.dump(cfg, f)


def test_unsupported_architecture_names_it(ckpts, tmp_path):
    d = _copy(ckpts, "llama", tmp_path)
    _edit_config(d, architectures=["FalconForCausalLM"])
    with pytest.raises(ValueError, match="FalconForCausalLM.*LlamaForCausalLM.*Qwen2ForCausalLM"
                                         ".*GPT2LMHeadModel"):
        CausalLM.from_pretrained(d)


def test_unsupported_rope_scaling(ckpts, tmp_path):
    d = _copy(ckpts, "llama", tmp_path)
    _edit_config(d, rope_parameters=None, rope_theta=10000.0,
                 rope_scaling={"rope_type": "yarn", "factor": 4.0})
    with pytest.raises(ValueError, match="rope_scaling type 'yarn'"):
        CausalLM.from_pretrained(d)


def test_missing_and_misshaped_tensors_are_named(ckpts, tmp_path):
    from safetensors.numpy import load_file, save_file
    d = _copy(ckpts, "llama", tmp_path)
    path = os.path.join(d, "model.safetensors")
    w = load_file(path)
    del w["model.layers.1.mlp.up_proj.weight"]
    save_file(w, path)
    with pytest.raises(CheckpointError, match="model.layers.1.mlp.up_proj.weight"):
        CausalLM.from_pretrained(d)
    d2 = _copy(ckpts, "llama", tmp_path / "b")
    _edit_config(d2, intermediate_size=100)
    with pytest.raises(CheckpointError, match=r"gate_proj.weight' has shape \[112, 64\], "
                                              r"expected \[100, 64\]"):
        CausalLM.from_pretrained(d2)


def test_truncated_file_is_an_error(ckpts, tmp_path):
    d = _copy(ckpts, "gpt2", tmp_path)
    path = os.path.join(d, "model.safetensors")
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 100)
    with pytest.raises(CheckpointError, match="truncated"):
        CausalLM.from_pretrained(d)


def test_bad_inputs(models):
    lm = models["llama"]
    with pytest.raises(TypeError, match="float"):
        lm(np.zeros((1, 3), np.float32))
    with pytest.raises(ValueError, match=r"\[0, 96\)"):
        lm(np.array([[1, 2, 96]]))
    with pytest.raises(ValueError, match="attention_mask has shape"):
        lm(np.array([[1, 2, 3]]), attention_mask=np.ones((1, 2)))
    with pytest.raises(ValueError, match="max_new_tokens"):
        lm.generate([1, 2], max_new_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        lm.generate([1, 2], do_sample=True, top_p=1.5)
    with pytest.raises(ValueError, match="1-D sequence"):
        lm.generate([[1, 2], []])
    with pytest.raises(ValueError, match="positions"):
        models["gpt2"].generate([1, 2], max_new_tokens=200)
    with pytest.raises(ValueError, match="caches"):
        lm(np.array([[1, 2]]), caches=lm.new_caches(2, 4))


def test_text_without_tokenizer(ckpts, tmp_path):
    d = _copy(ckpts, "gpt2", tmp_path)
    os.remove(os.path.join(d, "tokenizer.json"))
    lm = CausalLM.from_pretrained(d)
    assert lm.generate([1, 2, 3], max_new_tokens=2).shape[0] >= 1
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        lm.generate("hello")


def test_cli_generate_streams_text_and_speeds(ckpts, models, capsys):
    from cattn.cli import main
    folder = ckpts["llama"][0]
    assert main(["generate", folder, "the cat sat", "--max-new-tokens", "6",
                 "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    want = models["llama"].generate("the cat sat", max_new_tokens=6)
    assert out.startswith("the cat sat" + want)
    assert "prefill:" in err and "decode:" in err and "tokens/s" in err
    assert main(["generate", folder, "the cat", "--max-new-tokens", "4", "--top-k", "5",
                 "--seed", "1"]) == 0
    assert main(["generate", str(folder) + "-missing", "x"]) == 2
    assert "error" in capsys.readouterr().err
    assert main(["generate", folder, "the cat sat", "--max-new-tokens", "3",
                 "--weights", "int8"]) == 0
    int8 = CausalLM.from_pretrained(folder, weights="int8")
    assert capsys.readouterr().out.startswith(
        "the cat sat" + int8.generate("the cat sat", max_new_tokens=3))
