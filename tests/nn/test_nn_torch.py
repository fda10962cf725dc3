"""cattn.nn against torch.nn with copied weights (eval mode): a torch module's
`{k: v.numpy() for k, v in m.state_dict().items()}` loads unchanged into the
matching cattn module and gives the same outputs.

torch's eval "fast path" (nested tensors) may return 0 at padded query
positions when a key_padding_mask is given: those rows are compared only
where they are not padded. The same fast path turns a float attn_mask into
"masked wherever non-zero" and returns NaN (pytorch/pytorch#118628, #107084):
float-mask comparisons run torch with the fast path disabled.
"""
import contextlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as TF  # noqa: E402

from cattn import nn  # noqa: E402

F32, F64 = np.float32, np.float64
TOL = {F32: dict(rtol=1e-4, atol=3e-5), F64: dict(rtol=1e-9, atol=1e-10)}
E, H, FF = 16, 4, 32
TORCH_ACT = {"relu": "relu", "gelu": "gelu",
             "gelu_tanh": lambda x: TF.gelu(x, approximate="tanh"), "silu": TF.silu}


@pytest.fixture(autouse=True)
def _torch_setup():
    torch.manual_seed(0)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def randomized(tm, dtype=F32):
    """torch module in eval mode, dtype, with every parameter non-trivial."""
    tm = tm.double() if dtype == F64 else tm
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in tm.named_parameters():
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) / p.shape[1] ** 0.5)
            elif "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=g, dtype=p.dtype))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g, dtype=p.dtype))
    return tm.eval()


def np_state(tm):
    return {k: v.detach().numpy() for k, v in tm.state_dict().items()}


def t(x):
    return None if x is None else torch.from_numpy(np.ascontiguousarray(x))


def run(tm, *args, **kw):
    with torch.inference_mode():
        out = tm(*[t(a) if isinstance(a, np.ndarray) else a for a in args],
                 **{k: t(v) if isinstance(v, np.ndarray) else v for k, v in kw.items()})
    if isinstance(out, tuple):
        return tuple(None if o is None else o.numpy() for o in out)
    return out.numpy()


@contextlib.contextmanager
def torch_slow_path():
    """torch's reference (non-fast) path, for float masks (see module doc)."""
    prev = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        yield
    finally:
        torch.backends.mha.set_fastpath_enabled(prev)


def close(a, b, dtype=F32):
    np.testing.assert_allclose(a, b, **TOL[dtype])


def load(cm, tm):
    cm.load_state_dict(np_state(tm))  # strict: names and shapes identical
    assert list(cm.state_dict()) == list(tm.state_dict())
    return cm


# ---------------------------------------------------------------- MultiheadAttention


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("average", [True, False])
def test_mha_self_attention_weights(rng, dtype, batch_first, average):
    tm = randomized(torch.nn.MultiheadAttention(E, H, batch_first=batch_first), dtype)
    cm = load(nn.MultiheadAttention(E, H, batch_first=batch_first, dtype=dtype), tm)
    x = rng.standard_normal((3, 5, E) if batch_first else (5, 3, E)).astype(dtype)
    kpm = np.zeros((3, 5), bool)
    kpm[0, 3:] = True
    tout, tw = run(tm, x, x, x, key_padding_mask=kpm, need_weights=True,
                   average_attn_weights=average)
    cout, cw = cm(x, key_padding_mask=kpm, need_weights=True, average_attn_weights=average)
    close(cout, tout, dtype)
    close(cw, tw, dtype)


MASKS = ["none", "kpm_bool", "kpm_float", "attn_bool", "attn_float", "attn_bool_3d",
         "causal", "causal+kpm", "attn_float+kpm_float"]


@pytest.mark.parametrize("kind", MASKS)
def test_mha_masks(rng, kind):
    B, L = 2, 6
    tm = randomized(torch.nn.MultiheadAttention(E, H, batch_first=True))
    cm = load(nn.MultiheadAttention(E, H), tm)
    x = rng.standard_normal((B, L, E)).astype(F32)
    kpm = np.zeros((B, L), bool)
    kpm[0, -2:] = True
    kpm[1, 1] = True
    am = rng.random((L, L)) < 0.3
    am[:, 2] = False
    causal = nn.generate_square_subsequent_mask(L)
    kw = {
        "none": {},
        "kpm_bool": dict(key_padding_mask=kpm),
        "kpm_float": dict(key_padding_mask=np.where(kpm, -np.inf, 0.5).astype(F32)),
        "attn_bool": dict(attn_mask=am),
        "attn_float": dict(attn_mask=rng.standard_normal((L, L)).astype(F32)),
        "attn_bool_3d": dict(attn_mask=np.broadcast_to(am, (B * H, L, L)).copy()),
        "causal": dict(attn_mask=causal, is_causal=True),
        "causal+kpm": dict(attn_mask=np.isinf(causal), is_causal=True,
                           key_padding_mask=np.array([[0, 0, 0, 1, 0, 0], [0] * 6], bool)),
        "attn_float+kpm_float": dict(attn_mask=causal,
                                     key_padding_mask=np.where(kpm, -np.inf, 0).astype(F32)),
    }[kind]
    for need in (False, True):
        tout, tw = run(tm, x, x, x, need_weights=need, **kw)
        cout, cw = cm(x, need_weights=need, **kw)
        close(cout, tout)
        if need:
            close(cw, tw)


