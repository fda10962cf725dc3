"""cattn.nn against the float64 oracle in cattn.reference (written from the
paper's equations), plus construction, initialisation, state_dict, positional
encodings and KV-cache decoding. No torch here (see test_nn_torch.py).

Sizes are tiny (E=16, H=4): these tests check semantics, not speed.
"""
import ast
import inspect
import math

import numpy as np
import pytest

import cattn
import cattn.ops.attention
from cattn import nn
from cattn import reference as ref

F32, F64 = np.float32, np.float64
TOL = {F32: dict(rtol=2e-4, atol=2e-5), F64: dict(rtol=1e-9, atol=1e-10)}
ACTS = ["relu", "gelu", "gelu_tanh", "silu"]
E, H, FF = 16, 4, 32


@pytest.fixture
def rng():
    return np.random.default_rng(20240605)


def randn(rng, shape, dtype=F32):
    return rng.standard_normal(shape).astype(dtype)


def randomize(module, rng):
    """Give every parameter a non-trivial value (non-zero biases, non-unit norms)."""
    for name, p in module.named_parameters():
        if p.ndim == 2:
            p[...] = rng.standard_normal(p.shape) / math.sqrt(p.shape[1])
        elif "norm" in name and name.endswith("weight"):
            p[...] = 1 + 0.2 * rng.standard_normal(p.shape)
        else:
            p[...] = 0.2 * rng.standard_normal(p.shape)
    return module


def close(a, b, dtype=F32):
    np.testing.assert_allclose(a, b, **TOL[dtype])


# ---------------------------------------------------------------- MultiheadAttention


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("bias", [True, False])
def test_mha_self_attention_matches_reference(rng, dtype, batch_first, bias):
    m = randomize(nn.MultiheadAttention(E, H, bias=bias, batch_first=batch_first, dtype=dtype), rng)
    x = randn(rng, (2, 5, E), dtype)
    xin = x if batch_first else np.ascontiguousarray(x.swapaxes(0, 1))
    out, w = m(xin)
    assert w is None and out.dtype == dtype and out.shape == xin.shape
    expect, _ = ref.multihead_attention(m.state_dict(), x, x, x, H)
    close(out if batch_first else out.swapaxes(0, 1), expect, dtype)


def _masks(kind, rng, B, L, S):
    """(kwargs for MultiheadAttention, kwargs for the reference)."""
    kpm_b = np.zeros((B, S), bool)
    kpm_b[0, -2:] = True
    kpm_b[1, 0] = True
    kpm_f = np.where(kpm_b, -np.inf, 0.0).astype(F32)
    kpm_f[1, 1] = -1.5  # a soft penalty too
    am_b = rng.random((L, S)) < 0.3
    am_b[:, 2] = False  # every row keeps a key that is never padded
    am_f = (rng.standard_normal((L, S)) * 0.5).astype(F32)
    am_f[0, 3] = -np.inf
    am3_b = rng.random((B * H, L, S)) < 0.3
    am3_b[:, :, 2] = False
    am3_f = (rng.standard_normal((B * H, L, S))).astype(F32)
    table = {
        "kpm_bool": dict(key_padding_mask=kpm_b),
        "kpm_float": dict(key_padding_mask=kpm_f),
        "attn_bool_2d": dict(attn_mask=am_b),
        "attn_float_2d": dict(attn_mask=am_f),
        "attn_bool_3d": dict(attn_mask=am3_b),
        "attn_float_3d": dict(attn_mask=am3_f),
        "attn_bool+kpm_bool": dict(attn_mask=am_b, key_padding_mask=kpm_b),
        "attn_float+kpm_bool": dict(attn_mask=am_f, key_padding_mask=kpm_b),
        "attn_bool_3d+kpm_float": dict(attn_mask=am3_b, key_padding_mask=kpm_f),
        "causal": dict(is_causal=True),
        "causal+kpm_bool": dict(is_causal=True, key_padding_mask=np.roll(kpm_b, 2, axis=1)),
        "causal+kpm_float": dict(is_causal=True, key_padding_mask=np.roll(kpm_f, 2, axis=1)),
    }
    return table[kind]


