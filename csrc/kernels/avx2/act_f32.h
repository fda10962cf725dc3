/* kernels/avx2/act_f32.h — the float32 activations one vector at a time
 * (AVX2/FMA), shared by the activation kernels (act.c) and the int8
 * micro-kernel's epilogue (qgemm.c), so that an activation fused into a
 * GEMM gives each element the bits of cattn.gelu / silu / relu.
 * gelu, gelu_tanh and silu of float32 inputs run in double lanes (act.c's
 * header states the formulas and the accuracy).
 */
#ifndef CATTN_AVX2_ACT_F32_H
#define CATTN_AVX2_ACT_F32_H

#include <immintrin.h>
#include "../../common.h"
#include "vexp.h"

/* a constant vector read from memory (4 equal doubles, 32-byte aligned), so
 * that it folds into the FMA as a memory operand instead of a broadcast the
 * compiler would hoist and spill: the hot loops stay free of spills */
#define ACT_K(v) ({ static const double k_[4] __attribute__((aligned(32))) = {v, v, v, v}; \
                    _mm256_load_pd(k_); })

static inline __m256d act_abs_pd(__m256d x)
{
    return _mm256_andnot_pd(_mm256_set1_pd(-0.0), x);
}

/* float32 data through double lanes: gelu, gelu_tanh and silu of float32
 * inputs are computed in double (x^2 is then exact) and rounded once, so
 * they are within 0.5 ulp + ~1e-9 relative of the exact value. Double is
 * far more than these need: the polynomials are cut to ~1e-10 relative and
 * evaluated by Estrin's scheme (short dependency chains). */

/* exp(x) for x <= 0 to ~1e-11 relative: the reduction of cattn_exp_core_pd,
 * then Taylor to r^9 (remainder < 1e-11 on |r| <= ln2/2) */
static inline __m256d act_expneg9_pd(__m256d x)
{
    const __m256d lo = ACT_K(CATTN_EXP_LO_F64);
    const __m256d magic = ACT_K(6755399441056767.0);     /* 1.5 * 2^52 + 1023 */
    const __m256d xc = _mm256_max_pd(lo, x);
    const __m256d t = _mm256_fmadd_pd(xc, ACT_K(1.4426950408889634074), magic);
    const __m256d n = _mm256_sub_pd(t, magic);
    __m256d r = _mm256_fnmadd_pd(n, ACT_K(6.93145751953125e-1), xc);
    r = _mm256_fnmadd_pd(n, ACT_K(1.42860682030941723212e-6), r);
    const __m256d r2 = _mm256_mul_pd(r, r), r4 = _mm256_mul_pd(r2, r2);
    const __m256d p01 = _mm256_add_pd(ACT_K(1.0), r);
    const __m256d p23 = _mm256_fmadd_pd(ACT_K(1.0 / 6), r, ACT_K(0.5));
    const __m256d p45 = _mm256_fmadd_pd(ACT_K(1.0 / 120), r, ACT_K(1.0 / 24));
    const __m256d p67 = _mm256_fmadd_pd(ACT_K(1.0 / 5040), r, ACT_K(1.0 / 720));
    const __m256d p89 = _mm256_fmadd_pd(ACT_K(1.0 / 362880), r, ACT_K(1.0 / 40320));
    const __m256d q0 = _mm256_fmadd_pd(p23, r2, p01), q1 = _mm256_fmadd_pd(p67, r2, p45);
    __m256d p = _mm256_fmadd_pd(q1, r4, q0);
    p = _mm256_fmadd_pd(p89, _mm256_mul_pd(r4, r4), p);
    const __m256d y = _mm256_mul_pd(p, _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(t), 52)));
    return _mm256_and_pd(y, _mm256_cmp_pd(x, lo, _CMP_NLT_UQ));
}

/* erfcx(a) = exp(a^2) erfc(a) = P(t), t = (a - 3)/(a + 3): degree 12 on
 * a in [0, 10.3], fit error 1.5e-11 absolute, 2.8e-10 relative; a_0 .. a_12.
 * (erfcx is smooth in t up to t = 1: it falls like 1/(a sqrt pi).) */
