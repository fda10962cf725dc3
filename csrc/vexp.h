/* vexp.h — the portable exp used by every kernel that needs one.
 *
 * Semantics shared with the AVX2 version (vexp_avx2.h):
 *   exp(-inf) = 0 and exp(x) = 0 exactly below the underflow point
 *   (x < ln FLT_MIN = -87.33654 / ln DBL_MIN = -708.39642): never a denormal;
 *   +inf above the overflow point; NaN stays NaN.
 */
#ifndef CATTN_VEXP_H
#define CATTN_VEXP_H

#include <math.h>

#define CATTN_EXP_LO_F32 (-87.33654475f)  /* ln(FLT_MIN) */
#define CATTN_EXP_HI_F32 (88.72283905f)   /* ln(FLT_MAX) */
#define CATTN_EXP_LO_F64 (-708.39641853226408)
#define CATTN_EXP_HI_F64 (709.78271289338397)

static inline float cattn_exp_f32(float x)
{
    return x < CATTN_EXP_LO_F32 ? 0.0f : expf(x);
}

static inline double cattn_exp_f64(double x)
{
    return x < CATTN_EXP_LO_F64 ? 0.0 : exp(x);
}

#endif
