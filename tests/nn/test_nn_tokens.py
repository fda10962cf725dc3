"""cattn.nn's real-tokens-only path (RealTokens, forward_tokens, forward(...,
skip_padding=True)): against the full path of the same module, and against
torch.nn.TransformerEncoderLayer / TransformerEncoder with
src_key_padding_mask where torch is installed.

What is compared: real positions only, within float tolerance (the full
path runs attention over the padded length, the tokens path over each
sequence's own tokens, so not bitwise). Padding positions of the tokens
path are exactly 0 (documented), and a sequence that is all padding is all
0; no padding at all is the full path itself (bitwise). Batch invariance:
on the tokens path a sequence's rows have the same bits alone and in any
padded batch.
"""
import numpy as np
import pytest

from cattn import nn

F32, F64 = np.float32, np.float64
TOL = {F32: dict(rtol=1e-4, atol=3e-5), F64: dict(rtol=1e-10, atol=1e-11)}
E, H, FF = 16, 4, 32


def _pad_mask(lengths, L):
    """(B, L) bool, True = padding (torch's convention), from per-row lengths."""
    return np.arange(L)[None, :] >= np.asarray(lengths)[:, None]


def _layer(dtype=F32, norm_first=False, activation="gelu", eps=1e-12, seed=0):
    layer = nn.TransformerEncoderLayer(E, H, FF, 0.0, activation, eps, batch_first=True,
                                       norm_first=norm_first, dtype=dtype, seed=seed)
    rng = np.random.default_rng(seed + 1)
    for p in layer.parameters():       # non-trivial norms and biases too
        p += (0.2 * rng.standard_normal(p.shape)).astype(dtype)
    return layer


@pytest.fixture
def rng():
    return np.random.default_rng(3)


# ---- RealTokens -----------------------------------------------------------------

def test_real_tokens_layout():
    pad = _pad_mask([3, 0, 2], 4)
    t = nn.RealTokens(3, 4, pad)
    assert t.T == 5 and list(t.rows) == [0, 1, 2, 8, 9]
    x = np.arange(3 * 4 * 2, dtype=F32).reshape(3, 4, 2)
    packed = t.pack(x)
    np.testing.assert_array_equal(packed, x[~pad])
    back = t.unpack(packed)
    np.testing.assert_array_equal(back[~pad], x[~pad])
    assert (back[pad] == 0).all()
    s = t.spread(packed)
    assert s.shape == (12, 2) and (s[pad.reshape(-1)] == 0).all()
    assert t.spread(packed) is s                    # one buffer, reused
    np.testing.assert_array_equal(t.gather(s), packed)


def test_real_tokens_without_padding_is_the_identity():
    x = np.ones((2, 3, 4), F32)
    for mask in (None, np.zeros((2, 3), bool)):
        t = nn.RealTokens(2, 3, mask)
        assert t.rows is None and t.key_padding_mask is None and t.T == 6
        p = t.pack(x)
        assert p.shape == (6, 4) and np.shares_memory(p, x)
        assert t.spread(p) is p and t.gather(p) is p


def test_real_tokens_float_mask_and_errors():
    m = np.zeros((1, 3), F32)
    m[0, 2] = -np.inf
    t = nn.RealTokens(1, 3, m)
    assert list(t.rows) == [0, 1] and t.key_padding_mask is m
    with pytest.raises(ValueError, match=r"\(B, L\) = \(2, 3\)"):
        nn.RealTokens(2, 3, np.zeros((3, 2), bool))
    with pytest.raises(TypeError, match="int64"):
        nn.RealTokens(1, 3, np.zeros((1, 3), np.int64))


