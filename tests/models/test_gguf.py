"""cattn.models.GGUFFile against llama.cpp's own gguf-py (the `gguf`
package) as the oracle: the same metadata and tensor infos as its
GGUFReader, and for every supported tensor type the same dequantized
values bit for bit as gguf.quants.dequantize (random block bytes: every
scale, nibble and high bit pattern, NaN and inf scales included). Hostile
files (truncated at every byte of the header, huge counts and lengths,
offsets past the end, unsupported types) give a ValueError naming the
field and the file; they never crash (each parse is plain Python over a
bounds-checked map, so no subprocess is needed)."""
import struct

import numpy as np
import pytest

import cattn
from cattn.models.gguf import GGML_TYPES, GGUFFile, GGUFStrings

gguf = pytest.importorskip("gguf", reason="the gguf package (llama.cpp's gguf-py) is the oracle")

QUANT = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K"]


def write(path, tensors, metadata=(), alignment=None):
    """tensors: (name, ggml type name, NumPy shape, stored bytes or values)."""
    w = gguf.GGUFWriter(str(path), "llama")
    if alignment is not None:
        w.add_custom_alignment(alignment)
    for add, key, value in metadata:
        getattr(w, add)(key, value)
    for name, tname, shape, data in tensors:
        qt = gguf.GGMLQuantizationType[tname]
        if tname in ("F32", "F16"):
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def random_blocks(tname, shape, rng):
    """Random stored bytes of a tensor of NumPy shape `shape`: (rows, bytes per row)."""
    t = GGML_TYPES[tname]
    return rng.integers(0, 256, (shape[0], shape[1] // t.block * t.nbytes), dtype=np.uint8)


@pytest.mark.parametrize("tname", QUANT + ["BF16"])
def test_dequantize_matches_gguf(tmp_path, tname):
    rng = np.random.default_rng(hash(tname) % 2**32)
    shape = (3, 512)
    raw = (rng.integers(0, 2**16, shape, dtype=np.uint16).view(np.uint8)
           if tname == "BF16" else random_blocks(tname, shape, rng))
    path = write(tmp_path / "q.gguf", [("w", tname, shape, raw)])
    f = GGUFFile(path)
    assert f.tensors["w"] == (tname, shape)
    got = f.dequantize("w")
    with np.errstate(all="ignore"):
        want = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[tname])
    assert got.dtype == np.float32 and got.shape == shape
    np.testing.assert_array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("tname", ["Q4_0", "Q4_1", "Q4_K"])
def test_4bit_blocks_held_exactly_as_int4(tmp_path, tname):
    """Random blocks with finite scales: weight() is an int4 PackedWeight
    whose values are gguf-py's dequantization bit for bit (signed zeros
    included); the llama q/k row order is a row permutation of the same."""
    rng = np.random.default_rng(7)
    shape = (20, 512)
    raw = random_blocks(tname, shape, rng)
    bsize = {"Q4_0": 18, "Q4_1": 20, "Q4_K": 144}[tname]
    nf16 = {"Q4_0": 1, "Q4_1": 2, "Q4_K": 2}[tname]
    blocks = raw.reshape(-1, bsize)
    scales = (rng.standard_normal((len(blocks), nf16)) * 0.05).astype(np.float16)
    scales[::7, 0] = -scales[::7, 0]
    blocks[:, :2 * nf16] = scales.view(np.uint8).reshape(len(blocks), 2 * nf16)
    f = GGUFFile(write(tmp_path / "q.gguf", [("w", tname, shape, raw)]))
    w = f.weight("w")
    assert w.format == "int4"
    want = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[tname]).astype(np.float32)
    np.testing.assert_array_equal(w.unpack().view(np.uint32), want.view(np.uint32))
    assert w.nbytes <= 32 * 256 + 2 * 32 * 16 * 4      # panels of 16 rows, scale (+ min)


