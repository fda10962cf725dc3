/* kernels/avx512/qgemm.c — the int8 micro-kernels on AVX-512 (contract in
 * dispatch.h, cattn_ukr_i8_t): c (m x 16 int32) = sum over k of u8 x s8,
 * then the AVX2 path's epilogue (same bits).
 *
 * Both are exact by construction, like the AVX2 kernel:
 *   AVX-512BW (A in pairs): the pair's 16 columns x 2 weights are
 *     sign-extended to 32 words in one zmm (vpmovsxbw: lane j = column j's
 *     two weights as s16); row i's pair word (u8 a0 in bits 0-15, a1 in
 *     bits 16-31) is broadcast; vpmaddwd (a0 w0 + a1 w1, |.| <= 2 * 255 *
 *     127, no saturation) then vpaddd into the row's accumulator.
 *   AVX512_VNNI (A in quads, dispatch.h i8_quads): two pairs of the panel
 *     (64 bytes) are one zmm; vpermw puts column j's 4 weights (k = 4q ..
 *     4q+3) in lane j; row i's quad word (4 u8) is broadcast; vpdpbusd adds
 *     the 4 u8 x s8 products to the lane in 32 bits with no intermediate
 *     saturation (|sum| <= 4 * 255 * 127). 64 multiply-adds per
 *     instruction, one permute per 5 rows; an odd last pair is loaded alone
 *     (its upper 32 bytes zero; the quad's a2, a3 are 0 past K anyway).
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

/* the VNNI functions' target (tools/emu/simde.sh builds this file with
 * SIMDe's portable AVX-512 and no AVX-512 code generation: CATTN_SIMDE) */
#ifdef CATTN_SIMDE
#define TARGET_VNNI
#else
#define TARGET_VNNI __attribute__((target("avx512vnni")))
#endif

/* AVX-512BW, A in pairs: a (k2, MR) pair words, b the panel's k2 pairs */
static inline __attribute__((always_inline)) void sums_bw(int64_t k2, const uint32_t *a,
                                                          const int8_t *b, int32_t *acc, const int M)
{
#define BWSTEP(i, ci)                                                                   \
    if (M > i) ci = _mm512_add_epi32(ci, _mm512_madd_epi16(_mm512_set1_epi32((int)a[i]), w))
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0;
    for (int64_t p = 0; p < k2; p++, a += 5, b += 32) {
        const __m512i w = _mm512_cvtepi8_epi16(_mm256_loadu_si256((const __m256i *)b));
        BWSTEP(0, c0); BWSTEP(1, c1); BWSTEP(2, c2); BWSTEP(3, c3); BWSTEP(4, c4);
    }
#undef BWSTEP
    _mm512_store_si512((__m512i *)acc, c0);
    if (M > 1) _mm512_store_si512((__m512i *)(acc + 16), c1);
    if (M > 2) _mm512_store_si512((__m512i *)(acc + 32), c2);
    if (M > 3) _mm512_store_si512((__m512i *)(acc + 48), c3);
    if (M > 4) _mm512_store_si512((__m512i *)(acc + 64), c4);
}

/* vpermw's index: lane j (words 2j, 2j+1) = words j and 16 + j of the two
 * pairs: (w[j, 4q], w[j, 4q+1]) and (w[j, 4q+2], w[j, 4q+3]) */
static const int16_t quad_idx[32] __attribute__((aligned(64))) = {
    0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
    8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

#define QSTEP(i, ci)                                                                \
    if (M > i) ci = _mm512_dpbusd_epi32(ci, _mm512_set1_epi32((int)a[i]), w)

/* a: (ceil(k2/2), MR) quad words; b: the panel's k2 pairs (32 bytes each) */
TARGET_VNNI static inline __attribute__((always_inline)) void
sums_vnni(int64_t k2, const uint32_t *a, const int8_t *b, int32_t *acc, const int M)
{
    const __m512i idx = _mm512_load_si512((const void *)quad_idx);
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0;
    for (int64_t p = 0; p + 1 < k2; p += 2, a += 5, b += 64) {
        const __m512i w = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512((const void *)b));
        QSTEP(0, c0); QSTEP(1, c1); QSTEP(2, c2); QSTEP(3, c3); QSTEP(4, c4);
    }
    if (k2 & 1) {                        /* the last pair alone: 32 bytes */
        const __m256i h = _mm256_loadu_si256((const __m256i *)b);
        const __m512i w = _mm512_permutexvar_epi16(
            idx, _mm512_inserti64x4(_mm512_setzero_si512(), h, 0));
        QSTEP(0, c0); QSTEP(1, c1); QSTEP(2, c2); QSTEP(3, c3); QSTEP(4, c4);
    }
    _mm512_store_si512((__m512i *)acc, c0);
    if (M > 1) _mm512_store_si512((__m512i *)(acc + 16), c1);
    if (M > 2) _mm512_store_si512((__m512i *)(acc + 32), c2);
    if (M > 3) _mm512_store_si512((__m512i *)(acc + 48), c3);
    if (M > 4) _mm512_store_si512((__m512i *)(acc + 64), c4);
}

