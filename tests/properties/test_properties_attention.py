"""Property-based tests (hypothesis) of cattn.scaled_dot_product_attention,
cattn.attention_weights and cattn.KVCache against the float64 oracle
cattn.reference (tolerance: cattn_testing/attention.py; NaN / inf handling:
cattn_testing.properties.check_attention).

Each example draws:
  * sizes: L (decode path L <= 8, flash path with one or several 96-row
    query tiles, tile edges), S (0, tails of the 6-key micro-rows, kv-block
    and 256-key decode-chunk edges, not multiples of 192), E, Ev (0 included);
  * heads and batch: Hq = g * H with enable_gqa, kv heads broadcast by a
    size-1 dim, leading batch dims that broadcast, 2-D (L, E) inputs;
  * dtypes: float32, float64, mixed per array (result promoted as NumPy does);
  * masks: none, bool (True = attend) or float (added; -inf = excluded;
    float32 or float64) of any broadcastable shape (down to a scalar) and
    layout; or is_causal with "upper_left" / "lower_right" alignment;
  * scale: None, 0, negative, small, large;
  * values at several scales, optionally NaN / +-inf in q, k, v and masks;
  * a memory layout per array (transposed, negative-stride, sliced, stride-0,
    unaligned, non-whole-element strides, read-only), sometimes out=.
It runs with 1 and 2 threads (same bits) and compares with the reference.
"""
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the property tests need hypothesis")
from hypothesis import assume, event, given, note, strategies as st  # noqa: E402

import cattn  # noqa: E402
from cattn_testing.properties import (check_attention,  # noqa: E402
                                      check_attention_weights, threads_bitwise)
from cattn_testing.strategies import (arrays, dtypes, examples, layouts, lay_out,  # noqa: E402
                                      poisoned_out, sizes, values)

sdpa = cattn.scaled_dot_product_attention
L_EDGES = (7, 8, 9, 31, 32, 33, 95, 96, 97, 191, 192, 193)
S_EDGES = (5, 6, 7, 95, 96, 97, 191, 193, 255, 256, 257, 383, 385, 513, 769)
E_EDGES = (1, 7, 8, 9, 15, 16, 17, 32, 33, 64)
SCALES = (None, None, None, 0.0, -0.7, 0.125, 1.0, 2.5)
ALIGN = ("upper_left", "lower_right")


@st.composite
def batch_shapes(draw, n):
    """n batch shapes (0 to 2 dims, sizes 0..3) that broadcast together."""
    base = draw(st.lists(st.sampled_from([1, 2, 3, 0]), min_size=0, max_size=2))
    out = []
    for _ in range(n):
        nd = draw(st.integers(0, len(base)))
        out.append(tuple(1 if draw(st.booleans()) else m for m in base[len(base) - nd:]))
    return out


