"""A GGUF file's problems in its own words: every error CausalLM.from_pretrained
raises for a broken GGUF file names the file (its path) and the GGUF key or
tensor (`qwen2.attention.head_count`, `blk.0.attn_norm.weight`), never
config.json or a Hugging Face name (`model.layers.0.input_layernorm.weight`,
`num_attention_heads`).

Tiny llama, qwen2, qwen3 and gpt2 files are written here by the `gguf`
package's GGUFWriter from a spec (metadata and tensors) that each test
breaks one way: a tensor renamed, a key dropped, a bad value, a wrong shape,
a vocabulary that does not fit; and random byte flips of valid files, run
in a child process so that a crash fails the test instead of ending it."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

gguf = pytest.importorskip("gguf", reason="the gguf package (llama.cpp's gguf-py) writes the files")

from cattn.models import CausalLM  # noqa: E402

T = gguf.GGUFValueType
V, E, F, LAYERS = 40, 32, 64, 2

# Hugging Face words a GGUF error must never use: tensor names, config.json
# fields (a GGUF key may end in one, "tokenizer.ggml.eos_token_id": so not
# after a dot) and architecture class names
HF_WORDS = re.compile(
    r"config\.json|model\.layers|transformer\.|(?<![\w.])(?:input_layernorm|"
    r"post_attention_layernorm|self_attn|[qkvo]_proj|gate_proj|up_proj|down_proj|embed_tokens|"
    r"lm_head|ln_[12f]|c_attn|c_proj|c_fc|wte|wpe|hidden_size|num_hidden_layers|"
    r"num_attention_heads|num_key_value_heads|intermediate_size|head_dim|rms_norm_eps|"
    r"rope_theta|rope_scaling|n_embd|n_head|n_layer|n_inner|n_positions|vocab_size|"
    r"layer_norm_epsilon|max_position_embeddings|bos_token_id|eos_token_id|pad_token_id)(?!\w)"
    r"|ForCausalLM|LMHeadModel")


def spec(arch, heads=4, kv_heads=2, head_dim=None, seed=0):
    """(metadata {key: (value, GGUFValueType)}, tensors {name: float32 array})
    of a tiny model of `arch` as llama.cpp's converter writes one, with a
    vocabulary of V tokens."""
    rng = np.random.default_rng(seed)
    a = arch
    meta = {f"{a}.context_length": (128, T.UINT32), f"{a}.embedding_length": (E, T.UINT32),
            f"{a}.block_count": (LAYERS, T.UINT32), f"{a}.feed_forward_length": (F, T.UINT32),
            f"{a}.attention.head_count": (heads, T.UINT32),
            "tokenizer.ggml.model": ("gpt2", T.STRING),
            "tokenizer.ggml.tokens": ([f"t{i}" for i in range(V)], T.ARRAY),
            "tokenizer.ggml.bos_token_id": (1, T.UINT32),
            "tokenizer.ggml.eos_token_id": (2, T.UINT32)}
    t = {"token_embd.weight": (V, E), "output_norm.weight": (E,)}
    if arch == "gpt2":
        meta[f"{a}.attention.layer_norm_epsilon"] = (1e-5, T.FLOAT32)
        t.update({"position_embd.weight": (128, E), "output_norm.bias": (E,)})
        for i in range(LAYERS):
            b = f"blk.{i}."
            for n, s in (("attn_norm", (E,)), ("ffn_norm", (E,)), ("attn_qkv", (3 * E, E)),
                         ("attn_output", (E, E)), ("ffn_up", (F, E)), ("ffn_down", (E, F))):
                t[b + n + ".weight"] = s
                t[b + n + ".bias"] = s[:1]
    else:
        D = head_dim or E // heads
        meta.update({f"{a}.attention.head_count_kv": (kv_heads, T.UINT32),
                     f"{a}.attention.layer_norm_rms_epsilon": (1e-6, T.FLOAT32),
                     f"{a}.rope.freq_base": (10000.0, T.FLOAT32)})
        if head_dim:
            meta[f"{a}.attention.key_length"] = (head_dim, T.UINT32)
            meta[f"{a}.attention.value_length"] = (head_dim, T.UINT32)
        if arch == "llama":
            t["output.weight"] = (V, E)
        for i in range(LAYERS):
            b = f"blk.{i}."
            t.update({b + "attn_norm.weight": (E,), b + "ffn_norm.weight": (E,),
                      b + "attn_q.weight": (heads * D, E), b + "attn_k.weight": (kv_heads * D, E),
                      b + "attn_v.weight": (kv_heads * D, E),
                      b + "attn_output.weight": (E, heads * D), b + "ffn_gate.weight": (F, E),
                      b + "ffn_up.weight": (F, E), b + "ffn_down.weight": (E, F)})
            if arch == "qwen2":
                t.update({b + "attn_q.bias": (heads * D,), b + "attn_k.bias": (kv_heads * D,),
                          b + "attn_v.bias": (kv_heads * D,)})
            if arch == "qwen3":
                t.update({b + "attn_q_norm.weight": (D,), b + "attn_k_norm.weight": (D,)})
    tensors = {n: (rng.standard_normal(s) * 0.3).astype(np.float32) for n, s in t.items()}
    return meta, tensors


SPECS = {"llama": lambda: spec("llama"), "qwen2": lambda: spec("qwen2"),
         "qwen3": lambda: spec("qwen3", head_dim=16), "gpt2": lambda: spec("gpt2", heads=4)}


def write(path, arch, meta, tensors, qtype=None):
    """Write the file; general.architecture is `arch` (None: no such key).
    qtype: a gguf quantization type name for the 2-D weights (else F32)."""
    w = gguf.GGUFWriter(str(path), arch or "llama")
    if arch is None:
        w.kv_data[0].pop("general.architecture")
    for key, (value, vtype) in meta.items():
        sub = T.STRING if vtype == T.ARRAY else None
        w.add_key_value(key, value, vtype, sub)
    for name, a in tensors.items():
        if qtype and a.ndim == 2 and a.shape[1] % 32 == 0 and name != "token_embd.weight":
            qt = gguf.GGMLQuantizationType[qtype]
            w.add_tensor(name, gguf.quants.quantize(a, qt), raw_dtype=qt)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def load_error(path):
    """The error from_pretrained raises for `path` (a forward on a few ids
    after a load that succeeds: None if that runs too)."""
    try:
        m = CausalLM.from_pretrained(path)
        m(np.array([[1, 2, 3]]))
    except Exception as e:          # noqa: BLE001 - the type is asserted by the caller
        return e
    return None


def assert_own_words(e, path, *names):
    """e is a ValueError naming the file and each of `names`, in GGUF words only."""
    assert isinstance(e, ValueError), f"{type(e).__name__}: {e}"
    msg = str(e)
    assert path in msg, msg
    for n in names:
        assert n in msg, f"{n!r} not in: {msg}"
    bad = HF_WORDS.search(msg)
    assert bad is None, f"{bad.group(0)!r} in: {msg}"


def test_the_word_filter_can_fail():
    for msg in ("Qwen2ForCausalLM checkpoint: missing tensor "
                "'model.layers.0.input_layernorm.weight'",
                "config.json (Qwen2ForCausalLM): head_dim must be >= 1, got 0",
                "x: num_attention_heads=3", "x: tensor 'lm_head.weight'"):
        assert HF_WORDS.search(msg)
    assert not HF_WORDS.search("f.gguf: tokenizer.ggml.eos_token_id is 9; blk.0.attn_q.weight "
                               "qwen2.attention.head_count qwen2.attention.key_length")


@pytest.mark.parametrize("arch", list(SPECS))
@pytest.mark.parametrize("qtype", [None, "Q8_0"])
def test_valid_files_load(tmp_path, arch, qtype):
    meta, tensors = SPECS[arch]()
    assert load_error(write(tmp_path / "ok.gguf", arch, meta, tensors, qtype)) is None


def tensor_kinds(arch):
    """One name of each kind of tensor (blk.0's and blk.1's, and the globals)."""
    _, tensors = SPECS[arch]()
    return [n for n in tensors if not n.startswith("blk.") or n.startswith(("blk.0.", "blk.1."))]


@pytest.mark.parametrize("arch", list(SPECS))
def test_renamed_tensor_is_named(tmp_path, arch):
    for name in tensor_kinds(arch):
        meta, tensors = SPECS[arch]()
        tensors[name[:-1] + "X"] = tensors.pop(name)            # blk.0.attn_norm.weighX
        path = write(tmp_path / f"{name}.gguf", arch, meta, tensors)
        e = load_error(path)
        if name == "output.weight":             # no output projection: tied to token_embd
            assert e is None, e
            continue
        assert e is not None, name
        assert_own_words(e, path, repr(name))


def required_keys(arch):
    a = arch
    keys = ["general.architecture", f"{a}.embedding_length", f"{a}.block_count",
            f"{a}.attention.head_count", f"{a}.feed_forward_length"]
    return keys + [f"{a}.context_length"] if arch == "gpt2" else keys


@pytest.mark.parametrize("arch", list(SPECS))
def test_missing_metadata_is_named(tmp_path, arch):
    for key in required_keys(arch):
        meta, tensors = SPECS[arch]()
        meta.pop(key, None)
        path = write(tmp_path / f"{key}.gguf", None if key == "general.architecture" else arch,
                     meta, tensors)
        assert_own_words(load_error(path), path, key)
    # the optional ones have llama.cpp's defaults
    optional = ["tokenizer.ggml.eos_token_id", "tokenizer.ggml.tokens"] + (
        ["gpt2.attention.layer_norm_epsilon"] if arch == "gpt2" else
        [f"{arch}.attention.head_count_kv", f"{arch}.context_length", f"{arch}.rope.freq_base",
         f"{arch}.attention.layer_norm_rms_epsilon"])
    for key in optional:
        if key.endswith("head_count_kv"):          # absent: head_count (multi-head attention)
            meta, tensors = spec(arch, heads=4, kv_heads=4)
        else:
            meta, tensors = SPECS[arch]()
        meta.pop(key)
        assert load_error(write(tmp_path / f"opt-{key}.gguf", arch, meta, tensors)) is None, key


# (arch, key, value, GGUF type, what else the message names)
U32, I32, U64, F32, STR = T.UINT32, T.INT32, T.UINT64, T.FLOAT32, T.STRING
BAD_VALUES = [
    ("qwen2", "qwen2.attention.head_count", 0, U32, ">= 1"),
    ("qwen2", "qwen2.attention.head_count", 3, U32, "head_count_kv"),       # 3 % 2
    ("qwen2", "qwen2.attention.head_count", 6, U32, "even"),                 # D = 32 // 6
    ("qwen2", "qwen2.attention.head_count", 8, U32, "blk.0.attn_k.weight"),  # 2 x 4 != 16
    ("llama", "llama.attention.head_count", 64, U32, "llama.embedding_length"),  # D = 0
    ("llama", "llama.attention.head_count", 2**31, U32, "smaller than"),
    ("qwen2", "qwen2.attention.head_count_kv", 0, U32, ">= 1"),
    ("qwen2", "qwen2.attention.head_count_kv", 4, U32, "blk.0.attn_k.weight"),
    ("qwen2", "qwen2.attention.head_count_kv", 3, U32, "not a multiple"),
    ("llama", "llama.embedding_length", 0, U32, ">= 1"),
    ("llama", "llama.embedding_length", 64, U32, "token_embd.weight"),
    ("llama", "llama.embedding_length", 2**40, U64, "token_embd.weight"),
    ("llama", "llama.embedding_length", "32", STR, "expected int"),
    ("llama", "llama.embedding_length", 32.0, F32, "expected int"),
    ("qwen2", "qwen2.block_count", 0, U32, "blk.0"),
    ("qwen2", "qwen2.block_count", 1, U32, "blk.1"),
    ("qwen2", "qwen2.block_count", 3, U32, "blk.2"),
    ("qwen2", "qwen2.block_count", 2**32 - 1, U32, "blk.2"),
    ("qwen2", "qwen2.block_count", -1, I32, ">= 0"),
    ("qwen2", "qwen2.feed_forward_length", 0, U32, ">= 1"),
    ("qwen2", "qwen2.feed_forward_length", 96, U32, "blk.0.ffn_up.weight"),
    ("qwen2", "qwen2.feed_forward_length", 2**40, U64, "blk.0.ffn_up.weight"),
    ("qwen2", "qwen2.context_length", -5, I32, ">= 1"),
    ("qwen2", "qwen2.context_length", 0, U32, ">= 1"),
    ("gpt2", "gpt2.context_length", -5, I32, ">= 1"),
    ("gpt2", "gpt2.context_length", 2**40, U64, "position_embd.weight"),
    ("gpt2", "gpt2.context_length", 129, U32, "position_embd.weight"),
    ("gpt2", "gpt2.attention.head_count", 5, U32, "gpt2.embedding_length"),   # 32 % 5
    ("gpt2", "gpt2.attention.head_count", 0, U32, ">= 1"),
    ("gpt2", "gpt2.embedding_length", 48, U32, "token_embd.weight"),
    ("gpt2", "gpt2.feed_forward_length", 0, U32, ">= 1"),
    ("gpt2", "gpt2.attention.layer_norm_epsilon", -1.0, F32, ">= 0"),
    ("qwen2", "qwen2.attention.layer_norm_rms_epsilon", float("nan"), F32, "finite"),
    ("qwen2", "qwen2.attention.layer_norm_rms_epsilon", -1e-6, F32, ">= 0"),
    ("qwen2", "qwen2.rope.freq_base", 0.0, F32, "> 0"),
    ("qwen2", "qwen2.rope.freq_base", float("inf"), F32, "finite"),
    ("qwen3", "qwen3.attention.key_length", 0, U32, ">= 1"),
    ("qwen3", "qwen3.attention.key_length", 15, U32, "even"),
    ("qwen3", "qwen3.attention.key_length", 8, U32, "blk.0.attn_q.weight"),
    ("qwen2", "qwen2.rope.scaling.type", "yarn", STR, "'yarn'"),
    ("qwen2", "general.architecture", "falcon", STR, "'falcon' is not supported"),
    ("qwen2", "general.architecture", 7, U32, "is not supported"),
]


@pytest.mark.parametrize("arch, key, value, vtype, also", BAD_VALUES,
                         ids=[f"{k}={v!r}" for _, k, v, _, _ in BAD_VALUES])
def test_bad_value_is_named(tmp_path, arch, key, value, vtype, also):
    meta, tensors = SPECS[arch]()
    meta[key] = (value, vtype)
    path = write(tmp_path / "bad.gguf", None if key == "general.architecture" else arch,
                 meta, tensors)
    assert_own_words(load_error(path), path, key, also)


@pytest.mark.parametrize("arch, key, value, vtype", [
    ("qwen2", "tokenizer.ggml.eos_token_id", 40, U32),
    ("gpt2", "tokenizer.ggml.bos_token_id", 2**32 - 1, U32),
    ("qwen2", "tokenizer.ggml.padding_token_id", 99, U32),
    ("qwen2", "tokenizer.ggml.eos_token_id", -1, I32)])
def test_special_id_outside_the_vocabulary_is_ignored(tmp_path, arch, key, value, vtype):
    """As llama.cpp ("bad special token"): the model loads without that id,
    with a warning naming the file and the key."""
    from cattn.models import CausalLM
    meta, tensors = SPECS[arch]()
    meta[key] = (value, vtype)
    path = write(tmp_path / "bad.gguf", arch, meta, tensors)
    with pytest.warns(UserWarning) as got:
        lm = CausalLM.from_pretrained(path)
    msg = " ".join(str(w.message) for w in got)
    assert str(path) in msg and key in msg and "ignored" in msg
    field = {"eos": "eos_token_id", "bos": "bos_token_id", "pad": "pad_token_id"}[
        key.split(".")[-1].split("_")[0].replace("padding", "pad")]
    assert getattr(lm.config, field) in (None, [])


def test_bad_rope_scaling_factor_is_named(tmp_path):
    for factor, vtype in ((0.0, F32), (-2.0, F32), (float("nan"), F32), (1e-320, T.FLOAT64),
                          (None, None)):
        meta, tensors = SPECS["qwen2"]()
        meta["qwen2.rope.scaling.type"] = ("linear", STR)
        if factor is not None:                     # None: missing
            meta["qwen2.rope.scaling.factor"] = (factor, vtype)
        path = write(tmp_path / "f.gguf", "qwen2", meta, tensors)
        assert_own_words(load_error(path), path, "qwen2.rope.scaling.")


@pytest.mark.parametrize("count, values", [(7, 1.0), (4, 0.0), (4, float("inf"))])
def test_bad_rope_freqs_is_named(tmp_path, count, values):
    meta, tensors = SPECS["llama"]()              # head dim 8: 4 factors
    tensors["rope_freqs.weight"] = np.full(count, values, np.float32)
    path = write(tmp_path / "r.gguf", "llama", meta, tensors)
    assert_own_words(load_error(path), path, "rope_freqs.weight")


def reshaped(a, how):
    if how == "rows":
        return np.concatenate([a, a[:1]])
    if how == "columns":
        return np.concatenate([a, a[..., :32]], axis=-1)
    return a.reshape(-1)[:, None] if a.ndim == 1 else a.reshape(-1)      # "dims"


@pytest.mark.parametrize("arch", list(SPECS))
@pytest.mark.parametrize("qtype", [None, "Q8_0"])
def test_wrong_tensor_shape_is_named(tmp_path, arch, qtype):
    for name in tensor_kinds(arch):
        for how in ("rows", "columns", "dims"):
            meta, tensors = SPECS[arch]()
            if how == "columns" and tensors[name].ndim == 1:
                continue
            tensors[name] = reshaped(tensors[name], how)
            path = write(tmp_path / f"{name}-{how}.gguf", arch, meta, tensors, qtype)
            e = load_error(path)
            assert e is not None, (name, how)
            assert_own_words(e, path, repr(name))


def test_vocabulary_that_does_not_fit_is_named(tmp_path):
    meta, tensors = SPECS["qwen2"]()
    meta["tokenizer.ggml.tokens"] = ([f"t{i}" for i in range(V + 1)], T.ARRAY)
    path = write(tmp_path / "tokens.gguf", "qwen2", meta, tensors)
    assert_own_words(load_error(path), path, "tokenizer.ggml.tokens", "token_embd.weight")
    meta, tensors = SPECS["llama"]()
    tensors["output.weight"] = tensors["output.weight"][:-1]        # V - 1 logits
    path = write(tmp_path / "output.gguf", "llama", meta, tensors)
    assert_own_words(load_error(path), path, "'output.weight'")


# ---- random byte flips --------------------------------------------------------------

CHILD = r"""
import json, sys
import numpy as np
from cattn.models import CausalLM
src, dst = sys.argv[1:3]
trials, seed, head = map(int, sys.argv[3:6])
data = open(src, "rb").read()
rng = np.random.default_rng(seed)
out = []
for t in range(trials):
    b = bytearray(data)
    # most flips where the structure is (header, metadata, tensor infos), some in the data
    end = head if t % 4 else len(b)
    for _ in range(int(rng.integers(1, 4))):
        b[int(rng.integers(0, end))] ^= int(rng.integers(1, 256))
    with open(dst, "wb") as f:
        f.write(b)
    try:
        m = CausalLM.from_pretrained(dst)
        m(np.array([[1, 2, 3]]))
        out.append(None)
    except Exception as e:
        out.append([type(e).__name__, str(e)])
    print(json.dumps(out[-1]), flush=True)
"""


@pytest.mark.parametrize("arch, trials", [("qwen2", 500), ("llama", 200), ("gpt2", 200)])
def test_random_byte_flips_are_named(tmp_path, arch, trials):
    meta, tensors = SPECS[arch]()
    src = write(tmp_path / "valid.gguf", arch, meta, tensors)
    head = gguf.GGUFReader(src).data_offset
    dst = str(tmp_path / "flipped.gguf")
    r = subprocess.run([sys.executable, "-c", CHILD, src, dst, str(trials), str(len(arch)),
                        str(head)], capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    results = [json.loads(line) for line in r.stdout.splitlines()]
    assert r.returncode == 0 and len(results) == trials, (
        f"the child ended with {r.returncode} after {len(results)} of {trials} trials "
        f"(a crash?): {r.stderr[-2000:]}")
    failed = [x for x in results if x is not None]
    assert len(failed) > trials // 4             # the flips do break files
    for kind, msg in failed:
        assert kind in ("ValueError", "CheckpointError"), (kind, msg)
        assert dst in msg, msg
        bad = HF_WORDS.search(msg)
        assert bad is None, f"{bad.group(0)!r} in: {msg}"
