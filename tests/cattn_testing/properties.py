"""Checkers for the property tests: cattn against cattn.reference (float64),
extended to NaN / inf inputs, with tolerances from the arithmetic.

Non-finite values, the rule used everywhere: IEEE arithmetic decides
exactly which results are NaN or +-inf, independent of the order of the
operations, as long as no finite intermediate overflows. So NaN positions and
inf entries are compared EXACTLY (a NaN where the exact result has none is a
failure, and so is a missing one), finite entries within a tolerance:

* GEMM (matmul, linear): c_ij = sum_k a_ik b_kj is NaN iff some term is NaN
  (a NaN factor, or inf * 0) or terms of both infinite signs meet; +-inf iff
  some term is +-inf and none of the opposite sign. `ieee_gemm` computes that
  pattern with boolean matmuls (never trusting a BLAS with NaN), and the
  finite entries, which never touch a non-finite input, from the reference
  with the non-finite inputs zeroed. Finite entries: gemm.gemm_tol
  (5 sqrt(K) eps |A||B|, see gemm.py). The properties keep |values|
  <= ~1e3 so that no finite float32 dot product overflows.
* Activations of +-inf pre-activations are their limits: act(+inf) = +inf,
  act(-inf) = -inf (none), 0 (relu), -0 (gelu, gelu_tanh, silu); NaN stays
  NaN. (cattn.reference.gelu(-inf) is 0.5 * -inf * 0 = NaN: the limit is 0,
  and cattn and torch give -0.)
* softmax / norms / attention: cattn.reference already implements the
  semantics (a NaN or +inf in a softmax slice makes it NaN, a slice of -inf
  gives 0, masked keys never contribute); see each checker.
"""
import math

import numpy as np

from cattn import reference

from .attention import _gqa_repeat, assert_close as assert_close_attention, expected_sdpa, \
    expected_weights
from .gemm import ACT_SLOPE, gemm_tol
from .numerics import assert_close, eps, result_dtype
from .numerics import threads_bitwise  # noqa: F401  (the property tests use it with the checkers)


def _c(dtype):
    """Both sides carry rounding errors of the same size for float64 results
    (float64 reference): tolerances double."""
    return 2.0 if np.dtype(dtype) == np.float64 else 1.0


# ---------------------------------------------------------------- GEMM

def _f(mask):
    return mask.astype(np.float64)


