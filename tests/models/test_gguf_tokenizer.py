"""The tokenizer inside a GGUF file (cattn.models.GGUFTokenizer,
GGUFFile.tokenizer(), a GGUF CausalLM's text in and out).

The reference is llama.cpp's own tokenizer test data: its vocabulary-only
GGUF files with input texts (.inp, cases separated by a line
"__ggml_vocab_test__", as llama.cpp's tests/test-tokenizer-0 reads them)
and the token ids llama.cpp gives (.out, one line per case), for the
qwen2, llama-bpe (Llama 3), gpt-2, llama-spm (Llama 2) and phi-3
vocabularies. tools/fetch_ggml_vocab.sh puts them where this module looks
($CATTN_GGML_VOCAB or ~/.cache/cattn-test/ggml-vocab); CI fetches them in
its peers stage.
"""
import os

import pytest

pytest.importorskip("tokenizers", reason="the tokenizers package builds the tokenizer")

from cattn.models import GGUFFile, GGUFTokenizer  # noqa: E402

VOCAB = os.environ.get("CATTN_GGML_VOCAB", os.path.expanduser("~/.cache/cattn-test/ggml-vocab"))
NAMES = ["qwen2", "llama-bpe", "gpt-2", "llama-spm", "phi-3"]
SEP = "\n__ggml_vocab_test__\n"


def vocab_file(name):
    path = os.path.join(VOCAB, f"ggml-vocab-{name}.gguf")
    if not os.path.isfile(path):
        pytest.skip(f"the ggml-vocab test vectors are not in {VOCAB} "
                    "(tools/fetch_ggml_vocab.sh fetches them)")
    return path


def cases(name):
    path = vocab_file(name)
    with open(path + ".inp", encoding="utf-8") as f:
        texts = f.read().split(SEP)
    with open(path + ".out", encoding="utf-8") as f:
        ids = f.read().split("\n")
    texts = texts[:len(ids)] if texts[-1] == "" else texts
    assert len(texts) >= 40
    return [(t, [int(v) for v in line.split()]) for t, line in zip(texts, ids)]


@pytest.fixture(scope="module")
def tokenizers_by_name():
    return {}


def tok(name, cache):
    if name not in cache:
        cache[name] = GGUFFile(vocab_file(name)).tokenizer()
    return cache[name]


@pytest.mark.parametrize("name", NAMES)
def test_every_llama_cpp_case(name, tokenizers_by_name):
    t = tok(name, tokenizers_by_name)
    bad = [(text, t.encode(text, add_special=False), want) for text, want in cases(name)
           if t.encode(text, add_special=False) != want]
    assert not bad, f"{len(bad)} cases differ, first: {bad[0]!r}"


@pytest.mark.parametrize("name", NAMES)
def test_decode_round_trip(name, tokenizers_by_name):
    """decode(encode(text)) is the text for every case (llama-spm / phi-3 drop
    the one space the tokenizer puts in front, as llama.cpp's detokenizer does)."""
    t = tok(name, tokenizers_by_name)
    for text, want in cases(name):
        assert t.decode(want) == text, (text, t.decode(want))


def test_special_tokens(tokenizers_by_name):
    spm, qwen = tok("llama-spm", tokenizers_by_name), tok("qwen2", tokenizers_by_name)
    assert spm.encode("Hello")[0] == 1 == spm.bos_token_id and spm.add_bos
    assert spm.encode("Hello", add_special=False)[0] != 1
    assert not qwen.add_bos and qwen.encode("Hello") == qwen.encode("Hello", add_special=False)
    im = qwen.token_id("<|im_start|>")
    assert im == 151644
    assert qwen.encode("<|im_start|>user", parse_special=True)[0] == im
    assert im not in qwen.encode("<|im_start|>user")           # plain text without parse_special
    assert qwen.token_id("<|im_end|>") in qwen.eot_ids
    assert qwen.decode([im, *qwen.encode("hi")]) == "hi"        # control tokens skipped
    assert "<|im_start|>" in qwen.decode([im], skip_special=False)
    with pytest.raises(ValueError, match=r"\[0, 151936\)"):
        qwen.decode([151936])
    with pytest.raises(TypeError, match="str"):
        qwen.encode(b"bytes")