# ---- batch invariance ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("rotary, causal", [(False, False), (True, True)])
def test_tokens_path_is_batch_invariant(rng, dtype, rotary, causal):
    """A sequence's output rows: the same bits alone (no padding) as in
    padded batches of other sizes and lengths (the GEMMs are row-invariant,
    and attention runs on each sequence's own tokens)."""
    enc = nn.TransformerEncoder(_layer(dtype, norm_first=True), 2)
    if rotary:
        for layer in enc.layers:
            layer.self_attn.rotary = nn.RotaryEmbedding(E // H)
    lengths = [7, 1, 13, 4, 9, 200, 2, 7, 2]  # 200: past one key block; equal
                                              # lengths next to each other share a call
    x = [rng.standard_normal((n, E)).astype(dtype) for n in lengths]

    def run(batch):
        L = max(lengths[i] for i in batch)
        xs = np.zeros((len(batch), L, E), dtype)
        for r, i in enumerate(batch):
            xs[r, :lengths[i]] = x[i]
        pad = _pad_mask([lengths[i] for i in batch], L)
        t = nn.RealTokens(len(batch), L, pad)
        rows, _ = enc.forward_tokens(t.pack(xs), t, is_causal=causal)
        return np.split(rows, np.cumsum([lengths[i] for i in batch])[:-1])

    alone = [run([i])[0] for i in range(len(lengths))]
    for batch in ([0, 1, 2, 3, 4, 5, 6], [6, 3, 0], [5, 1], [2, 4, 3, 1], [0, 7, 6, 8],
                  [8, 6, 5, 0, 7]):
        for i, got in zip(batch, run(batch)):
            np.testing.assert_array_equal(got, alone[i], err_msg=f"sequence {i} in {batch}")


# ---- tokens path vs full path -------------------------------------------------------

@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("norm_first", [False, True])
def test_layer_tokens_path_equals_full_path(rng, dtype, norm_first):
    layer = _layer(dtype, norm_first)
    B, L = 4, 9
    x = rng.standard_normal((B, L, E)).astype(dtype)
    pad = _pad_mask([9, 3, 6, 1], L)                # B > 1, different lengths
    full = layer(x, src_key_padding_mask=pad)
    ours = layer(x, src_key_padding_mask=pad, skip_padding=True)
    assert ours.shape == full.shape and ours.dtype == dtype
    np.testing.assert_allclose(ours[~pad], full[~pad], **TOL[dtype])
    assert (ours[pad] == 0).all()
    # the (T, E) entry point gives the same rows
    t = nn.RealTokens(B, L, pad)
    rows, w = layer.forward_tokens(t.pack(x), t)
    assert w is None
    np.testing.assert_array_equal(rows, ours[~pad])


def test_padding_anywhere_and_masks_combined(rng):
    """Holes in the middle, a causal mask on top, an (L, L) float mask."""
    layer = _layer()
    B, L = 3, 7
    x = rng.standard_normal((B, L, E)).astype(F32)
    pad = _pad_mask([7, 5, 4], L)
    pad[0, 2] = pad[2, 0] = True
    for kw in (dict(is_causal=True), dict(src_mask=nn.generate_square_subsequent_mask(L)),
               dict(src_mask=rng.standard_normal((L, L)).astype(F32))):
        full = layer(x, src_key_padding_mask=pad, **kw)
        ours = layer(x, src_key_padding_mask=pad, skip_padding=True, **kw)
        np.testing.assert_allclose(ours[~pad], full[~pad], **TOL[F32])


def test_all_padding_row_is_zero_and_others_unaffected(rng):
    layer = _layer()
    B, L = 3, 5
    x = rng.standard_normal((B, L, E)).astype(F32)
    pad = _pad_mask([5, 0, 2], L)                   # row 1: nothing but padding
    ours = layer(x, src_key_padding_mask=pad, skip_padding=True)
    assert (ours[1] == 0).all()
    alone = layer(x[[0, 2]], src_key_padding_mask=pad[[0, 2]], skip_padding=True)
    np.testing.assert_allclose(ours[[0, 2]], alone, **TOL[F32])
    everything = layer(x, src_key_padding_mask=np.ones((B, L), bool), skip_padding=True)
    assert everything.shape == (B, L, E) and (everything == 0).all()


def test_no_padding_is_the_full_path_bitwise(rng):
    layer = _layer()
    x = rng.standard_normal((2, 6, E)).astype(F32)
    full = layer(x)
    np.testing.assert_array_equal(layer(x, skip_padding=True), full)
    np.testing.assert_array_equal(
        layer(x, src_key_padding_mask=np.zeros((2, 6), bool), skip_padding=True), full)


def test_seq_first_and_unbatched(rng):
    layer = nn.TransformerEncoderLayer(E, H, FF, 0.0, "relu", batch_first=False, seed=1)
    L, B = 6, 3
    x = rng.standard_normal((L, B, E)).astype(F32)
    pad = _pad_mask([6, 2, 4], L)                   # (B, L), as torch
    full = layer(x, src_key_padding_mask=pad)
    ours = layer(x, src_key_padding_mask=pad, skip_padding=True)
    assert ours.shape == (L, B, E) and ours.flags.c_contiguous
    np.testing.assert_allclose(ours[~pad.T], full[~pad.T], **TOL[F32])
    assert (ours[pad.T] == 0).all()
    one = layer(x[:, 1], src_key_padding_mask=pad[1], skip_padding=True)   # (L, E), (L,)
    np.testing.assert_allclose(one[:2], full[:2, 1], **TOL[F32])
    assert (one[2:] == 0).all()


@pytest.mark.parametrize("norm", [False, True])
def test_encoder_stack_tokens_path(rng, norm):
    layer = _layer(norm_first=norm)
    enc = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(E) if norm else None)
    B, L = 3, 8
    x = rng.standard_normal((B, L, E)).astype(F32)
    pad = _pad_mask([8, 2, 5], L)
    full = enc(x, src_key_padding_mask=pad)
    ours = enc(x, src_key_padding_mask=pad, skip_padding=True)
    np.testing.assert_allclose(ours[~pad], full[~pad], **TOL[F32])
    assert (ours[pad] == 0).all()
    t = nn.RealTokens(B, L, pad)
    rows, ws = enc.forward_tokens(t.pack(x), t, need_weights=True)
    np.testing.assert_array_equal(rows, ours[~pad])
    assert len(ws) == 3 and ws[0].shape == (B, H, L, L)
    np.testing.assert_allclose(ws[0].sum(-1), 1, atol=1e-5)
    assert (ws[0][pad[:, None, None, :].repeat(H, 1).repeat(L, 2)] == 0).all()


