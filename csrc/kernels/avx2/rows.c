/* kernels/avx2/rows.c — AVX2/FMA row kernels: softmax / log-softmax rows
 * and column blocks, layer norm and RMS norm rows (float32 and float64).
 * Compiled with -mavx2 -mfma only; cpu.c selects these at run time.
 * Not here: the threaded drivers (csrc/rows.c) and the portable kernels
 * (kernels/ref/rows_tmpl.h), whose comments state the numerics these
 * kernels share.
 *
 * x - max <= 0 (or -inf / NaN), so softmax uses the one-scaling
 * cattn_expneg256_* (bitwise equal to cattn_exp256_* there). In the masked
 * lanes of an edge column block the argument may be positive: those lanes
 * are never stored.
 *
 * Layout of each kernel (ggml style): SIMD main loop, then a // tail that
 * goes through the same vector code on a padded stack buffer (exp) or the
 * same scalar IEEE operations (max, multiply, subtract, fma), so a value's
 * result never depends on its position in the row. Reduction order is fixed
 * by n alone (4 accumulators, then a fixed horizontal order).
 */
#include <math.h>
#include <string.h>
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "kernels.h"
#include "vexp.h"
#include "simd.h"
#include "smx_rest.h"

/* ======================= softmax rows ======================= */

/* max over the row (NaN ignored: max_ps(x, acc) keeps acc when x is NaN) */
static inline float smx_max_f32(const float *x, int64_t n)
{
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
        m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    m0 = smx_max_rest_f32(m0, x, &i, n);
    float m = rows_hmax_ps(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    for (; i < n; i++) m = x[i] > m ? x[i] : m;                 /* tail */
    return m;
}

/* s = sum exp(x - m); y = exp(x - m) too when y != NULL. Each block of 32
 * (or the 8-wide rest and the tail) is summed in float (<= 4 terms a lane),
 * then widened and added in double: the row sum keeps float rounding level
 * for any n (a float running sum stops growing near 2^24 terms). */
static inline double smx_sumexp_f32(float *y, const float *x, int64_t n, float m)
{
    const __m256 vm = _mm256_set1_ps(m);
    __m256d d0 = _mm256_setzero_pd(), d1 = d0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 e0 = cattn_expneg256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        __m256 e1 = cattn_expneg256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm));
        __m256 e2 = cattn_expneg256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 16), vm));
        __m256 e3 = cattn_expneg256_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 24), vm));
        if (y) {
            _mm256_storeu_ps(y + i, e0);
            _mm256_storeu_ps(y + i + 8, e1);
            _mm256_storeu_ps(y + i + 16, e2);
            _mm256_storeu_ps(y + i + 24, e3);
        }
        const __m256 t = _mm256_add_ps(_mm256_add_ps(e0, e1), _mm256_add_ps(e2, e3));
        ROWS_ACC_PS_PD(t, d0, d1);
    }
    smx_sumexp_rest_f32(y, x, i, n, m, &d0, &d1);
    return rows_hsum_pd(_mm256_add_pd(d0, d1));
}

void cattn_softmax_row_avx2_f32(float *y, const float *x, int64_t n, int logsm)
{
    float m = smx_max_f32(x, n);
    if (m == -INFINITY) m = 0.0f;
    const int64_t n8 = n & ~(int64_t)7;
    int64_t i;
    if (!logsm) {
        const double s = smx_sumexp_f32(y, x, n, m);
        const float inv = s == 0.0 ? 0.0f : (float)(1.0 / s);
        const __m256 vinv = _mm256_set1_ps(inv);
        for (i = 0; i < n8; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), vinv));
        for (; i < n; i++) y[i] *= inv;                         /* tail */
    } else {
        const double s = smx_sumexp_f32(NULL, x, n, m);
        const float lse = s == 0.0 ? 0.0f : (float)log(s);
        const __m256 vm = _mm256_set1_ps(m), vl = _mm256_set1_ps(lse);
        for (i = 0; i < n8; i += 8)
            _mm256_storeu_ps(y + i, _mm256_sub_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vl));
        for (; i < n; i++) y[i] = (x[i] - m) - lse;            /* tail */
    }
}

