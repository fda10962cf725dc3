/* kernels/avx2/quant.c — bfloat16 widening, int8 row quantization and the
 * group-wise formats' int8 activation groups (contracts in dispatch.h).
 *
 * Rows (the formula in cattn.h, cattn_quantize_rows), 16 floats at a time:
 *   lo = min(0, min x), hi = max(0, max x), d = hi - lo, inv = 255 / d (double)
 *   q = clamp(rint(x *f (float)inv) + za, 0, 255),  za = clamp(rint(-lo * inv), 0, 255)
 * The float products x * inv are rounded before the rounding constant is
 * added (an empty asm keeps the compiler from fusing them into an FMA), so
 * the bits equal the portable loop's. The values go straight into the
 * packed A words of the int8 micro-kernels (pairs or quads at a stride):
 * no byte row in between.
 *
 * Groups of 32 (the driver's formula in q4gemm.c, quantize_row), 32 floats
 * at a time:
 *   amax = max |x|, inv = 127 / amax (float), q = clamp(rint(x *f inv), -127, 127)
 * the same rounded products as the portable loop (no FMA), so the same
 * bits. */
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

/* to nearest even for |p| < 2^22, p kept a rounded product */
static inline __m256 rint8(__m256 p)
{
    const __m256 magic = _mm256_set1_ps(12582912.0f);        /* 1.5 * 2^23 */
    __asm__("" : "+x"(p));
    return _mm256_sub_ps(_mm256_add_ps(p, magic), magic);
}

static inline float rint1(float p)
{
    __asm__("" : "+x"(p));
    return (p + 12582912.0f) - 12582912.0f;
}

/* words p0 .. p0 + n - 1 of the packed row (g = 2: pairs of u16, g = 4:
 * quads of bytes) from the u8 values q[0 .. g*n) */
static inline void put_words(uint32_t *dst, int64_t stride, int g, const uint8_t *q, int64_t p0,
                             int64_t n)
{
    for (int64_t p = 0; p < n; p++) {
        const uint8_t *r = q + g * p;
        dst[(p0 + p) * stride] = g == 4 ? (uint32_t)r[0] | (uint32_t)r[1] << 8 |
                                              (uint32_t)r[2] << 16 | (uint32_t)r[3] << 24
                                        : (uint32_t)r[0] | (uint32_t)r[1] << 16;
    }
}

/* the values 16 at a time into q8 (g = 1) or the words at w (g = 2, 4);
 * returns how many were done (K rounded down to 16) */
static inline __attribute__((always_inline)) int64_t
quant16(uint8_t *q8, uint32_t *w, int64_t stride, int g, const float *x, int64_t K, float invf,
        float zf, const int scaled)
{
    const __m256 vinv = _mm256_set1_ps(invf), vz = _mm256_set1_ps(zf);
    const __m256 vpre = _mm256_set1_ps(0x1p64f);
    const __m256 v0 = _mm256_setzero_ps(), v255 = _mm256_set1_ps(255.0f);
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
        __m256 a = _mm256_loadu_ps(x + k), b = _mm256_loadu_ps(x + k + 8);
        if (scaled) {
            a = _mm256_mul_ps(a, vpre);
            b = _mm256_mul_ps(b, vpre);
        }
        a = _mm256_mul_ps(a, vinv);
        b = _mm256_mul_ps(b, vinv);
        a = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(rint8(a), vz), v0), v255);
        b = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(rint8(b), vz), v0), v255);
        /* 16 u16 in k order (packus works per 128-bit lane: permute) */
        const __m256i h = _mm256_permute4x64_epi64(
            _mm256_packus_epi32(_mm256_cvtps_epi32(a), _mm256_cvtps_epi32(b)), 0xD8);
        if (g == 2) {                                 /* 8 pairs: the u16 words */
            uint32_t t[8] __attribute__((aligned(32)));
            _mm256_store_si256((__m256i *)t, h);
            uint32_t *o = w + (k / 2) * stride;
            for (int j = 0; j < 8; j++) o[j * stride] = t[j];
        } else {
            const __m128i b16 = _mm_packus_epi16(_mm256_castsi256_si128(h),
                                                 _mm256_extracti128_si256(h, 1));
            if (g == 1) {
                _mm_storeu_si128((__m128i *)(q8 + k), b16);
            } else {                                  /* 4 quads */
                uint32_t *o = w + (k / 4) * stride;
                o[0] = (uint32_t)_mm_cvtsi128_si32(b16);
                o[stride] = (uint32_t)_mm_extract_epi32(b16, 1);
                o[2 * stride] = (uint32_t)_mm_extract_epi32(b16, 2);
                o[3 * stride] = (uint32_t)_mm_extract_epi32(b16, 3);
            }
        }
    }
    return k;
}

