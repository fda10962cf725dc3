"""Failing examples found by the property tests (test_properties_*.py) and the
hostile-input probes of issue 9, minimised and kept as plain regular tests.

Markers (none open now; a new failing example gets one until it is fixed):
  xfail(strict=True, reason="being fixed: ...")  known, being fixed right now
  xfail(strict=True, reason="bug: ...")          found by the property tests
Strict: when a fix lands the test XPASSes, which fails the run: remove the
marker then (and the matching `assume` in the property test that names this
test). Tests without a marker pin behaviour that is already right.
"""
import math
import warnings

import numpy as np
import pytest

import cattn
from cattn import reference

F32, F64 = np.float32, np.float64
sdpa = cattn.scaled_dot_product_attention


def _unaligned(a, offset=1):
    """A copy of a in a bytearray at `offset` bytes (not a multiple of the
    itemsize): data NumPy flags as unaligned, as np.frombuffer gives."""
    a = np.asarray(a)
    buf = bytearray(a.nbytes + offset)
    u = np.frombuffer(buf, a.dtype, a.size, offset=offset).reshape(a.shape)
    u[...] = a
    assert not u.flags.aligned
    return u


# ---- attention: NaN and inf scores -----------------------------------------------

@pytest.mark.parametrize("L", [1, 20], ids=["decode", "flash"])
def test_attention_weights_plus_inf_score_row_is_nan(L):
    q = np.ones((L, 1), F32)
    k = np.array([[np.inf], [1.0]], F32)
    w = cattn.attention_weights(q, k)
    assert np.isnan(cattn.softmax(np.array([np.inf, 1.0], F32))).all()
    assert np.isnan(w).all(), f"got {w[0]}, expected [nan, nan]"


@pytest.mark.parametrize("dtype,gap", [(F32, 100.0), (F64, 800.0), (F32, np.inf)],
                         ids=["float32", "float64", "minus-inf-score"])
@pytest.mark.parametrize("L", [1, 20], ids=["decode", "flash"])
def test_attention_weights_nan_score_row_is_all_nan(dtype, gap, L):
    """Found by test_attention_weights_matches_reference (minimised): scores
    [nan, 0, -gap] (one example had q = inf, k = [nan, -0.13]: scores
    [nan, -inf]). softmax of a slice with a NaN is NaN everywhere
    (cattn.softmax, torch, the reference); attention_weights gives
    [nan, nan, 0]. The output of scaled_dot_product_attention is NaN there
    either way."""
    q = np.ones((L, 1), dtype)
    k = np.array([[np.nan], [0.0], [-gap]], dtype)
    w = cattn.attention_weights(q, k, scale=1.0)
    with np.errstate(invalid="ignore"):
        assert np.isnan(cattn.softmax(np.array([np.nan, 0.0, -gap], dtype))).all()
        assert np.isnan(reference.attention_weights(q, k, scale=1.0)).all()
    assert np.isnan(w).all(), f"got {w[0]}, expected [nan, nan, nan]"


def test_nan_score_below_flush_gap_is_all_nan():
    """The same row with the low key inside the exp range is already right."""
    w = cattn.attention_weights(np.ones((1, 1), F32), np.array([[np.nan], [0.0], [-50.0]], F32),
                                scale=1.0)
    assert np.isnan(w).all()


# ---- attention: huge values, long contexts ------------------------------------------

@pytest.mark.parametrize("L", [1, 20], ids=["decode", "flash"])
def test_sdpa_huge_values_overflow_before_normalising(L):
    """Issue 9: v = 8.5e37 with zero q and k; exact (and torch): 8.5e37."""
    v = np.full((7, 1), 8.5e37, F32)
    out = sdpa(np.zeros((L, 1), F32), np.zeros((7, 1), F32), v)
    assert np.isfinite(out).all(), f"got {out[0]}"
    np.testing.assert_allclose(out, 8.5e37, rtol=1e-6)