def test_forward_tokens_errors(rng):
    layer = _layer()
    t = nn.RealTokens(2, 3, _pad_mask([3, 1], 3))
    with pytest.raises(ValueError, match=r"\(T, E\) = \(4, 16\)"):
        layer.forward_tokens(np.zeros((6, E), F32), t)
    with pytest.raises(TypeError, match="RealTokens"):
        layer.self_attn.forward_tokens(np.zeros((4, E), F32), None)
    with pytest.raises(TypeError, match="float64"):
        layer.forward_tokens(np.zeros((4, E)), t)


# ---- against torch ----------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch")


def _torch_layer(torch, norm_first, dtype):
    tl = torch.nn.TransformerEncoderLayer(E, H, FF, 0.0, "gelu", 1e-12, batch_first=True,
                                          norm_first=norm_first)
    tl = tl.double() if dtype == F64 else tl
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in tl.parameters():
            p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype)
                    + (1 if p.dim() == 1 and p.shape[0] == E else 0))
    return tl.eval()


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("norm_first", [False, True])
def test_layer_tokens_path_matches_torch(rng, dtype, norm_first):
    torch = _torch()
    tl = _torch_layer(torch, norm_first, dtype)
    layer = nn.TransformerEncoderLayer(E, H, FF, 0.0, "gelu", 1e-12, batch_first=True,
                                       norm_first=norm_first, dtype=dtype)
    layer.load_state_dict({k: v.detach().numpy() for k, v in tl.state_dict().items()})
    B, L = 4, 7
    x = rng.standard_normal((B, L, E)).astype(dtype)
    pad = _pad_mask([7, 2, 5, 4], L)
    ours = layer(x, src_key_padding_mask=pad, skip_padding=True)
    with torch.no_grad():
        theirs = tl(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(pad)).numpy()
    np.testing.assert_allclose(ours[~pad], theirs[~pad], **TOL[dtype])


