/* act.c — elementwise activations: the threaded driver, the GEMM epilogue
 * entry (cattn_act_row_*), the exp test hook, and the portable C kernels
 * (the AVX2 ones are in act_avx2.c). Not here: bias (the GEMM adds it).
 *
 *   relu(x)      = max(x, 0)                  (NaN stays NaN, -0 stays -0)
 *   gelu(x)      = x Phi(x) = x/2 erfc(-x/sqrt 2)
 *   gelu_tanh(x) = x/2 (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi)(x + 0.044715 x^3)
 *   silu(x)      = x sigmoid(x)
 * Every form avoids the cancellation of 1 + erf / 1 + tanh for x < 0 (the
 * tails stay accurate relative to the tiny result), and the limits are
 * returned at infinities: gelu/gelu_tanh/silu(-inf) = -0, (+inf) = +inf.
 * sigmoid(z) is computed as (z >= 0 ? 1 : e) / (1 + e), e = exp(-|z|): no
 * overflow. The portable float32 kernels compute in double with libm.
 */
#include <math.h>
#include <string.h>
#include "kernels.h"
#include "vexp.h"

/* ---- portable kernels (double arithmetic, libm) ---- */

static inline double act_sigmoid(double z)
{
    const double e = exp(-fabs(z));
    return (z >= 0 ? 1.0 : e) / (1.0 + e);
}

static inline double act_gelu(double x)
{
    if (x < -40.0) return -0.0;             /* Phi(-40) ~ 4e-350: underflows */
    return 0.5 * x * erfc(-x * 0.70710678118654752440);
}

static inline double act_gelu_tanh(double x)
{
    const double xn = x < -30.0 ? -30.0 : x;   /* the result is -0 below */
    const double z = xn * (1.5957691216057308 + 0.07135481627260025 * xn * xn);   /* 2u */
    return xn * act_sigmoid(z);
}

static inline double act_silu(double x)
{
    const double xn = x < -800.0 ? -800.0 : x;
    return xn * act_sigmoid(x);
}

#define ACT_REF(SFX, T)                                                          \
void cattn_act_ref_##SFX(T *y, const T *x, int64_t n, int act)                   \
{                                                                                \
    switch (act) {                                                               \
    case CATTN_ACT_RELU:                                                         \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] < (T)0 ? (T)0 : x[i];        \
        break;                                                                   \
    case CATTN_ACT_GELU:                                                         \
        for (int64_t i = 0; i < n; i++) y[i] = (T)act_gelu(x[i]);                \
        break;                                                                   \
    case CATTN_ACT_GELU_TANH:                                                    \
        for (int64_t i = 0; i < n; i++) y[i] = (T)act_gelu_tanh(x[i]);           \
        break;                                                                   \
    case CATTN_ACT_SILU:                                                         \
        for (int64_t i = 0; i < n; i++) y[i] = (T)act_silu(x[i]);                \
        break;                                                                   \
    default:                                                                     \
        if (y != x) memmove(y, x, sizeof(T) * (size_t)n);                        \
        break;                                                                   \
    }                                                                            \
}

ACT_REF(f32, float)
ACT_REF(f64, double)

void cattn_exp_ref_f32(float *y, const float *x, int64_t n, int nonpos)
{
    (void)nonpos;
    for (int64_t i = 0; i < n; i++) y[i] = cattn_exp_f32(x[i]);
}

void cattn_exp_ref_f64(double *y, const double *x, int64_t n, int nonpos)
{
    (void)nonpos;
    for (int64_t i = 0; i < n; i++) y[i] = cattn_exp_f64(x[i]);
}

/* ---- GEMM epilogue: x[n] = act(x[n]) in place over one contiguous tile
 * row (n = NR or fewer), through the dispatch table ---- */

void cattn_act_row_f32(float *x, int64_t n, int act)
{
    if (act != CATTN_ACT_NONE) cattn_kt.act_f32(x, x, n, act);
}

void cattn_act_row_f64(double *x, int64_t n, int act)
{
    if (act != CATTN_ACT_NONE) cattn_kt.act_f64(x, x, n, act);
}

/* ---- driver: units of (row, chunk of ACT_CHUNK elements), handed out
 * dynamically; every element is computed alone, so the split never changes
 * a result ----
 * cattn_act_{f32,f64}: y[r,i] = act(x[r,i]) for a CATTN_ACT_* code
 *   y: (rows, n), row r at y + r*ys, unit element stride
 *   x: (rows, n), row r at x + r*xs, unit element stride
 * y may equal x exactly; no other overlap.
 * cattn_vexp_{f32,f64}: y[i] = exp(x[i]) on the selected path (test hook)
 *   y, x: (n,) contiguous; nonpos = 1: the x <= 0 variant */

#define ACT_CHUNK 8192

#define ACT_DRIVER(SFX, T)                                                       \
int cattn_act_##SFX(T *y, int64_t ys, const T *x, int64_t xs,                    \
                    int64_t rows, int64_t n, int act, int n_threads)             \
{                                                                                \
    cattn_init();                                                                \
    if (rows <= 0 || n <= 0) return CATTN_OK;                                    \
    const cattn_act_##SFX##_t f = cattn_kt.act_##SFX;                            \
    const int64_t nch = cattn_cdiv(n, ACT_CHUNK), units = rows * nch;            \
    const int nt = cattn_rows_threads(rows * n, n_threads);                      \
    (void)nt;                                   /* unused without OpenMP */      \
    CATTN_OMP(omp parallel for num_threads(nt) schedule(dynamic, 1) if (nt > 1)) \
    for (int64_t u = 0; u < units; u++) {                                        \
        const int64_t r = u / nch, c = (u % nch) * ACT_CHUNK;                    \
        f(y + r * ys + c, x + r * xs + c, cattn_min64(ACT_CHUNK, n - c), act);   \
    }                                                                            \
    return CATTN_OK;                                                             \
}                                                                                \
                                                                                 \
int cattn_vexp_##SFX(T *y, const T *x, int64_t n, int nonpos)                    \
{                                                                                \
    cattn_init();                                                                \
    if (n > 0) cattn_kt.exp_##SFX(y, x, n, nonpos);                              \
    return CATTN_OK;                                                             \
}

ACT_DRIVER(f32, float)
ACT_DRIVER(f64, double)