def test_parse_special_from_many_threads(tokenizers_by_name):
    """One tokenizer serves both modes (its encode_special_tokens flag is set
    per call under a lock): threads encoding with and without
    parse_special at once get what each call gets alone."""
    from concurrent.futures import ThreadPoolExecutor
    qwen = tok("qwen2", tokenizers_by_name)
    text = "<|im_start|>user\nHello, world! 123 <|im_end|>\n" * 20
    want = {ps: qwen.encode(text, parse_special=ps) for ps in (False, True)}
    assert want[True] != want[False] and 151644 in want[True]
    with ThreadPoolExecutor(8) as ex:
        got = list(ex.map(lambda i: (i % 2 == 1, qwen.encode(text, parse_special=i % 2 == 1)),
                          range(400)))
    assert all(ids == want[ps] for ps, ids in got)


def test_unsupported_metadata_is_named():
    meta = dict(GGUFFile(vocab_file("gpt-2")).metadata)
    with pytest.raises(ValueError, match="tokenizer.ggml.pre 'starcoder' is not supported"):
        GGUFTokenizer({**meta, "tokenizer.ggml.pre": "starcoder"})
    with pytest.raises(ValueError, match="tokenizer.ggml.model 'bert' is not supported"):
        GGUFTokenizer({**meta, "tokenizer.ggml.model": "bert"})
    with pytest.raises(ValueError, match="tokenizer.ggml.merges"):
        GGUFTokenizer({k: v for k, v in meta.items() if k != "tokenizer.ggml.merges"})
    with pytest.raises(ValueError, match="token_type"):
        GGUFTokenizer({**meta, "tokenizer.ggml.token_type": [1, 1]})
    n = len(meta["tokenizer.ggml.tokens"])
    with pytest.raises(ValueError, match="token_type must hold integers"):
        GGUFTokenizer({**meta, "tokenizer.ggml.token_type": ["x"] * n})
    with pytest.raises(ValueError, match="merges do not fit"):
        GGUFTokenizer({**meta, "tokenizer.ggml.merges": ["zzzq qqqz"]})
    with pytest.raises(ValueError, match="merges do not fit"):
        GGUFTokenizer({**meta, "tokenizer.ggml.tokens": ["a"] * n})
    with pytest.raises(ValueError, match="tokens must be a non-empty list"):
        GGUFTokenizer({**meta, "tokenizer.ggml.tokens": [], "tokenizer.ggml.token_type": []})
    spm = dict(GGUFFile(vocab_file("llama-spm")).metadata)
    with pytest.raises(ValueError, match="tokenizer.ggml.scores"):
        GGUFTokenizer({**spm, "tokenizer.ggml.scores": [0.0]})
    with pytest.raises(ValueError, match="scores must hold numbers"):
        GGUFTokenizer({**spm, "tokenizer.ggml.scores": ["a"] * len(spm["tokenizer.ggml.tokens"])})


@pytest.mark.parametrize("name", NAMES)
def test_token_strings(name, tokenizers_by_name):
    """token(i) is the file's token string i, as llama.cpp's gguf package
    reads it, for every id; ids outside [0, vocab_size) are an IndexError."""
    gguf = pytest.importorskip("gguf", reason="llama.cpp's gguf package reads the file")
    t = tok(name, tokenizers_by_name)
    field = gguf.GGUFReader(vocab_file(name)).fields["tokenizer.ggml.tokens"]
    want = [bytes(field.parts[i]).decode("utf-8") for i in field.data]
    assert len(want) == t.vocab_size
    assert [t.token(i) for i in range(t.vocab_size)] == want
    for bad in (-1, t.vocab_size, 1.0, True):
        with pytest.raises(IndexError, match="GGUFTokenizer.token"):
            t.token(bad)


def test_vocabulary_only_file_has_no_model_but_a_tokenizer():
    f = GGUFFile(vocab_file("qwen2"))
    assert f.tensors == {}
    assert f.tokenizer().vocab_size == 151936
    from cattn.models import CausalLM
    with pytest.raises(ValueError, match="vocabulary-only"):
        CausalLM.from_pretrained(vocab_file("qwen2"))


def tiny_model(tmp_path):
    """(path, chars): a 1-layer qwen2 GGUF file with a byte-level vocabulary
    of its own (printable ASCII, the byte-level space, "hi", <|endoftext|>)
    and a chat template."""
    from cattn_testing.llm_files import tiny_gguf
    return tiny_gguf(str(tmp_path / "t.gguf"))