MASK_KINDS = ["kpm_bool", "kpm_float", "attn_bool_2d", "attn_float_2d", "attn_bool_3d",
              "attn_float_3d", "attn_bool+kpm_bool", "attn_float+kpm_bool",
              "attn_bool_3d+kpm_float", "causal", "causal+kpm_bool", "causal+kpm_float"]


@pytest.mark.parametrize("kind", MASK_KINDS)
def test_mha_masks_match_reference(rng, kind):
    B, L = 2, 6
    m = randomize(nn.MultiheadAttention(E, H), rng)
    x = randn(rng, (B, L, E))
    kw = _masks(kind, rng, B, L, L)
    out, w = m(x, need_weights=True, average_attn_weights=False, **kw)
    expect, A = ref.multihead_attention(m.state_dict(), x, x, x, H, **kw)
    close(out, expect)
    close(w, A)
    out2, _ = m(x, **kw)  # the fused path (need_weights=False) agrees too
    close(out2, expect)


def test_mha_is_causal_with_mask_is_a_hint(rng):
    m = randomize(nn.MultiheadAttention(E, H), rng)
    x = randn(rng, (2, 5, E))
    causal_out, _ = m(x, is_causal=True)
    hinted, _ = m(x, attn_mask=nn.generate_square_subsequent_mask(5), is_causal=True)
    explicit, _ = m(x, attn_mask=np.triu(np.ones((5, 5), bool), 1))
    np.testing.assert_array_equal(causal_out, hinted)
    close(explicit, causal_out)


def test_mha_fully_masked_row_gives_zeros(rng):
    m = randomize(nn.MultiheadAttention(E, H, bias=False), rng)
    x = randn(rng, (2, 4, E))
    kpm = np.zeros((2, 4), bool)
    kpm[1] = True  # batch 1 has nothing to attend to
    out, w = m(x, key_padding_mask=kpm, need_weights=True)
    assert np.all(w[1] == 0) and np.all(out[1] == 0)  # no bias: zero context -> zero output
    assert np.all(np.isfinite(out))


@pytest.mark.parametrize("average", [True, False])
def test_mha_need_weights(rng, average):
    m = randomize(nn.MultiheadAttention(E, H), rng)
    q, kv = randn(rng, (2, 3, E)), randn(rng, (2, 7, E))
    out, w = m(q, kv, kv, need_weights=True, average_attn_weights=average)
    expect, A = ref.multihead_attention(m.state_dict(), q, kv, kv, H)
    assert w.shape == ((2, 3, 7) if average else (2, H, 3, 7))
    close(w, A.mean(axis=1) if average else A)
    close(out, expect)
    close(w.sum(-1), np.ones(w.shape[:-1]))


@pytest.mark.parametrize("dtype", [F32, F64])
def test_mha_cross_attention_L_ne_S(rng, dtype):
    m = randomize(nn.MultiheadAttention(E, H, dtype=dtype), rng)
    q, k, v = randn(rng, (3, 4, E), dtype), randn(rng, (3, 9, E), dtype), randn(rng, (3, 9, E), dtype)
    close(m(q, k, v)[0], ref.multihead_attention(m.state_dict(), q, k, v, H)[0], dtype)
    close(m(q, k)[0], ref.multihead_attention(m.state_dict(), q, k, k, H)[0], dtype)