static const double act_gelu_p32[13][4] __attribute__((aligned(32))) = {
    {0x1.6e9827d1f0e4ep-3, 0x1.6e9827d1f0e4ep-3, 0x1.6e9827d1f0e4ep-3, 0x1.6e9827d1f0e4ep-3},
    {-0x1.4e102b9f32ea8p-2, -0x1.4e102b9f32ea8p-2, -0x1.4e102b9f32ea8p-2, -0x1.4e102b9f32ea8p-2},
    {0x1.f6ff2065e3b3ap-3, 0x1.f6ff2065e3b3ap-3, 0x1.f6ff2065e3b3ap-3, 0x1.f6ff2065e3b3ap-3},
    {-0x1.336ffb0df3987p-3, -0x1.336ffb0df3987p-3, -0x1.336ffb0df3987p-3, -0x1.336ffb0df3987p-3},
    {0x1.258b0ca1d067cp-4, 0x1.258b0ca1d067cp-4, 0x1.258b0ca1d067cp-4, 0x1.258b0ca1d067cp-4},
    {-0x1.8fa5fd8da5915p-6, -0x1.8fa5fd8da5915p-6, -0x1.8fa5fd8da5915p-6, -0x1.8fa5fd8da5915p-6},
    {0x1.17cbcaebfec48p-8, 0x1.17cbcaebfec48p-8, 0x1.17cbcaebfec48p-8, 0x1.17cbcaebfec48p-8},
    {0x1.73737c24c7cddp-11, 0x1.73737c24c7cddp-11, 0x1.73737c24c7cddp-11, 0x1.73737c24c7cddp-11},
    {-0x1.395c37cc03e77p-11, -0x1.395c37cc03e77p-11, -0x1.395c37cc03e77p-11, -0x1.395c37cc03e77p-11},
    {0x1.65caf5bd922aep-15, 0x1.65caf5bd922aep-15, 0x1.65caf5bd922aep-15, 0x1.65caf5bd922aep-15},
    {0x1.0d7427b3b05fbp-14, 0x1.0d7427b3b05fbp-14, 0x1.0d7427b3b05fbp-14, 0x1.0d7427b3b05fbp-14},
    {-0x1.25074c52a9953p-17, -0x1.25074c52a9953p-17, -0x1.25074c52a9953p-17, -0x1.25074c52a9953p-17},
    {-0x1.aa8ec6629004bp-18, -0x1.aa8ec6629004bp-18, -0x1.aa8ec6629004bp-18, -0x1.aa8ec6629004bp-18},
};

/* exp(-a2) for a2 in [0, 106] (the GELU tail; no clamp, nothing underflows
 * there) to ~1e-11 relative: as act_expneg9_pd, Horner form */
static inline __m256d act_expm9_pd(__m256d a2)
{
    const __m256d magic = ACT_K(6755399441056767.0);             /* 1.5 * 2^52 + 1023 */
    const __m256d t = _mm256_fnmadd_pd(a2, ACT_K(1.4426950408889634074), magic);
    const __m256d n = _mm256_sub_pd(t, magic);
    __m256d r = _mm256_fnmsub_pd(n, ACT_K(6.93145751953125e-1), a2);      /* -a2 - n c1 */
    r = _mm256_fnmadd_pd(n, ACT_K(1.42860682030941723212e-6), r);
    __m256d p = _mm256_fmadd_pd(ACT_K(1.0 / 362880), r, ACT_K(1.0 / 40320));
    p = _mm256_fmadd_pd(p, r, ACT_K(1.0 / 5040));
    p = _mm256_fmadd_pd(p, r, ACT_K(1.0 / 720));
    p = _mm256_fmadd_pd(p, r, ACT_K(1.0 / 120));
    p = _mm256_fmadd_pd(p, r, ACT_K(1.0 / 24));
    p = _mm256_fmadd_pd(p, r, ACT_K(1.0 / 6));
    p = _mm256_fmadd_pd(p, r, ACT_K(0.5));
    p = _mm256_fmadd_pd(p, r, ACT_K(1.0));
    p = _mm256_fmadd_pd(p, r, ACT_K(1.0));
    return _mm256_mul_pd(p, _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(t), 52)));
}

static inline __m256d act_gelu_f32_full_pd(__m256d x)   /* x: a float32 value */
{
    const __m256d K = ACT_K(3.0), lim = ACT_K(14.5);
    const __m256d xc = _mm256_min_pd(lim, _mm256_max_pd(ACT_K(-14.5), x));
    const __m256d a = _mm256_mul_pd(act_abs_pd(xc), ACT_K(0.70710678118654752440));
    const __m256d t = _mm256_div_pd(_mm256_sub_pd(a, K), _mm256_add_pd(a, K));
    __m256d p = _mm256_fmadd_pd(_mm256_load_pd(act_gelu_p32[12]), t, _mm256_load_pd(act_gelu_p32[11]));
    for (int k = 10; k >= 0; k--) p = _mm256_fmadd_pd(p, t, _mm256_load_pd(act_gelu_p32[k]));
    /* c = x/2 erfcx(a) exp(-a^2); a^2 = x^2/2 up to 2^-52 relative (harmless) */
    const __m256d cc = _mm256_mul_pd(_mm256_mul_pd(_mm256_mul_pd(ACT_K(0.5), xc), p),
                                     act_expm9_pd(_mm256_mul_pd(a, a)));
    return _mm256_blendv_pd(_mm256_sub_pd(x, cc), cc, x);      /* sign bit of x: c (-0 -> -0) */
}

