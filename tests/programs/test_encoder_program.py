"""cattn.nn.fastpath.encoder_tokens: the fast path TransformerEncoder.
forward_tokens takes on the real tokens of a batch (no mask, need_weights=
False), which must give the same bits as the layer-by-layer path
(TransformerEncoderLayer.forward_tokens). Every test gets that path from the
same module by switching the fast path off: cattn.nn.fastpath.encoder_tokens
monkeypatched to return None, the caller's cue to fall back.

What is compared, bitwise (np.array_equal), fast path against layer-by-layer:
- stacks of 2-3 layers: post-LN and pre-LN, float32 (float64 stacks are
  checked to run their layers), each
  activation, plain / packed / bfloat16 / int8 weights, with and without a
  final norm, with and without biases, causal or not; each layer and norm
  its own weights and eps (a mixed-up parameter shows);
- batches through RealTokens: nothing padded, runs of equal lengths in any
  order, a sequence that is all padding, a single token, padding anywhere,
  a sequence past one key block, odd head dims (D = 5, 3) and row counts;
  forward_tokens and forward(..., skip_padding=True);
- weight layouts the fast path takes as they are (Fortran order, strided,
  negative strides) and a float padding mask (-inf / 0);
- 1 and 2 threads;
- weights assigned, changed in place or loaded (load_state_dict), eps and
  activation changed: seen by the next call (nothing cached stale);
- all-MiniLM-L6-v2 (float32 and int8 weights) end to end, where installed.
A spy on cattn.nn.fastpath.encoder_tokens checks that the fast path ran where it
should, and that it handed over where it must (an attention mask,
need_weights, an in_proj cut in two packed pieces, an unaligned or strided
parameter, a float mask adding finite values, token rows
that are not contiguous, no tokens at all). Two gaps of the fast path
found while writing these tests are at the end (fixed): a subclassed
sub-module's forward was skipped, is_causal was not checked.
"""

import numpy as np
import pytest

import cattn
from cattn import nn
from cattn.nn import fastpath as nn_fastpath

# the modules that call the fast path (TransformerEncoder's stack)
_CALLERS = (nn.transformer,)

F32, F64 = np.float32, np.float64
FORMATS = {"plain": lambda m: m, "packed": nn.pack_weights,
           "bfloat16": lambda m: nn.quantize(m, "bfloat16"),
           "int8": lambda m: nn.quantize(m, "int8")}


# ---- helpers ----------------------------------------------------------------------

def _pad_mask(lengths, L=None):
    """(B, L) bool, True = padding (torch's convention), from per-row lengths."""
    lengths = np.asarray(lengths)
    L = int(lengths.max()) if L is None else L
    return np.arange(L)[None, :] >= lengths[:, None]


def _encoder(E=20, H=4, F=36, n_layers=2, dtype=F32, norm_first=False, activation="gelu",
             bias=True, final_norm=True, fmt="plain", seed=0):
    """A TransformerEncoder whose layers and norms each have their own
    weights, non-trivial norms and biases, and eps (norm1 1e-3, norm2 2e-3,
    the final norm 3e-3), its linear weights then in format fmt."""
    layer = nn.TransformerEncoderLayer(E, H, F, 0.0, activation, 1e-3, batch_first=True,
                                       norm_first=norm_first, bias=bias, dtype=dtype, seed=seed)
    norm = nn.LayerNorm(E, 3e-3, bias, dtype=dtype) if final_norm else None
    enc = nn.TransformerEncoder(layer, n_layers, norm=norm)
    for layer in enc.layers:
        layer.norm2.eps = 2e-3
    rng = np.random.default_rng(seed + 1)
    for p in enc.parameters():            # the arrays themselves (nothing packed yet)
        p += (0.2 * rng.standard_normal(p.shape)).astype(dtype)
    return FORMATS[fmt](enc)


def _batch(pad, E, dtype, seed=0):
    """A padded batch for pad (B, L) (True = padding): (src (B, L, E), tokens,
    x (T, E) the real tokens' rows)."""
    rng = np.random.default_rng(seed)
    src = rng.standard_normal(pad.shape + (E,)).astype(dtype)
    tokens = nn.RealTokens(*pad.shape, pad)
    return src, tokens, np.ascontiguousarray(tokens.pack(src))