def test_mha_kdim_vdim(rng):
    m = randomize(nn.MultiheadAttention(E, H, kdim=6, vdim=10), rng)
    sd = m.state_dict()
    assert [(k, v.shape) for k, v in sd.items()] == [
        ("q_proj_weight", (E, E)), ("k_proj_weight", (E, 6)), ("v_proj_weight", (E, 10)),
        ("in_proj_bias", (3 * E,)), ("out_proj.weight", (E, E)), ("out_proj.bias", (E,))]
    q, k, v = randn(rng, (2, 3, E)), randn(rng, (2, 5, 6)), randn(rng, (2, 5, 10))
    kpm = np.array([[False] * 4 + [True], [True] + [False] * 4])
    out, w = m(q, k, v, key_padding_mask=kpm, need_weights=True)
    expect, A = ref.multihead_attention(sd, q, k, v, H, key_padding_mask=kpm)
    close(out, expect)
    close(w, A.mean(1))


def test_mha_unbatched(rng):
    m = randomize(nn.MultiheadAttention(E, H), rng)
    x, mem = randn(rng, (5, E)), randn(rng, (7, E))
    kpm = np.zeros(7, bool)
    kpm[3] = True
    out, w = m(x, mem, mem, key_padding_mask=kpm, need_weights=True)
    assert out.shape == (5, E) and w.shape == (5, 7)
    expect, A = ref.multihead_attention(m.state_dict(), x[None], mem[None], mem[None], H,
                                        key_padding_mask=kpm[None])
    close(out, expect[0])
    close(w, A.mean(1)[0])


class _LinearSpy:
    def __init__(self, monkeypatch):
        self.calls = []
        real = cattn.linear

        def spy(x, weight, bias=None, **kw):
            y = real(x, weight, bias, **kw)
            self.calls.append((x, weight, y))
            return y
        for mod in (nn.layers, nn.attention, nn.transformer_layers, nn.packed_params):
            if getattr(mod, "linear", None) is real:
                monkeypatch.setattr(mod, "linear", spy)


class _SdpaSpy:
    def __init__(self, monkeypatch):
        self.calls = []
        real = cattn.ops.attention.scaled_dot_product_attention

        def spy(q, k, v, *a, **kw):
            self.calls.append((q, k, v))
            return real(q, k, v, *a, **kw)
        monkeypatch.setattr(nn.attention, "scaled_dot_product_attention", spy)
        monkeypatch.setattr(cattn.ops.attention, "scaled_dot_product_attention", spy)


