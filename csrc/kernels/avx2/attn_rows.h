/* kernels/avx2/attn_rows.h — the AVX2/FMA row helpers of the attention
 * tiles (kernels/attention_tiles_tmpl.h): expsub, expsum, pv_rows, expf1
 * (contracts in attention.c's header comment). Included by attention.c
 * here and by the AVX-512 instantiation, which reuses the decode helpers
 * as they are (the same bits on both paths).
 */
#ifndef CATTN_AVX2_ATTN_ROWS_H
#define CATTN_AVX2_ATTN_ROWS_H

#include <immintrin.h>
#include "vexp.h"
#include "simd.h"

static inline void expsub_avx2_f32(float *x, const float *m, float *l, int64_t n)
{
    for (int64_t i = 0; i < n; i += 8) {
        const __m256 e = cattn_expneg256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(m + i)));
        _mm256_storeu_ps(x + i, e);
        _mm256_storeu_ps(l + i, _mm256_add_ps(_mm256_loadu_ps(l + i), e));
    }
}

static inline void expsub_avx2_f64(double *x, const double *m, double *l, int64_t n)
{
    for (int64_t i = 0; i < n; i += 4) {
        const __m256d e = cattn_expneg256_pd(_mm256_sub_pd(_mm256_loadu_pd(x + i), _mm256_loadu_pd(m + i)));
        _mm256_storeu_pd(x + i, e);
        _mm256_storeu_pd(l + i, _mm256_add_pd(_mm256_loadu_pd(l + i), e));
    }
}

/* x[s] = exp(x[s] - m); returns the sum: 8 lanes then a fixed-order tail */
static inline float expsum_avx2_f32(float *x, float m, int64_t n)
{
    const __m256 vm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int64_t s = 0;
    for (; s + 8 <= n; s += 8) {
        const __m256 e = cattn_expneg256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + s), vm));
        _mm256_storeu_ps(x + s, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = hsum_ps(acc);
    for (; s < n; s++) { x[s] = cattn_exp_f32(x[s] - m); sum += x[s]; }   /* tail */
    return sum;
}

static inline double expsum_avx2_f64(double *x, double m, int64_t n)
{
    const __m256d vm = _mm256_set1_pd(m);
    __m256d acc = _mm256_setzero_pd();
    int64_t s = 0;
    for (; s + 4 <= n; s += 4) {
        const __m256d e = cattn_expneg256_pd(_mm256_sub_pd(_mm256_loadu_pd(x + s), vm));
        _mm256_storeu_pd(x + s, e);
        acc = _mm256_add_pd(acc, e);
    }
    double sum = hsum_pd(acc);
    for (; s < n; s++) { x[s] = cattn_exp_f64(x[s] - m); sum += x[s]; }
    return sum;
}

/* o[j] = sum_{p[s] != 0} p[s] V[s][j]: kv_rows_tmpl.h's loop on float32 rows
 * (64 columns in 8 ymm registers per pass over the keys; its float16 copy:
 * attn_rows_h.h) */
#define KV_T float
#define KV_LOAD8(p) _mm256_loadu_ps(p)
#define KV_LOAD1(x) (x)
#define KV_PV pv_rows_avx2_f32
#include "kv_rows_tmpl.h"

/* the same for double: 32 columns in 8 ymm registers per pass */
static inline void pv_rows_avx2_f64(double *o, const double *p, const double *V, int64_t rsv,
                                    int64_t n, int64_t Ev)
{
    int64_t j = 0;
    for (; j + 32 <= Ev; j += 32) {
        __m256d a[8];
        for (int t = 0; t < 8; t++) a[t] = _mm256_setzero_pd();
        for (int64_t s = 0; s < n; s++) {
            if (p[s] == 0.0) continue;
            const __m256d ps = _mm256_broadcast_sd(p + s);
            const double *vs = V + s * rsv + j;
            for (int t = 0; t < 8; t++) a[t] = _mm256_fmadd_pd(ps, _mm256_loadu_pd(vs + 4 * t), a[t]);
        }
        for (int t = 0; t < 8; t++) _mm256_storeu_pd(o + j + 4 * t, a[t]);
    }
    for (; j + 4 <= Ev; j += 4) {
        __m256d a = _mm256_setzero_pd();
        for (int64_t s = 0; s < n; s++)
            if (p[s] != 0.0) a = _mm256_fmadd_pd(_mm256_broadcast_sd(p + s), _mm256_loadu_pd(V + s * rsv + j), a);
        _mm256_storeu_pd(o + j, a);
    }
    for (; j < Ev; j++) {
        double a = 0;
        for (int64_t s = 0; s < n; s++) if (p[s] != 0.0) a += p[s] * V[s * rsv + j];
        o[j] = a;
    }
}

static inline float exp1_avx2_f32(float x) { return cattn_exp_f32(x); }
static inline double exp1_avx2_f64(double x) { return cattn_exp_f64(x); }

#endif
