/* kernels/avx512/rows.c — AVX-512F softmax / log-softmax rows (float32 and
 * float64): kernels/avx2/rows.c's kernels with the exp and the elementwise
 * passes on 16 floats / 8 doubles, and every reduction in the AVX2 order,
 * so each result has the AVX2 path's bits (that file states the numerics):
 *   - a zmm register holds two of the AVX2 kernel's ymm accumulators
 *     (lanes 0-7 / 8-15 = accumulators 0 / 1, 2 / 3): the same lane chains;
 *   - where the AVX2 kernel adds two of its vectors together, their two
 *     halves are added as ymm in the same pairing; the 8-wide rest, the tail
 *     and the horizontal steps are the AVX2 code itself (kernels/avx2/simd.h,
 *     smx_rest.h).
 * Not here (the avx512 path keeps AVX2's): softmax column blocks, layer norm
 * and RMS norm, memory-bound at every size cattn meets.
 * Row length n; y may equal x.
 */
#include <math.h>
#include <string.h>
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "kernels.h"
#include "vexp.h"
#include "../avx2/vexp.h"
#include "../avx2/simd.h"
#include "../avx2/smx_rest.h"

#define LO8(v) _mm512_castps512_ps256(v)
#define HI8(v) _mm512_extractf32x8_ps((v), 1)
#define LO4(v) _mm512_castpd512_pd256(v)
#define HI4(v) _mm512_extractf64x4_pd((v), 1)

/* max over the row: AVX2's m0..m3 as [m0|m1], [m2|m3] (max is exact, but
 * the order fixes which zero / NaN operand survives: the same order) */
static inline float smx512_max_f32(const float *x, int64_t n)
{
    __m512 m01 = _mm512_set1_ps(-INFINITY), m23 = m01;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m01 = _mm512_max_ps(_mm512_loadu_ps(x + i), m01);
        m23 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), m23);
    }
    const __m256 m0 = smx_max_rest_f32(LO8(m01), x, &i, n);
    float m = rows_hmax_ps(_mm256_max_ps(_mm256_max_ps(m0, HI8(m01)),
                                         _mm256_max_ps(LO8(m23), HI8(m23))));
    for (; i < n; i++) m = x[i] > m ? x[i] : m;                 /* tail */
    return m;
}

/* sum exp(x - m) (and y = exp(x - m) when y != NULL): AVX2's per-32 float
 * sum (e0 + e1) + (e2 + e3), widened into [d0|d1] */
static inline double smx512_sumexp_f32(float *y, const float *x, int64_t n, float m)
{
    const __m512 vm = _mm512_set1_ps(m);
    __m512d d01 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 e01 = cattn_expneg512_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
        const __m512 e23 = cattn_expneg512_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), vm));
        if (y) {
            _mm512_storeu_ps(y + i, e01);
            _mm512_storeu_ps(y + i + 16, e23);
        }
        const __m256 t = _mm256_add_ps(_mm256_add_ps(LO8(e01), HI8(e01)),
                                       _mm256_add_ps(LO8(e23), HI8(e23)));
        d01 = _mm512_add_pd(d01, _mm512_cvtps_pd(t));
    }
    __m256d d0 = LO4(d01), d1 = HI4(d01);
    smx_sumexp_rest_f32(y, x, i, n, m, &d0, &d1);
    return rows_hsum_pd(_mm256_add_pd(d0, d1));
}

/* the last n % 16 elements through a mask (elementwise: the same bits as
 * AVX2's 8-wide loop and scalar tail) */
static inline __mmask16 tail16(int64_t r) { return (__mmask16)((1u << r) - 1u); }
static inline __mmask8 tail8(int64_t r) { return (__mmask8)((1u << r) - 1u); }