class _Spy:
    """cattn.nn.fastpath.encoder_tokens, recording per call whether the fast path ran
    (returned rows) or handed over (None)."""

    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kwargs):
        y = nn_fastpath.encoder_tokens(*args, **kwargs)
        self.calls.append(y is not None)
        return y


@pytest.fixture
def spy(monkeypatch):
    s = _Spy()
    for mod in _CALLERS:
        monkeypatch.setattr(mod, "encoder_tokens", s)
    return s


def _general(monkeypatch, run):
    """run() on the layer-by-layer path (the fast path switched off)."""
    with monkeypatch.context() as m:
        for mod in _CALLERS:
            m.setattr(mod, "encoder_tokens", lambda *a, **k: None)
        return run()


def _same_bits(got, want, what=""):
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if not np.array_equal(got, want):
        diff = np.abs(got.astype(F64) - want.astype(F64))
        pytest.fail(f"{what}: not the same bits: {np.count_nonzero(diff)} of {diff.size} "
                    f"values differ, by up to {np.nanmax(diff):.3g}")


def _check(monkeypatch, spy, run, taken=True, what=""):
    """run() with the fast path on, asserted taken (every call of
    encoder_tokens returned rows) or not (none did, or it was not called),
    then the same bits as run() on the layer-by-layer path; returns the
    fast path's result."""
    spy.calls.clear()
    got = run()
    if taken:
        assert spy.calls and all(spy.calls), f"{what}: fast path not taken ({spy.calls})"
    else:
        assert not any(spy.calls), f"{what}: fast path taken ({spy.calls})"
    _same_bits(got, _general(monkeypatch, run), what)
    return got


def _rows(enc, x, tokens, **kw):
    """enc.forward_tokens(...)'s rows (asserting no weights came back)."""
    y, w = enc.forward_tokens(x, tokens, **kw)
    assert w is None
    return y


# ---- the stack: norms, dtypes, activations, weight formats -----------------------------

DTYPE_FORMATS = [(F32, "plain"), (F32, "packed"), (F32, "bfloat16"), (F32, "int8"),
                 (F64, "plain"), (F64, "packed")]
# activation, final norm, bias, is_causal: each activation once, each flag both ways
VARIANTS = [("relu", True, True, False), ("gelu", False, True, True),
            ("gelu_tanh", True, False, True), ("silu", False, False, False)]


@pytest.mark.parametrize("activation, final_norm, bias, causal", VARIANTS,
                         ids=["relu-norm-bias", "gelu-causal", "gelu_tanh-norm-nobias-causal",
                              "silu-nobias"])
@pytest.mark.parametrize("dtype, fmt", DTYPE_FORMATS,
                         ids=[f"{np.dtype(d).name}-{f}" for d, f in DTYPE_FORMATS])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_stack_same_bits(monkeypatch, spy, norm_first, dtype, fmt, activation, final_norm,
                         bias, causal):
    enc = _encoder(n_layers=2 if final_norm else 3, dtype=dtype, norm_first=norm_first,
                   activation=activation, bias=bias, final_norm=final_norm, fmt=fmt)
    pad = _pad_mask([5, 5, 3, 7, 7, 7, 1])
    src, tokens, x = _batch(pad, 20, dtype)
    x0 = x.copy()
    taken = dtype == F32                            # float64 stacks run their layers
    rows = _check(monkeypatch, spy, lambda: _rows(enc, x, tokens, is_causal=causal),
                  taken, what="forward_tokens")
    np.testing.assert_array_equal(x, x0)            # the input rows are not written
    out = _check(monkeypatch, spy,
                 lambda: enc(src, src_key_padding_mask=pad, is_causal=causal, skip_padding=True),
                 taken, what="forward(skip_padding=True)")
    _same_bits(out[~pad], rows, "forward vs forward_tokens")


# ---- batches: lengths, layouts, head dims ---------------------------------------------

def _holes():
    """Padding anywhere (not only a suffix), one sequence without any."""
    pad = np.random.default_rng(5).random((5, 9)) < 0.35
    pad[2] = False
    return pad