int cattn_quant_row_avx2_u8(void *dst, int64_t stride, int g, float *sa, int32_t *za,
                            const float *x, int64_t K)
{
    /* lo, hi; NaN flagged by an unordered compare, +-inf by lo / hi */
    __m256 vlo = _mm256_setzero_ps(), vhi = vlo, vnan = vlo;
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        const __m256 v = _mm256_loadu_ps(x + k);
        vnan = _mm256_or_ps(vnan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        vlo = _mm256_min_ps(vlo, v);
        vhi = _mm256_max_ps(vhi, v);
    }
    float l8[8], h8[8];
    _mm256_storeu_ps(l8, vlo);
    _mm256_storeu_ps(h8, vhi);
    int nonfinite = _mm256_movemask_ps(vnan) != 0;
    float lo = 0.0f, hi = 0.0f;
    for (int i = 0; i < 8; i++) {
        lo = l8[i] < lo ? l8[i] : lo;
        hi = h8[i] > hi ? h8[i] : hi;
    }
    for (; k < K; k++) {
        const float v = x[k];
        nonfinite |= v != v;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    nonfinite |= lo == -INFINITY || hi == INFINITY;
    const double d = (double)hi - (double)lo;
    const int64_t nw = g == 1 ? K : (K + g - 1) / g;      /* words (bytes) to write */
    if (nonfinite || d == 0.0) {
        if (g == 1) {
            if (K > 0) memset(dst, 0, (size_t)K);
        } else {
            for (int64_t p = 0; p < nw; p++) ((uint32_t *)dst)[p * stride] = 0;
        }
        *za = 0;
        *sa = nonfinite ? NAN : 0.0f;
        return nonfinite;
    }
    const double inv = 255.0 / d;
    double z = -(double)lo * inv;
    __asm__("" : "+x"(z));                            /* a rounded product (no FMA) */
    z = (z + 6755399441055744.0) - 6755399441055744.0;         /* rint, |z| < 2^51 */
    z = z < 0 ? 0 : z > 255 ? 255 : z;
    /* (float)inv would overflow: the row is scaled by pre = 2^64 first (exact) */
    const int scaled = inv > 0x1p126;
    const float pre = scaled ? 0x1p64f : 1.0f;
    const float invf = (float)(inv / pre), zf = (float)z;
    uint8_t *q8 = dst;
    uint32_t *w = dst;
    if (scaled)
        k = quant16(q8, w, stride, g, x, K, invf, zf, 1);
    else
        k = quant16(q8, w, stride, g, x, K, invf, zf, 0);
    if (k < K) {                                      /* the last < 16 values */
        uint8_t t[16] = {0};
        for (int64_t i = k; i < K; i++) {
            float r = rint1((x[i] * pre) * invf) + zf;
            r = r < 0.0f ? 0.0f : r > 255.0f ? 255.0f : r;
            t[i - k] = (uint8_t)r;
        }
        if (g == 1)
            memcpy(q8 + k, t, (size_t)(K - k));
        else
            put_words(w, stride, g, t, k / g, nw - k / g);
    }
    *za = (int32_t)z;
    *sa = (float)(d / 255.0);
    return 0;
}

/* lane j of the result: the largest of v[j]'s 8 lanes (no NaN) */
static inline __m256 hmax8_ps(const __m256 v[8])
{
    __m256 p[4];
    for (int i = 0; i < 4; i++)        /* per 128-bit half: v[2i]'s and v[2i+1]'s pairs */
        p[i] = _mm256_max_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                             _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    const __m256 ab = _mm256_max_ps(_mm256_shuffle_ps(p[0], p[1], 0x44), _mm256_shuffle_ps(p[0], p[1], 0xEE));
    const __m256 cd = _mm256_max_ps(_mm256_shuffle_ps(p[2], p[3], 0x44), _mm256_shuffle_ps(p[2], p[3], 0xEE));
    return _mm256_max_ps(_mm256_permute2f128_ps(ab, cd, 0x20), _mm256_permute2f128_ps(ab, cd, 0x31));
}

/* one group's 32 values (4 ymm) with inv = 127 / amax into qx[0, 32) and
 * its two half sums (values 0-15, 16-31) */
static inline __attribute__((always_inline)) void
quant_group(int8_t *qx, const float *v, __m256 inv, int32_t *first, int32_t *second)
{
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    __m256i q[4];
    for (int t = 0; t < 4; t++)
        q[t] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(
            rint8(_mm256_mul_ps(_mm256_loadu_ps(v + 8 * t), inv)), lo), hi));
    /* 32 bytes in k order (the packs work per 128-bit lane: permute) */
    const __m256i b = _mm256_permutevar8x32_epi32(
        _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])), order);
    _mm256_storeu_si256((__m256i *)qx, b);
    const __m256i h0 = _mm256_add_epi32(q[0], q[1]), h1 = _mm256_add_epi32(q[2], q[3]);
    __m128i s0 = _mm_add_epi32(_mm256_castsi256_si128(h0), _mm256_extracti128_si256(h0, 1));
    const __m128i s1 = _mm_add_epi32(_mm256_castsi256_si128(h1), _mm256_extracti128_si256(h1, 1));
    s0 = _mm_hadd_epi32(s0, s1);                    /* s0 s0 s1 s1 partials */
    s0 = _mm_hadd_epi32(s0, s0);
    *first = _mm_cvtsi128_si32(s0);
    *second = _mm_extract_epi32(s0, 1);
}

