/* kernels/avx2/smx_rest.h — the end of a softmax row's reductions after
 * the wide blocks: the 8-wide (float) / 4-wide (double) rest and the tail
 * through a -inf padded buffer. Shared by the AVX2 row kernels (rows.c) and
 * the AVX-512 ones (kernels/avx512/rows.c), whose wide blocks hand over the
 * same accumulators: one piece of code, the same bits. Include after
 * vexp.h and simd.h. x - m <= 0 (or -inf / NaN): the one-scaling exp.
 */
#ifndef CATTN_AVX2_SMX_REST_H
#define CATTN_AVX2_SMX_REST_H

#include <math.h>
#include <string.h>

/* max of m0 and x[i..n) by 8 (then the caller's horizontal max and scalar tail) */
static inline __m256 smx_max_rest_f32(__m256 m0, const float *x, int64_t *i, int64_t n)
{
    for (; *i + 8 <= n; *i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + *i), m0);
    return m0;
}

static inline __m256d smx_max_rest_f64(__m256d m0, const double *x, int64_t *i, int64_t n)
{
    for (; *i + 4 <= n; *i += 4) m0 = _mm256_max_pd(_mm256_loadu_pd(x + *i), m0);
    return m0;
}

/* exp(x[i..n) - m) (into y when not NULL) added to the double sums d0, d1 */
static inline void smx_sumexp_rest_f32(float *y, const float *x, int64_t i, int64_t n, float m,
                                       __m256d *d0, __m256d *d1)
{
    const __m256 vm = _mm256_set1_ps(m);
    for (; i + 8 <= n; i += 8) {
        __m256 e = cattn_expneg256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        if (y) _mm256_storeu_ps(y + i, e);
        ROWS_ACC_PS_PD(e, *d0, *d1);
    }
    if (i < n) {                                                /* tail: -inf pads give 0 */
        float buf[8] __attribute__((aligned(32)));
        const int64_t r = n - i;
        for (int k = 0; k < 8; k++) buf[k] = k < r ? x[i + k] : -INFINITY;
        __m256 e = cattn_expneg256_ps(_mm256_sub_ps(_mm256_load_ps(buf), vm));
        if (y) { _mm256_store_ps(buf, e); memcpy(y + i, buf, sizeof(float) * (size_t)r); }
        ROWS_ACC_PS_PD(e, *d0, *d1);
    }
}

/* exp(x[i..n) - m) (into y when not NULL) added to the sum s0 */
static inline __m256d smx_sumexp_rest_f64(double *y, const double *x, int64_t i, int64_t n,
                                          double m, __m256d s0)
{
    const __m256d vm = _mm256_set1_pd(m);
    for (; i + 4 <= n; i += 4) {
        __m256d e = cattn_expneg256_pd(_mm256_sub_pd(_mm256_loadu_pd(x + i), vm));
        if (y) _mm256_storeu_pd(y + i, e);
        s0 = _mm256_add_pd(s0, e);
    }
    if (i < n) {                                                /* tail */
        double buf[4] __attribute__((aligned(32)));
        const int64_t r = n - i;
        for (int k = 0; k < 4; k++) buf[k] = k < r ? x[i + k] : -INFINITY;
        __m256d e = cattn_expneg256_pd(_mm256_sub_pd(_mm256_load_pd(buf), vm));
        if (y) { _mm256_store_pd(buf, e); memcpy(y + i, buf, sizeof(double) * (size_t)r); }
        s0 = _mm256_add_pd(s0, e);
    }
    return s0;
}

#endif