@st.composite
def attention_case(draw, need_value=True, specials=False, big=False, decode=None,
                   masks=True, value_scales=(1.0, 3.0, 0.1, 30.0)):
    """(q, k, v, kw): arrays and keyword arguments of one attention call."""
    if big:     # enough work for both threads: several query tiles or decode chunks
        L = draw(st.integers(1, 8)) if draw(st.booleans()) else draw(st.integers(97, 260))
        S = draw(st.integers(200, 900)) if L > 8 else draw(st.integers(257, 1800))
    else:
        if decode is True:
            L = draw(sizes(8))
        elif decode is False:
            L = draw(st.one_of(st.integers(9, 120), st.sampled_from(L_EDGES[2:])))
        else:
            L = draw(st.one_of(sizes(8), st.integers(9, 96), st.integers(97, 250),
                               st.sampled_from(L_EDGES)))
        S = draw(st.one_of(sizes(40), st.integers(1, 600), st.sampled_from(S_EDGES)))
    E = draw(sizes(72 if not big else 40, E_EDGES))
    Ev = draw(sizes(40, E_EDGES)) if need_value else 0
    dq = draw(dtypes)
    dk = dq if draw(st.booleans()) else draw(dtypes)
    dv = dq if draw(st.booleans()) else draw(dtypes)
    work = max(1, L * S)
    two_d = draw(st.sampled_from([False, False, False, True]))
    gqa = False
    if two_d:
        qs, ks, vs = (L, E), (S, E), (S, Ev)
        if draw(st.booleans()):                     # 2-D query against batched keys
            bk = draw(batch_shapes(1))[0] if work < 40_000 else ()
            H = draw(st.integers(1, 3))
            ks, vs = bk + (H, S, E), bk + (H, S, Ev)
    else:
        small = work < 20_000 and not big
        H = draw(st.integers(1, 3 if small else 2))
        g = draw(st.integers(1, 3 if small else 2))
        gqa = draw(st.booleans())
        if not gqa:
            g = 1
        Hq = H * g
        bq, bk, bv = draw(batch_shapes(3)) if small else ((), (), ())
        Hk = H
        if not gqa and H > 1 and draw(st.sampled_from([False, False, True])):
            Hk = 1                                   # kv heads broadcast (MQA without gqa)
        qs, ks, vs = bq + (Hq, L, E), bk + (Hk, S, E), bv + (Hk, S, Ev)
    vkw = dict(scales=value_scales, specials=specials)
    q, lq = draw(arrays(qs, dq, **vkw))
    k, lk = draw(arrays(ks, dk, **vkw))
    v, lv = (draw(arrays(vs, dv, **vkw)) if need_value else (None, None))
    kw = {}
    if gqa:
        kw["enable_gqa"] = True
    scale = draw(st.sampled_from(SCALES))
    if scale is not None:
        kw["scale"] = scale
    # the (..., Hq, L, S) shape every mask must broadcast to (None: the
    # drawn batch dims do not broadcast, an invalid call)
    vb = v.shape if v is not None else k.shape
    try:
        if gqa:
            full = np.broadcast_shapes(q.shape[:-3], k.shape[:-3], vb[:-3]) + (q.shape[-3],)
        else:
            full = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], vb[:-2])
    except ValueError:
        full = None
    mode = draw(st.sampled_from(["none", "bool", "float", "causal"] if masks else ["none", "causal"]))
    mask_desc = ""
    if mode == "causal":
        kw["is_causal"] = True
        kw["causal_alignment"] = draw(st.sampled_from(ALIGN))
    elif mode in ("bool", "float") and full is not None:
        target = tuple(full) + (L, S)
        r = draw(st.integers(0, len(target)))
        mshape = tuple(1 if draw(st.sampled_from([False, True])) else n
                       for n in target[len(target) - r:])
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        p_keep = draw(st.sampled_from([0.0, 0.3, 0.7, 0.95, 1.0]))
        keep = rng.random(mshape) < p_keep
        if mode == "bool":
            m = keep
        else:
            bias = rng.standard_normal(mshape) * draw(st.sampled_from([0.0, 1.0, 3.0, 100.0]))
            m = np.where(keep, bias, -np.inf)
            if specials and m.size and draw(st.booleans()):
                m.reshape(-1)[draw(st.integers(0, m.size - 1))] = draw(
                    st.sampled_from([np.nan, -1e30, 1e30]))
            m = m.astype(draw(dtypes))
        lm = draw(layouts(m.ndim, m.itemsize))
        m = lay_out(m, lm)
        kw["attn_mask"] = m
        mask_desc = f"{mode} mask {m.shape} {m.dtype} keep={p_keep} {lm}"
    event(f"L: {'decode (<= 8)' if L <= 8 else 'one tile' if L <= 96 else 'several tiles'}")
    event(f"S: {'0' if S == 0 else '< 192' if S < 192 else '>= 192'}")
    event(f"mask: {mode}" + (f" {kw['causal_alignment']}" if mode == "causal" else ""))
    event(f"dtypes: {'mixed' if len({dq, dk, dv}) > 1 else dq.name}")
    note(f"q {q.shape} {q.dtype} {lq}; k {k.shape} {k.dtype} {lk}; "
         + (f"v {v.shape} {v.dtype} {lv}; " if v is not None else "") + f"{mask_desc} "
         + str({n: kw[n] for n in kw if n != 'attn_mask'}))
    return q, k, v, kw


