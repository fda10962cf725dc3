"""The tokenizer inside a GGUF file (cattn.models.GGUFTokenizer,
GGUFFile.tokenizer(), a GGUF CausalLM's text in and out).

The references are llama.cpp's own: its tokenizer test data for 15
vocabularies (gguf_vocab_cases.py: every .inp case with the ids of its
.out, 694 cases), and llama.cpp's tokenize() recorded by
tools/llama_cpp_tokens.py in data/llama_cpp_tokens.json: add_special=True
of every case, the multilingual lines of data/multilingual.txt with and
without it, and every tokenizer.ggml.pre row of the table on the gpt-2
vocabulary. tools/fetch_ggml_vocab.sh puts the vocabularies where
gguf_vocab_cases looks; CI fetches them in its peers stage.
"""
import json
import os

import pytest

pytest.importorskip("tokenizers", reason="the tokenizers package builds the tokenizer")

from cattn.models import GGUFFile, GGUFTokenizer  # noqa: E402
from cattn.models.gguf_pretokenizers import GGUF_PRE_TOKENIZERS  # noqa: E402
from gguf_vocab_cases import NAMES, VOCAB, inp_cases, multilingual, vocab_path  # noqa: E402

with open(os.path.join(os.path.dirname(__file__), "data", "llama_cpp_tokens.json"),
          encoding="utf-8") as _f:
    LLAMA_CPP = json.load(_f)


def vocab_file(name):
    path = vocab_path(name)
    if not os.path.isfile(path):
        pytest.skip(f"the ggml-vocab test vectors are not in {VOCAB} "
                    "(tools/fetch_ggml_vocab.sh fetches them)")
    return path


def cases(name):
    vocab_file(name)
    return inp_cases(name)


@pytest.fixture(scope="module")
def tokenizers_by_name():
    return {}


def tok(name, cache):
    if name not in cache:
        cache[name] = GGUFFile(vocab_file(name)).tokenizer()
    return cache[name]


def first_difference(t, texts, want, **kw):
    for text, w in zip(texts, want):
        got = t.encode(text, **kw)
        if got != w:
            return f"{text!r}: cattn {got} llama.cpp {w}"
    return None


def test_case_count():
    """The data covers what llama.cpp tests: 15 vocabularies, 694 cases."""
    for name in NAMES:
        vocab_file(name)
    assert sum(len(inp_cases(n)) for n in NAMES) == 694
    assert sorted(LLAMA_CPP["vocab"]) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_llama_cpp_case(name, tokenizers_by_name):
    t = tok(name, tokenizers_by_name)
    bad = [(text, t.encode(text, add_special=False), want) for text, want in cases(name)
           if t.encode(text, add_special=False) != want]
    assert not bad, f"{len(bad)} cases differ, first: {bad[0]!r}"


@pytest.mark.parametrize("name", NAMES)
def test_add_special_and_multilingual_as_llama_cpp(name, tokenizers_by_name):
    """encode(text) (add_special=True: BOS / EOS, CLS / SEP as llama.cpp adds
    them, the file's flags or llama.cpp's defaults) of every case, and the
    multilingual lines with and without add_special, equal llama.cpp's."""
    t = tok(name, tokenizers_by_name)
    want = LLAMA_CPP["vocab"][name]
    lines = multilingual()
    assert first_difference(t, [c for c, _ in cases(name)], want["inp_special"]) is None
    assert first_difference(t, lines, want["multilingual_special"]) is None
    assert first_difference(t, lines, want["multilingual"], add_special=False) is None


def test_every_pre_tokenizer_as_llama_cpp():
    """Every byte-level row of the pre-tokenizer table, written as the
    tokenizer.ggml.pre of the gpt-2 vocabulary, splits the multilingual
    lines as llama.cpp does under that name (one tokenizer per distinct
    row), and add_special adds BOS as llama.cpp does for that name."""
    meta = dict(GGUFFile(vocab_file("gpt-2")).metadata)
    names = sorted(n for n, row in GGUF_PRE_TOKENIZERS.items() if row.byte_level)
    assert sorted(LLAMA_CPP["pre"]) == names, "tools/llama_cpp_tokens.py writes a new row's ids"
    lines, built, bad = multilingual(), {}, []
    for name in names:
        want = LLAMA_CPP["pre_ids"][LLAMA_CPP["pre"][name]]
        key = (id(GGUF_PRE_TOKENIZERS[name]), LLAMA_CPP["pre"][name])
        if key in built:
            continue
        t = built[key] = GGUFTokenizer({**meta, "tokenizer.ggml.pre": name}, name)
        diff = first_difference(t, lines, want["multilingual"], add_special=False)
        if diff or t.encode("Hello world") != want["special"]:
            bad.append((name, diff, t.encode("Hello world"), want["special"]))
    assert not bad, f"{len(bad)} rows differ, first: {bad[0]}"


@pytest.mark.parametrize("name", [n for n in NAMES if n != "bert-bge"])
def test_decode_round_trip(name, tokenizers_by_name):
    """decode(encode(text)) is the text for every case (llama-spm / phi-3 drop
    the one space the tokenizer puts in front, as llama.cpp's detokenizer does)."""
    t = tok(name, tokenizers_by_name)
    for text, want in cases(name):
        assert t.decode(want) == text, (text, t.decode(want))