/* |x| <= 3 (most activations): gelu(x) = x Phi(x) = x (1/2 + x g(x^2)),
 * g(v) = erf(sqrt(v/2)) / (2 sqrt(2 v)) a polynomial of degree 14 on
 * v in [0, 9] (fitted to mpmath, 8.7e-14 relative evaluated in double); no
 * division, no exp. For x < 0 the sum 1/2 + x g cancels down to Phi(-3) =
 * 0.00135: the error grows by at most 370x, to ~3e-11 relative (the budget
 * is ~1e-9, 0.015 ulp of float32). x^2 is exact (x is a float). */
static const double act_gelu_c32[15][4] __attribute__((aligned(32))) = {
    {0x1.9884533d4352ap-2, 0x1.9884533d4352ap-2, 0x1.9884533d4352ap-2, 0x1.9884533d4352ap-2},
    {-0x1.1058377e1e817p-4, -0x1.1058377e1e817p-4, -0x1.1058377e1e817p-4, -0x1.1058377e1e817p-4},
    {0x1.46d04293a5198p-7, 0x1.46d04293a5198p-7, 0x1.46d04293a5198p-7, 0x1.46d04293a5198p-7},
    {-0x1.37403f07ec332p-10, -0x1.37403f07ec332p-10, -0x1.37403f07ec332p-10, -0x1.37403f07ec332p-10},
    {0x1.e42b027d1bc2dp-14, 0x1.e42b027d1bc2dp-14, 0x1.e42b027d1bc2dp-14, 0x1.e42b027d1bc2dp-14},
    {-0x1.3ce89fc544a5ap-17, -0x1.3ce89fc544a5ap-17, -0x1.3ce89fc544a5ap-17, -0x1.3ce89fc544a5ap-17},
    {0x1.65863826cc055p-21, 0x1.65863826cc055p-21, 0x1.65863826cc055p-21, 0x1.65863826cc055p-21},
    {-0x1.6204c148588edp-25, -0x1.6204c148588edp-25, -0x1.6204c148588edp-25, -0x1.6204c148588edp-25},
    {0x1.37d8ba56d2a02p-29, 0x1.37d8ba56d2a02p-29, 0x1.37d8ba56d2a02p-29, 0x1.37d8ba56d2a02p-29},
    {-0x1.ec24723f59d5bp-34, -0x1.ec24723f59d5bp-34, -0x1.ec24723f59d5bp-34, -0x1.ec24723f59d5bp-34},
    {0x1.59c40b141c09bp-38, 0x1.59c40b141c09bp-38, 0x1.59c40b141c09bp-38, 0x1.59c40b141c09bp-38},
    {-0x1.a321c2daa844cp-43, -0x1.a321c2daa844cp-43, -0x1.a321c2daa844cp-43, -0x1.a321c2daa844cp-43},
    {0x1.97253f5ef449ap-48, 0x1.97253f5ef449ap-48, 0x1.97253f5ef449ap-48, 0x1.97253f5ef449ap-48},
    {-0x1.12f953757a521p-53, -0x1.12f953757a521p-53, -0x1.12f953757a521p-53, -0x1.12f953757a521p-53},
    {0x1.7839eb1f4eb93p-60, 0x1.7839eb1f4eb93p-60, 0x1.7839eb1f4eb93p-60, 0x1.7839eb1f4eb93p-60},
};

/* the polynomial form on 4 lanes; *out: a lane mask of |x| > 3 or NaN,
 * where the erfcx form must be used instead */