def test_long_context_float32_accuracy_flash_random():
    """Issue 9: S = 2^18 keys, near-uniform weights, L = 9 (flash path):
    relative error must stay at float32 rounding level (<= 1e-5); it is ~5e-4."""
    rng = np.random.default_rng(0)
    L, S, E = 9, 2**18, 4
    q = (0.01 * rng.standard_normal((L, E))).astype(F32)
    k = (0.01 * rng.standard_normal((S, E))).astype(F32)
    v = (1 + 0.01 * rng.standard_normal((S, 2))).astype(F32)
    out = sdpa(q, k, v)
    q64, k64, v64 = (a.astype(F64) for a in (q, k, v))
    s = q64 @ k64.T / 2.0
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p @ v64) / p.sum(-1, keepdims=True)
    rel = np.abs(out - ref).max() / np.abs(ref).max()
    assert rel <= 1e-5, f"relative error {rel:.3g}"


# (the S = 2^25 + 5 stride-0 case of issue 9 is
# tests/test_attention_numerics.py::test_long_context_constant_values)


# ---- attention: float64 masks with float32 inputs -----------------------------------

@pytest.mark.parametrize("bias,expected", [(-1e300, [1.0, 0.0]), (1e300, [1.0, 0.0])],
                         ids=["-1e300", "+1e300"])
def test_float64_mask_beyond_float32_range_with_float32_inputs(bias, expected):
    """Found while writing the attention properties (which now draw float64
    masks with float32-representable values only). Row scores [bias, -inf]:
    the exact weights are [1, 0] for any finite bias, and the reference gives
    them; cattn gives [0, 0] (-1e300 -> -inf: no key left) and [nan, 0]
    (1e300 -> +inf). A finite mask value must not turn into the -inf
    sentinel: clamp to +-FLT_MAX, or reject such masks with a ValueError."""
    q, k = np.zeros((1, 2), F32), np.zeros((2, 2), F32)     # scores 0
    m = np.array([[bias, -np.inf]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = cattn.attention_weights(q, k, attn_mask=m)
    np.testing.assert_array_equal(reference.attention_weights(q, k, attn_mask=m), [expected])
    np.testing.assert_array_equal(w, [expected])


# ---- unaligned data -------------------------------------------------------------------

_EXT_NAMES = ["gemm", "gemm_batched", "softmax", "layer_norm", "rms_norm", "activation",
              "attention"]


@pytest.fixture
def c_sees(monkeypatch):
    """Records every unaligned ndarray passed from Python to cattn._ext."""
    seen = []
    for name in _EXT_NAMES:
        f = getattr(cattn._ext, name)

        def wrap(*args, _f=f, _n=name):
            for i, a in enumerate(args):
                if isinstance(a, np.ndarray) and a.size and not a.flags.aligned:
                    seen.append((_n, i))
            return _f(*args)
        monkeypatch.setattr(cattn._ext, name, wrap)
    return seen


def _unaligned_calls(dtype, off):
    u = _unaligned(np.random.default_rng(0).standard_normal((8, 8)).astype(dtype), off)
    one = np.ones((8, 8), dtype)
    return {
        "matmul": (lambda: cattn.matmul(u, u), lambda: reference.matmul(u, u)),
        "linear_x": (lambda: cattn.linear(u, one), lambda: reference.linear(u, one)),
        "linear_weight": (lambda: cattn.linear(one, u), lambda: reference.linear(one, u)),
        "linear_bias": (lambda: cattn.linear(one, one, u[0]), lambda: reference.linear(one, one, u[0])),
        "layer_norm": (lambda: cattn.layer_norm(u), lambda: reference.layer_norm(u)),
        "rms_norm": (lambda: cattn.rms_norm(u), lambda: reference.rms_norm(u)),
        "gelu": (lambda: cattn.gelu(u), lambda: reference.gelu(u)),
        "silu": (lambda: cattn.silu(u), lambda: reference.silu(u)),
        "relu": (lambda: cattn.relu(u), lambda: reference.relu(u)),
        "softmax": (lambda: cattn.softmax(u), lambda: reference.softmax(u)),
        "sdpa_query": (lambda: sdpa(u, one, one), lambda: reference.scaled_dot_product_attention(u, one, one)),
        "sdpa_key": (lambda: sdpa(one, u, one), lambda: reference.scaled_dot_product_attention(one, u, one)),
        "sdpa_value": (lambda: sdpa(one, one, u), lambda: reference.scaled_dot_product_attention(one, one, u)),
        "sdpa_float_mask": (lambda: sdpa(one, one, one, u),
                            lambda: reference.scaled_dot_product_attention(one, one, one, u)),
        "attention_weights": (lambda: cattn.attention_weights(u, one),
                              lambda: reference.attention_weights(u, one)),
    }


UNALIGNED_CASES = [(F32, 1), (F64, 1), (F64, 4)]     # (dtype, byte offset)
UNALIGNED_OPS = list(_unaligned_calls(F32, 1))


@pytest.mark.parametrize("op", UNALIGNED_OPS)
def test_unaligned_inputs_give_correct_results(op):
    """Issue 9: results on unaligned data were right (and must stay right);
    the sanitizer build checks the kernels' loads (see the next test)."""
    for dtype, off in UNALIGNED_CASES:
        got, ref = _unaligned_calls(dtype, off)[op]
        np.testing.assert_allclose(got(), ref(), rtol=1e-5 if dtype == F32 else 1e-12, atol=1e-5)


@pytest.mark.parametrize("op", UNALIGNED_OPS)
def test_unaligned_inputs_never_reach_the_kernels(op, c_sees):
    """Issue 9 (UB on unaligned inputs), observed without a sanitizer: every
    array handed to cattn._ext must be aligned (float32 and float64 at byte
    offset 1, float64 at offset 4)."""
    for dtype, off in UNALIGNED_CASES:
        _unaligned_calls(dtype, off)[op][0]()
    assert not c_sees, f"unaligned arrays passed to the C kernels: {c_sees}"


# ---- KVCache --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["complex64", "int64", "int8", "object", "bool", "float16",
                                   "<U3"])
