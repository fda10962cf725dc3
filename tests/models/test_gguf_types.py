"""cattn.models.gguf_types (the one table of ggml types) against llama.cpp's
gguf-py (the `gguf` package): every type gguf-py knows has its row, with
gguf-py's id, block size and bytes per block; each type cattn reads
decodes random blocks into parts whose one dequantization is gguf-py's,
bit for bit; and GGUFFile.weight, built from the same parts in the format
the row names, unpacks to GGUFFile.dequantize's values, bit for bit."""
import numpy as np
import pytest

from cattn.models.gguf import GGUFFile
from cattn.models.gguf_types import GGML_TYPE_IDS, GGML_TYPES

gguf = pytest.importorskip("gguf", reason="the gguf package (llama.cpp's gguf-py) is the oracle")

READ = [t.name for t in GGML_TYPES.values() if t.decode is not None]
# gguf-py's Q8_1 is 4 + 4 + 32 bytes (float32 d and s); ggml's block_q8_1 holds them in float16
GGUF_PY_SIZES = {"Q8_1": (32, 40)}


def test_every_gguf_py_type_has_its_row():
    for qt in gguf.GGMLQuantizationType:
        t = GGML_TYPE_IDS[qt.value]
        assert t.name == qt.name
        assert GGUF_PY_SIZES.get(t.name, (t.block, t.nbytes)) == gguf.GGML_QUANT_SIZES[qt], t.name
    assert len(GGML_TYPE_IDS) == len(GGML_TYPES) == len(gguf.GGMLQuantizationType)
    assert sorted(READ) == sorted(["F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                   "Q4_K", "Q5_K", "Q6_K"])
    for t in GGML_TYPES.values():                     # read <=> held by a cattn format
        assert (t.decode is None) == (t.exact is None), t.name


def finite_blocks(t, nb, rng):
    """nb random blocks of type t whose float16 scales and mins (a float
    type's values) are finite, blocks drawn again until they are; every
    other bit random. (Packing a float32 weight quiets a signalling NaN.)"""
    b = rng.integers(0, 256, (nb, t.nbytes), dtype=np.uint8)
    while True:
        p = t.decode(b)
        bad = np.zeros(nb, bool)
        for a in (p.d, p.m, p.dmin, p.values):
            if a is not None:
                bad |= ~np.isfinite(a).all(axis=1)
        if not bad.any():
            return b
        b[bad] = rng.integers(0, 256, (int(bad.sum()), t.nbytes), dtype=np.uint8)


def bits(a):
    a = np.asarray(a, np.float32)
    return a.view(np.uint32)


@pytest.mark.parametrize("tname", READ)
def test_parts_dequantize_as_gguf_py(tname):
    """Random blocks -> Parts -> dequantize() is gguf-py's dequantize bit for
    bit (signed zeros, subnormal float16 scales, every quant pattern), for
    blocks with finite scales and for wholly random bytes (NaN and inf
    scales: the same NaN / inf results)."""
    t = GGML_TYPES[tname]
    qt = gguf.GGMLQuantizationType[tname]
    rng = np.random.default_rng(t.id)
    for blocks in (finite_blocks(t, 512, rng),
                   rng.integers(0, 256, (512, t.nbytes), dtype=np.uint8)):
        got = t.decode(blocks).dequantize()
        assert got.dtype == np.float32 and got.shape == (512, t.block)
        with np.errstate(all="ignore"):
            want = gguf.quants.dequantize(blocks.reshape(-1), qt).reshape(512, t.block)
        np.testing.assert_array_equal(bits(got), bits(want))


def write(path, tname, raw):
    w = gguf.GGUFWriter(str(path), "llama")
    qt = gguf.GGMLQuantizationType[tname]
    w.add_tensor("w", raw, raw_shape=raw.shape, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


@pytest.mark.parametrize("tname", READ)
def test_weight_holds_the_dequantized_values(tmp_path, tname):
    """weight() of a (40, 512) tensor (rows past the 16-row panels) is in the
    format the type's row names, and unpacks to dequantize(), which is
    gguf-py's; its rows() too. A scale that is not finite: float32."""
    t = GGML_TYPES[tname]
    rng = np.random.default_rng(100 + t.id)
    N, K = 40, 512
    raw = finite_blocks(t, N * K // t.block, rng).reshape(N, -1)
    f = GGUFFile(write(tmp_path / "w.gguf", tname, raw))
    w = f.weight("w")
    assert w.format == t.exact.format and w.shape == (N, K)
    want = f.dequantize("w")
    with np.errstate(all="ignore"):
        oracle = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[tname])
    np.testing.assert_array_equal(bits(want), bits(oracle))
    np.testing.assert_array_equal(bits(w.unpack()), bits(want))
    np.testing.assert_array_equal(bits(w.rows(np.array([39, 0, 17]))), bits(want[[39, 0, 17]]))
    if t.block > 1:                                   # an infinite scale: exact in float32
        p = f.parts("w")
        assert p.finite()
        bad = raw.copy()
        at = {"Q6_K": 208}.get(tname, 0)
        bad[3, at:at + 2] = np.array([np.inf], np.float16).view(np.uint8)
        g = GGUFFile(write(tmp_path / "bad.gguf", tname, bad))
        assert not g.parts("w").finite()
        assert g.weight("w").format == "float32"
        np.testing.assert_array_equal(bits(g.weight("w").unpack()), bits(g.dequantize("w")))


def test_parts_of_rows_are_the_blocks_parts(tmp_path):
    """GGUFFile.parts(name, r0, r1): each array (rows, per row), the rows'
    blocks' parts; dequantized, the rows of dequantize()."""
    t = GGML_TYPES["Q4_K"]
    raw = finite_blocks(t, 6 * 2, np.random.default_rng(1)).reshape(6, -1)
    f = GGUFFile(write(tmp_path / "w.gguf", "Q4_K", raw))
    p = f.parts("w", 2, 5)
    assert p.q.shape == (3, 512) and p.d.shape == (3, 2) and p.sc.shape == (3, 16)
    np.testing.assert_array_equal(p.dequantize().reshape(3, 512), f.dequantize("w")[2:5])
    with pytest.raises(KeyError, match="no tensor named 'x'"):
        f.parts("x")