static inline __m256d act_gelu_f32_poly_pd(__m256d x, int *out)
{
#define GC(k) _mm256_load_pd(act_gelu_c32[k])
    const __m256d v = _mm256_mul_pd(x, x);
    const __m256d v2 = _mm256_mul_pd(v, v), v4 = _mm256_mul_pd(v2, v2);
    const __m256d v8 = _mm256_mul_pd(v4, v4);
    /* Estrin: pairs, then v^2, v^4, v^8 */
    const __m256d e0 = _mm256_fmadd_pd(GC(1), v, GC(0)), e2 = _mm256_fmadd_pd(GC(3), v, GC(2));
    const __m256d e4 = _mm256_fmadd_pd(GC(5), v, GC(4)), e6 = _mm256_fmadd_pd(GC(7), v, GC(6));
    const __m256d e8 = _mm256_fmadd_pd(GC(9), v, GC(8)), e10 = _mm256_fmadd_pd(GC(11), v, GC(10));
    const __m256d e12 = _mm256_fmadd_pd(GC(13), v, GC(12));
    const __m256d f0 = _mm256_fmadd_pd(e2, v2, e0), f4 = _mm256_fmadd_pd(e6, v2, e4);
    const __m256d f8 = _mm256_fmadd_pd(e10, v2, e8);
    const __m256d f12 = _mm256_fmadd_pd(GC(14), v2, e12);
    const __m256d h0 = _mm256_fmadd_pd(f4, v4, f0), h8 = _mm256_fmadd_pd(f12, v4, f8);
    const __m256d g = _mm256_fmadd_pd(h8, v8, h0);
#undef GC
    *out = _mm256_movemask_pd(_mm256_cmp_pd(v, ACT_K(9.0), _CMP_NLE_UQ));
    return _mm256_mul_pd(x, _mm256_fmadd_pd(x, g, ACT_K(0.5)));   /* x (1/2 + x g): -0 -> -0 */
}

static inline __m256d act_xsigmoid_f32_pd(__m256d xn, __m256d z)
{
    const __m256d one = ACT_K(1.0);
    __m256d e = act_expneg9_pd(_mm256_sub_pd(_mm256_setzero_pd(), act_abs_pd(z)));
    __m256d num = _mm256_blendv_pd(one, e, _mm256_cmp_pd(z, _mm256_setzero_pd(), _CMP_LT_OQ));
    return _mm256_div_pd(_mm256_mul_pd(xn, num), _mm256_add_pd(one, e));
}

static inline __m256d act_silu_f32_pd(__m256d x)
{
    return act_xsigmoid_f32_pd(_mm256_max_pd(ACT_K(-200.0), x), x);
}

static inline __m256d act_gelu_tanh_f32_pd(__m256d x)
{
    const __m256d xn = _mm256_max_pd(ACT_K(-30.0), x);
    const __m256d z = _mm256_mul_pd(xn, _mm256_fmadd_pd(ACT_K(0.07135481627260025),
                                                        _mm256_mul_pd(xn, xn),
                                                        ACT_K(1.5957691216057308)));
    return act_xsigmoid_f32_pd(xn, z);
}

static inline __m256 act_relu_ps(__m256 x)
{
    return _mm256_max_ps(_mm256_setzero_ps(), x);   /* NaN in x: max returns x */
}

/* act(v) for 8 floats, each element as the array kernel computes it
 * (cattn_act_avx2_f32): the double-lane forms on each half; gelu takes the
 * polynomial form where |x| <= 3 and the erfcx form elsewhere, lane by lane */
static inline __m256d act_gelu_f32_lanes_pd(__m256d x)
{
    const __m256d m = _mm256_cmp_pd(_mm256_mul_pd(x, x), ACT_K(9.0), _CMP_NLE_UQ);
    const int out = _mm256_movemask_pd(m);
    if (out == 0xF) return act_gelu_f32_full_pd(x);          /* all four |x| > 3 */
    int unused;
    const __m256d r = act_gelu_f32_poly_pd(x, &unused);
    return out ? _mm256_blendv_pd(r, act_gelu_f32_full_pd(x), m) : r;
}

/* F on both halves of 8 floats through double lanes */
#define ACT_F32_VIA_PD(F, v)                                                         \
    _mm256_insertf128_ps(                                                            \
        _mm256_castps128_ps256(_mm256_cvtpd_ps(F(_mm256_cvtps_pd(_mm256_castps256_ps128(v))))), \
        _mm256_cvtpd_ps(F(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)))), 1)

/* v[0..n) = act(v[0..n)), 8 floats each; one switch for the whole tile */
static inline __attribute__((always_inline)) void act_f32_tile(__m256 *v, int n, int act)
{
    switch (act) {
    case CATTN_ACT_RELU:
        for (int i = 0; i < n; i++) v[i] = act_relu_ps(v[i]);
        break;
    case CATTN_ACT_GELU:
        for (int i = 0; i < n; i++) v[i] = ACT_F32_VIA_PD(act_gelu_f32_lanes_pd, v[i]);
        break;
    case CATTN_ACT_GELU_TANH:
        for (int i = 0; i < n; i++) v[i] = ACT_F32_VIA_PD(act_gelu_tanh_f32_pd, v[i]);
        break;
    case CATTN_ACT_SILU:
        for (int i = 0; i < n; i++) v[i] = ACT_F32_VIA_PD(act_silu_f32_pd, v[i]);
        break;
    default:
        break;
    }
}

#endif
