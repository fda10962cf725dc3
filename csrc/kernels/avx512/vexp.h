/* kernels/avx512/vexp.h — exp on 16 floats / 8 doubles: kernels/avx2/
 * vexp.h's functions lane for lane (the same operations in the same order:
 * Cody-Waite reduction, the same polynomial, the same scalings), so each
 * result has the AVX2 path's bits; semantics and measured errors there.
 *   cattn_expneg512_*  x <= 0 (softmax, attention tiles): one scaling
 *   cattn_exp512_*     every x: two scalings (cattn.exp, the exp kernel)
 */
#ifndef CATTN_VEXP_AVX512_H
#define CATTN_VEXP_AVX512_H

#include <immintrin.h>
#include "../ref/vexp.h"

/* exp(r) and t (n biased in the low mantissa bits): cattn_exp_core_* */
static inline __m512 cattn_exp512_core_ps(__m512 xc, __m512 *t)
{
    const __m512 magic = _mm512_set1_ps(12583039.0f);  /* 1.5 * 2^23 + 127 */
    *t = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.44269504088896341f), magic);
    const __m512 n = _mm512_sub_ps(*t, magic);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    return _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
}

static inline __m512 cattn_pow2i512_ps(__m512i n)   /* 2^n for |n| <= 127 */
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n, _mm512_set1_epi32(127)), 23));
}

static inline __m512 cattn_exp512_ps(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(CATTN_EXP_LO_F32);
    const __m512 xc = _mm512_min_ps(_mm512_set1_ps(88.75f), _mm512_max_ps(lo, x));
    __m512 t;
    const __m512 p = cattn_exp512_core_ps(xc, &t);
    const __m512i n = _mm512_sub_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(0x4B40007F));
    const __m512i n1 = _mm512_srai_epi32(n, 1);
    const __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, cattn_pow2i512_ps(n1)),
                                   cattn_pow2i512_ps(_mm512_sub_epi32(n, n1)));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y);
}

static inline __m512d cattn_exp512_core_pd(__m512d xc, __m512d *t)
{
    const __m512d magic = _mm512_set1_pd(6755399441056767.0);     /* 1.5 * 2^52 + 1023 */
    *t = _mm512_fmadd_pd(xc, _mm512_set1_pd(1.4426950408889634074), magic);
    const __m512d n = _mm512_sub_pd(*t, magic);
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
    return _mm512_fmadd_pd(p, r, _mm512_set1_pd(1.0));
}

static inline __m512d cattn_exp512_pd(__m512d x)
{
    const __m512d lo = _mm512_set1_pd(CATTN_EXP_LO_F64);
    const __m512d xc = _mm512_min_pd(_mm512_set1_pd(709.8), _mm512_max_pd(lo, x));
    __m512d t;
    const __m512d p = cattn_exp512_core_pd(xc, &t);
    const __m512i n = _mm512_sub_epi64(_mm512_castpd_si512(t), _mm512_set1_epi64(0x43380000000003FFLL));
    const __m512i n1 = _mm512_sub_epi64(_mm512_srli_epi64(_mm512_add_epi64(n, _mm512_set1_epi64(2048)), 1),
                                        _mm512_set1_epi64(1024));
    const __m512i bias = _mm512_set1_epi64(1023);
    const __m512d s1 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(n1, bias), 52));
    const __m512d s2 = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(_mm512_sub_epi64(n, n1), bias), 52));
    const __m512d y = _mm512_mul_pd(_mm512_mul_pd(p, s1), s2);
    return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, lo, _CMP_NLT_UQ), y);
}

/* x <= 0: one scaling (0 below the underflow point, NaN preserved;
 * meaningless but harmless for x > 0) */
static inline __m512 cattn_expneg512_ps(__m512 x)
{
    const __m512 lo = _mm512_set1_ps(CATTN_EXP_LO_F32);
    __m512 t;
    const __m512 p = cattn_exp512_core_ps(_mm512_max_ps(lo, x), &t);  /* NaN x: x */
    const __m512 y = _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23)));
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_NLT_UQ), y);   /* x < LO: 0 */
}

static inline __m512d cattn_expneg512_pd(__m512d x)
{
    const __m512d lo = _mm512_set1_pd(CATTN_EXP_LO_F64);
    __m512d t;
    const __m512d p = cattn_exp512_core_pd(_mm512_max_pd(lo, x), &t);
    const __m512d y = _mm512_mul_pd(p, _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(t), 52)));
    return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, lo, _CMP_NLT_UQ), y);
}

#endif
