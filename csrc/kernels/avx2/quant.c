/* kernels/avx2/quant.c — bfloat16 widening, and int8 row quantization (contract in dispatch.h;
 * the formula in cattn.h, cattn_quantize_rows), 8 floats at a time:
 *   lo = min(0, min x), hi = max(0, max x), d = hi - lo, inv = 255 / d (double)
 *   q = clamp(rint(x * inv) + za, 0, 255),  za = clamp(rint(-lo * inv), 0, 255)
 * The products x * inv are rounded before the rounding constant is added
 * (an empty asm keeps the compiler from fusing them into an FMA), so the
 * bits equal the portable loop's. */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include <immintrin.h>
#include <math.h>
#include <string.h>
#include "kernels.h"

/* dst[i] = src[i] << 16 as float (exact), 16 at a time */
void cattn_bf16_expand_avx2(float *dst, const uint16_t *src, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        const __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i + 8)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(a, 16));
        _mm256_storeu_si256((__m256i *)(dst + i + 8), _mm256_slli_epi32(b, 16));
    }
    for (; i < n; i++) {
        const uint32_t u = (uint32_t)src[i] << 16;
        memcpy(dst + i, &u, sizeof u);
    }
}

static inline __m256d rint4(__m256d p)            /* to nearest even, |p| < 2^51 */
{
    const __m256d magic = _mm256_set1_pd(6755399441055744.0);
    __asm__("" : "+x"(p));                        /* p stays a rounded product */
    return _mm256_sub_pd(_mm256_add_pd(p, magic), magic);
}

int cattn_quant_row_avx2_u8(uint8_t *q, float *sa, int32_t *za, const float *x, int64_t K)
{
    __m256 vlo = _mm256_setzero_ps(), vhi = vlo, vbad = vlo;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        const __m256 v = _mm256_loadu_ps(x + k);
        vbad = _mm256_or_ps(vbad, _mm256_cmp_ps(_mm256_sub_ps(v, v), _mm256_setzero_ps(),
                                                _CMP_NEQ_UQ));
        vlo = _mm256_min_ps(vlo, v);
        vhi = _mm256_max_ps(vhi, v);
    }
    float l8[8], h8[8];
    _mm256_storeu_ps(l8, vlo);
    _mm256_storeu_ps(h8, vhi);
    int nonfinite = _mm256_movemask_ps(vbad) != 0;
    float lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < 8; i++) {
        lo = l8[i] < lo ? l8[i] : lo;
        hi = h8[i] > hi ? h8[i] : hi;
    }
    for (; k < K; k++) {
        const float v = x[k];
        nonfinite |= !(v - v == 0.0f);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    const double d = (double)hi - (double)lo;
    if (nonfinite || d == 0.0) {
        if (K > 0) memset(q, 0, (size_t)K);
        *za = 0;
        *sa = nonfinite ? NAN : 0.0f;
        return nonfinite;
    }
    const double inv = 255.0 / d;
    double z = _mm256_cvtsd_f64(rint4(_mm256_set1_pd(-(double)lo * inv)));
    z = z < 0 ? 0 : z > 255 ? 255 : z;
    const __m256d vinv = _mm256_set1_pd(inv), vz = _mm256_set1_pd(z);
    const __m256d v0 = _mm256_setzero_pd(), v255 = _mm256_set1_pd(255.0);
    for (k = 0; k + 8 <= K; k += 8) {
        const __m256 v = _mm256_loadu_ps(x + k);
        __m256d a = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vinv);
        __m256d b = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vinv);
        a = _mm256_min_pd(_mm256_max_pd(_mm256_add_pd(rint4(a), vz), v0), v255);
        b = _mm256_min_pd(_mm256_max_pd(_mm256_add_pd(rint4(b), vz), v0), v255);
        const __m128i ia = _mm256_cvtpd_epi32(a), ib = _mm256_cvtpd_epi32(b);
        const __m128i w = _mm_packus_epi32(ia, ib);                /* 8 x u16 */
        _mm_storel_epi64((__m128i *)(q + k), _mm_packus_epi16(w, w));
    }
    for (; k < K; k++) {
        __m256d p = _mm256_set1_pd((double)x[k] * inv);
        double r = _mm256_cvtsd_f64(rint4(p)) + z;
        r = r < 0 ? 0 : r > 255 ? 255 : r;
        q[k] = (uint8_t)r;
    }
    *za = (int32_t)z;
    *sa = (float)(d / 255.0);
    return 0;
}
#endif