/* one row (decode): the same sums in four independent chains (pairs 8t ..
 * 8t+7 split by quad; integer sums are exact, so their order cannot change
 * a bit), each vpdpbusd waiting on the one four quads back instead of the
 * last, and the weight stream prefetched CATTN_STREAM_PF_I8 bytes ahead
 * (the panels lie back to back: past a panel's end it reaches the next) */
TARGET_VNNI static inline __attribute__((always_inline)) void
sums_vnni_1(int64_t k2, const uint32_t *a, const int8_t *b, int32_t *acc)
{
    const __m512i idx = _mm512_load_si512((const void *)quad_idx);
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0;
    int64_t p = 0;
    for (; p + 7 < k2; p += 8, a += 20, b += 256) {
        _mm_prefetch((const char *)b + CATTN_STREAM_PF_I8, _MM_HINT_T0);
        _mm_prefetch((const char *)b + CATTN_STREAM_PF_I8 + 64, _MM_HINT_T0);
        _mm_prefetch((const char *)b + CATTN_STREAM_PF_I8 + 128, _MM_HINT_T0);
        _mm_prefetch((const char *)b + CATTN_STREAM_PF_I8 + 192, _MM_HINT_T0);
        const __m512i w0 = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512((const void *)b));
        const __m512i w1 = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512((const void *)(b + 64)));
        const __m512i w2 = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512((const void *)(b + 128)));
        const __m512i w3 = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512((const void *)(b + 192)));
        c0 = _mm512_dpbusd_epi32(c0, _mm512_set1_epi32((int)a[0]), w0);
        c1 = _mm512_dpbusd_epi32(c1, _mm512_set1_epi32((int)a[5]), w1);
        c2 = _mm512_dpbusd_epi32(c2, _mm512_set1_epi32((int)a[10]), w2);
        c3 = _mm512_dpbusd_epi32(c3, _mm512_set1_epi32((int)a[15]), w3);
    }
    for (; p + 1 < k2; p += 2, a += 5, b += 64) {
        const __m512i w = _mm512_permutexvar_epi16(idx, _mm512_loadu_si512((const void *)b));
        c0 = _mm512_dpbusd_epi32(c0, _mm512_set1_epi32((int)a[0]), w);
    }
    if (k2 & 1) {
        const __m256i h = _mm256_loadu_si256((const __m256i *)b);
        const __m512i w = _mm512_permutexvar_epi16(
            idx, _mm512_inserti64x4(_mm512_setzero_si512(), h, 0));
        c1 = _mm512_dpbusd_epi32(c1, _mm512_set1_epi32((int)a[0]), w);
    }
    c0 = _mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3));
    _mm512_store_si512((__m512i *)acc, c0);
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

TARGET_VNNI void
cattn_ukr_avx512vnni_i8(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                        const int32_t *za, const float *sa, const int32_t *colsum,
                        const float *sw, const float *bias, int act, float *c, int64_t ldc)
{
    int32_t acc[5 * 16] __attribute__((aligned(64)));
    switch (m) {
    case 1: sums_vnni_1(k2, a, b, acc); break;
    case 2: sums_vnni(k2, a, b, acc, 2); break;
    case 3: sums_vnni(k2, a, b, acc, 3); break;
    case 4: sums_vnni(k2, a, b, acc, 4); break;
    default: sums_vnni(k2, a, b, acc, 5); m = 5; break;
    }
    cattn_i8_epilogue_avx2(acc, m, za, sa, colsum, sw, bias, act, c, ldc);
}
#endif
