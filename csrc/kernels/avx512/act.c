/* kernels/avx512/act.c — AVX-512 float32 activations (relu, gelu erf form,
 * gelu tanh form, silu) and the vector exp (float32, float64):
 * kernels/avx2/act.c's and act_f32.h's formulas on 8 double lanes (16
 * floats for relu and exp), each element by the same operations in the
 * same order, so every result has the AVX2 path's bits (the formulas,
 * their accuracy and the values at infinities are stated there).
 * gelu: the polynomial form where x^2 <= 9, the erfcx form elsewhere (NaN
 * included), each element by the form its own value selects; the erfcx
 * lanes are gathered by vcompresspd and computed 8 at a time.
 * Not here (the avx512 path keeps AVX2's): the float64 activations, and
 * the activation fused into the int8 GEMM epilogue.
 * y may equal x; n elements; tails through masks (elementwise: same bits).
 */
#include <string.h>
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "kernels.h"
#include "vexp.h"
#include "../avx2/act_f32.h"   /* the coefficient tables (act_gelu_c32, act_gelu_p32) */

#define K8(v) _mm512_set1_pd(v)

static inline __m512d act512_abs_pd(__m512d x)
{
    return _mm512_castsi512_pd(_mm512_andnot_si512(_mm512_castpd_si512(K8(-0.0)),
                                                   _mm512_castpd_si512(x)));
}

/* act_expneg9_pd: exp(x) for x <= 0 to ~1e-11 relative */
static inline __m512d act512_expneg9_pd(__m512d x)
{
    const __m512d lo = K8(CATTN_EXP_LO_F64);
    const __m512d magic = K8(6755399441056767.0);        /* 1.5 * 2^52 + 1023 */
    const __m512d xc = _mm512_max_pd(lo, x);
    const __m512d t = _mm512_fmadd_pd(xc, K8(1.4426950408889634074), magic);
    const __m512d n = _mm512_sub_pd(t, magic);
    __m512d r = _mm512_fnmadd_pd(n, K8(6.93145751953125e-1), xc);
    r = _mm512_fnmadd_pd(n, K8(1.42860682030941723212e-6), r);
    const __m512d r2 = _mm512_mul_pd(r, r), r4 = _mm512_mul_pd(r2, r2);
    const __m512d p01 = _mm512_add_pd(K8(1.0), r);
    const __m512d p23 = _mm512_fmadd_pd(K8(1.0 / 6), r, K8(0.5));
    const __m512d p45 = _mm512_fmadd_pd(K8(1.0 / 120), r, K8(1.0 / 24));
    const __m512d p67 = _mm512_fmadd_pd(K8(1.0 / 5040), r, K8(1.0 / 720));
    const __m512d p89 = _mm512_fmadd_pd(K8(1.0 / 362880), r, K8(1.0 / 40320));
    const __m512d q0 = _mm512_fmadd_pd(p23, r2, p01), q1 = _mm512_fmadd_pd(p67, r2, p45);
    __m512d p = _mm512_fmadd_pd(q1, r4, q0);
    p = _mm512_fmadd_pd(p89, _mm512_mul_pd(r4, r4), p);
    const __m512d y = _mm512_mul_pd(p, _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(t), 52)));
    return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, lo, _CMP_NLT_UQ), y);
}

/* act_expm9_pd: exp(-a2) for a2 in [0, 106] */
static inline __m512d act512_expm9_pd(__m512d a2)
{
    const __m512d magic = K8(6755399441056767.0);
    const __m512d t = _mm512_fnmadd_pd(a2, K8(1.4426950408889634074), magic);
    const __m512d n = _mm512_sub_pd(t, magic);
    __m512d r = _mm512_fnmsub_pd(n, K8(6.93145751953125e-1), a2);
    r = _mm512_fnmadd_pd(n, K8(1.42860682030941723212e-6), r);
    __m512d p = _mm512_fmadd_pd(K8(1.0 / 362880), r, K8(1.0 / 40320));
    p = _mm512_fmadd_pd(p, r, K8(1.0 / 5040));
    p = _mm512_fmadd_pd(p, r, K8(1.0 / 720));
    p = _mm512_fmadd_pd(p, r, K8(1.0 / 120));
    p = _mm512_fmadd_pd(p, r, K8(1.0 / 24));
    p = _mm512_fmadd_pd(p, r, K8(1.0 / 6));
    p = _mm512_fmadd_pd(p, r, K8(0.5));
    p = _mm512_fmadd_pd(p, r, K8(1.0));
    p = _mm512_fmadd_pd(p, r, K8(1.0));
    return _mm512_mul_pd(p, _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_castpd_si512(t), 52)));
}

