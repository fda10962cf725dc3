"""cattn.nn.pack_weights: every nn.Linear's weight packed once (cattn.pack_weight).

Outputs keep their bits (the packed and plain GEMM paths sum in one order,
and a packed GEMM computes each output column alone: MultiheadAttention's
in_proj_weight packed in row blocks gives the fused weight's bits),
and the module still behaves as a module: state_dict gives arrays,
load_state_dict and assignment pack again, deepcopy and pickle work.
"""
import copy
import pickle

import numpy as np
import pytest

import cattn
from cattn import nn

E, H, FF = 32, 4, 64


def _encoder(norm_first, dtype=np.float32):
    return nn.TransformerEncoder(
        nn.TransformerEncoderLayer(E, H, FF, 0.0, "gelu", batch_first=True,
                                   norm_first=norm_first, dtype=dtype, seed=3), 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("norm_first", [False, True])
def test_same_bits_and_state(rng, dtype, norm_first):
    plain, packed = _encoder(norm_first, dtype), _encoder(norm_first, dtype)
    before = {k: v.copy() for k, v in packed.state_dict().items()}
    assert nn.pack_weights(packed) is packed
    kinds = {type(m.weight) for m in _linears(packed)}
    assert kinds == {cattn.PackedWeight}
    assert len(_packed_params(packed)) == 2 * 4        # in_proj, out_proj, linear1, linear2
    for B, L in ((1, 1), (1, 7), (3, 20), (8, 33)):       # few rows and many
        x = rng.standard_normal((B, L, E)).astype(dtype)
        np.testing.assert_array_equal(packed(x), plain(x))
    sd = packed.state_dict()
    assert list(sd) == list(before)
    for k in sd:
        assert isinstance(sd[k], np.ndarray)
        np.testing.assert_array_equal(sd[k], before[k])


def _linears(m):
    out, stack = [], [m]
    while stack:
        x = stack.pop()
        stack.extend(x._modules.values())
        if isinstance(x, nn.Linear):
            out.append(x)
    return out


def test_load_assign_copy_and_pickle(rng):
    src, dst = _encoder(True), nn.pack_weights(_encoder(True))
    for p in src.parameters():
        p += rng.standard_normal(p.shape).astype(p.dtype)
    dst.load_state_dict(src.state_dict())                 # packed again, from arrays
    x = rng.standard_normal((2, 9, E)).astype(np.float32)
    np.testing.assert_array_equal(dst(x), src(x))
    lin = dst.layers[0].linear1
    new = rng.standard_normal(lin.weight.shape).astype(np.float32)
    lin.weight = new                                      # assignment packs too
    assert isinstance(lin.weight, cattn.PackedWeight)
    np.testing.assert_array_equal(lin.weight.unpack(), new)
    with pytest.raises(ValueError, match="shape"):
        lin.weight = np.zeros((3, 3), np.float32)
    with pytest.raises(ValueError, match="cannot replace"):
        lin.weight = cattn.pack_weight(np.zeros((3, 3), np.float32))
    twin = copy.deepcopy(dst)
    np.testing.assert_array_equal(twin(x), dst(x))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(dst))(x), dst(x))


def _packed_params(m):
    """Every packed parameter of m and its sub-modules."""
    out, stack = [], [m]
    while stack:
        x = stack.pop()
        stack.extend(x._modules.values())
        out += [p for p in x._parameters.values() if isinstance(p, (cattn.PackedWeight,
                                                                      nn.PackedRows))]
    return out


def _mha_inputs(rng, batch_first, batched=True, L=5, S=11):
    def make(n):
        shape = ((2, n) if batch_first else (n, 2)) if batched else (n,)
        return rng.standard_normal(shape + (E,)).astype(np.float32)
    return make(L), make(S), make(S)


