/* attention_avx2.c — the AVX2/FMA instantiation of attention_tmpl.h
 * (compiled with -mavx2 -mfma; called only when cpu.c selected AVX2).
 *
 * ukr: c[6,16|8] (=|+=) sum_p a[p*lak + i*lai] * b[p*ldb + j], 12 ymm
 *   accumulators; a is read by broadcasts from 6 row pointers, so both
 *   K rows (lak = 1) and the transposed probabilities Pt (lai = 1) work
 *   without packing; b rows (Q^T panels or V rows) by unaligned loads.
 * expsub: x = exp(x - m), l += x, 8 (4) lanes at a time.
 * dot_rows: 4 keys at once against one query row, then a horizontal sum.
 */
#include "kernels.h"

#ifdef CATTN_X86
#include "vexp_avx2.h"

static inline void ukr_avx2_f32(int64_t k, const float *a, int64_t lak, int64_t lai,
                                const float *b, int64_t ldb, float *c, int64_t ldc, int acc)
{
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    const float *a0 = a, *a1 = a + lai, *a2 = a + 2 * lai, *a3 = a + 3 * lai,
                *a4 = a + 4 * lai, *a5 = a + 5 * lai;
#pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
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

static inline void ukr_avx2_f64(int64_t k, const double *a, int64_t lak, int64_t lai,
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

static inline void expsub_avx2_f32(float *x, const float *m, float *l, int64_t n)
{
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 e = cattn_exp256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(m + i)));
        _mm256_storeu_ps(x + i, e);
        _mm256_storeu_ps(l + i, _mm256_add_ps(_mm256_loadu_ps(l + i), e));
    }
}

static inline void expsub_avx2_f64(double *x, const double *m, double *l, int64_t n)
{
    for (int64_t i = 0; i < n; i += 4) {
        const __m256d e = cattn_exp256_pd(_mm256_sub_pd(_mm256_loadu_pd(x + i), _mm256_loadu_pd(m + i)));
        _mm256_storeu_pd(x + i, e);
        _mm256_storeu_pd(l + i, _mm256_add_pd(_mm256_loadu_pd(l + i), e));
    }
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

/* out[s] = q · K[s]: 4 keys per pass; E tail handled by scalar adds */
static inline void dot_rows_avx2_f32(float *out, const float *q, const float *K, int64_t rsk,
                                     int64_t n, int64_t E)
{
    const int64_t E8 = E & ~(int64_t)7;
    int64_t s = 0;
    for (; s + 4 <= n; s += 4) {
        const float *k0 = K + s * rsk, *k1 = k0 + rsk, *k2 = k1 + rsk, *k3 = k2 + rsk;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t e = 0; e < E8; e += 8) {
            const __m256 qv = _mm256_loadu_ps(q + e);
            a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + e), a0);
            a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k1 + e), a1);
            a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k2 + e), a2);
            a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k3 + e), a3);
        }
        float r0 = hsum_ps(a0), r1 = hsum_ps(a1), r2 = hsum_ps(a2), r3 = hsum_ps(a3);
        for (int64_t e = E8; e < E; e++) {                       /* tail */
            r0 += q[e] * k0[e]; r1 += q[e] * k1[e]; r2 += q[e] * k2[e]; r3 += q[e] * k3[e];
        }
        out[s] = r0; out[s + 1] = r1; out[s + 2] = r2; out[s + 3] = r3;
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

static inline void dot_rows_avx2_f64(double *out, const double *q, const double *K, int64_t rsk,
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

static inline float exp1_avx2_f32(float x) { return cattn_exp_f32(x); }
static inline double exp1_avx2_f64(double x) { return cattn_exp_f64(x); }

#define PATH avx2
#define T float
#define SFX f32
#define MR CATTN_MR_F32
#define NR CATTN_NR_F32
#define BR CATTN_ATTN_BR_F32
#define BC CATTN_ATTN_BC_F32
#define ukr ukr_avx2_f32
#define expsub expsub_avx2_f32
#define dot_rows dot_rows_avx2_f32
#define expf1 exp1_avx2_f32
#include "attention_tmpl.h"
#undef T
#undef SFX
#undef MR
#undef NR
#undef BR
#undef BC
#undef ukr
#undef expsub
#undef dot_rows
#undef expf1

#define T double
#define SFX f64
#define MR CATTN_MR_F64
#define NR CATTN_NR_F64
#define BR CATTN_ATTN_BR_F64
#define BC CATTN_ATTN_BC_F64
#define ukr ukr_avx2_f64
#define expsub expsub_avx2_f64
#define dot_rows dot_rows_avx2_f64
#define expf1 exp1_avx2_f64
#include "attention_tmpl.h"
#endif