/* dispatch.h, cattn_quant_q8g_t: the full groups g < G of a row x, 8
 * groups a pass: their maxima side by side (one division for 8 scales),
 * then each group quantized from L1; NaN and +-inf are flagged as the
 * values are read (x - x is +0 only for a finite x) */
int cattn_quant_q8g_avx2(int8_t *qx, float *sx, int32_t *xs, int32_t *xs16, float *sxs,
                         const float *x, int64_t G)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 odd = _mm256_setzero_ps();                   /* x - x: nonzero bits for NaN, inf */
    int64_t g = 0;
    for (; g + 8 <= G; g += 8) {
        const float *v = x + 32 * g;
        __m256 m[8];
        for (int j = 0; j < 8; j++) {
            __m256 a[4];
            for (int t = 0; t < 4; t++) {
                a[t] = _mm256_loadu_ps(v + 32 * j + 8 * t);
                odd = _mm256_or_ps(odd, _mm256_sub_ps(a[t], a[t]));
                a[t] = _mm256_andnot_ps(sign, a[t]);
            }
            m[j] = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
        }
        const __m256 amax = hmax8_ps(m);
        const __m256 inv = _mm256_div_ps(_mm256_set1_ps(127.0f), amax);
        /* sx = (float)((double)amax / 127), as the driver's */
        const __m256d d127 = _mm256_set1_pd(127.0);
        const __m256 s = _mm256_set_m128(
            _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(amax, 1)), d127)),
            _mm256_cvtpd_ps(_mm256_div_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(amax)), d127)));
        float am[8], iv[8], sv[8];
        _mm256_storeu_ps(am, amax);
        _mm256_storeu_ps(iv, inv);
        _mm256_storeu_ps(sv, s);
        for (int j = 0; j < 8; j++) {
            const int64_t k = g + j;
            if (!(am[j] >= 0x1p-100f)) {                /* 0 or tiny: the driver's */
                sx[k] = -1.0f;
                continue;
            }
            int32_t first, second;
            quant_group(qx + 32 * k, v + 32 * j, _mm256_set1_ps(iv[j]), &first, &second);
            sx[k] = sv[j];
            xs[k] = first + second;
            xs16[2 * k] = first;
            xs16[2 * k + 1] = second;
            sxs[k] = sv[j] * (float)(first + second);
        }
    }
    for (; g < G; g++) {
        const float *v = x + 32 * g;
        __m256 a[4];
        for (int t = 0; t < 4; t++) {
            a[t] = _mm256_loadu_ps(v + 8 * t);
            odd = _mm256_or_ps(odd, _mm256_sub_ps(a[t], a[t]));
            a[t] = _mm256_andnot_ps(sign, a[t]);
        }
        const __m256 m = _mm256_max_ps(_mm256_max_ps(a[0], a[1]), _mm256_max_ps(a[2], a[3]));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (!(amax >= 0x1p-100f)) {                     /* 0 or tiny: the driver's */
            sx[g] = -1.0f;
            continue;
        }
        int32_t first, second;
        quant_group(qx + 32 * g, v, _mm256_set1_ps(127.0f / amax), &first, &second);
        sx[g] = (float)((double)amax / 127.0);
        xs[g] = first + second;
        xs16[2 * g] = first;
        xs16[2 * g + 1] = second;
        sxs[g] = sx[g] * (float)(first + second);
    }
    return !_mm256_testz_si256(_mm256_castps_si256(odd), _mm256_castps_si256(odd));
}
#endif
