"""cattn.nn.pack_weights: every nn.Linear's weight packed once (cattn.pack_weight).

Outputs keep their bits (the packed and plain GEMM paths sum in one order),
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


def test_decoder_layer_with_cross_attention(rng):
    """MultiheadAttention's in_proj_weight stays an array (cross-attention
    slices it); its out_proj and the feed-forward Linears are packed."""
    plain = nn.TransformerDecoderLayer(E, H, FF, 0.0, batch_first=True, seed=1)
    packed = nn.pack_weights(copy.deepcopy(plain))
    assert isinstance(packed.multihead_attn.in_proj_weight, np.ndarray)
    assert isinstance(packed.multihead_attn.out_proj.weight, cattn.PackedWeight)
    x, mem = (rng.standard_normal((2, L, E)).astype(np.float32) for L in (5, 11))
    np.testing.assert_array_equal(packed(x, mem), plain(x, mem))


def test_errors():
    with pytest.raises(TypeError, match="cattn.nn.Module"):
        nn.pack_weights(np.zeros((2, 2)))
