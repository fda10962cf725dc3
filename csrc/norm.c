/* norm.c — layer norm and RMS norm over the last axis: the threaded
 * drivers and the portable C row kernels (AVX2 ones in rows_avx2.c).
 * Not here: fused residual + norm (the layers call these after the add).
 *
 * Numerics (every kernel): two passes over the row while it is in cache,
 * mean first, then the variance of the centered values, never
 * E[x^2] - E[x]^2 (which cancels for rows like 1e4 + noise of 1e-2).
 * float32 rows accumulate sums in double; float64 rows add the classic
 * correction of the two-pass algorithm (the mean of the centered values,
 * which is ~0 up to rounding of the first mean) to the mean and variance.
 *   layer_norm: y = (x - mean) * rstd * weight + bias, rstd = 1/sqrt(var + eps)
 *   rms_norm:   y = x * rstd * weight,                 rstd = 1/sqrt(mean(x^2) + eps)
 */
#include <math.h>
#include "kernels.h"

/* ---- portable kernels ---- */

void cattn_layer_norm_row_ref_f32(float *y, const float *x, const float *w,
                                  const float *b, int64_t n, double eps)
{
    double s = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    const double mu = s / (double)n;
    for (int64_t i = 0; i < n; i++) { const double d = x[i] - mu; ss += d * d; }
    const double rstd = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) {
        double t = ((double)x[i] - mu) * rstd;
        if (w) t *= w[i];
        if (b) t += b[i];
        y[i] = (float)t;
    }
}

void cattn_layer_norm_row_ref_f64(double *y, const double *x, const double *w,
                                  const double *b, int64_t n, double eps)
{
    double s = 0, s1 = 0, ss = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    const double mu = s / (double)n;
    for (int64_t i = 0; i < n; i++) { const double d = x[i] - mu; s1 += d; ss += d * d; }
    const double c = s1 / (double)n;                   /* correction of the mean */
    const double var = (ss - s1 * c) / (double)n;
    const double rstd = 1.0 / sqrt((var > 0 ? var : 0) + eps);
    for (int64_t i = 0; i < n; i++) {
        double t = ((x[i] - mu) - c) * rstd;
        if (w) t *= w[i];
        if (b) t += b[i];
        y[i] = t;
    }
}

void cattn_rms_norm_row_ref_f32(float *y, const float *x, const float *w, int64_t n, double eps)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    const double rstd = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = (float)(w ? x[i] * rstd * w[i] : x[i] * rstd);
}

void cattn_rms_norm_row_ref_f64(double *y, const double *x, const double *w, int64_t n, double eps)
{
    double ss = 0;
    for (int64_t i = 0; i < n; i++) ss += x[i] * x[i];
    const double rstd = 1.0 / sqrt(ss / (double)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = w ? x[i] * rstd * w[i] : x[i] * rstd;
}

/* ---- drivers: rows handed out in chunks (cattn_rows_chunk) ----
 * cattn_layer_norm_{f32,f64}: y = (x - mean) / sqrt(var + eps) * weight + bias
 * cattn_rms_norm_{f32,f64}:   y = x / sqrt(mean(x^2) + eps) * weight
 *   y: (rows, n), row r at y + r*ys, unit element stride
 *   x: (rows, n), row r at x + r*xs, unit element stride
 *   weight, bias: (n,) contiguous, or NULL
 * y may equal x exactly; no other overlap. */

#define NORM_DRIVERS(SFX, T)                                                     \
int cattn_layer_norm_##SFX(T *y, int64_t ys, const T *x, int64_t xs,             \
                           const T *weight, const T *bias,                       \
                           int64_t rows, int64_t n, double eps, int n_threads)   \
{                                                                                \
    cattn_init();                                                                \
    if (rows <= 0 || n <= 0) return CATTN_OK;                                    \
    const cattn_ln_row_##SFX##_t row = cattn_kt.layer_norm_row_##SFX;            \
    const int nt = cattn_rows_threads(rows * n, n_threads);                      \
    const int64_t rc = cattn_rows_chunk(n);                                      \
    (void)nt; (void)rc;                         /* unused without OpenMP */      \
    CATTN_OMP(omp parallel for num_threads(nt) schedule(dynamic, rc) if (nt > 1)) \
    for (int64_t r = 0; r < rows; r++) row(y + r * ys, x + r * xs, weight, bias, n, eps); \
    return CATTN_OK;                                                             \
}                                                                                \
                                                                                 \
int cattn_rms_norm_##SFX(T *y, int64_t ys, const T *x, int64_t xs,               \
                         const T *weight, int64_t rows, int64_t n, double eps,   \
                         int n_threads)                                          \
{                                                                                \
    cattn_init();                                                                \
    if (rows <= 0 || n <= 0) return CATTN_OK;                                    \
    const cattn_rms_row_##SFX##_t row = cattn_kt.rms_norm_row_##SFX;             \
    const int nt = cattn_rows_threads(rows * n, n_threads);                      \
    const int64_t rc = cattn_rows_chunk(n);                                      \
    (void)nt; (void)rc;                         /* unused without OpenMP */      \
    CATTN_OMP(omp parallel for num_threads(nt) schedule(dynamic, rc) if (nt > 1)) \
    for (int64_t r = 0; r < rows; r++) row(y + r * ys, x + r * xs, weight, n, eps); \
    return CATTN_OK;                                                             \
}

NORM_DRIVERS(f32, float)
NORM_DRIVERS(f64, double)
