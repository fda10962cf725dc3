/* kernels/ref/vexp.h — the portable exp used by every kernel that needs one.
 *
 * Semantics shared with the AVX2 version (kernels/avx2/vexp.h):
 *   exp(-inf) = 0 and exp(x) = 0 exactly below the underflow point
 *   (x < CATTN_EXP_LO: the smallest x whose exp is a normal number, i.e.
 *   ln FLT_MIN = -87.33654 / ln DBL_MIN = -708.39642 rounded up): the result
 *   is never a denormal; +inf above the overflow point; NaN stays NaN.
 * Accuracy: this portable path is libm's expf / exp (glibc: < 1 ulp).
 * The AVX2 path's measured errors are documented in kernels/avx2/vexp.h.
 */
#ifndef CATTN_VEXP_H
#define CATTN_VEXP_H

#include <math.h>

/* -0x1.5d589ep+6: ln(FLT_MIN) = -87.3365447505 rounded toward zero to a
 * float, so exp(LO) = 1.0000045 * FLT_MIN is normal (the float nearest to
 * ln FLT_MIN, -87.33654475f, lies below it and gave a denormal) */
#define CATTN_EXP_LO_F32 (-87.33654022f)
#define CATTN_EXP_HI_F32 (88.72283905f)   /* ln(FLT_MAX) */
#define CATTN_EXP_LO_F64 (-708.39641853226408)  /* exp(LO) = 1.0000000000000018 * DBL_MIN */
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