def test_self_attention_projects_qkv_in_one_gemm_without_copies(rng, monkeypatch):
    m = randomize(nn.MultiheadAttention(E, H), rng)
    lin, sdpa = _LinearSpy(monkeypatch), _SdpaSpy(monkeypatch)
    x = randn(rng, (2, 5, E))
    m(x)
    assert len(lin.calls) == 2  # in_proj (3E, E) and out_proj
    w = lin.calls[0][1]                       # the whole weight (a view of it, no copy)
    assert w.shape == (3 * E, E) and np.shares_memory(w, m.in_proj_weight)
    qkv = lin.calls[0][2]
    (q, k, v), = sdpa.calls
    for t in (q, k, v):
        assert t.shape == (2, H, 5, E // H) and np.shares_memory(t, qkv)
    # the attention output is written straight into out_proj's input
    assert lin.calls[1][0].shape == (2, 5, E)


def test_cross_attention_projects_kv_in_one_gemm(rng, monkeypatch):
    m = randomize(nn.MultiheadAttention(E, H, batch_first=False), rng)
    lin, sdpa = _LinearSpy(monkeypatch), _SdpaSpy(monkeypatch)
    q, mem = randn(rng, (3, 2, E)), randn(rng, (7, 2, E))
    m(q, mem, mem)
    assert len(lin.calls) == 3  # q, [k; v], out
    (_, k, v), = sdpa.calls
    assert np.shares_memory(k, lin.calls[1][2]) and np.shares_memory(v, lin.calls[1][2])
    assert k.shape == (2, H, 7, E // H)


def test_mha_errors(rng):
    m = nn.MultiheadAttention(E, H)
    x = randn(rng, (2, 5, E))
    with pytest.raises(TypeError, match="float64"):
        m(x.astype(F64))
    with pytest.raises(TypeError, match="int64"):
        m(np.ones((2, 5, E), np.int64))
    with pytest.raises(ValueError, match=r"\(2, 5, 8\)"):
        m(randn(rng, (2, 5, 8)))
    with pytest.raises(ValueError, match="key_padding_mask"):
        m(x, key_padding_mask=np.zeros((2, 4), bool))
    with pytest.raises(ValueError, match="attn_mask"):
        m(x, attn_mask=np.zeros((4, 5), bool))
    with pytest.raises(TypeError, match="int"):
        m(x, attn_mask=np.zeros((5, 5), np.int32))
    with pytest.raises(ValueError, match="divisible"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(TypeError, match="dropout"):
        nn.MultiheadAttention(E, H, False)  # bias passed where torch has dropout
    with pytest.raises(TypeError, match="dtype"):
        nn.MultiheadAttention(E, H, dtype=np.float16)


# ---------------------------------------------------------------- encoder / decoder layers


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ACTS)
def test_encoder_layer_matches_reference(rng, norm_first, activation):
    layer = randomize(nn.TransformerEncoderLayer(E, H, FF, activation=activation,
                                                 norm_first=norm_first), rng)
    x = randn(rng, (2, 6, E))
    kpm = np.zeros((2, 6), bool)
    kpm[1, 4:] = True
    out = layer(x, src_key_padding_mask=kpm)
    expect = ref.transformer_encoder_layer(layer.state_dict(), x, H, activation,
                                           norm_first=norm_first, src_key_padding_mask=kpm)
    close(out, expect)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("batch_first", [True, False])
def test_encoder_layer_masks_and_layout(rng, dtype, batch_first):
    layer = randomize(nn.TransformerEncoderLayer(E, H, FF, batch_first=batch_first,
                                                 layer_norm_eps=1e-6, dtype=dtype), rng)
    x = randn(rng, (2, 6, E), dtype)
    xin = x if batch_first else np.ascontiguousarray(x.swapaxes(0, 1))
    sd = layer.state_dict()
    for kw in (dict(is_causal=True), dict(src_mask=(rng.random((6, 6)) < 0.3) & ~np.eye(6, dtype=bool)),
               dict(src_mask=randn(rng, (6, 6), dtype))):
        out = layer(xin, **kw)
        out = out if batch_first else out.swapaxes(0, 1)
        close(out, ref.transformer_encoder_layer(sd, x, H, layer_norm_eps=1e-6, **kw), dtype)
    assert layer(xin).dtype == dtype


def test_layers_accept_unbatched_input(rng):
    enc = randomize(nn.TransformerEncoderLayer(E, H, FF), rng)
    dec = randomize(nn.TransformerDecoderLayer(E, H, FF, norm_first=True), rng)
    x, mem = randn(rng, (5, E)), randn(rng, (7, E))
    close(enc(x, is_causal=True), enc(x[None], is_causal=True)[0])
    close(dec(x, mem), dec(x[None], mem[None])[0])


def test_encoder_layer_does_not_modify_input(rng):
    for norm_first in (False, True):
        layer = randomize(nn.TransformerEncoderLayer(E, H, FF, norm_first=norm_first), rng)
        x = randn(rng, (2, 4, E))
        x0 = x.copy()
        layer(x)
        np.testing.assert_array_equal(x, x0)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ACTS)
def test_decoder_layer_matches_reference(rng, norm_first, activation):
    layer = randomize(nn.TransformerDecoderLayer(E, H, FF, activation=activation,
                                                 norm_first=norm_first), rng)
    tgt, mem = randn(rng, (2, 5, E)), randn(rng, (2, 8, E))
    mkpm = np.zeros((2, 8), bool)
    mkpm[0, 6:] = True
    tkpm = np.zeros((2, 5), bool)
    tkpm[1, 4] = True
    out = layer(tgt, mem, tgt_is_causal=True, tgt_key_padding_mask=tkpm,
                memory_key_padding_mask=mkpm)
    expect = ref.transformer_decoder_layer(layer.state_dict(), tgt, mem, H, activation,
                                           norm_first=norm_first, tgt_is_causal=True,
                                           tgt_key_padding_mask=tkpm,
                                           memory_key_padding_mask=mkpm)
    close(out, expect)


def test_decoder_layer_masks(rng):
    layer = randomize(nn.TransformerDecoderLayer(E, H, FF, batch_first=False, bias=False), rng)
    tgt, mem = randn(rng, (2, 5, E)), randn(rng, (2, 8, E))
    tmask = nn.generate_square_subsequent_mask(5)
    mmask = randn(rng, (5, 8))
    out = layer(tgt.swapaxes(0, 1), mem.swapaxes(0, 1), tgt_mask=tmask, memory_mask=mmask)
    expect = ref.transformer_decoder_layer(layer.state_dict(), tgt, mem, H, tgt_mask=tmask,
                                           memory_mask=mmask)
    close(out.swapaxes(0, 1), expect)
    assert "norm1.bias" not in layer.state_dict()


def test_layer_activation_errors():
    with pytest.raises(ValueError, match="tanh"):
        nn.TransformerEncoderLayer(E, H, FF, activation="tanh")
    with pytest.raises(TypeError, match="string"):
        nn.TransformerDecoderLayer(E, H, FF, activation=lambda x: x)


# ---------------------------------------------------------------- stacks


def test_encoder_stack(rng):
    layer = nn.TransformerEncoderLayer(E, H, FF, activation="gelu", seed=1)
    enc = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(E))
    sd = enc.state_dict()
    assert list(sd)[:2] == ["layers.0.self_attn.in_proj_weight", "layers.0.self_attn.in_proj_bias"]
    assert "layers.2.norm2.bias" in sd and "norm.weight" in sd and "layers.3.linear1.weight" not in sd
    # deep copies: identical initial weights, independent arrays
    np.testing.assert_array_equal(sd["layers.0.linear1.weight"], sd["layers.2.linear1.weight"])
    assert not np.shares_memory(sd["layers.0.linear1.weight"], sd["layers.1.linear1.weight"])
    assert not np.shares_memory(sd["layers.0.linear1.weight"], layer.linear1.weight)
    assert enc.layers[1].linear1.weight is sd["layers.1.linear1.weight"]  # attribute == state
    randomize(enc, rng)
    x = randn(rng, (2, 6, E))
    kpm = np.zeros((2, 6), bool)
    kpm[0, 5] = True
    out = enc(x, src_key_padding_mask=kpm)
    close(out, ref.transformer_encoder(enc.state_dict(), x, H, 3, activation="gelu",
                                       src_key_padding_mask=kpm))
    # a causal mask is detected and runs the causal kernel path
    cm = nn.generate_square_subsequent_mask(6)
    close(enc(x, mask=cm), ref.transformer_encoder(enc.state_dict(), x, H, 3, activation="gelu",
                                                   is_causal=True))