@pytest.mark.parametrize("batch_first", [True, False])
def test_mha_cross_attention_and_kdim_vdim(rng, batch_first):
    L, S, B = 3, 7, 2
    tm = randomized(torch.nn.MultiheadAttention(E, H, batch_first=batch_first, kdim=5, vdim=9))
    cm = load(nn.MultiheadAttention(E, H, kdim=5, vdim=9, batch_first=batch_first), tm)
    sh = (lambda n, d: (B, n, d)) if batch_first else (lambda n, d: (n, B, d))
    q, k, v = (rng.standard_normal(sh(n, d)).astype(F32) for n, d in ((L, E), (S, 5), (S, 9)))
    mkpm = np.zeros((B, S), bool)
    mkpm[1, 4:] = True
    tout, tw = run(tm, q, k, v, key_padding_mask=mkpm)
    close(cm(q, k, v, key_padding_mask=mkpm, need_weights=True)[0], tout)
    # same embed dims: packed in_proj, K and V from one memory
    tm2 = randomized(torch.nn.MultiheadAttention(E, H, batch_first=batch_first))
    cm2 = load(nn.MultiheadAttention(E, H, batch_first=batch_first), tm2)
    mem = rng.standard_normal(sh(S, E)).astype(F32)
    tout, tw = run(tm2, q, mem, mem, need_weights=True)
    cout, cw = cm2(q, mem, mem, need_weights=True)
    close(cout, tout)
    close(cw, tw)


def test_mha_unbatched_and_no_bias(rng):
    tm = randomized(torch.nn.MultiheadAttention(E, H, bias=False))
    cm = load(nn.MultiheadAttention(E, H, bias=False), tm)
    assert "in_proj_bias" not in cm.state_dict() and "out_proj.bias" not in cm.state_dict()
    x = rng.standard_normal((5, E)).astype(F32)
    tout, tw = run(tm, x, x, x)
    cout, cw = cm(x, need_weights=True)
    close(cout, tout)
    close(cw, tw)


# ---------------------------------------------------------------- layers


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", list(TORCH_ACT))
def test_encoder_layer(rng, norm_first, activation):
    tm = randomized(torch.nn.TransformerEncoderLayer(
        E, H, FF, dropout=0.0, activation=TORCH_ACT[activation], batch_first=True,
        norm_first=norm_first))
    cm = load(nn.TransformerEncoderLayer(E, H, FF, activation=activation,
                                         norm_first=norm_first), tm)
    x = rng.standard_normal((2, 6, E)).astype(F32)
    close(cm(x), run(tm, x))
    kpm = np.zeros((2, 6), bool)
    kpm[1, 4:] = True
    keep = ~kpm  # torch's fast path may zero padded rows
    close(cm(x, src_key_padding_mask=kpm)[keep], run(tm, x, src_key_padding_mask=kpm)[keep])


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("batch_first", [True, False])
def test_encoder_layer_masks(rng, dtype, batch_first):
    tm = randomized(torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0,
                                                     batch_first=batch_first), dtype)
    cm = load(nn.TransformerEncoderLayer(E, H, FF, batch_first=batch_first, dtype=dtype), tm)
    x = rng.standard_normal((2, 6, E) if batch_first else (6, 2, E)).astype(dtype)
    causal = nn.generate_square_subsequent_mask(6, dtype)
    close(cm(x, src_mask=causal, is_causal=True),
          run(tm, x, src_mask=causal, is_causal=True), dtype)
    fm = rng.standard_normal((6, 6)).astype(dtype)
    with torch_slow_path():
        close(cm(x, src_mask=fm), run(tm, x, src_mask=fm), dtype)
    bm = rng.random((6, 6)) < 0.3
    np.fill_diagonal(bm, False)
    close(cm(x, src_mask=bm), run(tm, x, src_mask=bm), dtype)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", list(TORCH_ACT))
def test_decoder_layer(rng, norm_first, activation):
    tm = randomized(torch.nn.TransformerDecoderLayer(
        E, H, FF, dropout=0.0, activation=TORCH_ACT[activation], batch_first=True,
        norm_first=norm_first))
    cm = load(nn.TransformerDecoderLayer(E, H, FF, activation=activation,
                                         norm_first=norm_first), tm)
    tgt = rng.standard_normal((2, 5, E)).astype(F32)
    mem = rng.standard_normal((2, 8, E)).astype(F32)
    causal = np.triu(np.ones((5, 5), bool), 1)  # bool, like the padding masks
    mkpm = np.zeros((2, 8), bool)
    mkpm[0, 5:] = True
    tkpm = np.zeros((2, 5), bool)
    tkpm[1, 3] = True
    kw = dict(tgt_mask=causal, tgt_is_causal=True, memory_key_padding_mask=mkpm,
              tgt_key_padding_mask=tkpm)
    close(cm(tgt, mem, **kw), run(tm, tgt, mem, **kw))
    mm = rng.standard_normal((5, 8)).astype(F32)
    close(cm(tgt, mem, memory_mask=mm), run(tm, tgt, mem, memory_mask=mm))