void cattn_softmax_row_avx512_f32(float *y, const float *x, int64_t n, int logsm)
{
    float m = smx512_max_f32(x, n);
    if (m == -INFINITY) m = 0.0f;
    const int64_t n16 = n & ~(int64_t)15;
    int64_t i;
    if (!logsm) {
        const double s = smx512_sumexp_f32(y, x, n, m);
        const __m512 vinv = _mm512_set1_ps(s == 0.0 ? 0.0f : (float)(1.0 / s));
        for (i = 0; i < n16; i += 16) _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(y + i), vinv));
        if (i < n) {
            const __mmask16 k = tail16(n - i);
            _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), vinv));
        }
    } else {
        const double s = smx512_sumexp_f32(NULL, x, n, m);
        const float lse = s == 0.0 ? 0.0f : (float)log(s);
        const __m512 vm = _mm512_set1_ps(m), vl = _mm512_set1_ps(lse);
        for (i = 0; i < n16; i += 16)
            _mm512_storeu_ps(y + i, _mm512_sub_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm), vl));
        if (i < n) {
            const __mmask16 k = tail16(n - i);
            _mm512_mask_storeu_ps(y + i, k, _mm512_sub_ps(_mm512_sub_ps(
                _mm512_maskz_loadu_ps(k, x + i), vm), vl));
        }
    }
}

static inline double smx512_max_f64(const double *x, int64_t n)
{
    __m512d m01 = _mm512_set1_pd(-INFINITY), m23 = m01;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m01 = _mm512_max_pd(_mm512_loadu_pd(x + i), m01);
        m23 = _mm512_max_pd(_mm512_loadu_pd(x + i + 8), m23);
    }
    const __m256d m0 = smx_max_rest_f64(LO4(m01), x, &i, n);
    double m = rows_hmax_pd(_mm256_max_pd(_mm256_max_pd(m0, HI4(m01)),
                                          _mm256_max_pd(LO4(m23), HI4(m23))));
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* AVX2's s0..s3 as [s0|s1], [s2|s3] */
static inline double smx512_sumexp_f64(double *y, const double *x, int64_t n, double m)
{
    const __m512d vm = _mm512_set1_pd(m);
    __m512d s01 = _mm512_setzero_pd(), s23 = s01;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512d e01 = cattn_expneg512_pd(_mm512_sub_pd(_mm512_loadu_pd(x + i), vm));
        const __m512d e23 = cattn_expneg512_pd(_mm512_sub_pd(_mm512_loadu_pd(x + i + 8), vm));
        if (y) {
            _mm512_storeu_pd(y + i, e01);
            _mm512_storeu_pd(y + i + 8, e23);
        }
        s01 = _mm512_add_pd(s01, e01);
        s23 = _mm512_add_pd(s23, e23);
    }
    const __m256d s0 = smx_sumexp_rest_f64(y, x, i, n, m, LO4(s01));
    return rows_hsum_pd(_mm256_add_pd(_mm256_add_pd(s0, HI4(s01)),
                                      _mm256_add_pd(LO4(s23), HI4(s23))));
}

void cattn_softmax_row_avx512_f64(double *y, const double *x, int64_t n, int logsm)
{
    double m = smx512_max_f64(x, n);
    if (m == -INFINITY) m = 0.0;
    const int64_t n8 = n & ~(int64_t)7;
    int64_t i;
    if (!logsm) {
        const double s = smx512_sumexp_f64(y, x, n, m);
        const __m512d vinv = _mm512_set1_pd(s == 0.0 ? 0.0 : 1.0 / s);
        for (i = 0; i < n8; i += 8) _mm512_storeu_pd(y + i, _mm512_mul_pd(_mm512_loadu_pd(y + i), vinv));
        if (i < n) {
            const __mmask8 k = tail8(n - i);
            _mm512_mask_storeu_pd(y + i, k, _mm512_mul_pd(_mm512_maskz_loadu_pd(k, y + i), vinv));
        }
    } else {
        const double s = smx512_sumexp_f64(NULL, x, n, m);
        const double lse = s == 0.0 ? 0.0 : log(s);
        const __m512d vm = _mm512_set1_pd(m), vl = _mm512_set1_pd(lse);
        for (i = 0; i < n8; i += 8)
            _mm512_storeu_pd(y + i, _mm512_sub_pd(_mm512_sub_pd(_mm512_loadu_pd(x + i), vm), vl));
        if (i < n) {
            const __mmask8 k = tail8(n - i);
            _mm512_mask_storeu_pd(y + i, k, _mm512_sub_pd(_mm512_sub_pd(
                _mm512_maskz_loadu_pd(k, x + i), vm), vl));
        }
    }
}
#endif