def test_decoder_stack(rng):
    layer = nn.TransformerDecoderLayer(E, H, FF, norm_first=True)
    dec = randomize(nn.TransformerDecoder(layer, 2, norm=nn.LayerNorm(E)), rng)
    tgt, mem = randn(rng, (2, 4, E)), randn(rng, (2, 6, E))
    tm = np.triu(np.ones((4, 4), bool), 1)
    out = dec(tgt, mem, tgt_mask=tm)
    close(out, ref.transformer_decoder(dec.state_dict(), tgt, mem, H, 2, norm_first=True,
                                       tgt_mask=tm))
    assert dec.layers[1].multihead_attn.in_proj_weight.shape == (3 * E, E)


# ---------------------------------------------------------------- init and state_dict


def test_init_like_torch():
    m = nn.MultiheadAttention(64, 8, seed=0)
    bound = math.sqrt(6 / (64 + 3 * 64))
    w = m.in_proj_weight
    assert w.dtype == F32 and np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    assert np.all(m.in_proj_bias == 0) and np.all(m.out_proj.bias == 0)
    assert np.abs(m.out_proj.weight).max() <= 1 / 8
    layer = nn.TransformerEncoderLayer(64, 8, 128, seed=0)
    assert np.abs(layer.linear2.weight).max() <= 1 / math.sqrt(128)
    assert 0 < np.abs(layer.linear1.bias).max() <= 1 / 8
    assert np.all(layer.norm1.weight == 1) and np.all(layer.norm2.bias == 0)
    # reproducible from the seed, different for another seed
    a = nn.TransformerDecoderLayer(16, 4, 32, seed=7).state_dict()
    b = nn.TransformerDecoderLayer(16, 4, 32, seed=7).state_dict()
    c = nn.TransformerDecoderLayer(16, 4, 32, seed=8).state_dict()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    assert not np.array_equal(a["linear1.weight"], c["linear1.weight"])
    assert not np.array_equal(a["self_attn.in_proj_weight"], a["multihead_attn.in_proj_weight"])