def test_bert_wordpiece(tokenizers_by_name):
    """The WordPiece vocabulary: CLS / SEP around the text with add_special
    (whatever add_bos says, as llama.cpp), lower case and accents stripped by
    default, words split at punctuation; decode joins the pieces."""
    t = tok("bert-bge", tokenizers_by_name)
    assert (t.model, t.bos_token_id, t.sep_token_id) == ("bert", 101, 102)
    ids = t.encode("Héllo, WORLD! unaffable")
    assert ids[0] == 101 and ids[-1] == 102
    assert t.decode(ids) == "hello , world ! unaffable"
    assert t.encode("hello") == [101, 7592, 102]
    meta = dict(GGUFFile(vocab_file("bert-bge")).metadata)
    assert t.encode("Hello é", add_special=False) == [7592, 1041]          # "hello", "e"
    cased = GGUFTokenizer({**meta, "tokenizer.ggml.normalizer.lowercase": False})
    assert cased.encode("Hello é", add_special=False) == [100, 100]         # [UNK] twice
    keep = GGUFTokenizer({**meta, "tokenizer.ggml.normalizer.strip_accents": False})
    assert keep.encode("Hello é", add_special=False) == [7592, 100]


@pytest.mark.parametrize("name, text, want", [
    # llama.cpp's whitespace separates WordPiece words (the BertNormalizer alone drops these)
    ("bert-bge", "\u03a3\x0c\u00e9", [1173, 1041]),
    ("bert-bge", "\u0443\x85K", [1198, 1047]),
    ("bert-bge", "a\u2028b\u2029c\x0bd", [1037, 1038, 1039, 1040]),
    # llama.cpp matches deepseek-llm's expressions with non-ASCII spaces as \x0b
    ("deepseek-llm", "\xa0\xa0\u3000\u0e20\u0e32\u0e32\u0e17",
     [10467, 88946, 16510, 241, 84495, 93755, 232]),
    ("deepseek-llm", "a\u3000\u3002b", [64, 88946, 398, 65])])
def test_llama_cpp_corner_cases(name, text, want, tokenizers_by_name):
    """Strings where a straight reading of the tokenizer.json-style rules
    differs from llama.cpp (its ids, llama-cpp-python 0.3.36)."""
    assert tok(name, tokenizers_by_name).encode(text, add_special=False) == want


def test_add_bos_defaults_follow_llama_cpp(tokenizers_by_name):
    """Without tokenizer.ggml.add_bos_token, BOS as llama.cpp adds it: for
    Llama 3's pre-tokenizer (llama-bpe) yes (every row's default:
    test_every_pre_tokenizer_as_llama_cpp), for SentencePiece yes; the
    file's flag wins; Gemma 4 always adds it."""
    bpe = dict(GGUFFile(vocab_file("llama-bpe")).metadata)
    bpe.pop("tokenizer.ggml.add_bos_token", None)
    assert GGUFTokenizer(bpe).encode("Hello world") == [128000, 9906, 1917]
    gpt2 = dict(GGUFFile(vocab_file("gpt-2")).metadata)
    assert "tokenizer.ggml.add_bos_token" not in gpt2
    on = GGUFTokenizer({**gpt2, "tokenizer.ggml.add_bos_token": True})
    assert on.encode("Hello world") == [50256, 15496, 995]
    spm = dict(GGUFFile(vocab_file("llama-spm")).metadata)
    spm.pop("tokenizer.ggml.add_bos_token", None)
    assert GGUFTokenizer(spm).encode("Hello")[0] == 1
    assert GGUFTokenizer({**spm, "tokenizer.ggml.add_bos_token": False}).encode("Hello")[0] != 1
    gemma = tok("gemma-4", tokenizers_by_name)
    assert gemma.add_bos and gemma.encode("x")[0] == gemma.bos_token_id == 2
    forced = GGUFTokenizer({**gpt2, "tokenizer.ggml.model": "gemma4",
                            "tokenizer.ggml.add_bos_token": False})
    assert forced.pre == "gemma4" and forced.add_bos and forced.encode("x")[0] == 50256


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
    with pytest.raises(ValueError, match="tokenizer.ggml.pre 'no-such-pre' is not supported"):
        GGUFTokenizer({**meta, "tokenizer.ggml.pre": "no-such-pre"}, "x.gguf")
    with pytest.raises(ValueError, match="x.gguf: tokenizer.ggml.model 't5' is not supported"):
        GGUFTokenizer({**meta, "tokenizer.ggml.model": "t5"}, "x.gguf")
    with pytest.raises(ValueError, match="tokenizer.ggml.pre is int"):
        GGUFTokenizer({**meta, "tokenizer.ggml.pre": 3})
    with pytest.raises(ValueError, match="add_bos_token"):
        GGUFTokenizer({**meta, "tokenizer.ggml.add_bos_token": "yes"})
    bert = dict(GGUFFile(vocab_file("bert-bge")).metadata)
    with pytest.raises(ValueError, match="unknown_token_id"):
        GGUFTokenizer({**bert, "tokenizer.ggml.unknown_token_id": 10 ** 9})
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
    """token(i) is the file's token string i for every id (the file's list as
    cattn's reader reads it; as llama.cpp's gguf package reads it for two
    vocabularies); ids outside [0, vocab_size) are an IndexError."""
    t = tok(name, tokenizers_by_name)
    want = list(GGUFFile(vocab_file(name)).metadata["tokenizer.ggml.tokens"])
    if name in ("gpt-2", "bert-bge"):
        gguf = pytest.importorskip("gguf", reason="llama.cpp's gguf package reads the file")
        field = gguf.GGUFReader(vocab_file(name)).fields["tokenizer.ggml.tokens"]
        assert want == [bytes(field.parts[i]).decode("utf-8") for i in field.data]
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
