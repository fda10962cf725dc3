/* kernels/avx2/ukr.h — THE micro-kernel (AVX2/FMA), inlined into the
 * attention tiles and exported for the GEMM driver (kernels/avx2/gemm.c).
 * Contract (dispatch.h): c[MR,NR] (=|+=) sum_p a[p*lak + i*lai] * b[p*ldb + j].
 * float32 6x16: per k step 2 loads of b (16 floats), 6 broadcasts of a from
 * six row pointers, 12 FMAs into 12 ymm accumulators (rows i, halves 0/1);
 * float64 6x8: the same shape in doubles. Packed GEMM panels (lak = 6,
 * lai = 1, ldb = NR) and strided attention operands take the same code.
 */
#ifndef CATTN_AVX2_UKR_H
#define CATTN_AVX2_UKR_H

#include <immintrin.h>
#include "../../common.h"

static inline void ukr_avx2_f32_pf(int64_t k, const float *a, int64_t lak, int64_t lai,
                                    const float *b, int64_t ldb, float *c, int64_t ldc, int acc,
                                    int64_t pf)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *a0 = a, *a1 = a + lai, *a2 = a + 2 * lai, *a3 = a + 3 * lai,
                *a4 = a + 4 * lai, *a5 = a + 5 * lai;
#pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        if (pf) _mm_prefetch((const char *)(b + pf), _MM_HINT_T0);
        const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 ai;
        ai = _mm256_broadcast_ss(a0); c00 = _mm256_fmadd_ps(ai, b0, c00); c01 = _mm256_fmadd_ps(ai, b1, c01);
        ai = _mm256_broadcast_ss(a1); c10 = _mm256_fmadd_ps(ai, b0, c10); c11 = _mm256_fmadd_ps(ai, b1, c11);
        ai = _mm256_broadcast_ss(a2); c20 = _mm256_fmadd_ps(ai, b0, c20); c21 = _mm256_fmadd_ps(ai, b1, c21);
        ai = _mm256_broadcast_ss(a3); c30 = _mm256_fmadd_ps(ai, b0, c30); c31 = _mm256_fmadd_ps(ai, b1, c31);
        ai = _mm256_broadcast_ss(a4); c40 = _mm256_fmadd_ps(ai, b0, c40); c41 = _mm256_fmadd_ps(ai, b1, c41);
        ai = _mm256_broadcast_ss(a5); c50 = _mm256_fmadd_ps(ai, b0, c50); c51 = _mm256_fmadd_ps(ai, b1, c51);
        a0 += lak; a1 += lak; a2 += lak; a3 += lak; a4 += lak; a5 += lak;
        b += ldb;
    }
#define ST(r, lo, hi)                                                              \
    do {                                                                           \
        float *cr = c + r * ldc;                                                   \
        if (acc) {                                                                 \
            lo = _mm256_add_ps(lo, _mm256_loadu_ps(cr));                           \
            hi = _mm256_add_ps(hi, _mm256_loadu_ps(cr + 8));                       \
        }                                                                          \
        _mm256_storeu_ps(cr, lo); _mm256_storeu_ps(cr + 8, hi);                    \
    } while (0)
    ST(0, c00, c01); ST(1, c10, c11); ST(2, c20, c21);
    ST(3, c30, c31); ST(4, c40, c41); ST(5, c50, c51);
#undef ST
}

static inline void ukr_avx2_f32_inl(int64_t k, const float *a, int64_t lak, int64_t lai,
                                const float *b, int64_t ldb, float *c, int64_t ldc, int acc)
{
    ukr_avx2_f32_pf(k, a, lak, lai, b, ldb, c, ldc, acc, 0);
}

static inline void ukr_avx2_f64_inl(int64_t k, const double *a, int64_t lak, int64_t lai,
                                const double *b, int64_t ldb, double *c, int64_t ldc, int acc)
{
    __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
            c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const double *a0 = a, *a1 = a + lai, *a2 = a + 2 * lai, *a3 = a + 3 * lai,
                 *a4 = a + 4 * lai, *a5 = a + 5 * lai;
#pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        const __m256d b0 = _mm256_loadu_pd(b), b1 = _mm256_loadu_pd(b + 4);
        __m256d ai;
        ai = _mm256_broadcast_sd(a0); c00 = _mm256_fmadd_pd(ai, b0, c00); c01 = _mm256_fmadd_pd(ai, b1, c01);
        ai = _mm256_broadcast_sd(a1); c10 = _mm256_fmadd_pd(ai, b0, c10); c11 = _mm256_fmadd_pd(ai, b1, c11);
        ai = _mm256_broadcast_sd(a2); c20 = _mm256_fmadd_pd(ai, b0, c20); c21 = _mm256_fmadd_pd(ai, b1, c21);
        ai = _mm256_broadcast_sd(a3); c30 = _mm256_fmadd_pd(ai, b0, c30); c31 = _mm256_fmadd_pd(ai, b1, c31);
        ai = _mm256_broadcast_sd(a4); c40 = _mm256_fmadd_pd(ai, b0, c40); c41 = _mm256_fmadd_pd(ai, b1, c41);
        ai = _mm256_broadcast_sd(a5); c50 = _mm256_fmadd_pd(ai, b0, c50); c51 = _mm256_fmadd_pd(ai, b1, c51);
        a0 += lak; a1 += lak; a2 += lak; a3 += lak; a4 += lak; a5 += lak;
        b += ldb;
    }
#define ST(r, lo, hi)                                                              \
    do {                                                                           \
        double *cr = c + r * ldc;                                                  \
        if (acc) {                                                                 \
            lo = _mm256_add_pd(lo, _mm256_loadu_pd(cr));                           \
            hi = _mm256_add_pd(hi, _mm256_loadu_pd(cr + 4));                       \
        }                                                                          \
        _mm256_storeu_pd(cr, lo); _mm256_storeu_pd(cr + 4, hi);                    \
    } while (0)
    ST(0, c00, c01); ST(1, c10, c11); ST(2, c20, c21);
    ST(3, c30, c31); ST(4, c40, c41); ST(5, c50, c51);
#undef ST
}

#endif
