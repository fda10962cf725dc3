/* kernels/avx2/act.c — AVX2/FMA elementwise activations (relu, gelu erf form,
 * gelu tanh form, silu) and the vector exp test hook, float32 and float64.
 * Compiled with -mavx2 -mfma only; cpu.c selects these at run time.
 * Not here: the threaded driver (csrc/rows.c) and the portable kernels
 * (kernels/ref/rows.c, whose comment states the formulas and the values at
 * infinities).
 *
 * GELU, erf form: gelu(x) = x Phi(x), Phi(x) = erfc(-x/sqrt 2)/2. With
 * a = |x|/sqrt 2 and c = x erfc(a)/2:  x < 0 (or -0): gelu = c;  else gelu = x - c.
 * erfc(a) = exp(-a^2) P(t) / (1 + 2a), t = (a - K)/(a + K), a polynomial P
 * fitted (Chebyshev, mpmath) to (1 + 2a) exp(a^2) erfc(a) on [0, amax]
 * (Shepherd & Laframboise's form: smooth and bounded on [0, inf)).
 * exp(-a^2) = exp(-x^2/2) uses x^2 = h + l exactly (l = fma(x, x, -h)):
 * exp(-h/2) (1 - l/2), so the rounding of x^2 (which would be multiplied
 * by x^2 in the relative error of the tail) never enters.
 *   float64: K = 4, degree 23 on a in [0, 27.5] (fit error 1.9e-18); |x|
 *            clamped to 38.5, past which gelu is x or below DBL_MIN.
 *   float32: computed in double lanes (then x^2 is exact and no split is
 *            needed), |x| clamped to 14.5, with erfcx(a) = exp(a^2) erfc(a)
 *            itself as the polynomial in t (K = 3, degree 12 on [0, 10.3],
 *            2.8e-10 relative): no division by 1 + 2a. Where |x| <= 3
 *            (most activations) the polynomial form x (1/2 + x g(x^2))
 *            instead (no division, no exp; 2x faster), each element by the
 *            form its own value selects. Rounded once to float, gelu,
 *            gelu_tanh and silu are within ~0.5 ulp.
 * Measured max errors are in tests/test_activations.py.
 * Every element is computed alone by the same code (tails go through a
 * padded buffer), so results never depend on position or thread count.
 */
#include <math.h>
#include <string.h>
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "kernels.h"
#include "vexp.h"
#include "act_f32.h"

/* -------------------- double-lane math (float64 and float32) -------------------- */

static inline __m256d act_relu_pd(__m256d x)
{
    return _mm256_max_pd(_mm256_setzero_pd(), x);
}

/* exp(z) * 2^128 for -797 <= z <= 0 (NaN passes): exp's reduction and
 * polynomial with the scale folded into 2^n, so exp(z) below DBL_MIN
 * (z < -708.4) is not flushed before it is multiplied by x */
static inline __m256d act_exp_hi128_pd(__m256d z)
{
    __m256d t;
    const __m256d p = cattn_exp_core_pd(_mm256_max_pd(_mm256_set1_pd(-797.0), z), &t);
    /* t's low bits hold n + 1023: 2^(n + 128) from n + 1151 in [4, 1151] */
    const __m256i e = _mm256_add_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(128));
    return _mm256_mul_pd(p, _mm256_castsi256_pd(_mm256_slli_epi64(e, 52)));
}

/* x sigmoid(z) = x / (1 + e) for z >= 0, x e / (1 + e) for z < 0, with
 * e = exp(-|z|). For z < 0 the product x e is formed as (x e 2^128) and
 * scaled back after the division: exact power-of-two scalings, so the
 * result is rounded once, and results below DBL_MIN (x e tiny but x e /
 * (1 + e) still normal or subnormal) are not lost. Past z = -797 every
 * such result is below half the smallest subnormal (|x| <= 800): 0. */
static inline __m256d act_xsigmoid_pd(__m256d xn, __m256d z)
{
    const __m256d one = _mm256_set1_pd(1.0);
    const __m256d es = act_exp_hi128_pd(_mm256_sub_pd(_mm256_setzero_pd(), act_abs_pd(z)));
    const __m256d e = _mm256_mul_pd(es, _mm256_set1_pd(0x1p-128));
    const __m256d neg = _mm256_cmp_pd(z, _mm256_setzero_pd(), _CMP_LT_OQ);
    const __m256d num = _mm256_blendv_pd(xn, _mm256_mul_pd(xn, es), neg);
    const __m256d q = _mm256_div_pd(num, _mm256_add_pd(one, e));
    return _mm256_blendv_pd(q, _mm256_mul_pd(q, _mm256_set1_pd(0x1p-128)), neg);
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
    c = _mm256_mul_pd(c, cattn_expneg256_pd(_mm256_mul_pd(_mm256_set1_pd(-0.5), h)));
    return _mm256_blendv_pd(_mm256_sub_pd(x, c), c, x);      /* sign bit of x: c (-0 -> -0) */
}