def test_state_dict_round_trip(rng):
    src = randomize(nn.TransformerDecoderLayer(E, H, FF, seed=1), rng)
    dst = nn.TransformerDecoderLayer(E, H, FF, seed=2)
    keys = dst.load_state_dict({k: v.copy() for k, v in src.state_dict().items()})
    assert keys.missing_keys == [] and keys.unexpected_keys == []
    tgt, mem = randn(rng, (1, 3, E)), randn(rng, (1, 4, E))
    np.testing.assert_array_equal(src(tgt, mem), dst(tgt, mem))


def test_load_state_dict_errors(rng):
    m = nn.TransformerEncoderLayer(E, H, FF, seed=0)
    good = {k: v.copy() for k, v in m.state_dict().items()}
    before = {k: v.copy() for k, v in m.state_dict().items()}

    bad = dict(good)
    del bad["norm2.bias"], bad["linear1.weight"]
    bad["decoder.weight"] = np.zeros(3, F32)
    with pytest.raises(KeyError) as e:
        m.load_state_dict(bad)
    msg = str(e.value)
    assert "missing key(s): linear1.weight, norm2.bias" in msg and "decoder.weight" in msg

    bad = dict(good, **{"linear1.weight": np.zeros((FF, E + 1), F32), "norm1.weight": np.zeros(E)})
    with pytest.raises(ValueError, match=r"linear1.weight.*\(32, 17\).*\(32, 16\)"):
        m.load_state_dict(bad)
    with pytest.raises(TypeError, match="linear2.bias.*int64"):
        m.load_state_dict(dict(good, **{"linear2.bias": np.zeros(E, np.int64)}))
    with pytest.raises(ValueError, match="overflow"):
        m.load_state_dict(dict(good, **{"linear2.bias": np.full(E, 1e300)}))
    for k in before:  # nothing was written by the failed loads
        np.testing.assert_array_equal(m.state_dict()[k], before[k])

    # float64 into a float32 module: cast (torch's copy_ semantics)
    m.load_state_dict({k: v.astype(F64) * 2 for k, v in good.items()})
    assert m.linear1.weight.dtype == F32
    np.testing.assert_array_equal(m.linear1.weight, good["linear1.weight"] * 2)

    # strict=False: loads what matches, reports the rest
    res = m.load_state_dict({"norm1.weight": np.full(E, 3.0, F32), "extra": np.zeros(1)},
                            strict=False)
    assert res.unexpected_keys == ["extra"] and "norm1.bias" in res.missing_keys
    assert np.all(m.norm1.weight == 3)

    with pytest.raises(ValueError, match="shape"):
        m.linear1.weight = np.zeros((3, 3), F32)