@pytest.mark.parametrize("tname", ["Q8_0", "Q5_0", "Q5_1", "Q5_K", "Q6_K"])
def test_8bit_blocks_held_exactly_as_int8g(tmp_path, tname):
    """Random blocks with finite scales: weight() is an int8g PackedWeight
    (Q8_0), an int5g one (the 5-bit types) or an int6g one (Q6_K) whose values are
    gguf-py's dequantization bit for bit, and so is its linear."""
    rng = np.random.default_rng(8)
    shape = (20, 512)
    raw = random_blocks(tname, shape, rng)
    bsize = {"Q8_0": 34, "Q5_0": 22, "Q5_1": 24, "Q5_K": 176, "Q6_K": 210}[tname]
    at, n = {"Q8_0": (0, 1), "Q5_0": (0, 1), "Q5_1": (0, 2), "Q5_K": (0, 2), "Q6_K": (208, 1)}[tname]
    blocks = raw.reshape(-1, bsize)
    scales = (rng.standard_normal((len(blocks), n)) * 0.05).astype(np.float16)
    blocks[:, at:at + 2 * n] = scales.view(np.uint8).reshape(len(blocks), 2 * n)
    f = GGUFFile(write(tmp_path / "q.gguf", [("w", tname, shape, raw)]))
    w = f.weight("w")
    assert w.format == {"Q8_0": "int8g", "Q6_K": "int6g"}.get(tname, "int5g")
    want = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[tname]).astype(np.float32)
    np.testing.assert_array_equal(w.unpack().view(np.uint32), want.view(np.uint32))
    np.testing.assert_array_equal(w.rows(np.array([19, 0, 7])), want[[19, 0, 7]])
    a = rng.standard_normal((3, 512)).astype(np.float32)
    sx = np.abs(a).reshape(3, -1, 32).max(2) / 127       # activations quantized per 32
    bound = (0.5 * np.repeat(sx, 32, axis=1)) @ np.abs(want.T.astype(np.float64)) * 1.001
    assert np.all(np.abs(cattn.linear(a, w) - a.astype(np.float64) @ want.T) <= bound + 1e-5)


def test_4bit_with_infinite_scale_is_float32(tmp_path):
    raw = random_blocks("Q4_0", (2, 64), np.random.default_rng(0))
    raw.reshape(-1, 18)[1, :2] = np.array([np.inf], np.float16).view(np.uint8)
    f = GGUFFile(write(tmp_path / "q.gguf", [("w", "Q4_0", (2, 64), raw)]))
    assert f.weight("w").format == "float32"
    np.testing.assert_array_equal(f.weight("w").unpack(), f.dequantize("w"))


