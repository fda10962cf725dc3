/* kernels/ref/rows.c — the portable row kernels for float and double
 * (rows_tmpl.h instantiated twice): softmax and log-softmax rows and column
 * blocks, layer norm and RMS norm rows, activations, exp. Any CPU; also the
 * forced fallback. The numerics below hold for every path (the SIMD
 * kernels state only where they differ).
 *
 * Softmax (a "row" is the n values along the reduced axis):
 *   m = max(row), NaN ignored; m = 0 when the row has no value above -inf
 *   s = sum exp(x - m) (with the vector exp, 0 below the underflow point)
 *   softmax: y = exp(x - m) * (1/s), and y = 0 when s == 0 (row of -inf)
 *   log:     y = (x - m) - log(s),  and log(s) := 0 when s == 0, so y = -inf
 * A NaN anywhere in a row gives s = NaN, so the whole row (and only it) is
 * NaN; +inf gives inf - inf = NaN likewise. x - m is exact when x is close
 * to m (Sterbenz), so rows like 1e4 + noise keep full precision.
 * Sums are kept in double (AVX2 float32: blocks summed in float lanes, then
 * added in double), so a row of any length keeps float rounding level.
 *
 * Norms: the variance is always a mean of centered squares, never
 * E[x^2] - E[x]^2 (which cancels for rows like 1e4 + noise of 1e-2).
 * Portable kernels: two passes in double while the row is in cache, the
 * mean, then the centered squares with the classic correction of the
 * two-pass algorithm (the mean of the centered values, ~0 up to the
 * rounding of the first mean). The AVX2 float32 kernel (kernels/avx2/rows.c)
 * sums d = x - m0 and d^2 around a guess m0 of the mean (the mean of the
 * first 16 values) with the same correction (var = mean(d^2) - mean(d)^2,
 * mean = m0 + mean(d)), and takes a second pass around the corrected mean
 * whenever mean(d)^2 > var/4, so the correction never costs more than a
 * factor 1.25 in relative accuracy.
 *   layer_norm: y = (x - mean) * rstd * weight + bias, rstd = 1/sqrt(var + eps)
 *   rms_norm:   y = x * rstd * weight,                 rstd = 1/sqrt(mean(x^2) + eps)
 *
 * Activations:
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
#include "../../dispatch.h"
#include "kernels.h"
#include "vexp.h"

/* ---- activations in double (libm) ---- */

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

#define T float
#define SFX f32
#define EXP cattn_exp_f32
#define COLS CATTN_SMX_COLS_F32
#include "rows_tmpl.h"

#define T double
#define SFX f64
#define EXP cattn_exp_f64
#define COLS CATTN_SMX_COLS_F64
#include "rows_tmpl.h"