def test_decoder_layer_float64_seq_first_no_bias(rng):
    tm = randomized(torch.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, bias=False), F64)
    cm = load(nn.TransformerDecoderLayer(E, H, FF, batch_first=False, bias=False, dtype=F64), tm)
    tgt = rng.standard_normal((5, 2, E))
    mem = rng.standard_normal((9, 2, E))
    close(cm(tgt, mem), run(tm, tgt, mem), F64)


# ---------------------------------------------------------------- stacks


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_stack(rng, norm_first):
    layer = torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, activation="gelu",
                                             batch_first=True, norm_first=norm_first)
    tm = randomized(torch.nn.TransformerEncoder(layer, 3, norm=torch.nn.LayerNorm(E),
                                                enable_nested_tensor=False))
    cm = load(nn.TransformerEncoder(
        nn.TransformerEncoderLayer(E, H, FF, activation="gelu", norm_first=norm_first), 3,
        norm=nn.LayerNorm(E)), tm)
    x = rng.standard_normal((2, 7, E)).astype(F32)
    kpm = np.zeros((2, 7), bool)
    kpm[0, 5:] = True
    keep = ~kpm
    close(cm(x, src_key_padding_mask=kpm)[keep], run(tm, x, src_key_padding_mask=kpm)[keep])
    causal = nn.generate_square_subsequent_mask(7)
    close(cm(x, mask=causal), run(tm, x, mask=causal))


def test_decoder_stack(rng):
    layer = torch.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, batch_first=True)
    tm = randomized(torch.nn.TransformerDecoder(layer, 2, norm=torch.nn.LayerNorm(E)))
    cm = load(nn.TransformerDecoder(nn.TransformerDecoderLayer(E, H, FF), 2,
                                    norm=nn.LayerNorm(E)), tm)
    tgt = rng.standard_normal((2, 4, E)).astype(F32)
    mem = rng.standard_normal((2, 6, E)).astype(F32)
    causal = nn.generate_square_subsequent_mask(4)
    close(cm(tgt, mem, tgt_mask=causal), run(tm, tgt, mem, tgt_mask=causal))


def test_decoder_only_matches_torch_causal_encoder_stack(rng):
    """DecoderOnly's names are those of a pre-LN torch TransformerEncoder with a
    final norm; run causally, both agree, and so does KV-cache decoding."""
    layer = torch.nn.TransformerEncoderLayer(
        E, H, FF, dropout=0.0, activation=TORCH_ACT["gelu_tanh"], batch_first=True,
        norm_first=True)
    tm = randomized(torch.nn.TransformerEncoder(layer, 2, norm=torch.nn.LayerNorm(E),
                                                enable_nested_tensor=False))
    cm = load(nn.DecoderOnly(E, H, 2, FF, activation="gelu_tanh"), tm)
    x = rng.standard_normal((1, 8, E)).astype(F32)
    causal = nn.generate_square_subsequent_mask(8)
    expect = run(tm, x, mask=causal, is_causal=True)
    close(cm(x), expect)
    cache = cm.new_cache(1, 8)
    inc = np.concatenate([cm(x[:, :3], cache=cache)] +
                         [cm(x[:, i:i + 1], cache=cache) for i in range(3, 8)], axis=1)
    close(inc, expect)


# ---------------------------------------------------------------- state dicts both ways


def test_state_dict_loads_into_torch(rng):
    cm = nn.TransformerDecoderLayer(E, H, FF, seed=5)
    tm = torch.nn.TransformerDecoderLayer(E, H, FF, dropout=0.0, batch_first=True).eval()
    tm.load_state_dict({k: torch.from_numpy(v) for k, v in cm.state_dict().items()})
    tgt = rng.standard_normal((2, 3, E)).astype(F32)
    mem = rng.standard_normal((2, 4, E)).astype(F32)
    close(cm(tgt, mem), run(tm, tgt, mem))


def test_load_torch_tensors_directly_and_wrong_module(rng):
    tm = randomized(torch.nn.TransformerEncoderLayer(E, H, FF, batch_first=True))
    cm = nn.TransformerEncoderLayer(E, H, FF)
    cm.load_state_dict(tm.state_dict())  # CPU tensors convert through np.asarray
    np.testing.assert_array_equal(cm.linear1.weight, tm.linear1.weight.detach().numpy())
    with pytest.raises(KeyError, match="multihead_attn"):
        nn.TransformerDecoderLayer(E, H, FF).load_state_dict(np_state(tm))
    with pytest.raises(ValueError, match="linear1.weight"):
        nn.TransformerEncoderLayer(E, H, 2 * FF).load_state_dict(np_state(tm))