@pytest.mark.parametrize("batch_first", [True, False])
def test_mha_projections_packed_same_bits(rng, batch_first):
    """A MultiheadAttention's in_proj_weight is packed as two row blocks
    (query | key, value: split_in_proj, the default):
    self-attention, cross-attention (key is value), a key that is not the
    value, unbatched inputs, masks and need_weights give the unpacked bits."""
    plain = nn.MultiheadAttention(E, H, batch_first=batch_first, seed=5)
    plain.in_proj_bias[...] = rng.standard_normal(3 * E).astype(np.float32)
    packed = nn.pack_weights(copy.deepcopy(plain))
    W = packed.in_proj_weight
    assert isinstance(W, nn.PackedRows) and W.shape == (3 * E, E) and W.format == "float32"
    assert [p.shape for p in W.pieces] == [(E, E), (2 * E, E)]
    assert isinstance(packed.out_proj.weight, cattn.PackedWeight)
    q, k, v = _mha_inputs(rng, batch_first)
    kpm = np.zeros((2, 11), bool)
    kpm[1, 7:] = True
    cases = [((q,), {}), ((q,), {"is_causal": True}), ((q, k, k), {}),
             ((q, k, v), {"key_padding_mask": kpm}),
             ((q, k, k), {"need_weights": True, "average_attn_weights": False})]
    for args, kw in cases:
        (a, wa), (b, wb) = packed(*args, **kw), plain(*args, **kw)
        np.testing.assert_array_equal(a, b)
        if kw.get("need_weights"):
            np.testing.assert_array_equal(wa, wb)
    uq, uk, _ = _mha_inputs(rng, batch_first, batched=False)
    np.testing.assert_array_equal(packed(uq, uk, uk)[0], plain(uq, uk, uk)[0])
    np.testing.assert_array_equal(packed(uq)[0], plain(uq)[0])


def test_mha_kdim_vdim_packed(rng):
    """kdim, vdim != embed_dim: q_proj_weight, k_proj_weight, v_proj_weight
    are packed one by one."""
    plain = nn.MultiheadAttention(E, H, kdim=6, vdim=10, seed=2)
    packed = nn.pack_weights(copy.deepcopy(plain))
    assert all(isinstance(getattr(packed, f"{n}_proj_weight"), cattn.PackedWeight)
               for n in "qkv")
    q = rng.standard_normal((2, 5, E)).astype(np.float32)
    k = rng.standard_normal((2, 7, 6)).astype(np.float32)
    v = rng.standard_normal((2, 7, 10)).astype(np.float32)
    np.testing.assert_array_equal(packed(q, k, v)[0], plain(q, k, v)[0])


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_with_cross_attention(rng, norm_first):
    """Both attentions of a decoder layer run on packed projections."""
    plain = nn.TransformerDecoderLayer(E, H, FF, 0.0, batch_first=True, norm_first=norm_first,
                                       seed=1)
    packed = nn.pack_weights(copy.deepcopy(plain))
    assert packed.multihead_attn.in_proj_weight.cuts == (E,)    # query | key, value
    assert packed.self_attn.in_proj_weight.cuts == ()           # one block
    x, mem = (rng.standard_normal((2, L, E)).astype(np.float32) for L in (5, 11))
    mpm = np.zeros((2, 11), bool)
    mpm[0, 9:] = True
    np.testing.assert_array_equal(packed(x, mem), plain(x, mem))
    np.testing.assert_array_equal(packed(x, mem, tgt_is_causal=True, memory_key_padding_mask=mpm),
                                  plain(x, mem, tgt_is_causal=True, memory_key_padding_mask=mpm))
    stack_p = nn.pack_weights(nn.TransformerDecoder(copy.deepcopy(plain), 2))
    stack = nn.TransformerDecoder(plain, 2)
    np.testing.assert_array_equal(stack_p(x, mem), stack(x, mem))


def test_one_block_in_proj_used_for_cross_attention(rng):
    """An encoder layer's self_attn is packed as one block (one GEMM for
    q, k, v); called for cross-attention it projects through the whole
    block and keeps the unpacked bits."""
    plain = _encoder(False).layers[0]
    packed = nn.pack_weights(copy.deepcopy(plain))
    W = packed.self_attn.in_proj_weight
    assert isinstance(W, nn.PackedRows) and W.cuts == () and len(W.pieces) == 1
    q, k, v = _mha_inputs(rng, True)
    for args in ((q,), (q, k, k), (q, k, v)):
        np.testing.assert_array_equal(packed.self_attn(*args)[0], plain.self_attn(*args)[0])


def test_real_tokens_path_packed(rng):
    """forward_tokens (the BERT path): each sequence alone, and the padded
    layout (an attn_mask, need_weights) on packed projections."""
    plain = _encoder(False)
    packed = nn.pack_weights(copy.deepcopy(plain))
    x = rng.standard_normal((3, 9, E)).astype(np.float32)
    kpm = np.zeros((3, 9), bool)
    kpm[0, 4:] = kpm[2, 7:] = True
    np.testing.assert_array_equal(packed(x, src_key_padding_mask=kpm, skip_padding=True),
                                  plain(x, src_key_padding_mask=kpm, skip_padding=True))
    tokens = nn.RealTokens(3, 9, kpm)
    rows = tokens.pack(x)
    mask = rng.random((9, 9)) < 0.3
    for kw in ({"need_weights": True}, {"mask": mask}):
        (a, wa), (b, wb) = packed.forward_tokens(rows, tokens, **kw), plain.forward_tokens(
            rows, tokens, **kw)
        np.testing.assert_array_equal(a, b)
        if wa is not None:
            for u, v in zip(wa, wb):
                np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("rotary", [False, True])
