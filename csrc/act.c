/* act.c — activations applied in place over a contiguous row; used by the
 * GEMM epilogue (bias + act while the tile is in cache).
 *   relu(x) = max(x, 0) (NaN stays NaN); gelu(x) = x/2 (1 + erf(x/sqrt 2));
 *   gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); silu(x) = x sigmoid(x)
 */
#include <math.h>
#include "kernels.h"

#define ACT_ROW(SFX, T, ERF, TANH, EXP)                                          \
void cattn_act_row_##SFX(T *x, int64_t n, int act)                               \
{                                                                                \
    switch (act) {                                                               \
    case CATTN_ACT_RELU:                                                         \
        for (int64_t i = 0; i < n; i++) x[i] = x[i] < (T)0 ? (T)0 : x[i];        \
        break;                                                                   \
    case CATTN_ACT_GELU:                                                         \
        for (int64_t i = 0; i < n; i++)                                          \
            x[i] = (T)0.5 * x[i] * ((T)1 + ERF(x[i] * (T)0.70710678118654752440)); \
        break;                                                                   \
    case CATTN_ACT_GELU_TANH:                                                    \
        for (int64_t i = 0; i < n; i++) {                                        \
            const T v = x[i];                                                    \
            x[i] = (T)0.5 * v * ((T)1 + TANH((T)0.79788456080286535588 *         \
                                           (v + (T)0.044715 * v * v * v)));      \
        }                                                                        \
        break;                                                                   \
    case CATTN_ACT_SILU:                                                         \
        for (int64_t i = 0; i < n; i++) x[i] = x[i] / ((T)1 + EXP(-x[i]));       \
        break;                                                                   \
    default:                                                                     \
        break;                                                                   \
    }                                                                            \
}

ACT_ROW(f32, float, erff, tanhf, expf)
ACT_ROW(f64, double, erf, tanh, exp)
