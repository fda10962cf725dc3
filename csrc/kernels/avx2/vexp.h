/* kernels/avx2/vexp.h — vector exp for AVX2/FMA. Include only from this
 * folder (compiled with -mavx2 -mfma).
 *
 * exp(x) = 2^n * exp(r), n = round(x / ln2) by adding a magic constant
 * (1.5 * 2^23 or 2^52, plus the exponent bias) so that n lands in the low
 * mantissa bits, r = x - n*ln2 with ln2 split in two parts (Cody-Waite);
 * exp(r) on |r| <= ln2/2 by a polynomial (float: 1 + r + r^2 P5(r),
 * Cephes coefficients; double: Taylor to r^13). cattn_exp256_* apply 2^n
 * as two exact powers 2^(n/2) 2^(n - n/2) so the result stays normal up to
 * the overflow point; cattn_expneg256_* (for x <= 0: softmax, sigmoid,
 * GELU tails) use one. Semantics as vexp.h: 0 below the underflow point,
 * +inf above overflow, NaN preserved.
 *
 * Measured error (against exp in double / long double, round-to-nearest):
 *   cattn_exp256_ps: max 1.26 ulp over every float in [LO_F32, HI_F32]
 *     (exhaustive sweep, 2.24e9 inputs; worst at x = -71.02959); every
 *     result is 0 or normal (no denormal outputs).
 *   cattn_exp256_pd: max 0.90 ulp over 1.6e8 random inputs (uniform on
 *     [LO_F64, HI_F64] and log-uniform magnitudes 2^-50 .. 2^10).
 * tests/test_vexp.py re-checks both on a dense sweep and the special values.
 */
#ifndef CATTN_VEXP_AVX2_H
#define CATTN_VEXP_AVX2_H

#include <immintrin.h>
#include "../ref/vexp.h"

static inline __m256 cattn_pow2i_ps(__m256i n)   /* 2^n for |n| <= 127 */
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

/* exp(r) on |r| <= ln2/2 after the reduction xc = n ln2 + r; returns
 * exp(r) and t = n + 127 + 1.5 * 2^23 (the integer n, biased, in the low
 * mantissa bits: t << 23 is the bit pattern of 2^n for -126 <= n <= 127) */
static inline __m256 cattn_exp_core_ps(__m256 xc, __m256 *t)
{
    const __m256 magic = _mm256_set1_ps(12583039.0f);            /* 1.5 * 2^23 + 127 */
    *t = _mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), magic);
    const __m256 n = _mm256_sub_ps(*t, magic);                    /* round(x / ln2) */
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    return _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
}

/* exp(x) for every x. NaN passes the clamp (max / min return their second
 * operand when one is NaN) and stays NaN through the arithmetic; x above
 * the overflow point is clamped to 88.75 (709.8 for double), whose exp
 * still overflows to +inf (n = 128 / 1024: both factors 2^(n/2) are
 * normal); x below LO gives 0. */
static inline __m256 cattn_exp256_ps(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(CATTN_EXP_LO_F32);
    const __m256 xc = _mm256_min_ps(_mm256_set1_ps(88.75f), _mm256_max_ps(lo, x));
    __m256 t;
    const __m256 p = cattn_exp_core_ps(xc, &t);
    /* 2^n as 2^n1 2^(n - n1), n in [-126, 128]: both factors normal */
    const __m256i n = _mm256_sub_epi32(_mm256_castps_si256(t), _mm256_set1_epi32(0x4B40007F));
    const __m256i n1 = _mm256_srai_epi32(n, 1);
    const __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, cattn_pow2i_ps(n1)),
                                   cattn_pow2i_ps(_mm256_sub_epi32(n, n1)));
    return _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_NLT_UQ));   /* x < LO: 0 */
}

/* exp(x) for x <= 0, -inf or NaN (the softmax, sigmoid and GELU tails):
 * one scaling instead of two. Bitwise equal to cattn_exp256_ps there;
 * meaningless (but harmless) for x > 0. */
static inline __m256 cattn_expneg256_ps(__m256 x)
{
    const __m256 lo = _mm256_set1_ps(CATTN_EXP_LO_F32);
    __m256 t;
    const __m256 p = cattn_exp_core_ps(_mm256_max_ps(lo, x), &t);
    const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23)));
    return _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_NLT_UQ));
}

/* double: as cattn_exp_core_ps, t = n + 1023 + 1.5 * 2^52; exp(r) by its
 * Taylor series to r^13 (truncation < 2^-60 on |r| <= ln2/2) */
static inline __m256d cattn_exp_core_pd(__m256d xc, __m256d *t)
{
    const __m256d magic = _mm256_set1_pd(6755399441056767.0);     /* 1.5 * 2^52 + 1023 */
    *t = _mm256_fmadd_pd(xc, _mm256_set1_pd(1.4426950408889634074), magic);
    const __m256d n = _mm256_sub_pd(*t, magic);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93145751953125e-1), xc);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.42860682030941723212e-6), r);
    __m256d p = _mm256_set1_pd(1.0 / 6227020800.0);
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 479001600.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 39916800.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 3628800.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 362880.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 40320.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 5040.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 720.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 120.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 24.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 6.0));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(0.5));
    p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
    return _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
}

static inline __m256d cattn_exp256_pd(__m256d x)
{
    const __m256d lo = _mm256_set1_pd(CATTN_EXP_LO_F64);
    const __m256d xc = _mm256_min_pd(_mm256_set1_pd(709.8), _mm256_max_pd(lo, x));
    __m256d t;
    const __m256d p = cattn_exp_core_pd(xc, &t);
    /* 2^n as 2^n1 2^(n - n1), n in [-1022, 1024] */
    const __m256i n = _mm256_sub_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(0x43380000000003FFLL));
    /* n1 = floor(n / 2) without an arithmetic 64-bit shift: n + 2048 > 0 */
    const __m256i n1 = _mm256_sub_epi64(_mm256_srli_epi64(_mm256_add_epi64(n, _mm256_set1_epi64x(2048)), 1),
                                        _mm256_set1_epi64x(1024));
    const __m256i bias = _mm256_set1_epi64x(1023);
    const __m256d s1 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(n1, bias), 52));
    const __m256d s2 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(_mm256_sub_epi64(n, n1), bias), 52));
    const __m256d y = _mm256_mul_pd(_mm256_mul_pd(p, s1), s2);
    return _mm256_and_pd(y, _mm256_cmp_pd(x, lo, _CMP_NLT_UQ));
}

/* exp(x) for x <= 0, -inf or NaN: one scaling; bitwise equal to
 * cattn_exp256_pd there, meaningless for x > 0 */
static inline __m256d cattn_expneg256_pd(__m256d x)
{
    const __m256d lo = _mm256_set1_pd(CATTN_EXP_LO_F64);
    __m256d t;
    const __m256d p = cattn_exp_core_pd(_mm256_max_pd(lo, x), &t);
    const __m256d y = _mm256_mul_pd(p, _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(t), 52)));
    return _mm256_and_pd(y, _mm256_cmp_pd(x, lo, _CMP_NLT_UQ));
}

#endif