def ieee_gemm(a, b):
    """(special, finite_ref, bound) for a @ b with a (..., M, K), b (..., K, N)
    (no 1-D operands): special is NaN / +-inf where the exact IEEE result is
    non-finite and 0 elsewhere; finite_ref the float64 reference with non-finite
    inputs zeroed; bound = |a| @ |b| over the finite inputs."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    inf_a, inf_b = np.isinf(a), np.isinf(b)
    zero_a, zero_b = a == 0, b == 0
    pos_a, pos_b, neg_a, neg_b = a > 0, b > 0, a < 0, b < 0   # NaN is neither
    ones_a, ones_b = np.ones(a.shape), np.ones(b.shape)
    mm = np.matmul
    nan = (mm(_f(nan_a), ones_b) + mm(ones_a, _f(nan_b)) + mm(_f(inf_a), _f(zero_b))
           + mm(_f(zero_a), _f(inf_b))) > 0
    pinf = (mm(_f(inf_a & pos_a), _f(pos_b)) + mm(_f(pos_a), _f(inf_b & pos_b))
            + mm(_f(inf_a & neg_a), _f(neg_b)) + mm(_f(neg_a), _f(inf_b & neg_b))) > 0
    ninf = (mm(_f(inf_a & pos_a), _f(neg_b)) + mm(_f(pos_a), _f(inf_b & neg_b))
            + mm(_f(inf_a & neg_a), _f(pos_b)) + mm(_f(neg_a), _f(inf_b & pos_b))) > 0
    nan = nan | (pinf & ninf)
    special = np.where(nan, np.nan, np.where(pinf, np.inf, np.where(ninf, -np.inf, 0.0)))
    fa, fb = np.where(np.isfinite(a), a, 0.0), np.where(np.isfinite(b), b, 0.0)
    return special, reference.matmul(fa, fb), reference.matmul(np.abs(fa), np.abs(fb))


def expected_matmul(a, b):
    """(ref, tol) for cattn.matmul(a, b) (numpy.matmul shapes, 1-D promotion)."""
    a = np.asarray(a)
    b = np.asarray(b)
    dtype = np.result_type(a.dtype, b.dtype)
    A = a[None, :] if a.ndim == 1 else a
    B = b[:, None] if b.ndim == 1 else b
    special, fin, bound = ieee_gemm(A, B)
    K = A.shape[-1]
    ref = np.where(special != 0, special, fin)
    tol = gemm_tol(bound, K, dtype)
    if a.ndim == 1:
        ref, tol = ref[..., 0, :], tol[..., 0, :]
    if b.ndim == 1:
        ref, tol = ref[..., 0], tol[..., 0]
    return ref, tol


def check_matmul(got, a, b, what="matmul"):
    dtype = result_dtype(a, b)
    assert got.dtype == dtype, f"{what}: dtype {got.dtype} != {dtype}"
    ref, tol = expected_matmul(a, b)
    assert_close(got, ref, tol, f"{what} {np.shape(a)} @ {np.shape(b)}")


_ACT_AT_INF = {None: (np.inf, -np.inf), "relu": (np.inf, 0.0), "gelu": (np.inf, 0.0),
               "gelu_tanh": (np.inf, 0.0), "silu": (np.inf, 0.0)}


def expected_linear(x, weight, bias=None, activation=None):
    """(ref, tol) for cattn.linear: z = x @ W.T + bias with the IEEE pattern
    of ieee_gemm (a NaN bias makes its column NaN, an inf bias joins the
    inf terms), then the activation; finite entries: gemm.check_linear's
    budget (GEMM + bias tolerance times the activation's largest slope, plus
    8 eps |z| for the activation's own evaluation)."""
    x = np.asarray(x)
    weight = np.asarray(weight)
    arrays = [x, weight] + ([np.asarray(bias)] if bias is not None else [])
    dtype = np.result_type(*[t.dtype for t in arrays])
    X = x[None, :] if x.ndim == 1 else x
    special, z, bound = ieee_gemm(X, np.swapaxes(weight, -1, -2))
    if bias is not None:
        b = np.asarray(bias, dtype=np.float64)
        bfin = np.where(np.isfinite(b), b, 0.0)
        z = z + bfin
        bound = bound + np.abs(bfin)
        with np.errstate(invalid="ignore"):
            # NaN + anything = NaN; inf + finite = inf; inf + -inf = NaN
            special = np.where(np.isfinite(b), special, special + b)
            special = np.where(np.isnan(special), np.nan, special)
    K = weight.shape[1]
    tol = ACT_SLOPE[activation] * gemm_tol(bound, K, dtype, extra_terms=bias is not None)
    act = reference.ACTIVATIONS[activation]
    ref = act(z)
    if activation is not None:
        tol = tol + 8 * eps(dtype) * np.abs(z)
    up, down = _ACT_AT_INF[activation]
    ref = np.where(np.isnan(special), np.nan,
                   np.where(special == np.inf, up, np.where(special == -np.inf, down, ref)))
    if x.ndim == 1:
        ref, tol = ref[0], tol[0]
    return ref, tol


def check_linear(got, x, weight, bias=None, activation=None, what="linear"):
    dtype = result_dtype(x, weight, bias)
    assert got.dtype == dtype, f"{what}: dtype {got.dtype} != {dtype}"
    ref, tol = expected_linear(x, weight, bias, activation)
    assert_close(got, ref, tol, f"{what} x{np.shape(x)} w{np.shape(weight)} act={activation}")


# ---------------------------------------------------------------- softmax

def softmax_tol(x64, ref, axis, log, dtype):
    """Tolerance of tests/test_softmax.py (derivation there), path-agnostic:
    the sum of n terms is split over at least 32 float32 lanes (AVX2; the
    portable float32 path sums in double) or 4 float64 partial sums, i.e. a
    relative error <= (n / lanes + 5) u."""
    n = x64.shape[axis] if x64.ndim else 1
    lanes = 32 if np.dtype(dtype) == np.float32 else 4
    spread = n / lanes / 2
    e = eps(dtype) * _c(dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        if log:
            return e * (2 * np.abs(ref) + spread + 8)
        m = np.max(x64, axis=axis, keepdims=True)
        d = np.where(ref > 0, np.abs(x64 - m), 0.0)
        return ref * e * (7 + d + spread) + 2 * float(np.finfo(dtype).tiny)


def check_softmax(got, x, axis, log, what="softmax"):
    dtype = np.asarray(x).dtype
    assert got.dtype == dtype and got.shape == np.shape(x), f"{what}: {got.dtype} {got.shape}"
    x64 = np.asarray(x, dtype=np.float64)
    if x64.size == 0:               # the reference cannot reduce an empty axis
        return
    with np.errstate(all="ignore"):
        ref = reference.log_softmax(x64, axis) if log else reference.softmax(x64, axis)
        tol = softmax_tol(x64, ref, axis, log, dtype)
        # the exact result rounded to the output dtype: a log-probability of
        # -6e38 is -inf in float32 (x - max overflows), as it must be
        ref = ref.astype(dtype).astype(np.float64)
    assert_close(got, ref, np.where(np.isfinite(tol), tol, np.inf), what)


# ---------------------------------------------------------------- norms

def check_layer_norm(got, x, w, b, eps_, what="layer_norm"):
    """|y - ref| <= c 4 e ((|t| + 1 + r) |w| + |b|) + tiny, t = the normalized
    value, r = |mean| / sqrt(var + eps) (tests/test_norm.py's budget; the
    r term is the float64 reference's own error: its plain two-pass mean is
    off by ~u |mean|, which shifts every t by ~u |mean| / std; it matters only
    for float64 rows with a large mean and a small spread)."""
    dtype = result_dtype(x, w, b)
    assert got.dtype == dtype and got.shape == np.shape(x), f"{what}: {got.dtype} {got.shape}"
    x64 = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        ref = reference.layer_norm(x64, w, b, eps_)
        t = reference.layer_norm(x64, None, None, eps_)
        mu = x64.mean(-1, keepdims=True)
        r = np.abs(mu) / np.sqrt(((x64 - mu) ** 2).mean(-1, keepdims=True) + eps_)
        aw = 1.0 if w is None else np.abs(np.asarray(w, np.float64))
        ab = 0.0 if b is None else np.abs(np.asarray(b, np.float64))
        tol = 4 * _c(dtype) * eps(dtype) * ((np.abs(t) + 1 + r) * aw + ab) + float(np.finfo(dtype).tiny)
        tol = np.where(np.isnan(tol), np.inf, tol)
        if w is not None and np.isinf(np.asarray(w, np.float64)).any():
            # t * inf: NaN when t is exactly 0 (a constant row), +-inf
            # otherwise; where |t| is within its own rounding band (the
            # absolute t error of the budget above, ~c 4 e (1 + r)) both
            # answers are defensible (the reference's mean of [a, a, a] need
            # not be exactly a): those entries are not judged
            band = 4 * _c(dtype) * eps(dtype) * (1 + r)
            amb = np.isinf(np.asarray(w, np.float64)) & (np.abs(t) <= band)
            if amb.any():
                ref = np.where(amb, np.asarray(got, np.float64), ref)
                tol = np.where(amb, np.inf, tol)
    assert_close(got, ref, tol, what)


def check_rms_norm(got, x, w, eps_, what="rms_norm"):
    """Three roundings (sum of squares in a wider type or pairwise, rsqrt, the
    products): |y - ref| <= c 4 e |ref| + tiny."""
    dtype = result_dtype(x, w)
    assert got.dtype == dtype and got.shape == np.shape(x), f"{what}: {got.dtype} {got.shape}"
    with np.errstate(all="ignore"):
        ref = reference.rms_norm(x, w, eps_)
        tol = 4 * _c(dtype) * eps(dtype) * np.abs(ref) + float(np.finfo(dtype).tiny)
    assert_close(got, ref, np.where(np.isnan(tol), np.inf, tol), what)


# ---------------------------------------------------------------- activations

C_TANH = math.sqrt(2.0 / math.pi)


def act_reference(name, x):
    """Float64 reference values of the elementwise activations: the formulas
    of cattn.reference, rewritten where they lose accuracy (identities only):
      gelu       x Phi(x), Phi(x) = (1 + erf(x / sqrt 2)) / 2
      gelu_tanh  x (1 + tanh u) / 2 = x expit(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
      silu       x expit(x)
    cattn.reference's 1 + erf and 1 + tanh cancel for x < -5 (100 % relative
    error near x = -8, where float32 results are still normal), and
    scipy's expit / erfc underflow to 0 (or a subnormal with few bits) while
    the product with x is still a normal number (silu at x = -709.9 is
    -3.9e-306, expit(x) = 0). So erfc(-x / sqrt 2) and expit replace
    1 + erf and 1 + tanh, and in the far tail (x < -30 for gelu, z < -600
    for x expit(z)) the value is computed in log space:
    -exp(log(-x) + log Phi(x)) (scipy.special.log_ndtr) and
    -exp(log(-x) + log_expit(z)) (relative error ~ |log| u <= ~1e-13 there,
    inside the tolerance's kappa term; elsewhere the direct forms are
    accurate to a few ulp). test_act_reference_forms checks that these equal
    cattn.reference's formulas where those are accurate.
    Limits at +-inf as in the module docstring."""
    from scipy import special as sp
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        lx = np.log(np.where(x < 0, -x, 1.0))
        if name == "relu":
            y = reference.relu(x)
        elif name == "gelu":
            y = np.where(x < -30, -np.exp(lx + sp.log_ndtr(x)),
                         0.5 * x * sp.erfc(-x / math.sqrt(2.0)))
        elif name in ("gelu_tanh", "silu"):
            z = 2 * C_TANH * (x + 0.044715 * x ** 3) if name == "gelu_tanh" else x
            y = np.where(z < -600, -np.exp(lx + sp.log_expit(z)), x * sp.expit(z))
        else:
            raise ValueError(name)
    y = np.where(x == np.inf, np.inf, np.where(x == -np.inf, 0.0, y))
    return np.where(np.isnan(x), np.nan, y)


def act_condition(name, x):
    """|d ln f / d ln x|: a relative error u in x costs kappa u in f."""
    x = np.abs(np.asarray(x, np.float64))
    with np.errstate(all="ignore"):
        if name == "gelu":
            return 2.0 + x * x
        if name == "gelu_tanh":
            return 2.0 + 2 * C_TANH * x * (1 + 3 * 0.044715 * x * x)
        if name == "silu":
            return 2.0 + x
        return np.zeros_like(x)


def check_activation(got, x, name, what=""):
    """float32: computed in double and rounded once (both kernel paths), so
    within 0.5 ulp of the exact value; the float64 reference's own error
    (kappa u, kappa <= ~1e4 in the float32 range that does not underflow) is
    far below an ulp of float32: allow 0.52 ulp (tests/test_activations.py).
    float64: eps (8 + kappa) |f| per side (c = 2), plus tiny (results that
    flush below the smallest normal). relu: exact."""
    dtype = np.asarray(x).dtype
    what = what or name
    assert got.dtype == dtype and got.shape == np.shape(x), f"{what}: {got.dtype} {got.shape}"
    ref = act_reference(name, x)
    g = np.asarray(got, np.float64)
    if name == "relu":
        tol = np.zeros(ref.shape)
    elif dtype == np.float32:
        with np.errstate(over="ignore"):
            r32 = ref.astype(np.float32)
        # 0.52 ulp at the exact value (ulp of the float32 grid around it)
        tol = 0.52 * np.spacing(np.abs(r32)).astype(np.float64)
        tol = np.where(np.isfinite(tol), tol, np.inf)
        ref = np.where(np.isinf(r32) & np.isfinite(ref), r32, ref)   # overflow to inf is exact
    else:
        tol = 2 * eps(dtype) * (8 + act_condition(name, x)) * np.abs(ref) + float(np.finfo(dtype).tiny)
        tol = np.where(np.isfinite(tol), tol, np.inf)
    assert_close(g, ref, tol, f"{what} {np.shape(x)} {dtype}")


# ---------------------------------------------------------------- attention

def reference_kw(E, kw):
    """The reference's keyword arguments for a call with head dim E: cattn
    takes scale = 1 when E = 0 (the scores are empty sums, 0, either way);
    the reference would divide by sqrt(0)."""
    kw = dict(kw)
    if E == 0 and kw.get("scale") is None:
        kw["scale"] = 1.0
    return kw


def allowed_pairs(shape, L, S, attn_mask=None, is_causal=False, causal_alignment="upper_left",
                  **_):
    """(..., Hq, L, S) bool: the (query, key) pairs no mask / causal rule
    excludes (a float mask excludes only with -inf)."""
    allowed = np.ones((L, S), bool)
    if is_causal:
        allowed = reference.causal_mask(L, S, causal_alignment)
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        allowed = allowed & (m if m.dtype == np.bool_ else ~np.isneginf(m))
    return np.broadcast_to(allowed, shape)


def _check_empty(got, q, k, v, rkw, what):
    """S = 0 (no key: every row gives zeros, weights of shape (..., L, 0))
    or an empty result: the reference cannot reduce over zero keys, so the
    shape comes from a one-key call whose key is masked out."""
    S = np.shape(k)[-2]
    k1 = np.zeros(np.shape(k)[:-2] + (1, np.shape(k)[-1]))
    kw1 = {n: x for n, x in rkw.items() if n != "attn_mask"}
    if v is None:
        shape = reference.attention_weights(q, k1, **kw1).shape[:-1] + (S,)
    else:
        v1 = np.zeros(np.shape(v)[:-2] + (1, np.shape(v)[-1]))
        shape = reference.scaled_dot_product_attention(q, k1, v1, **kw1).shape
    assert got.shape == shape, f"{what}: shape {got.shape} != expected {shape}"
    assert (np.asarray(got) == 0).all(), f"{what}: a row with no key to attend to is not 0"


def broadcast_qkv(q, k, v, enable_gqa=False, **_):
    """q, k, v broadcast to their common batch dims (read-only views).
    cattn.reference builds the (..., L, S) weights from q and k alone, so a
    value with more leading batch dims than query and key makes it fail
    (np.broadcast_to to a shorter shape); the broadcast inputs describe the
    same call."""
    arrays = [np.asarray(a) for a in (q, k, v) if a is not None]
    if any(a.ndim < 2 for a in arrays):
        return q, k, v
    cut = 3 if enable_gqa and all(a.ndim >= 3 for a in arrays) and \
        np.shape(q)[-3] != np.shape(k)[-3] else 2
    try:
        batch = np.broadcast_shapes(*[a.shape[:-cut] for a in arrays])
    except ValueError:
        return q, k, v
    out = [np.broadcast_to(a, batch + a.shape[len(a.shape) - cut:]) for a in arrays]
    return (out[0], out[1], out[2] if v is not None else None)


def check_attention(got, q, k, v, what="sdpa", **kw):
    """cattn.scaled_dot_product_attention's result `got` against the float64
    reference with attention.py's tolerance (derivation there), NaN
    positions and inf entries exact.

    One honest exception, for non-finite VALUES: the exact result of
    sum_j p_ij v_jc with v_jc = inf is inf for any weight p_ij > 0, but a
    weight below the smallest normal is 0 in the kernels (they flush
    exp(s - m) < exp(-87.3) in float32) and in the float64 reference below
    exp(-745). Where an attended key with a non-finite value has a reference
    weight under 1e-30 (float32) / 1e-300 (float64), the entry (i, c) is not
    judged: inf, NaN and a finite value are all defensible there (NaN values
    included: NaN * 1e-54 is NaN exactly, NaN * 0 after the flush is NaN, a
    kernel that skips flushed keys gives a finite value)."""
    dtype = result_dtype(q, k, v)
    assert got.dtype == dtype, f"{what}: dtype {got.dtype} != {dtype}"
    E = np.shape(q)[-1]
    rkw = reference_kw(E, kw)
    q, k, v = broadcast_qkv(q, k, v, **rkw)
    if np.shape(k)[-2] == 0 or got.size == 0:
        _check_empty(got, q, k, v, rkw, what)
        return None
    ref, tol = expected_sdpa(q, k, v, **rkw)
    v64 = np.asarray(v, np.float64)
    if not np.isfinite(v64).all() and ref.size:
        A = reference.attention_weights(q, k, **{n: rkw[n] for n in rkw})
        allowed = allowed_pairs(A.shape, A.shape[-2], A.shape[-1], **rkw)
        thr = 1e-30 if dtype == np.float32 else 1e-300
        tiny = allowed & (A < thr)                                    # (..., Hq, L, S)
        hq = A.shape[-3] if A.ndim >= 3 else 1
        vb = _gqa_repeat(v64, hq, rkw.get("enable_gqa", False))
        nonfin = ~np.isfinite(vb)                                     # (..., H?, S, Ev)
        amb = np.matmul(tiny.astype(np.float64), nonfin.astype(np.float64)) > 0
        # rows whose weights are NaN (a NaN / +inf score) are NaN for sure
        nan_rows = np.isnan(A).any(axis=-1, keepdims=True)
        amb = np.broadcast_to(amb & ~nan_rows, ref.shape)
        if amb.any():
            g = np.asarray(got, np.float64)
            ref = np.where(amb, g, ref)
            tol = np.where(amb, np.inf, tol)
    assert_close_attention(got, ref, tol, f"{what} q{np.shape(q)} k{np.shape(k)} v{np.shape(v)}")
    return ref


def check_attention_weights(got, q, k, what="attention_weights", **kw):
    dtype = result_dtype(q, k)
    assert got.dtype == dtype, f"{what}: dtype {got.dtype} != {dtype}"
    rkw = reference_kw(np.shape(q)[-1], kw)
    if np.shape(k)[-2] == 0 or got.size == 0:
        _check_empty(got, q, k, None, rkw, what)
        return None
    ref, tol = expected_weights(q, k, **rkw)
    assert_close_attention(got, ref, tol, f"{what} q{np.shape(q)} k{np.shape(k)}")
    return ref

