/* act_avx2.c — AVX2/FMA elementwise activations (relu, gelu erf form,
 * gelu tanh form, silu) and the vector exp test hook, float32 and float64.
 * Compiled with -mavx2 -mfma only; cpu.c selects these at run time.
 * Not here: the threaded driver and the portable kernels (act.c, whose
 * comment states the formulas and the values at infinities).
 *
 * GELU, erf form: gelu(x) = x Phi(x), Phi(x) = erfc(-x/sqrt 2)/2. With
 * a = |x|/sqrt 2 and c = x erfc(a)/2:  x < 0: gelu = c;  x >= 0: gelu = x - c.
 * erfc(a) = exp(-a^2) P(t) / (1 + 2a), t = (a - K)/(a + K), a polynomial P
 * fitted (Chebyshev, mpmath) to (1 + 2a) exp(a^2) erfc(a) on [0, amax]
 * (Shepherd & Laframboise's form: smooth and bounded on [0, inf)).
 * exp(-a^2) = exp(-x^2/2) uses x^2 = h + l exactly (l = fma(x, x, -h)):
 * exp(-h/2) (1 - l/2), so the rounding of x^2 (which would be multiplied
 * by x^2 in the relative error of the tail) never enters.
 *   float64: K = 4, degree 23 on a in [0, 27.5] (fit error 1.9e-18); |x|
 *            clamped to 38.5, past which gelu is x or below DBL_MIN.
 *   float32: computed in double lanes (then x^2 is exact and no split is
 *            needed) with K = 3, degree 13 on a in [0, 10.3] (fit error
 *            1.8e-11), |x| clamped to 14.5, and rounded once to float: the
 *            float32 gelu, gelu_tanh and silu are within ~0.5 ulp.
 * Measured max errors are in tests/test_activations.py.
 * Every element is computed alone by the same code (tails go through a
 * padded buffer), so results never depend on position or thread count.
 */
#include <math.h>
#include <string.h>
#include "kernels.h"
#include "vexp_avx2.h"

/* -------------------- double-lane math (float64 and float32) -------------------- */

static inline __m256d act_abs_pd(__m256d x)
{
    return _mm256_andnot_pd(_mm256_set1_pd(-0.0), x);
}

static inline __m256d act_relu_pd(__m256d x)
{
    return _mm256_max_pd(_mm256_setzero_pd(), x);
}

static inline __m256d act_xsigmoid_pd(__m256d xn, __m256d z)
{
    const __m256d one = _mm256_set1_pd(1.0);
    __m256d e = cattn_exp256_pd(_mm256_sub_pd(_mm256_setzero_pd(), act_abs_pd(z)));
    __m256d num = _mm256_blendv_pd(one, e, _mm256_cmp_pd(z, _mm256_setzero_pd(), _CMP_LT_OQ));
    return _mm256_div_pd(_mm256_mul_pd(xn, num), _mm256_add_pd(one, e));
}

static inline __m256d act_silu_pd(__m256d x)
{
    return act_xsigmoid_pd(_mm256_max_pd(_mm256_set1_pd(-800.0), x), x);
}

static inline __m256d act_gelu_tanh_pd(__m256d x)
{
    const __m256d xn = _mm256_max_pd(_mm256_set1_pd(-30.0), x);
    const __m256d z = _mm256_mul_pd(xn, _mm256_fmadd_pd(_mm256_set1_pd(0.07135481627260025),
                                                        _mm256_mul_pd(xn, xn),
                                                        _mm256_set1_pd(1.5957691216057308)));
    return act_xsigmoid_pd(xn, z);
}

static const double act_gelu_p64[24] = {
    0x1.58a12a6de32b3p-30, 0x1.f8e6ce33532f4p-30, -0x1.e45a279d29f94p-27,
    -0x1.33de9402c1f5dp-26, 0x1.d8f553235570ep-24, 0x1.4093bbdb2244ap-24,
    -0x1.bb383d84837e4p-21, 0x1.3b7bf198a88ddp-22, 0x1.7f2e89022af89p-18,
    -0x1.788cb6125d278p-17, -0x1.995a165bfb90ap-16, 0x1.3be068468cff1p-13,
    -0x1.a1df1d0157977p-13, -0x1.8d4a9c358d161p-11, 0x1.49c672795ae39p-8,
    -0x1.096238829a103p-6, 0x1.3079edf6afb72p-5, -0x1.0fb06dfe55b64p-4,
    0x1.7fee004e11047p-4, -0x1.9ddb23c3e88bdp-4, 0x1.16ecefcfa5420p-4,
    0x1.f7f5df66fd6b2p-7, -0x1.1df1ad154a28fp-3, 0x1.3ba5916e9fd7fp+0,
};