static inline double smx_max_f64(const double *x, int64_t n)
{
    __m256d m0 = _mm256_set1_pd(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = _mm256_max_pd(_mm256_loadu_pd(x + i), m0);
        m1 = _mm256_max_pd(_mm256_loadu_pd(x + i + 4), m1);
        m2 = _mm256_max_pd(_mm256_loadu_pd(x + i + 8), m2);
        m3 = _mm256_max_pd(_mm256_loadu_pd(x + i + 12), m3);
    }
    m0 = smx_max_rest_f64(m0, x, &i, n);
    double m = rows_hmax_pd(_mm256_max_pd(_mm256_max_pd(m0, m1), _mm256_max_pd(m2, m3)));
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static inline double smx_sumexp_f64(double *y, const double *x, int64_t n, double m)
{
    const __m256d vm = _mm256_set1_pd(m);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256d e0 = cattn_expneg256_pd(_mm256_sub_pd(_mm256_loadu_pd(x + i), vm));
        __m256d e1 = cattn_expneg256_pd(_mm256_sub_pd(_mm256_loadu_pd(x + i + 4), vm));
        __m256d e2 = cattn_expneg256_pd(_mm256_sub_pd(_mm256_loadu_pd(x + i + 8), vm));
        __m256d e3 = cattn_expneg256_pd(_mm256_sub_pd(_mm256_loadu_pd(x + i + 12), vm));
        if (y) {
            _mm256_storeu_pd(y + i, e0);
            _mm256_storeu_pd(y + i + 4, e1);
            _mm256_storeu_pd(y + i + 8, e2);
            _mm256_storeu_pd(y + i + 12, e3);
        }
        s0 = _mm256_add_pd(s0, e0);
        s1 = _mm256_add_pd(s1, e1);
        s2 = _mm256_add_pd(s2, e2);
        s3 = _mm256_add_pd(s3, e3);
    }
    s0 = smx_sumexp_rest_f64(y, x, i, n, m, s0);
    return rows_hsum_pd(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
}

void cattn_softmax_row_avx2_f64(double *y, const double *x, int64_t n, int logsm)
{
    double m = smx_max_f64(x, n);
    if (m == -INFINITY) m = 0.0;
    const int64_t n4 = n & ~(int64_t)3;
    int64_t i;
    if (!logsm) {
        const double s = smx_sumexp_f64(y, x, n, m);
        const double inv = s == 0.0 ? 0.0 : 1.0 / s;
        const __m256d vinv = _mm256_set1_pd(inv);
        for (i = 0; i < n4; i += 4) _mm256_storeu_pd(y + i, _mm256_mul_pd(_mm256_loadu_pd(y + i), vinv));
        for (; i < n; i++) y[i] *= inv;
    } else {
        const double s = smx_sumexp_f64(NULL, x, n, m);
        const double lse = s == 0.0 ? 0.0 : log(s);
        const __m256d vm = _mm256_set1_pd(m), vl = _mm256_set1_pd(lse);
        for (i = 0; i < n4; i += 4)
            _mm256_storeu_pd(y + i, _mm256_sub_pd(_mm256_sub_pd(_mm256_loadu_pd(x + i), vm), vl));
        for (; i < n; i++) y[i] = (x[i] - m) - lse;
    }
}

/* ======================= softmax column blocks ======================= */

#define T float
#define V __m256
#define VL 8
#define VS ps
#define SFX f32
#include "softmax_cols_tmpl.h"

#define T double
#define V __m256d
#define VL 4
#define VS pd
#define SFX f64
#include "softmax_cols_tmpl.h"

/* ======================= layer norm / RMS norm rows ======================= */

/* float32 output pass: t = (x - mh) r - ml r, y = t w + b, where mh + ml
 * is the mean to ~2^-48 relative and x - mh is exact near the mean, so rows
 * with a large mean keep their small deviations (one fma adds the tiny
 * ml r term) */
static inline void ln_out_f32(float *y, const float *x, const float *w, const float *b,
                              int64_t n, double mu, double rstd)
{
    const int64_t n8 = n & ~(int64_t)7;
    const float mh = (float)mu, ml = (float)(mu - (double)mh), r = (float)rstd;
    const float mlr = -(float)((double)ml * rstd);
    const __m256 vmh = _mm256_set1_ps(mh), vmlr = _mm256_set1_ps(mlr), vr = _mm256_set1_ps(r);
    int64_t i;
    for (i = 0; i < n8; i += 8) {
        __m256 t = _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmh), vr, vmlr);
        if (w && b) t = _mm256_fmadd_ps(t, _mm256_loadu_ps(w + i), _mm256_loadu_ps(b + i));
        else if (w) t = _mm256_mul_ps(t, _mm256_loadu_ps(w + i));
        else if (b) t = _mm256_add_ps(t, _mm256_loadu_ps(b + i));
        _mm256_storeu_ps(y + i, t);
    }
    for (; i < n; i++) {                                        /* tail */
        float t = fmaf(x[i] - mh, r, mlr);
        if (w && b) t = fmaf(t, w[i], b[i]);
        else if (w) t *= w[i];
        else if (b) t += b[i];
        y[i] = t;
    }
}