# ---------------------------------------------------------------- positional encodings


@pytest.mark.parametrize("d", [8, 7])
def test_positional_encoding_formula(d):
    pe = nn.PositionalEncoding(d, max_len=50, dtype=F64)
    for pos in (0, 1, 13, 49):
        for i in range(d):
            angle = pos / 10000 ** ((i - i % 2) / d)
            want = math.sin(angle) if i % 2 == 0 else math.cos(angle)
            assert abs(pe.pe[pos, i] - want) < 1e-12
    x = np.zeros((2, 5, d))
    np.testing.assert_array_equal(pe(x, offset=3)[1], pe.pe[3:8])
    pe_t = nn.PositionalEncoding(d, 50, batch_first=False, dtype=F64)
    np.testing.assert_array_equal(pe_t(np.zeros((5, 2, d)))[:, 1], pe.pe[:5])
    with pytest.raises(ValueError, match="max_len"):
        pe(np.zeros((1, 51, d)))
    assert pe.state_dict() == {}


def test_rotary_matches_complex_formula(rng):
    D, T = 8, 11
    rope = nn.RotaryEmbedding(D, base=10000)
    x = rng.standard_normal((2, 3, T, D))
    out = rope.apply(x, offset=5)
    h = D // 2
    theta = 10000.0 ** (-2 * np.arange(h) / D)
    pos = np.arange(5, 5 + T)[:, None]
    z = (x[..., :h] + 1j * x[..., h:]) * np.exp(1j * pos * theta)
    np.testing.assert_allclose(out, np.concatenate([z.real, z.imag], -1), atol=1e-12)
    # float32 in, float32 out; q_m . k_n depends only on m - n
    q, k = x[0, 0, 0].astype(F32), x[0, 1, 0].astype(F32)
    def dot(m, n):
        return float((rope.apply(q[None], m) * rope.apply(k[None], n)).sum())
    assert rope.apply(q[None], 3).dtype == F32
    assert abs(dot(3, 1) - dot(43, 41)) < 1e-4 and abs(dot(3, 1) - dot(1, 3)) > 1e-3
    with pytest.raises(ValueError, match="even"):
        nn.RotaryEmbedding(7)


# ---------------------------------------------------------------- KV-cache decoding


@pytest.mark.parametrize("dtype,rotary", [(F32, False), (F64, False), (F32, True)])
def test_kv_cache_decoding_equals_full_forward(rng, dtype, rotary):
    model = nn.DecoderOnly(E, H, num_layers=3, dim_feedforward=FF, rotary=rotary, dtype=dtype,
                           seed=3)
    randomize(model, rng)
    B, T, P = 2, 12, 5
    x = randn(rng, (B, T, E), dtype)
    full = model(x)
    cache = model.new_cache(B, max_len=16)
    steps = [model(x[:, :P], cache=cache)]                 # prompt (prefill)
    steps += [model(x[:, t:t + 1], cache=cache) for t in range(P, T)]  # one token at a time
    inc = np.concatenate(steps, axis=1)
    np.testing.assert_allclose(inc, full, rtol=0, atol=1e-5 if dtype == F32 else 1e-12)
    assert all(c.length == T for c in cache)
    if not rotary:
        sd = model.state_dict()
        assert "norm.weight" in sd and "layers.2.self_attn.in_proj_weight" in sd
        close(full, ref.transformer_encoder(sd, x, H, 3, activation="gelu_tanh",
                                            norm_first=True, is_causal=True), dtype)


