/* kernels/avx512/vexp.h — exp for x <= 0 (the attention tiles' online
 * softmax) on 16 floats / 8 doubles: kernels/avx2/vexp.h's
 * cattn_expneg256_* lane for lane (the same operations in the same order:
 * Cody-Waite reduction, the same polynomial, one scaling), so each result
 * has the AVX2 path's bits. Semantics there: 0 below the underflow point,
 * NaN preserved; meaningless (but harmless) for x > 0.
 */
#ifndef CATTN_VEXP_AVX512_H
#define CATTN_VEXP_AVX512_H

#include <immintrin.h>
#include "../ref/vexp.h"

static inline __m512 cattn_expneg512_ps(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(CATTN_EXP_LO_F32);
    const __m512 xc = _mm512_max_ps(lo, x);            /* NaN x: x (second operand) */
    const __m512 magic = _mm512_set1_ps(12583039.0f);  /* 1.5 * 2^23 + 127 */
    const __m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), magic);
    const __m512 n = _mm512_sub_ps(t, magic);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    const __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23)));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y);   /* x < LO: 0 */
}

static inline __m512d cattn_expneg512_pd(__m512d x)
{
    const __m512d lo = _mm512_set1_pd(CATTN_EXP_LO_F64);
    const __m512d xc = _mm512_max_pd(lo, x);
    const __m512d magic = _mm512_set1_pd(6755399441056767.0);     /* 1.5 * 2^52 + 1023 */
    const __m512d t = _mm512_fmadd_pd(xc, _mm512_set1_pd(1.4426950408889634074), magic);
    const __m512d n = _mm512_sub_pd(t, magic);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(6.93145751953125e-1), xc);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(1.42860682030941723212e-6), r);
    __m512d p = _mm512_set1_pd(1.0 / 6227020800.0);
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 479001600.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 39916800.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 3628800.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 362880.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 40320.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 5040.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 720.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 120.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 24.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0 / 6.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(0.5));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
    const __m512d y = _mm512_mul_pd(p, _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(t), 52)));
    return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, lo, _CMP_NLT_UQ), y);
}

#endif