/* left-packing controls by lane mask: the 32-bit elements of the flagged
 * double lanes (vpermps), the flagged int32 lanes (vpermilps), in order */
static const int32_t act_pack_pd[16][8] __attribute__((aligned(32))) = {
    {0, 1, 0, 1, 0, 1, 0, 1},
    {0, 1, 0, 1, 0, 1, 0, 1},
    {2, 3, 0, 1, 0, 1, 0, 1},
    {0, 1, 2, 3, 0, 1, 0, 1},
    {4, 5, 0, 1, 0, 1, 0, 1},
    {0, 1, 4, 5, 0, 1, 0, 1},
    {2, 3, 4, 5, 0, 1, 0, 1},
    {0, 1, 2, 3, 4, 5, 0, 1},
    {6, 7, 0, 1, 0, 1, 0, 1},
    {0, 1, 6, 7, 0, 1, 0, 1},
    {2, 3, 6, 7, 0, 1, 0, 1},
    {0, 1, 2, 3, 6, 7, 0, 1},
    {4, 5, 6, 7, 0, 1, 0, 1},
    {0, 1, 4, 5, 6, 7, 0, 1},
    {2, 3, 4, 5, 6, 7, 0, 1},
    {0, 1, 2, 3, 4, 5, 6, 7}};
static const int32_t act_pack_i[16][4] __attribute__((aligned(16))) = {
    {0, 0, 0, 0},
    {0, 0, 0, 0},
    {1, 0, 0, 0},
    {0, 1, 0, 0},
    {2, 0, 0, 0},
    {0, 2, 0, 0},
    {1, 2, 0, 0},
    {0, 1, 2, 0},
    {3, 0, 0, 0},
    {0, 3, 0, 0},
    {1, 3, 0, 0},
    {0, 1, 3, 0},
    {2, 3, 0, 0},
    {0, 2, 3, 0},
    {1, 2, 3, 0},
    {0, 1, 2, 3}};

/* float32 gelu: each element by the polynomial form if |x| <= 3, else by
 * the erfcx form (NaN, inf included), chosen by its own value only (never
 * by its neighbours': results do not depend on position). Per block of
 * ACT_GELU_BLOCK elements: one pass of the polynomial form over all of
 * them, noting the others (and their inputs: y may be x), then the erfcx
 * form on those, packed 4 to a vector. */
#define ACT_GELU_BLOCK 512
static void act_gelu_f32(float *y, const float *x, int64_t n)
{
    int32_t idx[ACT_GELU_BLOCK + 4];
    double xs[ACT_GELU_BLOCK + 4] __attribute__((aligned(32)));
    for (int64_t b = 0; b < n; b += ACT_GELU_BLOCK) {
        const int64_t nb = cattn_min64(ACT_GELU_BLOCK, n - b);
        int cnt = 0, out;
        int64_t i = 0;
        for (; i + 4 <= nb; i += 4) {
            const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + b + i));
            if (_mm256_movemask_pd(_mm256_cmp_pd(_mm256_mul_pd(v, v), ACT_K(9.0),
                                                 _CMP_NLE_UQ)) == 0xF) {
                /* all four |x| > 3 (or NaN): the erfcx form at once */
                _mm_storeu_ps(y + b + i, _mm256_cvtpd_ps(act_gelu_f32_full_pd(v)));
                continue;
            }
            const __m256d r = act_gelu_f32_poly_pd(v, &out);
            {               /* branch-free: the flagged lanes packed to the front */
                const __m256i pd = _mm256_load_si256((const __m256i *)act_pack_pd[out]);
                const __m128i pi = _mm_load_si128((const __m128i *)act_pack_i[out]);
                _mm256_storeu_pd(xs + cnt, _mm256_castps_pd(
                    _mm256_permutevar8x32_ps(_mm256_castpd_ps(v), pd)));
                _mm_storeu_si128((__m128i *)(idx + cnt), _mm_castps_si128(_mm_permutevar_ps(
                    _mm_castsi128_ps(_mm_add_epi32(_mm_set1_epi32((int)i),
                                                   _mm_setr_epi32(0, 1, 2, 3))), pi)));
                cnt += __builtin_popcount((unsigned)out);
            }
            _mm_storeu_ps(y + b + i, _mm256_cvtpd_ps(r));
        }
        if (i < nb) {                                            /* tail: < 4 */
            float buf[4] __attribute__((aligned(16))) = {0};
            memcpy(buf, x + b + i, sizeof(float) * (size_t)(nb - i));
            const __m256d v = _mm256_cvtps_pd(_mm_load_ps(buf));
            const __m256d r = act_gelu_f32_poly_pd(v, &out);
            double t[4] __attribute__((aligned(32)));
            _mm256_store_pd(t, v);
            for (int l = 0; l < (int)(nb - i); l++)
                if (out >> l & 1) { idx[cnt] = (int32_t)(i + l); xs[cnt++] = t[l]; }
            _mm_store_ps(buf, _mm256_cvtpd_ps(r));
            memcpy(y + b + i, buf, sizeof(float) * (size_t)(nb - i));
        }
        for (int j = cnt; j < cnt + 4; j++) xs[j] = 0.0;       /* pad the last vector */
        for (int j = 0; j < cnt; j += 4) {
            float r[4] __attribute__((aligned(16)));
            _mm_store_ps(r, _mm256_cvtpd_ps(act_gelu_f32_full_pd(_mm256_load_pd(xs + j))));
            for (int l = 0; l < 4 && j + l < cnt; l++) y[b + idx[j + l]] = r[l];
        }
    }
}