def test_kvcache_append_rejects_non_float_dtypes(dtype):
    """Every other op raises TypeError naming the dtype (found again by
    test_properties_api.py::test_wrong_dtype_raises_type_error); k and v."""
    good = np.ones((1, 1, 1, 2), F32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bad = good.astype(dtype)
    for args in ((bad, good), (good, bad)):
        cache = cattn.KVCache(1, 1, 4, 2)
        with pytest.raises(TypeError, match=str(np.dtype(dtype))):
            cache.append(*args)
        assert cache.length == 0


@pytest.mark.parametrize("value_dim", [-1, 2.5, "a"])
def test_kvcache_bad_value_dim_message(value_dim):
    with pytest.raises((TypeError, ValueError), match="value_dim"):
        cattn.KVCache(1, 1, 4, 4, value_dim=value_dim)


@pytest.mark.parametrize("arg,value", [("max_len", 2**63), ("head_dim", 10**20),
                                       ("max_len", True)], ids=["max_len=2^63", "head_dim=1e20",
                                                                "max_len=True"])
def test_kvcache_huge_or_bool_sizes_message(arg, value):
    """Found by test_scalar_arguments_work_or_raise_clear_errors."""
    sizes = dict(batch=1, kv_heads=1, max_len=4, head_dim=4)
    sizes[arg] = value
    with pytest.raises((TypeError, ValueError, MemoryError), match=arg):
        cattn.KVCache(**sizes)


def test_kvcache_overflow_leaves_cache_unchanged():
    cache = cattn.KVCache(1, 1, 3, 2)
    cache.append(np.ones((1, 1, 2, 2), F32), np.ones((1, 1, 2, 2), F32))
    with pytest.raises(ValueError, match="max_len"):
        cache.append(np.zeros((1, 1, 2, 2), F32), np.zeros((1, 1, 2, 2), F32))
    assert cache.length == 2 and (cache.keys == 1).all()


# ---- scalar arguments -----------------------------------------------------------------

@pytest.mark.parametrize("n", [1 << 40, 2**63], ids=["2^40", "2^63"])
@pytest.mark.parametrize("how", ["set_num_threads", "num_threads"])
def test_huge_thread_count_is_rejected_or_clamped(n, how):
    """Either a ValueError naming the limit where the count is set, or a
    (documented) clamp after which every call works."""
    x = np.ones((4, 4), F32)
    saved = cattn._threads._global
    try:
        try:
            if how == "set_num_threads":
                cattn.set_num_threads(n)
                cattn.matmul(x, x)
                assert 1 <= cattn.get_num_threads() < 2**31
            else:
                with cattn.num_threads(n):
                    cattn.matmul(x, x)
                    assert 1 <= cattn.get_num_threads() < 2**31
        except ValueError as e:
            assert "thread" in str(e)
    finally:
        cattn._threads._global = saved


@pytest.mark.parametrize("op", ["layer_norm", "rms_norm", "sdpa", "attention_weights"])
def test_huge_int_eps_or_scale_raises_value_error(op):
    x = np.ones((2, 3), F32)
    calls = {"layer_norm": (lambda: cattn.layer_norm(x, eps=10**400), "eps"),
             "rms_norm": (lambda: cattn.rms_norm(x, eps=10**400), "eps"),
             "sdpa": (lambda: sdpa(x, x, x, scale=10**400), "scale"),
             "attention_weights": (lambda: cattn.attention_weights(x, x, scale=10**400), "scale")}
    call, name = calls[op]
    with pytest.raises((ValueError, TypeError), match=name):
        call()


@pytest.mark.parametrize("scale", ["a", [1.0], 1j], ids=["str", "list", "complex"])
@pytest.mark.parametrize("op", ["sdpa", "attention_weights"])
def test_bad_scale_message_names_scale(op, scale):
    x = np.ones((2, 3), F32)
    with pytest.raises((TypeError, ValueError), match="scale"):
        if op == "sdpa":
            sdpa(x, x, x, scale=scale)
        else:
            cattn.attention_weights(x, x, scale=scale)


@pytest.mark.parametrize("arg", ["approximate", "causal_alignment", "dropout_p"])
def test_array_for_string_or_float_argument_message(arg):
    """Found by test_scalar_arguments_work_or_raise_clear_errors."""
    x = np.ones((2, 3), F32)
    a = np.array([1.0, 2.0])
    with pytest.raises((TypeError, ValueError), match=arg):
        if arg == "approximate":
            cattn.gelu(x, approximate=a)
        elif arg == "causal_alignment":
            sdpa(x, x, x, is_causal=True, causal_alignment=a)
        else:
            sdpa(x, x, x, dropout_p=a)


# ---- activations ----------------------------------------------------------------------

@pytest.mark.parametrize("name,x", [("silu", -708.5), ("gelu_tanh", -21.15)])
def test_float64_silu_gelu_tanh_keep_tiny_normal_results(name, x):
    """Found by the long run of test_activations_match_reference (minimised):
    float64 results between the smallest normal (2.2e-308) and ~1e-290 must
    not be flushed to 0. silu(-708.5) = -708.5 exp(-708.5) / (1 + ...) =
    -1.4213e-305 (torch: -1.4213e-305), gelu_tanh(-21.15) = -3.0528e-307.
    The AVX2 path gave -0.0 (its exp flushed exp(z) for z < -708.4 before
    the product with x; also in the linear epilogue): fixed by forming
    x exp(z) scaled by 2^128 and scaling back after the division."""
    f = {"silu": cattn.silu, "gelu_tanh": lambda a: cattn.gelu(a, approximate="tanh")}[name]
    want = {"silu": -1.4213447375e-305, "gelu_tanh": -3.0527519700e-307}[name]
    got = f(np.array([x]))[0]
    lin = cattn.linear(np.array([[x]]), np.ones((1, 1)), activation=name)[0, 0]
    np.testing.assert_allclose([got, lin], want, rtol=1e-8)


def test_reference_oracle_limits_are_worked_around():
    """Limits of cattn.reference met while writing the properties (the
    checkers in cattn_testing/properties.py work around them; not cattn bugs):
    * reference.gelu / gelu_tanh cancel in 1 + erf / 1 + tanh for x < -5:
      at x = -8 the float64 reference is off by ~20 % (float32 itself has
      ~7 correct digits there); reference.silu (scipy's expit) underflows
      to 0 at x < -709.8 where x * sigmoid(x) is still a normal number;
      cattn_testing.properties.act_reference computes them in log space;
    * reference.scaled_dot_product_attention fails when the value has more
      leading batch dims than query and key (cattn_testing.properties.broadcast_qkv)."""
    from scipy import special as sp
    exact = 0.5 * -8.0 * sp.erfc(8.0 / math.sqrt(2.0))
    assert abs(reference.gelu(np.array([-8.0]))[0] / exact - 1) > 1e-3
    assert reference.silu(np.array([-709.9]))[0] == 0.0                  # exact: -3.5e-306
    with pytest.raises(ValueError):
        reference.scaled_dot_product_attention(np.ones((3, 4)), np.ones((5, 4)), np.ones((2, 1, 5, 2)))
    assert sdpa(np.ones((3, 4), F32), np.ones((5, 4), F32),
                np.ones((2, 1, 5, 2), F32)).shape == (2, 1, 3, 2)