def test_gguf_model_generates_text(tmp_path):
    """The tiny model: text in, text out, the same tokens as generating from
    the ids; its chat template; the reply up to an end of turn."""
    from cattn.models import CausalLM
    path, chars = tiny_model(tmp_path)
    V = len(chars)
    lm = CausalLM.from_pretrained(path)
    t = lm._tokenizer()
    ids = t.encode("hi there")
    assert ids == [V - 2, V - 3] + [chars.index(c) for c in "there"]       # "hi" merged
    text = lm.generate("hi there", max_new_tokens=6, eos_token_id=[])
    want = lm.generate(ids, max_new_tokens=6, eos_token_id=[])
    assert text == t.decode(want)
    assert "".join(lm.generate("hi there", max_new_tokens=6, eos_token_id=[], stream=True)) == text
    # chat: the file's template, its <|endoftext|> a control token, the reply up to an end of turn
    pytest.importorskip("jinja2", reason="jinja2 renders chat templates")
    msgs = [{"role": "user", "content": "hi"}]
    prompt = lm.apply_chat_template(msgs)
    assert prompt == "user:hi<|endoftext|>assistant:"
    pids = lm.apply_chat_template(msgs, tokenize=True)
    assert pids[6] == V - 1 and pids == t.encode(prompt, add_special=False, parse_special=True)
    assert lm.apply_chat_template(msgs, add_generation_prompt=False) == "user:hi<|endoftext|>"
    out = [int(i) for i in lm.generate(pids, max_new_tokens=8, eos_token_id=[V - 1])]
    reply = t.decode([i for i in out if i != V - 1])
    assert lm.chat(msgs, max_new_tokens=8) == reply
    assert "".join(lm.chat(msgs, max_new_tokens=8, stream=True)) == reply


def test_tokenizer_first(tmp_path):
    """tokenizer_first=True builds the file's tokenizer while loading and
    changes nothing else: the same ids and text as the lazily built one; a
    non-bool is a TypeError. (A folder's: test_llm.py.)"""
    from cattn.models import CausalLM
    path, _ = tiny_model(tmp_path)
    lazy = CausalLM.from_pretrained(path)
    first = CausalLM.from_pretrained(path, tokenizer_first=True)
    assert lazy.tokenizer is None and first.tokenizer is not None
    assert first.text_tokenizer() is first.tokenizer
    assert first.tokenizer.encode("hi there") == lazy.text_tokenizer().encode("hi there")
    assert first.generate("hi there", max_new_tokens=5, eos_token_id=[]) == \
        lazy.generate("hi there", max_new_tokens=5, eos_token_id=[])
    # the metadata goes once a tokenizer is built; let go, it is read again
    assert first.tokenizer_meta is None and lazy.tokenizer_meta is None
    first.tokenizer = None
    assert first.text_tokenizer().encode("hi there") == lazy.text_tokenizer().encode("hi there")
    with pytest.raises(TypeError, match="tokenizer_first"):
        CausalLM.from_pretrained(path, tokenizer_first="yes")


def test_cli_generate_and_chat(tmp_path):
    """`cattn generate model.gguf TEXT` and `cattn chat model.gguf` (a real
    process: lines in, streamed replies out; /reset; end of input ends it)."""
    import subprocess
    import sys
    pytest.importorskip("jinja2", reason="jinja2 renders chat templates")
    from cattn.models import CausalLM
    path, _ = tiny_model(tmp_path)
    lm = CausalLM.from_pretrained(path)
    msgs = [{"role": "user", "content": "hi"}]
    reply = lm.chat(msgs, max_new_tokens=5)
    cont = lm.generate("hi there", max_new_tokens=4)
    # (run from tmp_path: from the repository root the unbuilt source tree
    # would shadow the installed cattn, as CI runs the tests)
    r = subprocess.run([sys.executable, "-m", "cattn", "generate", path, "hi there",
                        "--max-new-tokens", "4"], capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("hi there" + cont)
    lm.kv_dtype = "float16"                          # --kv-dtype float16: that model's text
    cont16 = lm.generate("hi there", max_new_tokens=4)
    r = subprocess.run([sys.executable, "-m", "cattn", "generate", path, "hi there",
                        "--max-new-tokens", "4", "--kv-dtype", "float16"], capture_output=True,
                       text=True, timeout=120, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("hi there" + cont16)
    lm.kv_dtype = "float32"
    r = subprocess.run([sys.executable, "-m", "cattn", "chat", path, "--max-new-tokens", "5"],
                       input="hi\n/reset\nhi\n", capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count(reply) >= 2 and "(conversation reset)" in r.stdout
    r = subprocess.run([sys.executable, "-m", "cattn", "chat", str(tmp_path / "absent.gguf")],
                       input="", capture_output=True, text=True, timeout=120,
                       cwd=str(tmp_path))
    assert r.returncode == 2 and "cattn: error:" in r.stderr and "Traceback" not in r.stderr
