/* kernels/avx512/qgemm.c — the int8 micro-kernel on AVX-512 (contract in
 * dispatch.h, cattn_ukr_i8_t): c (m x 16 int32) = sum over k pairs of u8
 * pairs x s8 pairs, then the AVX2 path's epilogue (same bits).
 *
 * Both forms are exact by construction, like the AVX2 kernel: the pair's
 * 16 columns x 2 weights are sign-extended to 32 words in one zmm
 * (vpmovsxbw: lane j = column j's two weights as s16); row i's pair word
 * (u8 a0 in bits 0-15, a1 in bits 16-31) is broadcast;
 *   AVX-512BW:   vpmaddwd (a0 w0 + a1 w1, |.| <= 2 * 255 * 127, no
 *                saturation) then vpaddd into the row's accumulator;
 *   AVX512_VNNI: vpdpbusd, which adds u8 x s8 byte products in 32 bits
 *                with no intermediate saturation: the word's bytes are
 *                (a0, 0, a1, 0) and the lane's (w0, sign, w1, sign), so the
 *                four products are a0 w0 + 0 + a1 w1 + 0: the same sum.
 * 16 columns per instruction (AVX2: 8), one zmm accumulator per row (m <= 5).
 */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include <immintrin.h>
#include "kernels.h"
#include "../avx2/kernels.h"

#if CATTN_MR_I8 != 5
#error "kernels/avx512/qgemm.c: the tile has 5 rows (config.h CATTN_MR_I8)"
#endif

#define SUMS_BODY(STEP)                                                           \
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0;        \
    for (int64_t p = 0; p < k2; p++, a += 5, b += 32) {                             \
        const __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b)); \
        c0 = STEP(c0, _mm512_set1_epi32((int)a[0]), w);                             \
        if (M > 1) c1 = STEP(c1, _mm512_set1_epi32((int)a[1]), w);                  \
        if (M > 2) c2 = STEP(c2, _mm512_set1_epi32((int)a[2]), w);                  \
        if (M > 3) c3 = STEP(c3, _mm512_set1_epi32((int)a[3]), w);                  \
        if (M > 4) c4 = STEP(c4, _mm512_set1_epi32((int)a[4]), w);                  \
    }                                                                               \
    _mm512_store_si512((__m512i *)acc, c0);                                         \
    if (M > 1) _mm512_store_si512((__m512i *)(acc + 16), c1);                       \
    if (M > 2) _mm512_store_si512((__m512i *)(acc + 32), c2);                       \
    if (M > 3) _mm512_store_si512((__m512i *)(acc + 48), c3);                       \
    if (M > 4) _mm512_store_si512((__m512i *)(acc + 64), c4)

static inline __m512i step_bw(__m512i c, __m512i a, __m512i w)
{
    return _mm512_add_epi32(c, _mm512_madd_epi16(a, w));
}

static inline __attribute__((always_inline)) void sums_bw(int64_t k2, const uint32_t *a,
                                                          const int8_t *b, int32_t *acc, const int M)
{
    SUMS_BODY(step_bw);
}

__attribute__((target("avx512vnni"))) static inline __m512i step_vnni(__m512i c, __m512i a,
                                                                      __m512i w)
{
    return _mm512_dpbusd_epi32(c, a, w);
}

__attribute__((target("avx512vnni"))) static inline __attribute__((always_inline)) void
sums_vnni(int64_t k2, const uint32_t *a, const int8_t *b, int32_t *acc, const int M)
{
    SUMS_BODY(step_vnni);
}

void cattn_ukr_avx512_i8(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                         const int32_t *za, const float *sa, const int32_t *colsum,
                         const float *sw, const float *bias, int act, float *c, int64_t ldc)
{
    int32_t acc[5 * 16] __attribute__((aligned(64)));
    switch (m) {
    case 1: sums_bw(k2, a, b, acc, 1); break;
    case 2: sums_bw(k2, a, b, acc, 2); break;
    case 3: sums_bw(k2, a, b, acc, 3); break;
    case 4: sums_bw(k2, a, b, acc, 4); break;
    default: sums_bw(k2, a, b, acc, 5); m = 5; break;
    }
    cattn_i8_epilogue_avx2(acc, m, za, sa, colsum, sw, bias, act, c, ldc);
}

__attribute__((target("avx512vnni"))) void
cattn_ukr_avx512vnni_i8(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                        const int32_t *za, const float *sa, const int32_t *colsum,
                        const float *sw, const float *bias, int act, float *c, int64_t ldc)
{
    int32_t acc[5 * 16] __attribute__((aligned(64)));
    switch (m) {
    case 1: sums_vnni(k2, a, b, acc, 1); break;
    case 2: sums_vnni(k2, a, b, acc, 2); break;
    case 3: sums_vnni(k2, a, b, acc, 3); break;
    case 4: sums_vnni(k2, a, b, acc, 4); break;
    default: sums_vnni(k2, a, b, acc, 5); m = 5; break;
    }
    cattn_i8_epilogue_avx2(acc, m, za, sa, colsum, sw, bias, act, c, ldc);
}
#endif
