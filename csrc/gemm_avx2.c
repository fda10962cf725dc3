/* gemm_avx2.c — AVX2/FMA micro-kernels. This file alone is compiled with
 * -mavx2 -mfma; it runs only after cpu.c has seen both features.
 *
 * float32 6x16: c[6,16] = alpha * a·b + beta * c
 *   per k step: 2 loads of b (16 floats), 6 broadcasts of a, 12 FMAs into
 *   12 ymm accumulators (rows i, column halves 0/1).
 * float64 6x8: the same shape in doubles (4 per ymm).
 * a: (k, 6) packed; b: (k, 16|8) packed and 64-byte aligned; c row stride ldc.
 * Also cattn_dotn_*: n dot products of one vector against matrix rows.
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
static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline double hsum_pd(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* Multi-row dot products (GEMV with a transposed matrix; attention decode):
 *   out[s] = q[0:E] · K[s*rsk : s*rsk+E]   for s < n
 * q: (E,) contiguous; K: (n, E) rows contiguous, row stride rsk. */
/* out[s] = q · K[s]: 4 keys per pass; E tail handled by scalar adds */
/* 8 horizontal sums at once: out[r] = sum of the lanes of a[r] */
static inline __m256 hsum8_ps(__m256 a0, __m256 a1, __m256 a2, __m256 a3,
                              __m256 a4, __m256 a5, __m256 a6, __m256 a7)
{
    const __m256 s0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    const __m256 s1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
    return _mm256_add_ps(_mm256_permute2f128_ps(s0, s1, 0x20), _mm256_permute2f128_ps(s0, s1, 0x31));
}

void cattn_dotn_avx2_f32(float *out, const float *q, const float *K, int64_t rsk,
                         int64_t n, int64_t E)
{
    const int64_t E8 = E & ~(int64_t)7;
    int64_t s = 0;
    for (; s + 8 <= n; s += 8) {                        /* 8 keys: 8 FMA chains */
        const float *k0 = K + s * rsk;
        __m256 a[8];
        for (int r = 0; r < 8; r++) a[r] = _mm256_setzero_ps();
        for (int64_t e = 0; e < E8; e += 8) {
            const __m256 qv = _mm256_loadu_ps(q + e);
            for (int r = 0; r < 8; r++)
                a[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + r * rsk + e), a[r]);
        }
        __m256 sums = hsum8_ps(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        if (E8 < E) {                                                    /* tail */
            float t[8];
            _mm256_storeu_ps(t, sums);
            for (int r = 0; r < 8; r++)
                for (int64_t e = E8; e < E; e++) t[r] += q[e] * k0[r * rsk + e];
            sums = _mm256_loadu_ps(t);
        }
        _mm256_storeu_ps(out + s, sums);
    }
    for (; s < n; s++) {
        const float *k0 = K + s * rsk;
        __m256 a0 = _mm256_setzero_ps();
        for (int64_t e = 0; e < E8; e += 8)
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), _mm256_loadu_ps(k0 + e), a0);
        float r0 = hsum_ps(a0);
        for (int64_t e = E8; e < E; e++) r0 += q[e] * k0[e];
        out[s] = r0;
    }
}

void cattn_dotn_avx2_f64(double *out, const double *q, const double *K, int64_t rsk,
                                     int64_t n, int64_t E)
{
    const int64_t E4 = E & ~(int64_t)3;
    int64_t s = 0;
    for (; s + 4 <= n; s += 4) {
        const double *k0 = K + s * rsk, *k1 = k0 + rsk, *k2 = k1 + rsk, *k3 = k2 + rsk;
        __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t e = 0; e < E4; e += 4) {
            const __m256d qv = _mm256_loadu_pd(q + e);
            a0 = _mm256_fmadd_pd(qv, _mm256_loadu_pd(k0 + e), a0);
            a1 = _mm256_fmadd_pd(qv, _mm256_loadu_pd(k1 + e), a1);
            a2 = _mm256_fmadd_pd(qv, _mm256_loadu_pd(k2 + e), a2);
            a3 = _mm256_fmadd_pd(qv, _mm256_loadu_pd(k3 + e), a3);
        }
        double r0 = hsum_pd(a0), r1 = hsum_pd(a1), r2 = hsum_pd(a2), r3 = hsum_pd(a3);
        for (int64_t e = E4; e < E; e++) {
            r0 += q[e] * k0[e]; r1 += q[e] * k1[e]; r2 += q[e] * k2[e]; r3 += q[e] * k3[e];
        }
        out[s] = r0; out[s + 1] = r1; out[s + 2] = r2; out[s + 3] = r3;
    }
    for (; s < n; s++) {
        const double *k0 = K + s * rsk;
        __m256d a0 = _mm256_setzero_pd();
        for (int64_t e = 0; e < E4; e += 4)
            a0 = _mm256_fmadd_pd(_mm256_loadu_pd(q + e), _mm256_loadu_pd(k0 + e), a0);
        double r0 = hsum_pd(a0);
        for (int64_t e = E4; e < E; e++) r0 += q[e] * k0[e];
        out[s] = r0;
    }
}

#endif