def _is_valid(q, k, v, kw):
    """The API contract's shape rule, independent of cattn: batch dims of q,
    k, v broadcast (with enable_gqa and Hq != H: the dims before the heads,
    and Hq a multiple of H). False: cattn must raise ValueError, which
    test_sdpa_matches_reference checks."""
    vb = v.shape if v is not None else k.shape
    gqa = (kw.get("enable_gqa", False) and q.ndim >= 3 and k.ndim >= 3
           and q.shape[-3] != k.shape[-3])
    try:
        if gqa:
            if k.shape[-3] == 0 or q.shape[-3] % k.shape[-3]:
                return False
            np.broadcast_shapes(q.shape[:-3], k.shape[:-3], vb[:-3])
        else:
            np.broadcast_shapes(q.shape[:-2], k.shape[:-2], vb[:-2])
        return True
    except ValueError:
        return False


@examples(4)
@given(case=attention_case(), use_out=st.booleans(), data=st.data())
def test_sdpa_matches_reference(case, use_out, data):
    q, k, v, kw = case
    if not _is_valid(q, k, v, kw):
        with pytest.raises(ValueError):
            sdpa(q, k, v, **kw)
        return
    if use_out:
        shape = sdpa(q, k, v, **kw).shape
        dtype = np.result_type(q, k, v)
        lay = data.draw(layouts(len(shape), dtype.itemsize, broadcast=False))
        note(f"out= {lay}")
        out = poisoned_out(shape, dtype, lay)

        def run():
            out[...] = np.nan
            r = sdpa(q, k, v, out=out, **kw)
            assert r is out
            return r
    else:
        def run():
            return sdpa(q, k, v, **kw)
    check_attention(threads_bitwise(run), q, k, v, **kw)


@examples(3)
@given(case=attention_case(specials=True))
def test_sdpa_nan_inf(case):
    """NaN / +-inf anywhere in q, k, v (and NaN / +-1e30 in float masks): NaN
    exactly in the rows (or value columns) whose attended inputs hold them,
    never in rows that do not attend to them; inf in an attended value gives
    inf; see cattn_testing.properties.check_attention for the one unjudged case."""
    q, k, v, kw = case
    assume(_is_valid(q, k, v, kw))
    check_attention(threads_bitwise(lambda: sdpa(q, k, v, **kw)), q, k, v, **kw)


@examples(3)
@given(case=attention_case(need_value=False, specials=True))
def test_attention_weights_matches_reference(case):
    q, k, _, kw = case
    assume(_is_valid(q, k, None, kw))
    got = threads_bitwise(lambda: cattn.attention_weights(q, k, **kw))
    check_attention_weights(got, q, k, **kw)


@examples(1)
@given(case=attention_case(big=True, masks=True))
def test_sdpa_threads_bitwise_large(case):
    """Shapes with several query tiles / kv blocks (flash) or several 256-key
    chunks (decode): both threads get work; same bits, and correct."""
    q, k, v, kw = case
    assume(_is_valid(q, k, v, kw))
    check_attention(threads_bitwise(lambda: sdpa(q, k, v, **kw)), q, k, v, **kw)


# ---- semantics, one rule per property ---------------------------------------