/* act_gelu_f32_full_pd: the erfcx form (x a float32 value) */
static inline __m512d act512_gelu_full_pd(__m512d x)
{
    const __m512d K = K8(3.0), lim = K8(14.5);
    const __m512d xc = _mm512_min_pd(lim, _mm512_max_pd(K8(-14.5), x));
    const __m512d a = _mm512_mul_pd(act512_abs_pd(xc), K8(0.70710678118654752440));
    const __m512d t = _mm512_div_pd(_mm512_sub_pd(a, K), _mm512_add_pd(a, K));
    __m512d p = _mm512_fmadd_pd(K8(act_gelu_p32[12][0]), t, K8(act_gelu_p32[11][0]));
    for (int k = 10; k >= 0; k--) p = _mm512_fmadd_pd(p, t, K8(act_gelu_p32[k][0]));
    const __m512d cc = _mm512_mul_pd(_mm512_mul_pd(_mm512_mul_pd(K8(0.5), xc), p),
                                     act512_expm9_pd(_mm512_mul_pd(a, a)));
    /* the sign bit of x selects c (blendv's rule; -0 -> -0) */
    return _mm512_mask_blend_pd(_mm512_movepi64_mask(_mm512_castpd_si512(x)),
                                _mm512_sub_pd(x, cc), cc);
}

/* act_gelu_f32_poly_pd: x (1/2 + x g(x^2)); *out: x^2 > 9 or NaN */
static inline __m512d act512_gelu_poly_pd(__m512d x, __mmask8 *out)
{
#define GC(k) K8(act_gelu_c32[k][0])
    const __m512d v = _mm512_mul_pd(x, x);
    const __m512d v2 = _mm512_mul_pd(v, v), v4 = _mm512_mul_pd(v2, v2);
    const __m512d v8 = _mm512_mul_pd(v4, v4);
    const __m512d e0 = _mm512_fmadd_pd(GC(1), v, GC(0)), e2 = _mm512_fmadd_pd(GC(3), v, GC(2));
    const __m512d e4 = _mm512_fmadd_pd(GC(5), v, GC(4)), e6 = _mm512_fmadd_pd(GC(7), v, GC(6));
    const __m512d e8 = _mm512_fmadd_pd(GC(9), v, GC(8)), e10 = _mm512_fmadd_pd(GC(11), v, GC(10));
    const __m512d e12 = _mm512_fmadd_pd(GC(13), v, GC(12));
    const __m512d f0 = _mm512_fmadd_pd(e2, v2, e0), f4 = _mm512_fmadd_pd(e6, v2, e4);
    const __m512d f8 = _mm512_fmadd_pd(e10, v2, e8);
    const __m512d f12 = _mm512_fmadd_pd(GC(14), v2, e12);
    const __m512d h0 = _mm512_fmadd_pd(f4, v4, f0), h8 = _mm512_fmadd_pd(f12, v4, f8);
    const __m512d g = _mm512_fmadd_pd(h8, v8, h0);
#undef GC
    *out = _mm512_cmp_pd_mask(v, K8(9.0), _CMP_NLE_UQ);
    return _mm512_mul_pd(x, _mm512_fmadd_pd(x, g, K8(0.5)));
}

/* act_xsigmoid_f32_pd: x sigmoid(z) */
static inline __m512d act512_xsigmoid_pd(__m512d xn, __m512d z)
{
    const __m512d one = K8(1.0);
    const __m512d e = act512_expneg9_pd(_mm512_sub_pd(_mm512_setzero_pd(), act512_abs_pd(z)));
    const __m512d num = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(z, _mm512_setzero_pd(), _CMP_LT_OQ),
                                             one, e);
    return _mm512_div_pd(_mm512_mul_pd(xn, num), _mm512_add_pd(one, e));
}

static inline __m512d act512_silu_pd(__m512d x)
{
    return act512_xsigmoid_pd(_mm512_max_pd(K8(-200.0), x), x);
}

static inline __m512d act512_gelu_tanh_pd(__m512d x)
{
    const __m512d xn = _mm512_max_pd(K8(-30.0), x);
    const __m512d z = _mm512_mul_pd(xn, _mm512_fmadd_pd(K8(0.07135481627260025),
                                                        _mm512_mul_pd(xn, xn),
                                                        K8(1.5957691216057308)));
    return act512_xsigmoid_pd(xn, z);
}

