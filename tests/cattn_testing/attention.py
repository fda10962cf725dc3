"""Attention checks: compare cattn against the float64
oracle cattn.reference (and torch) with a tolerance derived from the
arithmetic, never against cattn's own output.

Error budget, per query row i (u = eps / 2; "c" doubles everything for
float64 results, whose float64 reference carries errors of the same size):

1. Scores. s_ij = scale * q_i . k_j is a dot product of length E, plus one
   rounding when the kernel scales Q: by Higham & Mary's probabilistic bound
   (SIAM J. Sci. Comput. 41(5), 2019, lam = 10) the error is at most
       d_ij = 5 sqrt(E + 1) eps * scale * (|q_i| . |k_j|)
   (for E <= 100 the deterministic E u bound is smaller still). An additive
   float mask adds one rounding of s + m: eps * (|s| + |m|). Note d_ij scales
   with |q||k|, not with |s|: large logits (|s| ~ 1e4) get a large absolute
   error (~1e-3 at 1e4 in float32), which is real and shared by torch.
2. Softmax. p_j = exp(s_j - m) / sum_k exp(s_k - m). Shifting each s_j by
   at most D_i = max_j d_ij (over keys with nonzero weight) changes p_j by a
   factor within exp(+-2 D_i), i.e. a RELATIVE error of about 2 D_i on every
   weight: softmax turns an absolute score error into a relative weight error.
3. Evaluation. exp (<= 2 ulp), the running sum of S terms and the P.V dot
   product of S terms (5 sqrt(S) eps each, same bound as 1), one division,
   and per kv block (flash, BC >= 96 keys) or key chunk (decode, 256 keys)
   one rescaling exp(m_old - m_new) * l: a few eps per block.
   Together: rel_i = 2 D_i + 10 (sqrt(S + 1) + nblk + 2) eps, nblk = ceil(S / 96).
4. Output. o_ij = sum_s p_is v_sj, so |err| <= rel_i * sum_s p_is |v_sj|
   = rel_i * (A |V|)_ij, computed from the reference weights A. Weights:
   |err_ij| <= rel_i * A_ij. Plus a floor for weights the kernels flush to 0
   below exp(-87.3) (float32) instead of keeping a denormal:
   S * tiny * max|v| * 4.

NaN and inf are compared exactly: the pattern of NaN entries must equal the
reference's, inf entries must be equal. A dropped key (~ |v| / S ~ 2e-3 at
S = 513) is two orders of magnitude above this tolerance for unit-normal
data (see test_checker_rejects_* in test_attention.py).
"""
import math

import numpy as np

from cattn import reference

from . import numerics
from .numerics import result_dtype

MIN_BC = 96   # smallest kv block (float64 flash); decode chunks are 256 keys


def _gqa_repeat(x, hq, enable_gqa):
    x = np.asarray(x, dtype=np.float64)
    if enable_gqa and x.ndim >= 3 and x.shape[-3] != hq:
        x = np.repeat(x, hq // x.shape[-3], axis=-3)
    return x


def row_rel_error(q, k, A, attn_mask=None, scale=None, enable_gqa=False, dtype=None):
    """rel_i of the module docstring, shape (..., Hq, L, 1); NaN for NaN rows."""
    dtype = np.dtype(dtype or result_dtype(q, k))
    c = 2.0 if dtype == np.float64 else 1.0
    eps = float(np.finfo(dtype).eps)
    q64 = np.abs(np.asarray(q, dtype=np.float64))
    E, S = q64.shape[-1], np.shape(k)[-2]
    scale = 1.0 / math.sqrt(E) if scale is None else abs(float(scale))
    hq = q64.shape[-3] if q64.ndim >= 3 else 1
    k64 = np.abs(_gqa_repeat(k, hq, enable_gqa))
    with np.errstate(invalid="ignore", over="ignore"):
        bound = scale * np.matmul(q64, np.swapaxes(k64, -1, -2))       # >= |s_ij|
        d = 5.0 * math.sqrt(E + 1) * eps * bound
        if attn_mask is not None and np.asarray(attn_mask).dtype != np.bool_:
            m = np.abs(np.asarray(attn_mask, dtype=np.float64))
            d = d + eps * (bound + np.where(np.isfinite(m), m, 0.0))
        d = np.broadcast_to(d, A.shape)
        D = np.max(np.where(A > 0, d, 0.0), axis=-1, keepdims=True)
    nblk = -(-S // MIN_BC)
    return c * (2.0 * D + 10.0 * (math.sqrt(S + 1) + nblk + 2) * eps)


def _floor(S, vmax, dtype):
    return 4.0 * max(S, 1) * float(np.finfo(dtype).tiny) * vmax


def expected_sdpa(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
                  causal_alignment="upper_left"):
    """(reference output in float64, elementwise tolerance)."""
    kw = dict(attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa,
              causal_alignment=causal_alignment)
    ref = reference.scaled_dot_product_attention(q, k, v, **kw)
    A = reference.attention_weights(q, k, **kw)
    dtype = result_dtype(q, k, v)
    rel = row_rel_error(q, k, A, attn_mask, scale, enable_gqa, dtype)
    va = np.abs(_gqa_repeat(v, A.shape[-3] if A.ndim >= 3 else 1, enable_gqa))
    with np.errstate(invalid="ignore", over="ignore"):
        mag = np.matmul(np.nan_to_num(A), np.where(np.isfinite(va), va, 0.0))
        vmax = float(np.max(np.where(np.isfinite(va), va, 0.0), initial=0.0))
        tol = rel * mag + _floor(np.shape(k)[-2], vmax, dtype)
    return ref, tol


def expected_weights(q, k, attn_mask=None, is_causal=False, scale=None, enable_gqa=False,
                     causal_alignment="upper_left"):
    """(reference weights in float64, elementwise tolerance)."""
    A = reference.attention_weights(q, k, attn_mask=attn_mask, is_causal=is_causal,
                                    scale=scale, enable_gqa=enable_gqa,
                                    causal_alignment=causal_alignment)
    dtype = result_dtype(q, k)
    rel = row_rel_error(q, k, A, attn_mask, scale, enable_gqa, dtype)
    with np.errstate(invalid="ignore"):
        tol = rel * np.nan_to_num(A) + _floor(np.shape(k)[-2], 1.0, dtype)
    return A, tol


def assert_close(got, ref, tol, what=""):
    """numerics.assert_close where a NaN tolerance (a row whose error bound
    is NaN) accepts any value at a finite reference entry."""
    numerics.assert_close(got, ref, tol, what, nan_tol_accepts=True)


def check_sdpa(got, q, k, v, what="", **kw):
    """got == cattn.scaled_dot_product_attention(q, k, v, **kw) must match
    the reference within expected_sdpa's tolerance, with NumPy's dtype."""
    dtype = result_dtype(q, k, v)
    assert got.dtype == dtype, f"{what}: dtype {got.dtype} != {dtype}"
    ref, tol = expected_sdpa(q, k, v, **kw)
    assert_close(got, ref, tol, what or f"sdpa q{np.shape(q)} k{np.shape(k)} v{np.shape(v)} {kw}")
    return ref


def check_weights(got, q, k, what="", **kw):
    dtype = result_dtype(q, k)
    assert got.dtype == dtype, f"{what}: dtype {got.dtype} != {dtype}"
    ref, tol = expected_weights(q, k, **kw)
    assert_close(got, ref, tol, what or f"weights q{np.shape(q)} k{np.shape(k)} {kw}")
    return ref