@st.composite
def padded_case(draw):
    """q, k, v (B, H, L, E) with a key-padding mask (B, 1, 1, S) (bool or
    -inf float) and NaN / +-inf poison in the padded keys and values."""
    dtype = draw(dtypes)
    B, H = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    L = draw(st.one_of(sizes(8), st.integers(9, 130)))
    S = draw(st.one_of(sizes(30), st.integers(0, 600), st.sampled_from(S_EDGES)))
    E, Ev = draw(sizes(40, E_EDGES)), draw(sizes(24, E_EDGES))
    q = draw(values((B, H, L, E), dtype, scales=(1.0, 3.0)))
    k = draw(values((B, H, S, E), dtype, scales=(1.0, 3.0)))
    v = draw(values((B, H, S, Ev), dtype, scales=(1.0, 3.0)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    keep = rng.random((B, 1, 1, S)) < draw(st.sampled_from([0.0, 0.2, 0.5, 0.9]))
    m = keep if draw(st.booleans()) else np.where(keep, 0.0, -np.inf).astype(draw(dtypes))
    lm = draw(layouts(m.ndim, m.itemsize))
    m = lay_out(m, lm)                    # a stride-0 layout may change the mask: use m's own
    keep = np.asarray(m) if m.dtype == np.bool_ else ~np.isneginf(m)
    poison = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    pad = ~keep[:, 0, 0, :]                                       # (B, S)
    k[np.broadcast_to(pad[:, None, :, None], k.shape)] = poison
    v[np.broadcast_to(pad[:, None, :, None], v.shape)] = poison
    # no stride-0 layouts for q, k, v here: repeating a slice would move the
    # poison to attended positions (stride 0 is covered by the other properties)
    lays = [draw(layouts(a.ndim, a.itemsize, broadcast=False)) for a in (q, k, v)] + [lm]
    q, k, v = (lay_out(a, lay) for a, lay in zip((q, k, v), lays))
    note(f"q {q.shape} {dtype} keep={int(keep.sum())}/{keep.size} poison={poison} "
         f"mask {m.dtype} layouts {lays}")
    return q, k, v, m


@examples(2)
@given(case=padded_case())
def test_masked_nan_inf_never_leaks(case):
    """NaN / +-inf in every padded (masked) key and value: the output is
    finite everywhere, rows with no key left are exactly 0, and the rest
    matches the reference."""
    q, k, v, m = case
    out = threads_bitwise(lambda: sdpa(q, k, v, attn_mask=m))
    assert np.isfinite(out).all(), "masked NaN / inf reached the output"
    none_left = ~np.asarray(m if m.dtype == np.bool_ else ~np.isneginf(m)).any(axis=-1)  # (B,1,1)
    assert (out[np.broadcast_to(none_left[..., None], out.shape)] == 0).all()
    check_attention(out, q, k, v, attn_mask=m)
    w = threads_bitwise(lambda: cattn.attention_weights(q, k, attn_mask=m))
    assert np.isfinite(w).all()
    check_attention_weights(w, q, k, attn_mask=m)


@st.composite
def fully_masked_case(draw):
    """Rows with nothing to attend to, by every route: a bool row of False, a
    float row of -inf, S = 0, lower_right causal with L > S; the other rows
    hold NaN in q so that a leak of one row into another would show."""
    dtype = draw(dtypes)
    L = draw(st.one_of(sizes(8), st.integers(9, 120)))
    S = draw(st.one_of(sizes(20), st.integers(0, 400)))
    E, Ev = draw(sizes(24, E_EDGES)), draw(sizes(24, E_EDGES))
    H = draw(st.integers(1, 2))
    q = draw(values((1, H, L, E), dtype, scales=(1.0, 3.0)))
    k = draw(values((1, H, S, E), dtype, scales=(1.0, 3.0)))
    v = draw(values((1, H, S, Ev), dtype, scales=(1.0, 3.0)))
    route = draw(st.sampled_from(["bool", "float", "lower_right"]))
    kw = {}
    dead = np.zeros(L, bool)
    if route == "lower_right":
        kw = dict(is_causal=True, causal_alignment="lower_right")
        dead = np.arange(L) + S - L < 0
    else:
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        keep = rng.random((L, S)) < 0.6
        dead = rng.random(L) < 0.4
        keep[dead] = False
        dead = ~keep.any(axis=1)
        kw["attn_mask"] = keep if route == "bool" else np.where(keep, 0.5, -np.inf).astype(dtype)
    if S == 0:
        dead[:] = True
    note(f"L={L} S={S} E={E} Ev={Ev} {dtype} route={route} dead rows {np.flatnonzero(dead)}")
    return q, k, v, kw, dead


@examples(2)
@given(case=fully_masked_case())
def test_fully_masked_rows_are_zero(case):
    q, k, v, kw, dead = case
    out = threads_bitwise(lambda: sdpa(q, k, v, **kw))
    assert (out[:, :, dead] == 0).all()
    check_attention(out, q, k, v, **kw)
    w = threads_bitwise(lambda: cattn.attention_weights(q, k, **kw))
    assert (w[:, :, dead] == 0).all()
    check_attention_weights(w, q, k, **kw)


@st.composite
def huge_value_case(draw):
    """Values near the top of the dtype's range (|v| up to 0.9 max) with small
    q and k: the exact result is a convex combination of the values, finite."""
    dtype = draw(dtypes)
    L = draw(st.one_of(sizes(8), st.integers(9, 120)))
    S = draw(st.one_of(st.integers(1, 40), st.integers(1, 600)))
    E, Ev = draw(sizes(16, E_EDGES)), draw(st.integers(1, 8))
    q = draw(values((1, L, E), dtype, scales=(0.0, 0.1, 1.0)))
    k = draw(values((1, S, E), dtype, scales=(0.0, 0.1, 1.0)))
    top = float(np.finfo(dtype).max) * draw(st.sampled_from([0.9, 0.5, 0.25, 1e-3, 1e-6]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    sign = draw(st.sampled_from(["same", "mixed"]))
    mag = rng.uniform(0.5, 1.0, (1, S, Ev))
    if sign == "mixed":
        mag = mag * rng.choice([-1.0, 1.0], (1, S, Ev))
    v = (mag * top).astype(dtype)
    note(f"L={L} S={S} E={E} Ev={Ev} {dtype} top={top:.3g} {sign}")
    return q, k, v


@examples(2)
@given(case=huge_value_case())
def test_huge_values_give_finite_results(case):
    """Any input whose exact result is finite gives it (issue 9): here values
    close to the largest float."""
    q, k, v = case
    out = threads_bitwise(lambda: sdpa(q, k, v))
    assert np.isfinite(out).all()
    check_attention(out, q, k, v)


# ---- KV cache ----------------------------------------------------------------

@st.composite
def kvcache_case(draw):
    dtype = draw(dtypes)
    B, H = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    g = draw(st.integers(1, 3))
    E = draw(sizes(24, E_EDGES))
    Ev = draw(st.one_of(st.none(), sizes(16, E_EDGES)))
    max_len = draw(st.integers(0, 300))
    steps = draw(st.lists(st.tuples(st.one_of(sizes(3), st.integers(0, 120)),  # new tokens
                                    st.one_of(sizes(8), st.integers(9, 100)),   # query rows
                                    st.booleans()),                             # padding mask
                          min_size=1, max_size=6))
    seed = draw(st.integers(0, 2**32 - 1))
    note(f"B={B} H={H} g={g} E={E} Ev={Ev} max_len={max_len} {dtype} steps={steps}")
    return dtype, B, H, g, E, Ev, max_len, steps, seed


@examples(2)
@given(case=kvcache_case())
def test_kvcache_append_attend_sequences(case):
    """A sequence of appends (0 to 120 tokens) and attends (decode-sized and
    longer queries, GQA, optional padding mask) equals the reference over the
    filled prefix with lower_right causal alignment; an append past max_len
    raises ValueError and leaves the cache unchanged; unfilled slots hold
    NaN / inf garbage that must never be read."""
    dtype, B, H, g, E, Ev, max_len, steps, seed = case
    rng = np.random.default_rng(seed)
    ev = E if Ev is None else Ev
    cache = cattn.KVCache(B, H, max_len, E, dtype=dtype, value_dim=Ev)
    cache.k[...] = np.nan                    # garbage in unfilled slots
    cache.v[...] = np.inf
    ks, vs = [], []
    for T, Lq, masked in steps:
        k = rng.standard_normal((B, H, T, E)).astype(dtype)
        v = rng.standard_normal((B, H, T, ev)).astype(dtype)
        if cache.length + T > max_len:
            before = (cache.length, cache.keys.copy(), cache.values.copy())
            with pytest.raises(ValueError):
                cache.append(k, v)
            assert cache.length == before[0]
            assert np.array_equal(cache.keys, before[1], equal_nan=True)
            assert np.array_equal(cache.values, before[2], equal_nan=True)
            continue
        assert cache.append(k, v) == cache.length
        ks.append(k)
        vs.append(v)
        K = np.concatenate(ks, axis=2)
        V = np.concatenate(vs, axis=2)
        assert np.array_equal(cache.keys, K) and np.array_equal(cache.values, V)
        q = rng.standard_normal((B, H * g, Lq, E)).astype(dtype)
        kw = dict(is_causal=True, causal_alignment="lower_right", enable_gqa=g > 1)
        mask = None
        if masked:
            mask = rng.random((B, 1, 1, cache.length)) < 0.7
            kw = dict(attn_mask=mask, enable_gqa=g > 1)
        got = threads_bitwise(lambda: cache.attend(q, attn_mask=mask))
        check_attention(got, q, K, V, what="KVCache.attend", **kw)