/* ---------------------------- float32 ---------------------------- */

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

/* float32 data through a double-lane function F, 4 floats per 128-bit load
 * and store: no 256-bit insert / extract, and in the GEMM epilogue each load
 * matches one 16-byte store of the bias loop (a 32-byte load spanning two
 * such stores would miss store-to-load forwarding) */
#define ACT_LOOP_PS_VIA_PD(F)                                                    \
    do {                                                                         \
        int64_t i = 0;                                                           \
        for (; i + 16 <= n; i += 16) {                                           \
            const __m128 a0 = _mm_loadu_ps(x + i), a1 = _mm_loadu_ps(x + i + 4);   \
            const __m128 a2 = _mm_loadu_ps(x + i + 8), a3 = _mm_loadu_ps(x + i + 12); \
            const __m256d r0 = F(_mm256_cvtps_pd(a0)), r1 = F(_mm256_cvtps_pd(a1)); \
            const __m256d r2 = F(_mm256_cvtps_pd(a2)), r3 = F(_mm256_cvtps_pd(a3)); \
            _mm_storeu_ps(y + i, _mm256_cvtpd_ps(r0));                           \
            _mm_storeu_ps(y + i + 4, _mm256_cvtpd_ps(r1));                       \
            _mm_storeu_ps(y + i + 8, _mm256_cvtpd_ps(r2));                       \
            _mm_storeu_ps(y + i + 12, _mm256_cvtpd_ps(r3));                      \
        }                                                                        \
        for (; i + 4 <= n; i += 4)                                               \
            _mm_storeu_ps(y + i, _mm256_cvtpd_ps(F(_mm256_cvtps_pd(_mm_loadu_ps(x + i))))); \
        if (i < n) {                                         /* tail */          \
            float buf[4] __attribute__((aligned(16))) = {0};                     \
            memcpy(buf, x + i, sizeof(float) * (size_t)(n - i));                 \
            _mm_store_ps(buf, _mm256_cvtpd_ps(F(_mm256_cvtps_pd(_mm_load_ps(buf))))); \
            memcpy(y + i, buf, sizeof(float) * (size_t)(n - i));                 \
        }                                                                        \
    } while (0)

void cattn_act_avx2_f32(float *y, const float *x, int64_t n, int act)
{
    switch (act) {
    case CATTN_ACT_RELU: ACT_LOOP_PS(act_relu_ps); break;
    case CATTN_ACT_GELU: act_gelu_f32(y, x, n); break;
    case CATTN_ACT_GELU_TANH: ACT_LOOP_PS_VIA_PD(act_gelu_tanh_f32_pd); break;
    case CATTN_ACT_SILU: ACT_LOOP_PS_VIA_PD(act_silu_f32_pd); break;
    default: if (y != x) memmove(y, x, sizeof(float) * (size_t)n); break;
    }
}

void cattn_exp_avx2_f32(float *y, const float *x, int64_t n, int nonpos)
{
    if (nonpos) ACT_LOOP_PS(cattn_expneg256_ps);
    else ACT_LOOP_PS(cattn_exp256_ps);
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

void cattn_exp_avx2_f64(double *y, const double *x, int64_t n, int nonpos)
{
    if (nonpos) ACT_LOOP_PD(cattn_expneg256_pd);
    else ACT_LOOP_PD(cattn_exp256_pd);
}
#endif