/* the 8 vectors at p (64 floats) summed as a pairwise tree */
static inline __m256 ln_tree8(const __m256 *v)
{
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0], v[1]), _mm256_add_ps(v[2], v[3])),
                         _mm256_add_ps(_mm256_add_ps(v[4], v[5]), _mm256_add_ps(v[6], v[7])));
}

/* sums of d = x - m0 and of d^2 over the row: blocks of 64 floats are
 * summed in float (a pairwise tree, or two fma chains of 4 squares: <= 4u
 * of the block per lane) and the block sums added in double */
static inline void ln_shifted_sums_f32(const float *x, int64_t n, float m0,
                                       double *s1, double *s2)
{
    __m256d D0 = _mm256_setzero_pd(), D1 = D0, E0 = D0, E1 = D0;
    __m256 v[8];
    const __m256 vm = _mm256_set1_ps(m0);
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        for (int k = 0; k < 8; k++) v[k] = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8 * k), vm);
        __m256 q0 = _mm256_mul_ps(v[0], v[0]), q1 = _mm256_mul_ps(v[1], v[1]);
        q0 = _mm256_fmadd_ps(v[2], v[2], q0);
        q1 = _mm256_fmadd_ps(v[3], v[3], q1);
        q0 = _mm256_fmadd_ps(v[4], v[4], q0);
        q1 = _mm256_fmadd_ps(v[5], v[5], q1);
        q0 = _mm256_fmadd_ps(v[6], v[6], q0);
        q1 = _mm256_fmadd_ps(v[7], v[7], q1);
        __m256 t = ln_tree8(v), q = _mm256_add_ps(q0, q1);
        ROWS_ACC_PS_PD(t, D0, D1);
        ROWS_ACC_PS_PD(q, E0, E1);
    }
    __m256 fd = _mm256_setzero_ps(), fq = fd;
    for (; i + 8 <= n; i += 8) {
        __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vm);
        fd = _mm256_add_ps(fd, d);
        fq = _mm256_fmadd_ps(d, d, fq);
    }
    ROWS_ACC_PS_PD(fd, D0, D1);
    ROWS_ACC_PS_PD(fq, E0, E1);
    double a = rows_hsum_pd(_mm256_add_pd(D0, D1)), q = rows_hsum_pd(_mm256_add_pd(E0, E1));
    for (; i < n; i++) { const double d = (double)x[i] - m0; a += d; q += d * d; }
    *s1 = a;
    *s2 = q;
}

/* float32 stats, fast path: one pass of shifted sums around m0 = the mean
 * of the first 16 values, then mean = m0 + c, var = mean(d^2) - c^2 with
 * c = mean(d). That difference loses (1 + c^2/var) in relative accuracy, so
 * when c^2 > var/4 (m0 was a poor guess: an outlier among the first values)
 * the sums are taken once more around m0 + c, where c is ~0. Returns 0 when
 * a float sum overflowed (|x| ~ 1e19 and up) or met NaN / inf: the caller
 * then takes the all-double path. */