static inline __m256d act_gelu_pd(__m256d x)
{
    const __m256d one = _mm256_set1_pd(1.0), half = _mm256_set1_pd(0.5);
    const __m256d K = _mm256_set1_pd(4.0), lim = _mm256_set1_pd(38.5);
    const __m256d xc = _mm256_min_pd(lim, _mm256_max_pd(_mm256_sub_pd(_mm256_setzero_pd(), lim), x));
    const __m256d h = _mm256_mul_pd(xc, xc);
    const __m256d l = _mm256_fmsub_pd(xc, xc, h);
    const __m256d a = _mm256_mul_pd(act_abs_pd(xc), _mm256_set1_pd(0.70710678118654752440));
    const __m256d d = _mm256_fmadd_pd(_mm256_set1_pd(2.0), a, one);
    const __m256d t = _mm256_div_pd(_mm256_sub_pd(a, K), _mm256_add_pd(a, K));
    __m256d p = _mm256_set1_pd(act_gelu_p64[0]);
    for (int k = 1; k < 24; k++) p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(act_gelu_p64[k]));
    __m256d c = _mm256_div_pd(_mm256_mul_pd(_mm256_mul_pd(half, xc), p), d);
    c = _mm256_mul_pd(c, _mm256_fnmadd_pd(half, l, one));
    c = _mm256_mul_pd(c, cattn_exp256_pd(_mm256_mul_pd(_mm256_set1_pd(-0.5), h)));
    return _mm256_blendv_pd(_mm256_sub_pd(x, c), c, _mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_LT_OQ));
}

/* float32 data through double lanes: gelu, gelu_tanh and silu of float32
 * inputs are computed in double (x^2 is then exact) and rounded once, so
 * they are within 0.5 ulp + ~1e-11 relative of the exact value. */

static const double act_gelu_p32[14] = {   /* K = 3, degree 13, a in [0, 10.3], fit 1.8e-11 */
    -0x1.1edd03deae345p-18, 0x1.60993032c41c5p-16, 0x1.f3ed3a031af3ep-14,
    -0x1.f5de62a6e9a2ep-14, -0x1.99d5be8f381d1p-11, 0x1.f062231f93d29p-10,
    0x1.4bb4af6372303p-9, -0x1.8577f8bb312cep-6, 0x1.17c9e873cab37p-4,
    -0x1.e88b70f18b1c8p-4, 0x1.098368c082c75p-3, -0x1.85a15d423dd3fp-5,
    -0x1.15c084c508490p-3, 0x1.40c522d7eee1fp+0,
};

static inline __m256d act_gelu_f32_pd(__m256d x)   /* x: a float32 value */
{
    const __m256d one = _mm256_set1_pd(1.0), half = _mm256_set1_pd(0.5);
    const __m256d K = _mm256_set1_pd(3.0), lim = _mm256_set1_pd(14.5);
    const __m256d xc = _mm256_min_pd(lim, _mm256_max_pd(_mm256_sub_pd(_mm256_setzero_pd(), lim), x));
    const __m256d a = _mm256_mul_pd(act_abs_pd(xc), _mm256_set1_pd(0.70710678118654752440));
    const __m256d apk = _mm256_add_pd(a, K);
    const __m256d d = _mm256_fmadd_pd(_mm256_set1_pd(2.0), a, one);          /* 1 + 2a */
    const __m256d q = _mm256_div_pd(one, _mm256_mul_pd(apk, d));              /* one division */
    const __m256d t = _mm256_mul_pd(_mm256_mul_pd(_mm256_sub_pd(a, K), d), q);
    __m256d p = _mm256_set1_pd(act_gelu_p32[0]);
    for (int k = 1; k < 14; k++) p = _mm256_fmadd_pd(p, t, _mm256_set1_pd(act_gelu_p32[k]));
    __m256d c = _mm256_mul_pd(_mm256_mul_pd(_mm256_mul_pd(half, xc), p), _mm256_mul_pd(apk, q));
    c = _mm256_mul_pd(c, cattn_exp256_pd(_mm256_mul_pd(_mm256_set1_pd(-0.5), _mm256_mul_pd(xc, xc))));
    return _mm256_blendv_pd(_mm256_sub_pd(x, c), c, _mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_LT_OQ));
}