/* gelu: the polynomial form 8 at a time; the lanes it flags (and their
 * indices) compressed into xs / idx, then the erfcx form on those */
#define GELU_BLOCK 512
static void act512_gelu_f32(float *y, const float *x, int64_t n)
{
    int32_t idx[GELU_BLOCK];
    double xs[GELU_BLOCK] __attribute__((aligned(64)));
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t b = 0; b < n; b += GELU_BLOCK) {
        const int64_t nb = cattn_min64(GELU_BLOCK, n - b);
        int cnt = 0;
        for (int64_t i = 0; i < nb; i += 8) {
            const __mmask8 k = nb - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (nb - i)) - 1u);
            const __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, x + b + i));
            __mmask8 out;
            const __m512d r = act512_gelu_poly_pd(v, &out);
            out &= k;
            _mm256_mask_storeu_ps(y + b + i, k, _mm512_cvtpd_ps(r));
            _mm512_mask_compressstoreu_pd(xs + cnt, out, v);
            _mm256_mask_compressstoreu_epi32(idx + cnt, out,
                                             _mm256_add_epi32(_mm256_set1_epi32((int)i), lane));
            cnt += __builtin_popcount((unsigned)out);
        }
        for (int j = 0; j < cnt; j += 8) {
            const __mmask8 k = cnt - j >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (cnt - j)) - 1u);
            float r[8] __attribute__((aligned(32)));
            _mm256_store_ps(r, _mm512_cvtpd_ps(act512_gelu_full_pd(_mm512_maskz_loadu_pd(k, xs + j))));
            for (int l = 0; l < 8 && j + l < cnt; l++) y[b + idx[j + l]] = r[l];
        }
    }
}

/* float32 through a double-lane F, 8 floats per vector */
#define ACT512_LOOP_VIA_PD(F)                                                    \
    do {                                                                         \
        for (int64_t i = 0; i < n; i += 8) {                                     \
            const __mmask8 k = n - i >= 8 ? (__mmask8)0xFF                       \
                                          : (__mmask8)((1u << (n - i)) - 1u);    \
            const __m512d v = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, x + i));  \
            _mm256_mask_storeu_ps(y + i, k, _mm512_cvtpd_ps(F(v)));              \
        }                                                                        \
    } while (0)

/* 16 floats / 8 doubles per vector through F */
#define ACT512_LOOP(T, W, SUF, F)                                                \
    do {                                                                         \
        for (int64_t i = 0; i < n; i += W) {                                     \
            const int64_t r = n - i;                                             \
            if (r >= W) {                                                        \
                _mm512_storeu_##SUF(y + i, F(_mm512_loadu_##SUF(x + i)));        \
            } else {                                                             \
                const uint32_t k = (1u << r) - 1u;                               \
                _mm512_mask_storeu_##SUF(y + i, k, F(_mm512_maskz_loadu_##SUF(k, x + i))); \
            }                                                                    \
        }                                                                        \
    } while (0)

static inline __m512 act512_relu_ps(__m512 x)
{
    return _mm512_max_ps(_mm512_setzero_ps(), x);   /* NaN in x: max returns x */
}

void cattn_act_avx512_f32(float *y, const float *x, int64_t n, int act)
{
    switch (act) {
    case CATTN_ACT_RELU: ACT512_LOOP(float, 16, ps, act512_relu_ps); break;
    case CATTN_ACT_GELU: act512_gelu_f32(y, x, n); break;
    case CATTN_ACT_GELU_TANH: ACT512_LOOP_VIA_PD(act512_gelu_tanh_pd); break;
    case CATTN_ACT_SILU: ACT512_LOOP_VIA_PD(act512_silu_pd); break;
    default: if (y != x) memmove(y, x, sizeof(float) * (size_t)n); break;
    }
}

void cattn_exp_avx512_f32(float *y, const float *x, int64_t n, int nonpos)
{
    if (nonpos) ACT512_LOOP(float, 16, ps, cattn_expneg512_ps);
    else ACT512_LOOP(float, 16, ps, cattn_exp512_ps);
}

void cattn_exp_avx512_f64(double *y, const double *x, int64_t n, int nonpos)
{
    if (nonpos) ACT512_LOOP(double, 8, pd, cattn_expneg512_pd);
    else ACT512_LOOP(double, 8, pd, cattn_exp512_pd);
}
#endif