@pytest.mark.parametrize("tname", ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"])
def test_quantized_values_round_trip(tmp_path, tname):
    """Values quantized by gguf-py come back as its dequantization gives them
    and near the values (within the format's step)."""
    x = np.random.default_rng(1).standard_normal((4, 64)).astype(np.float32)
    qt = gguf.GGMLQuantizationType[tname]
    q = gguf.quants.quantize(x, qt)
    f = GGUFFile(write(tmp_path / "q.gguf", [("w", tname, x.shape, q)]))
    got = f.dequantize("w")
    np.testing.assert_array_equal(got, gguf.quants.dequantize(q, qt))
    step = np.abs(x).reshape(-1, 32).max(1) / (127 if tname == "Q8_0" else 7)
    assert np.all(np.abs(got - x).reshape(-1, 32) <= step[:, None] * 1.01 + 1e-6)
    w = f.weight("w")                                 # holds the values exactly
    assert w.shape == x.shape
    assert w.format == ("int4" if tname in ("Q4_0", "Q4_1", "Q4_K") else
                        "int8g" if tname == "Q8_0" else "int5g")
    np.testing.assert_array_equal(w.unpack(), got)
    a = np.random.default_rng(3).standard_normal((2, 64)).astype(np.float32)
    ref = a.astype(np.float64) @ got.T.astype(np.float64)
    if w.format != "float32":     # x quantized per 32: off by half a step sx = amax / 127
        sx = np.abs(a).reshape(2, -1, 32).max(2) / 127
        bound = (0.5 * np.repeat(sx, 32, axis=1)) @ np.abs(got.T.astype(np.float64)) * 1.001
        assert np.all(np.abs(cattn.linear(a, w) - ref) <= bound + 1e-5)
    else:
        np.testing.assert_allclose(cattn.linear(a, w), ref, rtol=1e-5, atol=1e-5)


def test_metadata_and_plain_tensors(tmp_path):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5, 7)).astype(np.float32)
    b = rng.standard_normal((2, 3, 4)).astype(np.float16)
    c = rng.standard_normal(9).astype(np.float32)
    meta = [("add_uint32", "x.u32", 7), ("add_int32", "x.i32", -3), ("add_float32", "x.f32", 0.5),
            ("add_bool", "x.b", True), ("add_string", "x.s", "héllo"),
            ("add_uint64", "x.u64", 2**40), ("add_float64", "x.f64", 1e-300),
            ("add_array", "x.ints", [1, 2, 3]), ("add_array", "x.strs", ["a", "", "ζ"]),
            ("add_int8", "x.i8", -5), ("add_uint16", "x.u16", 65535)]
    path = write(tmp_path / "m.gguf", [("a", "F32", a.shape, a), ("b", "F16", b.shape, b),
                                       ("c", "F32", c.shape, c)], meta, alignment=64)
    f = GGUFFile(path)
    r = gguf.GGUFReader(path)
    assert f.version == 3 and f.alignment == 64
    for field in r.fields.values():
        if field.name.startswith("GGUF."):
            continue
        want = field.contents()
        assert f.metadata[field.name] == pytest.approx(want) if isinstance(want, float) \
            else f.metadata[field.name] == want, field.name
    assert f.metadata["x.s"] == "héllo" and f.metadata["x.strs"] == ["a", "", "ζ"]
    assert f.metadata["x.f32"] == 0.5 and f.metadata["x.b"] is True
    assert f.metadata["general.architecture"] == "llama"
    for t in r.tensors:
        tname, shape = f.tensors[t.name]
        assert tname == t.tensor_type.name and shape == tuple(int(d) for d in t.shape[::-1])
    np.testing.assert_array_equal(f.dequantize("a"), a)
    np.testing.assert_array_equal(f.dequantize("b"), b.astype(np.float32))
    np.testing.assert_array_equal(f.dequantize("c"), c)
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        f.dequantize("nope")
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        f.weight("nope")
    with pytest.raises(ValueError, match=r"tensor 'b' has shape \(2, 3, 4\); a weight is 2-D"):
        f.weight("b")


def test_long_string_arrays_are_compact_and_equal_the_oracle(tmp_path):
    """An array of 64+ strings (a vocabulary) is held as GGUFStrings: reading
    the key gives the list the gguf package reads, strings(key)[i] one
    string; short arrays stay lists; membership and items() work as for a
    dict."""
    rng = np.random.default_rng(5)
    words = ["", "a", "ζ", "\u2581the", "<|im_end|>", "日本", "x" * 300]
    words += ["".join(chr(int(c)) for c in rng.integers(32, 0x3000, int(rng.integers(0, 9))))
              for _ in range(200)]
    meta = [("add_array", "x.words", words), ("add_array", "x.few", words[:63]),
            ("add_array", "x.exact", words[:64])]
    path = write(tmp_path / "m.gguf", [("a", "F32", (2, 3), np.ones((2, 3), np.float32))],
                 meta)
    f = GGUFFile(path)
    r = gguf.GGUFReader(path)
    for key, n in (("x.words", len(words)), ("x.few", 63), ("x.exact", 64)):
        assert f.metadata[key] == r.fields[key].contents() == words[:n]
        s = f.metadata.strings(key)
        assert len(s) == n and isinstance(s, list) == (n < 64)
        assert [s[i] for i in range(n)] == words[:n] and s[-1] == words[n - 1]
        assert s[2:5] == words[2:5]
    assert isinstance(f.metadata.strings("x.words"), GGUFStrings)
    with pytest.raises(IndexError, match="out of range"):
        f.metadata.strings("x.words")[len(words)]
    assert "x.words" in f.metadata and "x.none" not in f.metadata
    assert f.metadata == dict(f.metadata.items()) and f.metadata.get("x.none", 3) == 3
    sub = f.metadata.subset("x.w")
    assert list(sub) == ["x.words"] and sub["x.words"] == words