LAYOUTS = {
    "no_padding": lambda: np.zeros((4, 6), bool),
    "runs": lambda: _pad_mask([5, 5, 3, 7, 7, 7, 1, 3]),       # runs of equal lengths
    "all_padding_sequence": lambda: _pad_mask([4, 0, 4, 2, 0]),
    "single_token": lambda: _pad_mask([1]),
    "long": lambda: _pad_mask([2, 130, 9]),                     # past one key block
    "holes": _holes,
}
SHAPES = [(20, 4, F32), (24, 3, F64), (21, 7, F32)]             # D = 5, 8, 3


@pytest.mark.parametrize("E, H, dtype", SHAPES, ids=["E20H4", "E24H3", "E21H7"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_batch_layouts_same_bits(monkeypatch, spy, layout, E, H, dtype):
    enc = _encoder(E, H, 2 * E - 3, dtype=dtype, norm_first=layout in ("runs", "holes"),
                   seed=E)
    pad = LAYOUTS[layout]()
    for causal in (False, True):
        for seed in (0, 1):                 # a second batch of one layout: plans reused
            src, tokens, x = _batch(pad, E, dtype, seed)
            what = f"{layout}, causal={causal}, batch {seed}"
            taken = dtype == F32                    # float64 stacks run their layers
            rows = _check(monkeypatch, spy, lambda: _rows(enc, x, tokens, is_causal=causal),
                          taken, what=what)
            out = _check(monkeypatch, spy, lambda: enc(src, src_key_padding_mask=pad,
                                                       is_causal=causal, skip_padding=True),
                         taken, what=what)
            _same_bits(out[~pad], rows, what)
            assert (out[pad] == 0).all()


def test_float_padding_mask(monkeypatch, spy):
    """A float key padding mask of -inf (padding) and 0 is pure padding:
    the fast path, the bits of the bool mask. One that also adds finite
    values is not (RealTokens.real_lengths() is None): the general path."""
    enc = _encoder()
    pad = _pad_mask([4, 6, 6, 2])
    src, tokens, x = _batch(pad, 20, F32)
    fmask = np.where(pad, -np.inf, 0.0).astype(F32)
    ftokens = nn.RealTokens(*pad.shape, fmask)
    assert ftokens.real_lengths() is not None
    rows = _check(monkeypatch, spy, lambda: _rows(enc, x, ftokens))
    _same_bits(rows, _rows(enc, x, tokens), "float mask vs bool mask")
    _check(monkeypatch, spy, lambda: enc(src, src_key_padding_mask=fmask, skip_padding=True))
    fmask[0, 0] = -0.5
    atokens = nn.RealTokens(*pad.shape, fmask)
    assert atokens.real_lengths() is None
    _check(monkeypatch, spy, lambda: _rows(enc, x, atokens), taken=False)
    assert spy.calls == []


# ---- weight layouts ----------------------------------------------------------------------

def test_odd_weight_layouts_taken(monkeypatch, spy):
    """Weights the kernels read through their strides (as cattn.linear does):
    Fortran order, every other column of a wider array, negative strides."""
    enc = _encoder(n_layers=3)
    rng = np.random.default_rng(9)
    a, b, c = enc.layers
    a.linear1.weight = np.asfortranarray(a.linear1.weight)
    a.self_attn.in_proj_weight = np.asfortranarray(a.self_attn.in_proj_weight)
    wide = rng.standard_normal((20, 72)).astype(F32) * 0.2
    b.linear2.weight = wide[:, ::2]
    c.self_attn.out_proj.weight = c.self_attn.out_proj.weight.copy()[::-1, ::-1]
    assert not a.linear1.weight.flags.c_contiguous and b.linear2.weight.strides[1] == 8
    assert c.self_attn.out_proj.weight.strides[0] < 0
    pad = _pad_mask([3, 8, 8, 2])
    src, tokens, x = _batch(pad, 20, F32)
    for causal in (False, True):
        _check(monkeypatch, spy, lambda: _rows(enc, x, tokens, is_causal=causal))


# ---- where the fast path hands over --------------------------------------------------------

def test_mask_or_weights_take_the_general_path(monkeypatch, spy):
    """An attention mask or need_weights=True: encoder_tokens is not called."""
    enc = _encoder()
    pad = _pad_mask([4, 6, 6, 2])
    src, tokens, x = _batch(pad, 20, F32)
    L = pad.shape[1]
    for mask in (nn.generate_square_subsequent_mask(L), np.tri(L, dtype=bool) == 0):
        _check(monkeypatch, spy, lambda: _rows(enc, x, tokens, mask=mask), taken=False)
        assert spy.calls == []
    spy.calls.clear()
    rows, ws = enc.forward_tokens(x, tokens, need_weights=True)
    assert spy.calls == [] and len(ws) == 2 and ws[0].shape == (4, 4, L, L)
    _same_bits(rows, _general(monkeypatch, lambda: _rows(enc, x, tokens)), "need_weights")


@pytest.mark.parametrize("fmt", ["packed", "int8"])
@pytest.mark.parametrize("cut", [(0, 1), (1,)], ids=["every_layer", "last_layer"])
def test_in_proj_cut_in_two_pieces(monkeypatch, spy, fmt, cut):
    """A self_attn with split_in_proj=True gets its in_proj_weight packed as
    two row blocks (query | key, value): the general path runs the stack,
    even when only one layer is cut."""
    enc = _encoder()
    for i in cut:
        enc.layers[i].self_attn.split_in_proj = True
    FORMATS[fmt](enc)
    pieces = [len(layer.self_attn.in_proj_weight.pieces) for layer in enc.layers]
    assert pieces == [2 if i in cut else 1 for i in range(2)]
    pad = _pad_mask([4, 6, 6, 2])
    src, tokens, x = _batch(pad, 20, F32)
    _check(monkeypatch, spy, lambda: _rows(enc, x, tokens), taken=False)
    assert spy.calls == [False]


def _unaligned(a):
    """A copy of a whose data is not aligned to its itemsize."""
    buf = np.empty(a.nbytes + 1, np.uint8)
    u = buf[1:].view(a.dtype).reshape(a.shape)
    u[...] = a
    assert not u.flags.aligned
    return u


def _spoil_unaligned_weight(enc):
    lin = enc.layers[1].linear1
    lin.register_parameter("weight", _unaligned(lin.weight))   # assignment would realign it


def _spoil_strided_bias(enc):
    b = enc.layers[0].linear2.bias
    wide = np.zeros(2 * b.size, b.dtype)
    wide[::2] = b
    enc.layers[0].linear2.bias = wide[::2]


def _spoil_strided_norm(enc):
    w = enc.layers[1].norm1.weight
    wide = np.zeros((w.size, 2), w.dtype)
    wide[:, 0] = w
    enc.layers[1].norm1.weight = wide[:, 0]


@pytest.mark.parametrize("spoil", [_spoil_unaligned_weight, _spoil_strided_bias,
                                   _spoil_strided_norm],
                         ids=["unaligned_weight", "strided_bias", "strided_norm_weight"])
def test_unusual_parameters_fall_back(monkeypatch, spy, spoil):
    enc = _encoder(24, 3, 40)
    pad = _pad_mask([4, 6, 6, 2])
    src, tokens, x = _batch(pad, 24, F32)
    _check(monkeypatch, spy, lambda: _rows(enc, x, tokens))
    spoil(enc)
    _check(monkeypatch, spy, lambda: _rows(enc, x, tokens), taken=False)
    assert spy.calls == [False]


def test_unusual_inputs_fall_back(monkeypatch, spy):
    enc = _encoder()
    pad = _pad_mask([4, 6, 6, 2])
    src, tokens, x = _batch(pad, 20, F32)
    wide = np.zeros((x.shape[0], 40), F32)
    wide[:, :20] = x
    strided = wide[:, :20]                                  # rows not contiguous
    rows = _check(monkeypatch, spy, lambda: _rows(enc, strided, tokens), taken=False)
    _same_bits(rows, _rows(enc, x, tokens), "strided rows")
    empty = np.ones((3, 5), bool)                           # no real token at all
    e_src, e_tokens, e_x = _batch(empty, 20, F32)
    assert e_x.shape == (0, 20)
    rows = _check(monkeypatch, spy, lambda: _rows(enc, e_x, e_tokens), taken=False)
    assert rows.shape == (0, 20)
    out = _check(monkeypatch, spy, lambda: enc(e_src, src_key_padding_mask=empty,
                                                skip_padding=True), taken=False)
    assert (out == 0).all()
    with pytest.raises(TypeError, match="float64"):         # the general path's check
        enc.forward_tokens(x.astype(F64), tokens)


# ---- threads, kernel calls -----------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["plain", "int8"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_threads(monkeypatch, spy, norm_first, fmt):
    """1 and 2 threads give the same bits, each the layer-by-layer path's
    (which tests/test_kernel_paths.py re-runs on every kernel path)."""
    enc = _encoder(32, 4, 96, norm_first=norm_first, activation="silu", fmt=fmt)
    pad = _pad_mask([40, 40, 40, 17, 60, 3])             # 200 rows, attention units to share
    src, tokens, x = _batch(pad, 32, F32)
    run = lambda: _rows(enc, x, tokens, is_causal=True)      # noqa: E731
    results = {}
    for nt in (1, 2):
        with cattn.num_threads(nt):
            results[nt] = _check(monkeypatch, spy, run, what=f"{nt} threads")
    _same_bits(results[2], results[1], "2 threads vs 1")


@pytest.mark.parametrize("fmt", ["plain", "packed", "bfloat16", "int8"])
def test_c_loop_takes_float32_stacks(monkeypatch, spy, fmt):
    # every float32 format, plain arrays included: the whole stack in one
    # _ext.encoder_f32 call, with the thread count of the call
    enc = _encoder(fmt=fmt, final_norm=True)
    pad = _pad_mask([5, 5, 2, 7, 7])
    src, tokens, x = _batch(pad, 20, F32)
    seen = []
    real = nn_fastpath._ext.encoder_f32

    def logged(*args):
        seen.append(args[-1])
        return real(*args)
    monkeypatch.setattr(nn_fastpath._ext, "encoder_f32", logged)
    for nt in (1, 2):
        with cattn.num_threads(nt):
            _check(monkeypatch, spy, lambda: _rows(enc, x, tokens), what=f"C loop, {nt}")
    assert seen == [1, 2]


# ---- changed weights are seen ------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["plain", "packed", "int8"])
def test_changes_seen_by_the_next_call(monkeypatch, spy, fmt):
    enc = _encoder(fmt=fmt)
    pad = _pad_mask([5, 5, 2, 7])
    src, tokens, x = _batch(pad, 20, F32)
    rng = np.random.default_rng(11)
    run = lambda: _rows(enc, x, tokens)      # noqa: E731
    last = _check(monkeypatch, spy, run)

    def changed(what):
        nonlocal last
        y = _check(monkeypatch, spy, run, what=what)
        assert not np.array_equal(y, last), f"{what}: the result did not change"
        last = y

    a, b = enc.layers
    a.linear1.weight = (0.2 * rng.standard_normal(a.linear1.weight.shape)).astype(F32)
    changed("linear1.weight assigned")
    b.self_attn.in_proj_weight = (0.2 * rng.standard_normal((60, 20))).astype(F32)
    changed("in_proj_weight assigned")
    b.linear2.bias += 0.5                   # biases and norms: arrays in every format
    changed("linear2.bias in place")
    a.norm2.weight[...] = rng.standard_normal(20).astype(F32)
    changed("norm2.weight in place")
    a.self_attn.out_proj.bias = rng.standard_normal(20).astype(F32)
    changed("out_proj.bias assigned")
    b.norm1.eps = 0.5
    changed("norm1.eps")
    a.activation = "relu"
    changed("activation")
    enc.load_state_dict(_encoder(seed=5).state_dict())
    changed("load_state_dict")
    if fmt == "plain":
        enc.layers[1].linear2.weight *= 0.5  # the parameter array itself
        changed("linear2.weight in place")


@pytest.mark.parametrize("fmt", ["plain", "int8"])
def test_results_do_not_share_the_kept_scratch(fmt):
    # the fast path keeps its scratch arrays per thread for the next call:
    # a result must stay as it was after later calls of the same shapes
    enc = _encoder(fmt=fmt)
    pad = _pad_mask([4, 6, 6, 2])
    _, tokens, x = _batch(pad, 20, F32)
    _, _, x2 = _batch(pad, 20, F32, seed=3)
    first = _rows(enc, x, tokens)
    keep = first.copy()
    second = _rows(enc, x2, tokens)
    assert not np.shares_memory(first, second)
    _same_bits(first, keep, "the first result after a second call")
    _same_bits(_rows(enc, x, tokens), keep, "the first input again")


@pytest.mark.parametrize("fmt", ["plain", "int8"])
def test_kept_scratch_serves_shorter_batches(fmt):
    # a batch with fewer tokens than the previous one runs in views of the
    # kept scratch (no new arrays: SentenceEncoder's longest-first batches
    # allocate once); its results are those of a fresh process's call
    from cattn.nn import fastpath as nn_fastpath
    enc = _encoder(fmt=fmt)
    long_pad, short_pad = _pad_mask([6, 6, 5, 4]), _pad_mask([3, 2])
    _, t_long, x_long = _batch(long_pad, 20, F32)
    _, t_short, x_short = _batch(short_pad, 20, F32, seed=4)
    nn_fastpath._scratch.kept = None
    want = _rows(enc, x_short, t_short).copy()     # fresh scratch of its own size
    nn_fastpath._scratch.kept = None
    _rows(enc, x_long, t_long)
    kept = nn_fastpath._scratch.kept
    assert kept is not None
    ids = [id(f) for f in kept[1]]
    got = _rows(enc, x_short, t_short)
    assert [id(f) for f in nn_fastpath._scratch.kept[1]] == ids     # reused, not replaced
    _same_bits(got, want, "a short batch in the long batch's scratch")


def test_deep_copy_has_its_own_program(monkeypatch, spy):
    # the fast path caches each stack's kernel calls (nn_fastpath._programs):
    # a deep copy changed in place (no attribute assigned) must not run the
    # original's weights
    import copy
    enc = _encoder(fmt="plain")
    pad = _pad_mask([4, 6, 6, 2])
    src, tokens, x = _batch(pad, 20, F32)
    before = _rows(enc, x, tokens)
    twin = copy.deepcopy(enc)
    twin.layers[0].linear1.weight *= 0.5
    got = _check(monkeypatch, spy, lambda: _rows(twin, x, tokens), what="deep copy")
    assert not np.array_equal(got, before)
    _same_bits(_rows(enc, x, tokens), before, "the original, after its copy ran")


# ---- all-MiniLM-L6-v2 ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def minilm():
    """all-MiniLM-L6-v2 with float32 and int8 weights (skips without the
    model package)."""
    from cattn_testing.minilm import require_model
    require_model()
    from cattn.models import SentenceEncoder
    return {w: SentenceEncoder.from_pretrained(weights=w) for w in ("float32", "int8")}


SENTENCES = ["A cat.", "The weather is lovely today.", "A dog.", "",
             "Transformers replaced recurrent networks for most language tasks because "
             "attention lets every token look at every other token in one step.",
             "Hello", "It's so sunny outside!", "He drove to the stadium " * 6]


@pytest.mark.parametrize("weights", ["float32", "int8"])
def test_minilm_same_bits(monkeypatch, spy, minilm, weights):
    enc = minilm[weights]
    run = lambda: enc.encode(SENTENCES, batch_size=3)      # noqa: E731
    emb = _check(monkeypatch, spy, run, what=f"MiniLM {weights}")
    assert len(spy.calls) == 3 and emb.shape == (len(SENTENCES), 384)


# ---- gaps found while writing these tests (fixed) -------------------------------------

class _ScaledLinear(nn.Linear):
    """A Linear whose forward also scales its output (e.g. an adapter)."""

    def forward(self, x, activation=None, *, out=None):
        return 0.5 * super().forward(x, activation, out=out)


def test_linear_subclass_is_not_skipped(monkeypatch, spy):
    enc = _encoder()
    old = enc.layers[0].linear1
    new = _ScaledLinear(20, 36)
    new.weight[...], new.bias[...] = old.weight, old.bias
    enc.layers[0].linear1 = new
    pad = _pad_mask([4, 6, 6, 2])
    src, tokens, x = _batch(pad, 20, F32)
    got = _rows(enc, x, tokens)
    _same_bits(got, _general(monkeypatch, lambda: _rows(enc, x, tokens)), "Linear subclass")


@pytest.mark.parametrize("is_causal", ["no", 2], ids=["str", "int2"])
def test_is_causal_checked_as_on_the_general_path(is_causal):
    enc = _encoder()
    pad = _pad_mask([4, 6, 6, 2])
    src, tokens, x = _batch(pad, 20, F32)
    with pytest.raises(TypeError, match="is_causal must be a bool"):
        enc.forward_tokens(x, tokens, is_causal=is_causal)