static inline int ln_stats_fast_f32(const float *x, int64_t n, double *mean, double *var)
{
    const int64_t k = n < 16 ? n : 16;
    double g = 0;
    for (int64_t i = 0; i < k; i++) g += x[i];
    float m0 = (float)(g / (double)k);
    double s1, s2, c, v2;
    for (int pass = 0; pass < 2; pass++) {
        ln_shifted_sums_f32(x, n, m0, &s1, &s2);
        if (!(fabs(s1) <= 1e300 && s2 <= 1e300)) return 0;      /* overflow, inf or NaN */
        c = s1 / (double)n;
        v2 = s2 / (double)n - c * c;
        if (pass == 0 && c * c > 0.25 * v2) {
            m0 = (float)((double)m0 + c);                        /* poor shift: again */
            continue;
        }
        break;
    }
    *mean = (double)m0 + c;
    *var = v2 > 0 ? v2 : 0;
    return 1;
}

/* float32: stats in double throughout (the fallback of the fast path) */
void cattn_layer_norm_row_avx2_f32(float *y, const float *x, const float *w,
                                   const float *b, int64_t n, double eps)
{
    double fmu, fvar;
    if (ln_stats_fast_f32(x, n, &fmu, &fvar)) {
        ln_out_f32(y, x, w, b, n, fmu, 1.0 / sqrt(fvar + eps));
        return;
    }
    const int64_t n16 = n & ~(int64_t)15, n8 = n & ~(int64_t)7;
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i < n16; i += 16) {                                  /* pass 1: mean */
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        ROWS_ACC_PS_PD(v0, a0, a1);
        ROWS_ACC_PS_PD(v1, a2, a3);
    }
    for (; i < n8; i += 8) { __m256 v = _mm256_loadu_ps(x + i); ROWS_ACC_PS_PD(v, a0, a1); }
    double sum = rows_hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    for (; i < n; i++) sum += x[i];
    const double mu = sum / (double)n;
    const __m256d vmu = _mm256_set1_pd(mu);
    a0 = a1 = a2 = a3 = _mm256_setzero_pd();
    for (i = 0; i < n8; i += 8) {                               /* pass 2: variance */
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vmu);
        __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vmu);
        a0 = _mm256_fmadd_pd(d0, d0, a0);
        a1 = _mm256_fmadd_pd(d1, d1, a1);
    }
    double ss = rows_hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; i++) { const double d = x[i] - mu; ss += d * d; }
    ln_out_f32(y, x, w, b, n, mu, 1.0 / sqrt(ss / (double)n + eps));
}

/* float64: two-pass with the correction term c = mean(x - mu) */
void cattn_layer_norm_row_avx2_f64(double *y, const double *x, const double *w,
                                   const double *b, int64_t n, double eps)
{
    const int64_t n8 = n & ~(int64_t)7, n4 = n & ~(int64_t)3;
    __m256d a0 = _mm256_setzero_pd(), a1 = a0;
    int64_t i = 0;
    for (; i < n8; i += 8) {                                    /* pass 1: mean */
        a0 = _mm256_add_pd(a0, _mm256_loadu_pd(x + i));
        a1 = _mm256_add_pd(a1, _mm256_loadu_pd(x + i + 4));
    }
    for (; i < n4; i += 4) a0 = _mm256_add_pd(a0, _mm256_loadu_pd(x + i));
    double sum = rows_hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; i++) sum += x[i];
    const double mu = sum / (double)n;
    const __m256d vmu = _mm256_set1_pd(mu);
    __m256d c0 = _mm256_setzero_pd(), c1 = c0;
    a0 = a1 = _mm256_setzero_pd();
    for (i = 0; i < n8; i += 8) {                               /* pass 2: variance */
        __m256d d0 = _mm256_sub_pd(_mm256_loadu_pd(x + i), vmu);
        __m256d d1 = _mm256_sub_pd(_mm256_loadu_pd(x + i + 4), vmu);
        c0 = _mm256_add_pd(c0, d0);
        c1 = _mm256_add_pd(c1, d1);
        a0 = _mm256_fmadd_pd(d0, d0, a0);
        a1 = _mm256_fmadd_pd(d1, d1, a1);
    }
    for (; i < n4; i += 4) {
        __m256d d = _mm256_sub_pd(_mm256_loadu_pd(x + i), vmu);
        c0 = _mm256_add_pd(c0, d);
        a0 = _mm256_fmadd_pd(d, d, a0);
    }
    double s1 = rows_hsum_pd(_mm256_add_pd(c0, c1)), ss = rows_hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; i++) { const double d = x[i] - mu; s1 += d; ss += d * d; }
    const double c = s1 / (double)n, var = (ss - s1 * c) / (double)n;
    const double rstd = 1.0 / sqrt((var > 0 ? var : 0) + eps);
    const __m256d vc = _mm256_set1_pd(c), vr = _mm256_set1_pd(rstd);
    for (i = 0; i < n4; i += 4) {                               /* pass 3: output */
        __m256d t = _mm256_mul_pd(_mm256_sub_pd(_mm256_sub_pd(_mm256_loadu_pd(x + i), vmu), vc), vr);
        if (w && b) t = _mm256_fmadd_pd(t, _mm256_loadu_pd(w + i), _mm256_loadu_pd(b + i));
        else if (w) t = _mm256_mul_pd(t, _mm256_loadu_pd(w + i));
        else if (b) t = _mm256_add_pd(t, _mm256_loadu_pd(b + i));
        _mm256_storeu_pd(y + i, t);
    }
    for (; i < n; i++) {
        double t = ((x[i] - mu) - c) * rstd;
        if (w && b) t = fma(t, w[i], b[i]);
        else if (w) t *= w[i];
        else if (b) t += b[i];
        y[i] = t;
    }
}