def test_encoder_stack_tokens_path_matches_torch(rng):
    torch = _torch()
    tl = _torch_layer(torch, False, F32)
    te = torch.nn.TransformerEncoder(tl, 2, enable_nested_tensor=False).eval()
    enc = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(E, H, FF, 0.0, "gelu", 1e-12, batch_first=True), 2)
    enc.load_state_dict({k: v.detach().numpy() for k, v in te.state_dict().items()})
    B, L = 3, 6
    x = rng.standard_normal((B, L, E)).astype(F32)
    pad = _pad_mask([6, 1, 3], L)
    ours = enc(x, src_key_padding_mask=pad, skip_padding=True)
    with torch.no_grad():
        theirs = te(torch.from_numpy(x), src_key_padding_mask=torch.from_numpy(pad)).numpy()
    np.testing.assert_allclose(ours[~pad], theirs[~pad], **TOL[F32])


# ---- Embedding, skip_init ---------------------------------------------------------

def test_embedding_matches_torch_semantics(rng):
    emb = nn.Embedding(10, 4, padding_idx=2, seed=0)
    assert (emb.weight[2] == 0).all() and emb.weight.dtype == F32
    ids = np.array([[1, 2], [9, 0]])
    np.testing.assert_array_equal(emb(ids), emb.weight[ids])
    assert list(emb.state_dict()) == ["weight"]
    with pytest.raises(ValueError, match=r"\[0, 10\)"):
        emb(np.array([10]))
    with pytest.raises(TypeError, match="integer"):
        emb(np.array([1.0]))
    torch = pytest.importorskip("torch")
    te = torch.nn.Embedding(10, 4, padding_idx=2)
    emb.load_state_dict({k: v.detach().numpy() for k, v in te.state_dict().items()})
    np.testing.assert_array_equal(emb(ids), te(torch.from_numpy(ids)).detach().numpy())


def test_skip_init_then_load_state_dict(rng):
    src = _layer(seed=5)
    dst = nn.skip_init(nn.TransformerEncoderLayer, E, H, FF, 0.0, "gelu", 1e-12,
                       batch_first=True)
    assert (dst.norm1.weight == 1).all() and (dst.self_attn.in_proj_bias == 0).all()
    dst.load_state_dict(src.state_dict())
    x = rng.standard_normal((2, 3, E)).astype(F32)
    np.testing.assert_array_equal(dst(x), src(x))
    # outside skip_init, initialisation is drawn again (and reproducible)
    a, b = nn.Linear(3, 2, seed=1), nn.Linear(3, 2, seed=1)
    np.testing.assert_array_equal(a.weight, b.weight)


def test_skip_init_draws_nothing(tmp_path):
    """Under skip_init no random generator is made (a model's load never
    imports numpy.random: a fresh process building a decoder stack so);
    outside it, a module built with seed=None still draws its weights."""
    import subprocess
    import sys
    code = ("import sys; from cattn import nn; "
            "m = nn.skip_init(nn.DecoderOnly, 32, 4, 2, rotary=True); "
            "g = nn.skip_init(nn.GatedMLP, 8, 16); "
            "assert 'numpy.random' not in sys.modules, 'numpy.random imported'; "
            "a, b = nn.Linear(3, 2), nn.Linear(3, 2); "
            "assert (a.weight != b.weight).any()")
    # (run from tmp_path: from the repository root the unbuilt source tree
    # would shadow the installed cattn, as CI runs the tests)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