def test_kv_cache_step_is_linear_in_length(rng, monkeypatch):
    """A decode step projects one position and attends one query (L=1) over
    the S cached keys: O(S) work, never the (S, S) causal problem again
    (float64: the layers run one by one, so their calls can be watched)."""
    model = nn.DecoderOnly(E, H, num_layers=2, dim_feedforward=FF, dtype=F64, seed=0)
    cache = model.new_cache(1, max_len=32)
    model(randn(rng, (1, 9, E), F64), cache=cache)
    lin, sdpa = _LinearSpy(monkeypatch), _SdpaSpy(monkeypatch)
    model(randn(rng, (1, 1, E), F64), cache=cache)
    assert len(sdpa.calls) == 2  # one attention per layer
    for q, k, v in sdpa.calls:
        assert q.shape == (1, H, 1, E // H) and k.shape == (1, H, 10, E // H) == v.shape
    assert len(lin.calls) == 2 * 4 and all(x.shape[:-1] == (1, 1) for x, _, _ in lin.calls)


def test_float32_decode_step_is_one_program_call(rng, monkeypatch):
    """A float32 DecoderOnly runs a step on its caches as one program (no
    per-layer Python: no linear or attention call from the layers), with
    the layers' own bits."""
    model = randomize(nn.DecoderOnly(E, H, num_layers=3, dim_feedforward=FF, rotary=True,
                                     seed=0), rng)
    x = randn(rng, (2, 6, E))
    caches = [model.new_cache(2, 8) for _ in range(2)]
    expect = [x[:, :5].copy(), x[:, 5:].copy()]
    for i, part in enumerate(expect):       # the layers, one by one, on their own caches
        for layer, kv in zip(model.layers, caches[1]):
            part = layer(part, kv_cache=kv)
        expect[i] = model.norm(part)
    lin, sdpa = _LinearSpy(monkeypatch), _SdpaSpy(monkeypatch)
    got = [model(x[:, :5], cache=caches[0]), model(x[:, 5:], cache=caches[0])]
    assert lin.calls == [] and sdpa.calls == []
    for g, e in zip(got, expect):
        np.testing.assert_array_equal(g, e)
    assert all(c.length == 6 for c in caches[0])


def test_kv_cache_errors(rng):
    model = nn.DecoderOnly(E, H, num_layers=1, seed=0)
    cache = model.new_cache(1, max_len=4)
    with pytest.raises(ValueError, match="max_len"):
        model(randn(rng, (1, 5, E)), cache=cache)
    with pytest.raises(ValueError, match="cache"):
        model(randn(rng, (1, 1, E)), cache=cache * 2)
    mha = nn.MultiheadAttention(E, H)          # torch's signature: no cache of its own
    with pytest.raises(TypeError, match="kv_cache"):
        mha(randn(rng, (1, 1, E)), kv_cache=cache[0])


# ---------------------------------------------------------------- no NumPy on hot data


def test_forward_source_has_no_numpy_hot_ops():
    tree = ast.parse(inspect.getsource(nn))
    banned = {"matmul", "dot", "einsum", "exp", "tensordot", "inner", "vdot"}
    for node in ast.walk(tree):
        assert not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult)), \
            f"`@` at line {node.lineno}"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "np":
            assert node.attr not in banned, f"np.{node.attr} at line {node.lineno}"


def test_forward_paths_never_call_numpy_matmul_or_exp(rng, monkeypatch):
    model = nn.DecoderOnly(E, H, num_layers=1, dim_feedforward=FF, rotary=True, seed=0)
    enc = nn.TransformerEncoderLayer(E, H, FF)
    dec = nn.TransformerDecoderLayer(E, H, FF, norm_first=True)
    x, mem = randn(rng, (2, 4, E)), randn(rng, (2, 5, E))

    def boom(*a, **k):
        raise AssertionError("numpy hot op called in a forward path")
    for name in ("matmul", "dot", "einsum", "exp", "tensordot"):
        monkeypatch.setattr(np, name, boom)
    enc(x, src_key_padding_mask=np.zeros((2, 4), bool))
    dec(x, mem, tgt_is_causal=True)
    dec.multihead_attn(x, mem, need_weights=True)
    cache = model.new_cache(2, 8)
    model(x, cache=cache)
    model(x[:, :1], cache=cache)
    model(x)