void cattn_rms_norm_row_avx2_f32(float *y, const float *x, const float *w, int64_t n, double eps)
{
    const int64_t n8 = n & ~(int64_t)7;
    __m256d a0 = _mm256_setzero_pd(), a1 = a0;
    int64_t i = 0;
    for (; i < n8; i += 8) {                                    /* pass 1: mean square */
        __m256 v = _mm256_loadu_ps(x + i);
        __m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        __m256d d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        a0 = _mm256_fmadd_pd(d0, d0, a0);
        a1 = _mm256_fmadd_pd(d1, d1, a1);
    }
    double ss = rows_hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; i++) ss += (double)x[i] * x[i];
    const float r = (float)(1.0 / sqrt(ss / (double)n + eps));
    const __m256 vr = _mm256_set1_ps(r);
    for (i = 0; i < n8; i += 8) {                               /* pass 2: output */
        __m256 t = _mm256_mul_ps(_mm256_loadu_ps(x + i), vr);
        if (w) t = _mm256_mul_ps(t, _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(y + i, t);
    }
    for (; i < n; i++) y[i] = w ? (x[i] * r) * w[i] : x[i] * r;
}

void cattn_rms_norm_row_avx2_f64(double *y, const double *x, const double *w, int64_t n, double eps)
{
    const int64_t n8 = n & ~(int64_t)7, n4 = n & ~(int64_t)3;
    __m256d a0 = _mm256_setzero_pd(), a1 = a0;
    int64_t i = 0;
    for (; i < n8; i += 8) {
        __m256d v0 = _mm256_loadu_pd(x + i), v1 = _mm256_loadu_pd(x + i + 4);
        a0 = _mm256_fmadd_pd(v0, v0, a0);
        a1 = _mm256_fmadd_pd(v1, v1, a1);
    }
    for (; i < n4; i += 4) { __m256d v = _mm256_loadu_pd(x + i); a0 = _mm256_fmadd_pd(v, v, a0); }
    double ss = rows_hsum_pd(_mm256_add_pd(a0, a1));
    for (; i < n; i++) ss += x[i] * x[i];
    const double r = 1.0 / sqrt(ss / (double)n + eps);
    const __m256d vr = _mm256_set1_pd(r);
    for (i = 0; i < n4; i += 4) {
        __m256d t = _mm256_mul_pd(_mm256_loadu_pd(x + i), vr);
        if (w) t = _mm256_mul_pd(t, _mm256_loadu_pd(w + i));
        _mm256_storeu_pd(y + i, t);
    }
    for (; i < n; i++) y[i] = w ? (x[i] * r) * w[i] : x[i] * r;
}
#endif