static inline __m256d act_silu_f32_pd(__m256d x)
{
    return act_xsigmoid_pd(_mm256_max_pd(_mm256_set1_pd(-200.0), x), x);
}

/* apply a double-lane function F to 8 floats */
#define ACT_VIA_PD(F, v)                                                         \
    _mm256_set_m128(_mm256_cvtpd_ps(F(_mm256_cvtps_pd(_mm256_extractf128_ps((v), 1)))), \
                    _mm256_cvtpd_ps(F(_mm256_cvtps_pd(_mm256_castps256_ps128(v)))))

static inline __m256 act_gelu_ps(__m256 x) { return ACT_VIA_PD(act_gelu_f32_pd, x); }
static inline __m256 act_gelu_tanh_ps(__m256 x) { return ACT_VIA_PD(act_gelu_tanh_pd, x); }
static inline __m256 act_silu_ps(__m256 x) { return ACT_VIA_PD(act_silu_f32_pd, x); }

/* ---------------------------- float32 ---------------------------- */

static inline __m256 act_relu_ps(__m256 x)
{
    return _mm256_max_ps(_mm256_setzero_ps(), x);   /* NaN in x: max returns x */
}

#define ACT_LOOP_PS(F)                                                           \
    do {                                                                         \
        int64_t i = 0;                                                           \
        for (; i + 16 <= n; i += 16) {                                           \
            __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8); \
            _mm256_storeu_ps(y + i, F(v0));                                      \
            _mm256_storeu_ps(y + i + 8, F(v1));                                  \
        }                                                                        \
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i))); \
        if (i < n) {                                         /* tail */          \
            float buf[8] __attribute__((aligned(32))) = {0};                     \
            memcpy(buf, x + i, sizeof(float) * (size_t)(n - i));                 \
            _mm256_store_ps(buf, F(_mm256_load_ps(buf)));                        \
            memcpy(y + i, buf, sizeof(float) * (size_t)(n - i));                 \
        }                                                                        \
    } while (0)

void cattn_act_avx2_f32(float *y, const float *x, int64_t n, int act)
{
    switch (act) {
    case CATTN_ACT_RELU: ACT_LOOP_PS(act_relu_ps); break;
    case CATTN_ACT_GELU: ACT_LOOP_PS(act_gelu_ps); break;
    case CATTN_ACT_GELU_TANH: ACT_LOOP_PS(act_gelu_tanh_ps); break;
    case CATTN_ACT_SILU: ACT_LOOP_PS(act_silu_ps); break;
    default: if (y != x) memmove(y, x, sizeof(float) * (size_t)n); break;
    }
}

void cattn_exp_avx2_f32(float *y, const float *x, int64_t n)
{
    ACT_LOOP_PS(cattn_exp256_ps);
}

/* ---------------------------- float64 ---------------------------- */

#define ACT_LOOP_PD(F)                                                           \
    do {                                                                         \
        int64_t i = 0;                                                           \
        for (; i + 8 <= n; i += 8) {                                             \
            __m256d v0 = _mm256_loadu_pd(x + i), v1 = _mm256_loadu_pd(x + i + 4); \
            _mm256_storeu_pd(y + i, F(v0));                                      \
            _mm256_storeu_pd(y + i + 4, F(v1));                                  \
        }                                                                        \
        for (; i + 4 <= n; i += 4) _mm256_storeu_pd(y + i, F(_mm256_loadu_pd(x + i))); \
        if (i < n) {                                         /* tail */          \
            double buf[4] __attribute__((aligned(32))) = {0};                    \
            memcpy(buf, x + i, sizeof(double) * (size_t)(n - i));                \
            _mm256_store_pd(buf, F(_mm256_load_pd(buf)));                        \
            memcpy(y + i, buf, sizeof(double) * (size_t)(n - i));                \
        }                                                                        \
    } while (0)

void cattn_act_avx2_f64(double *y, const double *x, int64_t n, int act)
{
    switch (act) {
    case CATTN_ACT_RELU: ACT_LOOP_PD(act_relu_pd); break;
    case CATTN_ACT_GELU: ACT_LOOP_PD(act_gelu_pd); break;
    case CATTN_ACT_GELU_TANH: ACT_LOOP_PD(act_gelu_tanh_pd); break;
    case CATTN_ACT_SILU: ACT_LOOP_PD(act_silu_pd); break;
    default: if (y != x) memmove(y, x, sizeof(double) * (size_t)n); break;
    }
}

void cattn_exp_avx2_f64(double *y, const double *x, int64_t n)
{
    ACT_LOOP_PD(cattn_exp256_pd);
}