def _string_array(key, items):
    k = key.encode()
    out = struct.pack("<Q", len(k)) + k + struct.pack("<IIQ", 9, 8, len(items))
    for b in items:
        out += struct.pack("<Q", len(b)) + b
    return out


@pytest.mark.parametrize("n", [3, 100])          # a list, and a compact array
def test_hostile_string_arrays(tmp_path, n):
    items = [b"tok%d" % i for i in range(n)]
    bad = list(items)
    bad[n - 2] = b"\xc3("                           # not UTF-8
    check_bad(tmp_path, header(0, 1) + _string_array("t", bad),
              rf"metadata 't'\[{n - 2}\]: not UTF-8")
    # a multi-byte character split across two strings: each is refused alone
    split = list(items)
    split[1], split[2] = b"\xc3", b"\xa9"
    check_bad(tmp_path, header(0, 1) + _string_array("t", split), r"metadata 't'\[1\]: not UTF-8")
    data = header(0, 1) + _string_array("t", items)
    for cut in (len(data) - 2, len(data) - 4 - len(items[-1])):      # in a string, in a length
        check_bad(tmp_path, data[:cut], rf"metadata 't'\[{n - 1}\]")
    huge = header(0, 1) + _string_array("t", items[:-1] + [b""])[:-8] + struct.pack("<Q", 2**62)
    check_bad(tmp_path, huge, rf"metadata 't'\[{n - 1}\]: needs 4611686018427387904 bytes")


# ---- hostile files ---------------------------------------------------------------


