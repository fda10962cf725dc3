/* gemm_avx2.c — AVX2/FMA micro-kernels. This file alone is compiled with
 * -mavx2 -mfma; it runs only after cpu.c has seen both features.
 *
 * float32 6x16: c[6,16] = alpha * a·b + beta * c
 *   per k step: 2 loads of b (16 floats), 6 broadcasts of a, 12 FMAs into
 *   12 ymm accumulators (rows i, column halves 0/1).
 * float64 6x8: the same shape in doubles (4 per ymm).
 * a: (k, 6) packed; b: (k, 16|8) packed and 64-byte aligned; c row stride ldc.
 */
#include "kernels.h"

#ifdef CATTN_X86
#include <immintrin.h>

#define ROW_STORE_PS(ci, lo, hi)                                                 \
    do {                                                                         \
        __m256 l = _mm256_mul_ps(va, lo), h = _mm256_mul_ps(va, hi);             \
        if (beta != 0.0f) {                                                      \
            l = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), l);                     \
            h = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), h);                 \
        }                                                                        \
        _mm256_storeu_ps(ci, l); _mm256_storeu_ps(ci + 8, h);                    \
    } while (0)

void cattn_ukr_avx2_f32(int64_t k, const float *CATTN_RESTRICT a,
                        const float *CATTN_RESTRICT b, float *CATTN_RESTRICT c,
                        int64_t ldc, float alpha, float beta)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00,
           c20 = c00, c21 = c00, c30 = c00, c31 = c00,
           c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int r = 0; r < 6; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
        __m256 ai;
        ai = _mm256_broadcast_ss(a + 0);
        c00 = _mm256_fmadd_ps(ai, b0, c00); c01 = _mm256_fmadd_ps(ai, b1, c01);
        ai = _mm256_broadcast_ss(a + 1);
        c10 = _mm256_fmadd_ps(ai, b0, c10); c11 = _mm256_fmadd_ps(ai, b1, c11);
        ai = _mm256_broadcast_ss(a + 2);
        c20 = _mm256_fmadd_ps(ai, b0, c20); c21 = _mm256_fmadd_ps(ai, b1, c21);
        ai = _mm256_broadcast_ss(a + 3);
        c30 = _mm256_fmadd_ps(ai, b0, c30); c31 = _mm256_fmadd_ps(ai, b1, c31);
        ai = _mm256_broadcast_ss(a + 4);
        c40 = _mm256_fmadd_ps(ai, b0, c40); c41 = _mm256_fmadd_ps(ai, b1, c41);
        ai = _mm256_broadcast_ss(a + 5);
        c50 = _mm256_fmadd_ps(ai, b0, c50); c51 = _mm256_fmadd_ps(ai, b1, c51);
        a += 6; b += 16;
    }
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    ROW_STORE_PS(c + 0 * ldc, c00, c01);
    ROW_STORE_PS(c + 1 * ldc, c10, c11);
    ROW_STORE_PS(c + 2 * ldc, c20, c21);
    ROW_STORE_PS(c + 3 * ldc, c30, c31);
    ROW_STORE_PS(c + 4 * ldc, c40, c41);
    ROW_STORE_PS(c + 5 * ldc, c50, c51);
}

#define ROW_STORE_PD(ci, lo, hi)                                                 \
    do {                                                                         \
        __m256d l = _mm256_mul_pd(va, lo), h = _mm256_mul_pd(va, hi);            \
        if (beta != 0.0) {                                                       \
            l = _mm256_fmadd_pd(vb, _mm256_loadu_pd(ci), l);                     \
            h = _mm256_fmadd_pd(vb, _mm256_loadu_pd(ci + 4), h);                 \
        }                                                                        \
        _mm256_storeu_pd(ci, l); _mm256_storeu_pd(ci + 4, h);                    \
    } while (0)

void cattn_ukr_avx2_f64(int64_t k, const double *CATTN_RESTRICT a,
                        const double *CATTN_RESTRICT b, double *CATTN_RESTRICT c,
                        int64_t ldc, double alpha, double beta)
{
    __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00,
            c20 = c00, c21 = c00, c30 = c00, c31 = c00,
            c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    for (int r = 0; r < 6; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
#pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        const __m256d b0 = _mm256_load_pd(b), b1 = _mm256_load_pd(b + 4);
        __m256d ai;
        ai = _mm256_broadcast_sd(a + 0);
        c00 = _mm256_fmadd_pd(ai, b0, c00); c01 = _mm256_fmadd_pd(ai, b1, c01);
        ai = _mm256_broadcast_sd(a + 1);
        c10 = _mm256_fmadd_pd(ai, b0, c10); c11 = _mm256_fmadd_pd(ai, b1, c11);
        ai = _mm256_broadcast_sd(a + 2);
        c20 = _mm256_fmadd_pd(ai, b0, c20); c21 = _mm256_fmadd_pd(ai, b1, c21);
        ai = _mm256_broadcast_sd(a + 3);
        c30 = _mm256_fmadd_pd(ai, b0, c30); c31 = _mm256_fmadd_pd(ai, b1, c31);
        ai = _mm256_broadcast_sd(a + 4);
        c40 = _mm256_fmadd_pd(ai, b0, c40); c41 = _mm256_fmadd_pd(ai, b1, c41);
        ai = _mm256_broadcast_sd(a + 5);
        c50 = _mm256_fmadd_pd(ai, b0, c50); c51 = _mm256_fmadd_pd(ai, b1, c51);
        a += 6; b += 8;
    }
    const __m256d va = _mm256_set1_pd(alpha), vb = _mm256_set1_pd(beta);
    ROW_STORE_PD(c + 0 * ldc, c00, c01);
    ROW_STORE_PD(c + 1 * ldc, c10, c11);
    ROW_STORE_PD(c + 2 * ldc, c20, c21);
    ROW_STORE_PD(c + 3 * ldc, c30, c31);
    ROW_STORE_PD(c + 4 * ldc, c40, c41);
    ROW_STORE_PD(c + 5 * ldc, c50, c51);
}
#endif