def test_kv_cache_decoding_packed(rng, rotary):
    """DecoderOnly: a prompt, then one token at a time through the per-layer
    KV caches, on packed projections: the unpacked model's bits."""
    plain = nn.DecoderOnly(E, H, 2, FF, rotary=rotary, seed=4)
    packed = nn.pack_weights(copy.deepcopy(plain))
    assert all(isinstance(layer.self_attn.qkv_proj.weight, cattn.PackedWeight)
               for layer in packed.layers)
    x = rng.standard_normal((2, 9, E)).astype(np.float32)
    caches = [m.new_cache(2, 9) for m in (packed, plain)]
    for lo, hi in ((0, 5), (5, 6), (6, 7), (7, 9)):
        a, b = (m(x[:, lo:hi], cache=c) for m, c in zip((packed, plain), caches))
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(packed(x), plain(x))


def test_mha_state_dict_load_and_assign(rng):
    """state_dict gives in_proj_weight as the (3E, E) array; load_state_dict
    and assignment pack it again as row blocks."""
    plain = nn.TransformerDecoderLayer(E, H, FF, 0.0, seed=6)
    packed = nn.pack_weights(copy.deepcopy(plain))
    sd = packed.state_dict()
    assert list(sd) == list(plain.state_dict())
    for k, v in plain.state_dict().items():
        assert type(sd[k]) is np.ndarray
        np.testing.assert_array_equal(sd[k], v)
    new = {k: v + rng.standard_normal(v.shape).astype(np.float32) for k, v in sd.items()}
    packed.load_state_dict(new)
    plain.load_state_dict(new)
    assert isinstance(packed.multihead_attn.in_proj_weight, nn.PackedRows)
    x, mem = (rng.standard_normal((2, L, E)).astype(np.float32) for L in (4, 6))
    np.testing.assert_array_equal(packed(x, mem), plain(x, mem))
    mha = packed.self_attn
    w = rng.standard_normal((3 * E, E)).astype(np.float32)
    mha.in_proj_weight = w
    assert isinstance(mha.in_proj_weight, nn.PackedRows)
    np.testing.assert_array_equal(mha.in_proj_weight.unpack(), w)
    np.testing.assert_array_equal(mha.state_dict()["in_proj_weight"], w)
    with pytest.raises(ValueError, match=r"\(96, 32\)"):
        mha.in_proj_weight = np.zeros((E, E), np.float32)
    with pytest.raises(ValueError, match="in_proj_weight is used by rows"):
        mha.in_proj_weight = cattn.pack_weight(w)
    twin = pickle.loads(pickle.dumps(packed))
    np.testing.assert_array_equal(twin(x, mem), packed(x, mem))
    assert isinstance(twin.self_attn.in_proj_weight, nn.PackedRows)


@pytest.mark.parametrize("fmt", ["float32", "bfloat16", "int8", "bfloat16dot"])
def test_packed_rows_equal_one_fused_weight(rng, fmt):
    """PackedRows.linear: the pieces' columns are the fused weight's bits
    (int8 included: its activations are quantized per row, the same for
    every piece), for any rows of W."""
    W = rng.standard_normal((3 * E, E)).astype(np.float32)
    b = rng.standard_normal(3 * E).astype(np.float32)
    fused = cattn.pack_weight(W, fmt)
    for cuts in ((E,), (), (5, 2 * E + 3)):
        rows = nn.PackedRows(W, fmt, cuts)
        assert rows.shape == (3 * E, E) and rows.format == fmt and rows.cuts == cuts
        np.testing.assert_array_equal(rows.unpack(), fused.unpack())
        for shape in ((1, E), (7, E), (2, 33, E)):
            x = rng.standard_normal(shape).astype(np.float32)
            want = cattn.linear(x, fused, b)
            np.testing.assert_array_equal(rows.linear(x, b), want)
            for lo, hi in ((0, E), (E, 3 * E), (E, 2 * E), (2 * E, 3 * E)):
                np.testing.assert_array_equal(rows.linear(x, b, (lo, hi)), want[..., lo:hi])
    with pytest.raises(ValueError, match=r"rows must be \(lo, hi\)"):
        rows.linear(x, b, (E, E))


def test_errors():
    with pytest.raises(TypeError, match="cattn.nn.Module"):
        nn.pack_weights(np.zeros((2, 2)))