def header(n_tensors, n_kv, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def kv_string(key, value):
    k, v = key.encode(), value.encode()
    return struct.pack("<Q", len(k)) + k + struct.pack("<I", 8) + struct.pack("<Q", len(v)) + v


def tensor_info(name, ne, ttype, offset):
    n = name.encode()
    return (struct.pack("<Q", len(n)) + n + struct.pack("<I", len(ne))
            + struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", ttype, offset))


def good_file():
    body = header(1, 1) + kv_string("general.architecture", "llama") + tensor_info(
        "w", [32, 2], 8, 0)
    body += b"\0" * (-len(body) % 32)
    return body + bytes(68)                                   # two Q8_0 blocks


def check_bad(tmp_path, data, match):
    p = tmp_path / "bad.gguf"
    p.write_bytes(data)
    with pytest.raises(ValueError, match=match) as e:
        GGUFFile(p)
    assert str(p) in str(e.value)


def test_good_file_parses(tmp_path):
    p = tmp_path / "ok.gguf"
    p.write_bytes(good_file())
    f = GGUFFile(p)
    assert f.tensors == {"w": ("Q8_0", (2, 32))}
    assert f.dequantize("w").tolist() == [[0.0] * 32] * 2


def test_every_truncation_is_refused(tmp_path):
    data = good_file()
    for n in range(len(data)):
        check_bad(tmp_path, data[:n], "GGUF file")


@pytest.mark.parametrize("data, match", [
    (b"GGML" + bytes(20), "magic: not a GGUF file"),
    (header(0, 0, version=1), "version: 1 is not supported"),
    (header(0, 0, version=2**31), "version: 2147483648"),
    (header(0, 2**62), "metadata_kv_count: 4611686018427387904 entries cannot fit"),
    (header(2**60, 0), "tensor_count: 1152921504606846976 tensors cannot fit"),
    (header(0, 1) + struct.pack("<Q", 2**63) + bytes(16), r"metadata key 0: needs 9223372036854775808"),
    (header(0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 4, 2**61),
     r"metadata 'k' \(2305843009213693952 array elements\)"),
    (header(0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 8, 2**61),
     "an array of 2305843009213693952 strings cannot fit"),
    (header(0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 9, 1) + bytes(16),
     "array element type 9 is not supported"),
    (header(0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<I", 99) + bytes(16),
     "unknown metadata value type 99"),
    (header(0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IQ", 8, 2) + b"\xff\xfe",
     "metadata 'k': not UTF-8"),
    (header(0, 1) + struct.pack("<Q", 17) + b"general.alignment" + struct.pack("<II", 4, 48)
     + bytes(16), "'general.alignment': 48 is not a power of two"),
    (header(1, 0) + tensor_info("w", [32, 2, 1, 1, 1], 8, 0) + bytes(64), "n_dims: 5"),
    (header(1, 0) + tensor_info("w", [32, 0], 8, 0) + bytes(64), r"dimension 0 is out of range"),
    (header(1, 0) + tensor_info("w", [2**40, 2**40], 0, 0) + bytes(64),
     "dimension 1099511627776 is out of range"),
    (header(1, 0) + tensor_info("w", [33, 1], 8, 0) + bytes(64),
     "a row of 33 values is not a whole number of Q8_0 blocks of 32"),
    (header(1, 0) + tensor_info("w", [32, 1], 10, 0) + bytes(64), "type: Q2_K is not supported"),
    (header(1, 0) + tensor_info("w", [32, 1], 77, 0) + bytes(64), "type id 77 is not supported"),
    (header(1, 0) + tensor_info("w", [32, 1], 8, 3) + bytes(64), "offset: 3 is not a multiple"),
    (header(1, 0) + tensor_info("w", [32, 4], 8, 0) + bytes(64), "run past the end of the file"),
    (header(2, 0) + tensor_info("w", [32], 0, 0) + tensor_info("w", [32], 0, 128) + bytes(512),
     "tensor 'w': named twice"),
])
def test_hostile_headers(tmp_path, data, match):
    check_bad(tmp_path, data, match)


FUZZ_SCRIPT = r"""
import sys, numpy as np
from cattn.models import GGUFFile
src, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
good = bytearray(open(src, "rb").read())
rng = np.random.default_rng(seed)
path = src + ".fuzz"
outcomes = {"ok": 0, "ValueError": 0, "KeyError": 0}
for case in range(n):
    data = bytearray(good)
    for _ in range(int(rng.integers(1, 9))):                 # 1..8 random bytes changed
        data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
    with open(path, "wb") as f:
        f.write(data)
    try:
        f = GGUFFile(path)
        for name, (t, shape) in f.tensors.items():
            f.dequantize(name)
            if len(shape) == 2:
                f.weight(name)
        f.close()
        outcomes["ok"] += 1
    except (ValueError, KeyError) as e:
        outcomes[type(e).__name__] += 1
print(outcomes)
"""


def test_random_byte_changes_never_crash(tmp_path):
    """10,000 copies of a small file with 1-8 random bytes changed (header,
    metadata, tensor infos and data alike), read, dequantized and packed in
    a subprocess: each gives its values or a ValueError / KeyError; no
    crash, no hang, no other exception (the subprocess would fail)."""
    import subprocess
    import sys
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 256)).astype(np.float32)
    tensors = [("a", "F32", (3, 8), rng.standard_normal((3, 8)).astype(np.float32)),
               ("b", "Q4_0", (4, 256), gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q4_0)),
               ("c", "Q8_0", (4, 256), gguf.quants.quantize(x, gguf.GGMLQuantizationType.Q8_0)),
               ("d", "Q6_K", (2, 256), random_blocks("Q6_K", (2, 256), rng)),
               ("e", "Q4_K", (2, 256), random_blocks("Q4_K", (2, 256), rng))]
    meta = [("add_string", "general.name", "fuzz"), ("add_uint32", "x.n", 7),
            ("add_array", "x.list", ["a", "bc", "def"])]
    src = write(tmp_path / "f.gguf", tensors, meta)
    # run from tmp_path: from the repository root the unbuilt source tree
    # would shadow the installed cattn (CI runs the tests on an install)
    r = subprocess.run([sys.executable, "-c", FUZZ_SCRIPT, src, "10000", "1"],
                       capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    counts = eval(r.stdout.strip().splitlines()[-1])
    assert sum(counts.values()) == 10000 and counts["ValueError"] > 500 and counts["ok"] > 500


def test_q4k_two_level_parts_hold_the_blocks(tmp_path):
    """int4_k_parts: a Q4_K tensor's scales as stored (D, Dmin, sc, m), as an
    int4 weight with two-level scales (int4_k_arrays): gguf-py's values bit
    for bit, in fewer bytes than the float32 scales of int4_parts; weight()
    gives the two-level form, with the float32-scale weight's linear bits."""
    from cattn.ops.formats import int4_arrays, int4_k_arrays
    from cattn.ops.packed import PackedWeight
    rng = np.random.default_rng(9)
    raw = random_blocks("Q4_K", (20, 512), rng)
    blocks = raw.reshape(-1, 144)
    blocks[:, :4] = (rng.standard_normal((len(blocks), 2)) * 0.05).astype(np.float16).view(np.uint8)
    f = GGUFFile(write(tmp_path / "q.gguf", [("w", "Q4_K", (20, 512), raw)]))
    two = PackedWeight.from_arrays(int4_k_arrays(*f.int4_k_parts("w")))
    want = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType.Q4_K).astype(np.float32)
    np.testing.assert_array_equal(two.unpack().view(np.uint32), want.view(np.uint32))
    q, d, mn, z = f.int4_parts("w")
    flat = PackedWeight.from_arrays(int4_arrays(q, d, mn, z))
    assert two.nbytes < 0.8 * flat.nbytes and f.weight("w").nbytes == two.nbytes
    x = rng.standard_normal((3, 512)).astype(np.float32)
    np.testing.assert_array_equal(cattn.linear(x, f.weight("w")), cattn.linear(x, flat))
    assert f.int4_k_parts("w") is not None and GGUFFile.int4_k_parts(f, "w")[0].shape == (20, 512)


@pytest.mark.parametrize("tname", ["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                   "Q4_K", "Q5_K", "Q6_K"])
def test_weight_built_in_row_blocks(tmp_path, monkeypatch, tname):
    """weight() builds a tensor a block of rows at a time (CHUNK_ROWS, here
    32, of a 100-row tensor: blocks past the panels' 16 rows and a ragged
    last one): the same values as dequantize and the same linear bits as
    one block; its pages of the map are let go and read back when touched."""
    from cattn.models import gguf as gguf_mod
    rng = np.random.default_rng(5)
    shape = (100, 256)
    if tname in ("F32", "F16", "BF16"):
        raw = rng.standard_normal(shape).astype(np.float32)
        stored = (raw.astype(np.float16) if tname == "F16" else raw if tname == "F32" else
                  (raw.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8))
        entry = ("w", tname, shape, stored)
    else:
        raw = random_blocks(tname, shape, rng)
        bsize = {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20, "Q5_0": 22, "Q5_1": 24, "Q4_K": 144,
                 "Q5_K": 176, "Q6_K": 210}[tname]
        at, n = {"Q6_K": (208, 1), "Q4_1": (0, 2), "Q5_1": (0, 2), "Q4_K": (0, 2),
                 "Q5_K": (0, 2)}.get(tname, (0, 1))
        blocks = raw.reshape(-1, bsize)
        blocks[:, at:at + 2 * n] = (rng.standard_normal((len(blocks), n)) * 0.05).astype(
            np.float16).view(np.uint8).reshape(len(blocks), 2 * n)
        entry = ("w", tname, shape, raw)
    f = GGUFFile(write(tmp_path / "q.gguf", [entry]))
    whole = f.weight("w")
    monkeypatch.setattr(gguf_mod, "CHUNK_ROWS", 32)
    parts = f.weight("w")
    assert parts.format == whole.format and parts.nbytes == whole.nbytes
    np.testing.assert_array_equal(parts.unpack(), f.dequantize("w"))
    x = rng.standard_normal((3, 256)).astype(np.float32)
    np.testing.assert_array_equal(cattn.linear(x, parts), cattn.linear(x, whole))
    f.release("w")
    np.testing.assert_array_equal(f.dequantize("w"), whole.unpack())
