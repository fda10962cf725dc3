"""GEMM checks (matmul, linear): compare against cattn.reference (float64)
with a tolerance derived from floating-point error analysis.

Why sqrt(K): each output element is a dot product of length K, computed with
at most K roundings (one FMA per term, in any blocked order). Higham & Mary's
probabilistic bound ("A new approach to probabilistic rounding error
analysis", SIAM J. Sci. Comput. 41(5), 2019; inner products) gives

    |got - exact| <= lam * sqrt(K) * u * sum_k |a_ik| |b_kj|,    u = eps / 2,

with probability at least about 1 - 2K exp(-lam^2 / 2) per element (model:
independent, mean-zero rounding errors). We take lam = 10 (failure odds
below 1e-17 per element for K <= 5000), i.e. 5 * sqrt(K) * eps *
(|A| @ |B|). For K < lam^2 = 100 this is implied by the deterministic bound
K * u / (1 - K u), so small K is covered without any probability argument.
A linear bias adds one rounding (K + 1 terms, |bias| joins the magnitude).

The float64 reference is itself a float64 GEMM, so for float64 results both
sides carry such an error: the tolerance doubles. For float32 results the
reference error (~1e-16 relative) is negligible.

The tolerance is tight enough to fail on real bugs: a dropped k term, a
missed K block or a misplaced element changes an entry by ~|a||b| ~ 1 while
the tolerance is ~1e-2 even at K = 1000 (see test_checker_rejects_*).
"""
import math

import numpy as np

from cattn import reference

from .numerics import assert_within, eps, result_dtype

LAM_EPS = 5.0  # lam * u with lam = 10, expressed in units of eps


def gemm_tol(a_abs_b_abs, K, dtype, extra_terms=0):
    """Elementwise tolerance for a dot-product result of length K."""
    c = LAM_EPS * (2.0 if np.dtype(dtype) == np.float64 else 1.0)
    return c * math.sqrt(max(K + extra_terms, 1)) * eps(dtype) * a_abs_b_abs


def check_matmul(got, a, b):
    """got must equal numpy.matmul(a, b) in shape and dtype and match the
    float64 reference within gemm_tol."""
    dtype = result_dtype(a, b)
    assert got.dtype == dtype, f"dtype {got.dtype} != {dtype}"
    ref = reference.matmul(a, b)
    K = np.shape(a)[-1]
    bound = reference.matmul(np.abs(np.asarray(a)), np.abs(np.asarray(b)))
    assert_within(got, ref, gemm_tol(bound, K, dtype), f"matmul {np.shape(a)} @ {np.shape(b)}")


# Largest |f'(z)| of each activation (error in z propagates by at most this)
ACT_SLOPE = {None: 1.0, "relu": 1.0, "gelu": 1.13, "gelu_tanh": 1.13, "silu": 1.1}


def check_linear(got, x, weight, bias=None, activation=None):
    """got vs reference.linear. Error budget: the GEMM + bias tolerance on the
    pre-activation z, times the activation's largest slope, plus the
    activation's own evaluation error: a few roundings of the formula
    (0.5 * z * (1 + erf(...)) and friends), each relative to |z| (the
    1 + erf cancellation makes it relative to |z|, not to the output): 8 eps |z|."""
    arrays = [x, weight] + ([bias] if bias is not None else [])
    dtype = result_dtype(*arrays)
    assert got.dtype == dtype, f"dtype {got.dtype} != {dtype}"
    z = reference.linear(x, weight, bias)
    ref = reference.linear(x, weight, bias, activation)
    K = np.shape(weight)[1]
    bound = reference.linear(np.abs(np.asarray(x)), np.abs(np.asarray(weight)),
                             None if bias is None else np.abs(np.asarray(bias)))
    tol = ACT_SLOPE[activation] * gemm_tol(bound, K, dtype, extra_terms=bias is not None)
    if activation is not None:
        tol = tol + 8 * eps(dtype) * np.abs(z)
    assert_within(got, ref, tol, f"linear x{np.shape(x)} w{np.shape(weight)} act={activation}")

