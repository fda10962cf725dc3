/* kernels/avx2/q4gemm.c — the int4 and int8g micro-kernels on AVX2
 * (contracts in dispatch.h: cattn_ukr_q4_t, cattn_ukr_q8g_t; same bits as
 * the portable ones). Not here: the driver (q4gemm.c: row quantization,
 * panels, threads).
 *
 * Shapes: m x 16 tiles (m = 1..4 rows of quantized activations, 16 output
 * columns) over G groups of 32 inputs. Variants by rows and values:
 *   tile / tile_both          int4; one row, 2-4 rows (float accumulators
 *                             in L1, the 2 m group sums in registers)
 *   tile8 / tile8_half        int8g, each byte split into two nibbles
 *   tile8_z128_rows / _both   int8g Q8_0 (z = 128, no sub-scales): sign
 *                             trick; 1-2 rows, 3-4 rows
 *   tile8n_row / tile8n_half  int8g whose every u < 64: bytes unsplit
 *                             (cattn_ukr_avx2_q8g_n)
 * The integer group sums are exact in every variant, so each gives the
 * contract's bits; PIN keeps accumulators in registers.
 *
 * int4:
 * A group's 64-byte chunk is two ymm (columns 0-7, 8-15; 4 bytes per
 * column). Its low and high nibbles (vpand; vpsrlw 4 + vpand) are u8
 * weights against row i's 4 broadcast s8 activations (vpmaddubsw: pairs
 * into s16, |.| <= 2 * 15 * 127); the 8 products of a group's 4 chunks add
 * in s16 (|.| <= 16 * 15 * 127 = 30480: no overflow), vpmaddwd with ones
 * makes the column's int32 group sum, exact. Then the contract's float
 * steps (vcvtdq2ps, vmulps, vfmadd). float16 scales are widened with
 * integer shifts and adds (no F16C needed; scales8), or, in q4gemm_f16c.c's
 * copy of these kernels (the table's choice where the CPU has F16C), by
 * vcvtph2ps: one instruction for 8 instead of ~12 (a one-row int4 GEMV in
 * cache 1.19x faster on Zen 3). */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include <immintrin.h>
#include "kernels.h"

#ifdef CATTN_Q4_F16C
#define Q4NAME(f) f##_f16c
#else
#define Q4NAME(f) f
#endif

#if CATTN_MR_Q4 != 4 || CATTN_NR_Q4 != 16 || CATTN_Q4_GROUP != 32
#error "kernels/avx2/q4gemm.c: the tile is 4 rows x 16 columns, groups of 32"
#endif

/* 8 scales at a (float32, or float16 when H16: widened exactly without
 * F16C and without a subnormal operand: a float16's exponent and mantissa
 * bits shifted into float32's fields and its exponent rebiased by an
 * integer add (+112); a subnormal float16 (exponent 0) rebiased to 2^-14 +
 * m 2^-24 and 2^-14 subtracted (exact). Multiplying the subnormal float32
 * the shifted bits form by 2^112 instead cost a microcode assist per
 * group: GGUF Q6_K's scales are often float16 subnormals (a 1.4x slower
 * GEMV on Zen 3). Finite values only. */
static inline __attribute__((always_inline)) __m256 scales8(const void *a, int64_t i, const int H16)
{
    if (!H16) return _mm256_loadu_ps((const float *)a + i);
#ifdef CATTN_Q4_F16C                                 /* q4gemm_f16c.c: one vcvtph2ps, exact */
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)a + i)));
#endif
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)a + i)));
    const __m256i em = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7FFF)), 13);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
    const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(em, _mm256_set1_epi32(112 << 23)));
    const __m256 tiny = _mm256_sub_ps(_mm256_castsi256_ps(_mm256_add_epi32(em, _mm256_set1_epi32(113 << 23))),
                                      _mm256_set1_ps(0x1p-14f));
    const __m256i is_tiny = _mm256_cmpeq_epi32(_mm256_and_si256(em, _mm256_set1_epi32(0x7C00 << 13)),
                                               _mm256_setzero_si256());
    return _mm256_or_ps(_mm256_blendv_ps(normal, tiny, _mm256_castsi256_ps(is_tiny)),
                        _mm256_castsi256_ps(sign));
}

/* int4's two-level scales (GGUF Q4_K; dispatch.h, cattn_ukr_q4k_t): 8
 * columns' D (float16, widened exactly) times their u8 sub-scales s of
 * group g: the float32 products are exact (11 x 8 bits), the same values
 * as the driver's expansion */
static inline __attribute__((always_inline)) __m256 kmul(__m256 Dv, const uint8_t *s, int64_t i)
{
    const __m256i u = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(s + i)));
    return _mm256_mul_ps(Dv, _mm256_cvtepi32_ps(u));
}

/* keeps an accumulator in its register: without it gcc re-associates the
 * exact integer adds into a tree of all of a group's products at once and
 * spills them to the stack */
#define PIN(v) __asm__("" : "+x"(v))

/* the weight stream PF bytes ahead (int4 groups: 256 bytes and their
 * scales; int8g: 512 bytes at twice the distance), as the AVX-512 kernels */
#define PF 4096
static inline __attribute__((always_inline)) void
pf4(const uint8_t *b, const void *d, const void *mn, int64_t g, const int H16)
{
    for (int t = 0; t < 4; t++) _mm_prefetch((const char *)b + PF + 64 * t, _MM_HINT_T0);
    const int64_t sb = (H16 ? 2 : 4) * g * 16, spf = H16 ? PF / 8 : PF / 4;
    _mm_prefetch((const char *)d + sb + spf, _MM_HINT_T0);
    if (mn) _mm_prefetch((const char *)mn + sb + spf, _MM_HINT_T0);
}
static inline __attribute__((always_inline)) void
pf4k(const uint8_t *b, const uint8_t *ksc, const uint8_t *km, int64_t g)
{
    for (int t = 0; t < 4; t++) _mm_prefetch((const char *)b + PF + 64 * t, _MM_HINT_T0);
    _mm_prefetch((const char *)ksc + g * 16 + PF / 16, _MM_HINT_T0);
    _mm_prefetch((const char *)km + g * 16 + PF / 16, _MM_HINT_T0);
}
static inline __attribute__((always_inline)) void pf8(const uint8_t *b)
{
    for (int t = 0; t < 8; t++) _mm_prefetch((const char *)b + 2 * PF + 64 * t, _MM_HINT_T0);
}

/* an int4 group's start: the prefetches, and with two-level scales
 * (K2) the 16 columns' D and Dmin at the first group of each 8 */
static inline __attribute__((always_inline)) void
group_start(int64_t g, const uint8_t *b, const void *d, const void *mn, const int H16,
            const cattn_q4k_scales *k, const int K2, __m256 kD[2], __m256 kDm[2])
{
    if (K2) {
        pf4k(b, k->sc, k->m, g);
        if ((g & 7) == 0)
            for (int h = 0; h < 2; h++) {
                kD[h] = scales8(k->D, (g >> 3) * 16 + 8 * h, 1);
                kDm[h] = scales8(k->Dmin, (g >> 3) * 16 + 8 * h, 1);
            }
    } else {
        pf4(b, d, mn, g, H16);
    }
}

static inline __attribute__((always_inline)) void
tile(int64_t G, const uint8_t *b, const void *d, const void *mn, const int H16, int z, const int M,
     const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs, const float *sxs,
     int64_t lds, float *c, int64_t ldc, const cattn_q4k_scales *k, const int K2)
{
    const __m256i low = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const __m256 neg = _mm256_set1_ps(-0.0f);
    __m256 f[4][2], kD[2] = {neg, neg}, kDm[2] = {neg, neg};
    for (int i = 0; i < 4; i++) f[i][0] = f[i][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < G; g++, b += 256) {
        group_start(g, b, d, mn, H16, k, K2, kD, kDm);
        for (int h = 0; h < 2; h++) {
            __m256i s[4];
            for (int i = 0; i < M; i++) s[i] = _mm256_setzero_si256();
            for (int t = 0; t < 4; t++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 64 * t + 32 * h));
                const __m256i lo = _mm256_and_si256(v, low);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                for (int i = 0; i < M; i++) {
                    const int8_t *a = qx + i * ldq + g * 32 + 8 * t;
                    int32_t w0, w1;
                    __builtin_memcpy(&w0, a, 4);
                    __builtin_memcpy(&w1, a + 4, 4);
                    s[i] = _mm256_add_epi16(s[i], _mm256_maddubs_epi16(lo, _mm256_set1_epi32(w0)));
                    s[i] = _mm256_add_epi16(s[i], _mm256_maddubs_epi16(hi, _mm256_set1_epi32(w1)));
                }
            }
            const __m256 dv = K2 ? kmul(kD[h], k->sc, g * 16 + 8 * h) : scales8(d, g * 16 + 8 * h, H16);
            const __m256 mv = K2 ? _mm256_xor_ps(kmul(kDm[h], k->m, g * 16 + 8 * h), neg)
                              : mn ? scales8(mn, g * 16 + 8 * h, H16) : _mm256_setzero_ps();
            for (int i = 0; i < M; i++) {
                const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(s[i], ones),
                                                      _mm256_set1_epi32(z * xs[i * lds + g]));
                const __m256 ds = _mm256_mul_ps(dv, _mm256_set1_ps(sx[i * lds + g]));
                f[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), ds, f[i][h]);
                if (K2 || mn) f[i][h] = _mm256_fmadd_ps(mv, _mm256_set1_ps(sxs[i * lds + g]), f[i][h]);
            }
        }
    }
    for (int i = 0; i < M; i++) {
        _mm256_storeu_ps(c + i * ldc, f[i][0]);
        _mm256_storeu_ps(c + i * ldc + 8, f[i][1]);
    }
}

/* m >= 2 (compute-bound): both 8-column halves in one pass, each
 * activation word broadcast once for the two halves, each product added to
 * its row's group sum at once (the 2 x m sums, 4 nibble vectors, 2
 * broadcasts and one product fit the 16 ymm registers: no spills; adding
 * each chunk's two products first, as before, needed a 17th and spilled
 * ~40 times a group: a 4-row decode step of a Qwen2.5-0.5B-shaped Q4_0
 * file 0.978-0.986x the time, a 128-token prefill 0.964x, on Zen 3), the
 * float accumulators in memory (an fma from and a store to L1 per row,
 * half and group). The same integer sums and float steps per column in
 * the same order as tile (same bits). One 8-column half at a time over all
 * G groups instead (a panel read twice, every word broadcast twice: 15%
 * more instructions) made a 4-row decode step 6-10% slower on Zen 3. */
static inline __attribute__((always_inline)) void
tile_both(int64_t G, const uint8_t *b, const void *d, const void *mn, const int H16, int z,
              const int M, const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
              const float *sxs, int64_t lds, float *c, int64_t ldc, const cattn_q4k_scales *k,
              const int K2)
{
    const __m256 neg = _mm256_set1_ps(-0.0f);
    float f[4][16] __attribute__((aligned(32)));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 16; j++) f[i][j] = 0.0f;
    __m256 kD[2] = {neg, neg}, kDm[2] = {neg, neg};
    for (int64_t g = 0; g < G; g++, b += 256) {
        group_start(g, b, d, mn, H16, k, K2, kD, kDm);
        __m256i s[4][2];
        for (int i = 0; i < M; i++) s[i][0] = s[i][1] = _mm256_setzero_si256();
        for (int t = 0; t < 4; t++) {
            const __m256i low = _mm256_set1_epi8(15);
            const __m256i v0 = _mm256_loadu_si256((const __m256i *)(b + 64 * t));
            const __m256i v1 = _mm256_loadu_si256((const __m256i *)(b + 64 * t + 32));
            const __m256i lo0 = _mm256_and_si256(v0, low), lo1 = _mm256_and_si256(v1, low);
            const __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), low);
            const __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), low);
            for (int i = 0; i < M; i++) {
                const int8_t *a = qx + i * ldq + g * 32 + 8 * t;
                int32_t w0, w1;
                __builtin_memcpy(&w0, a, 4);
                __builtin_memcpy(&w1, a + 4, 4);
                const __m256i a0 = _mm256_set1_epi32(w0), a1 = _mm256_set1_epi32(w1);
                s[i][0] = _mm256_add_epi16(s[i][0], _mm256_maddubs_epi16(lo0, a0));
                PIN(s[i][0]);
                s[i][1] = _mm256_add_epi16(s[i][1], _mm256_maddubs_epi16(lo1, a0));
                PIN(s[i][1]);
                s[i][0] = _mm256_add_epi16(s[i][0], _mm256_maddubs_epi16(hi0, a1));
                PIN(s[i][0]);
                s[i][1] = _mm256_add_epi16(s[i][1], _mm256_maddubs_epi16(hi1, a1));
                PIN(s[i][1]);
            }
        }
        const __m256i ones = _mm256_set1_epi16(1);
        for (int h = 0; h < 2; h++) {
            const __m256 dv = K2 ? kmul(kD[h], k->sc, g * 16 + 8 * h) : scales8(d, g * 16 + 8 * h, H16);
            const __m256 mv = K2 ? _mm256_xor_ps(kmul(kDm[h], k->m, g * 16 + 8 * h), neg)
                              : mn ? scales8(mn, g * 16 + 8 * h, H16) : _mm256_setzero_ps();
            for (int i = 0; i < M; i++) {
                const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(s[i][h], ones),
                                                      _mm256_set1_epi32(z * xs[i * lds + g]));
                const __m256 ds = _mm256_mul_ps(dv, _mm256_set1_ps(sx[i * lds + g]));
                __m256 fv = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), ds, _mm256_load_ps(f[i] + 8 * h));
                if (K2 || mn) fv = _mm256_fmadd_ps(mv, _mm256_set1_ps(sxs[i * lds + g]), fv);
                _mm256_store_ps(f[i] + 8 * h, fv);
            }
        }
    }
    for (int i = 0; i < M; i++) {
        _mm256_storeu_ps(c + i * ldc, _mm256_load_ps(f[i]));
        _mm256_storeu_ps(c + i * ldc + 8, _mm256_load_ps(f[i] + 8));
    }
}

#define TILES(H, K2)                                                                     \
    switch (m) {                                                                         \
    case 1: tile(G, b, d, mn, H, z, 1, qx, ldq, sx, xs, sxs, lds, c, ldc, k, K2); break; \
    case 2: tile_both(G, b, d, mn, H, z, 2, qx, ldq, sx, xs, sxs, lds, c, ldc, k, K2); break; \
    case 3: tile_both(G, b, d, mn, H, z, 3, qx, ldq, sx, xs, sxs, lds, c, ldc, k, K2); break; \
    default: tile_both(G, b, d, mn, H, z, 4, qx, ldq, sx, xs, sxs, lds, c, ldc, k, K2); break; \
    }

void Q4NAME(cattn_ukr_avx2_q4)(int64_t G, const uint8_t *b, const void *d, const void *mn, int h16,
                       int z, int m, const int8_t *qx, int64_t ldq, const float *sx,
                       const int32_t *xs, const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    const cattn_q4k_scales *k = NULL;
    if (h16) {
        TILES(1, 0)
    } else {
        TILES(0, 0)
    }
}

/* two-level scales (dispatch.h, cattn_ukr_q4k_t): d and mn computed per
 * group from k's panel arrays, z = 0 */
void Q4NAME(cattn_ukr_avx2_q4k)(int64_t G, const uint8_t *b, const cattn_q4k_scales *k, int m,
                        const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
                        const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    const void *d = NULL, *mn = NULL;
    const int z = 0;
    TILES(0, 1)
}

/* int8g (dispatch.h, cattn_ukr_q8g_t): a u8 value is 16 uh + ul with both
 * nibbles in [0, 15], so vpmaddubsw on each nibble against the same s8
 * activations stays exact (|.| <= 2 * 15 * 127, 8 products of a sub-block
 * of 16 in s16 <= 15240); isum = 16 isum_h + isum_l in int32. */
static inline __attribute__((always_inline)) void
tile8(int64_t G, const uint8_t *b, const void *d, const void *mn, const int8_t *sub, const int H16,
      int z, const int M, const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
      const int32_t *xs16, const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    const __m256i low = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    __m256 f[4][2];
    for (int i = 0; i < 4; i++) f[i][0] = f[i][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < G; g++, b += 512) {
        pf8(b);
        for (int h = 0; h < 2; h++) {
            __m256i part[4][2];
            for (int sb = 0; sb < 2; sb++) {
                __m256i sl[4], sh[4];
                for (int i = 0; i < M; i++) sl[i] = sh[i] = _mm256_setzero_si256();
                for (int t = 4 * sb; t < 4 * sb + 4; t++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 64 * t + 32 * h));
                    const __m256i lo = _mm256_and_si256(v, low);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                    for (int i = 0; i < M; i++) {
                        int32_t w;
                        __builtin_memcpy(&w, qx + i * ldq + g * 32 + 4 * t, 4);
                        const __m256i a = _mm256_set1_epi32(w);
                        sl[i] = _mm256_add_epi16(sl[i], _mm256_maddubs_epi16(lo, a));
                        sh[i] = _mm256_add_epi16(sh[i], _mm256_maddubs_epi16(hi, a));
                    }
                }
                for (int i = 0; i < M; i++)
                    part[i][sb] = _mm256_add_epi32(_mm256_madd_epi16(sl[i], ones),
                                                   _mm256_slli_epi32(_mm256_madd_epi16(sh[i], ones), 4));
            }
            const __m256 dv = scales8(d, g * 16 + 8 * h, H16);
            const __m256 mv = mn ? scales8(mn, g * 16 + 8 * h, H16) : _mm256_setzero_ps();
            __m256i s0 = _mm256_setzero_si256(), s1 = s0;
            if (sub) {
                s0 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sub + g * 32 + 8 * h)));
                s1 = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sub + g * 32 + 16 + 8 * h)));
            }
            for (int i = 0; i < M; i++) {
                __m256i t;
                if (sub) {
                    const __m256i t0 = _mm256_sub_epi32(part[i][0], _mm256_set1_epi32(z * xs16[i * 2 * lds + 2 * g]));
                    const __m256i t1 = _mm256_sub_epi32(part[i][1], _mm256_set1_epi32(z * xs16[i * 2 * lds + 2 * g + 1]));
                    t = _mm256_add_epi32(_mm256_mullo_epi32(s0, t0), _mm256_mullo_epi32(s1, t1));
                } else {
                    t = _mm256_sub_epi32(_mm256_add_epi32(part[i][0], part[i][1]),
                                         _mm256_set1_epi32(z * xs[i * lds + g]));
                }
                const __m256 ds = _mm256_mul_ps(dv, _mm256_set1_ps(sx[i * lds + g]));
                f[i][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), ds, f[i][h]);
                if (mn) f[i][h] = _mm256_fmadd_ps(mv, _mm256_set1_ps(sxs[i * lds + g]), f[i][h]);
            }
        }
    }
    for (int i = 0; i < M; i++) {
        _mm256_storeu_ps(c + i * ldc, f[i][0]);
        _mm256_storeu_ps(c + i * ldc + 8, f[i][1]);
    }
}

/* m >= 2: one 8-column half at a time. Without sub-scales the
 * nibble sums run over all 8 chunks in s16 (8 products of at most
 * 2 * 15 * 127 per lane: 30480, no overflow) and the two sub-blocks' int32
 * sums are not kept apart (t = isum_0 + isum_1 - z xs, the same integer). */
static inline __attribute__((always_inline)) void
tile8_half(int64_t G, const uint8_t *b, int h, const void *d, const void *mn, const int8_t *sub,
           const int H16, int z, const int M, const int8_t *qx, int64_t ldq, const float *sx,
           const int32_t *xs, const int32_t *xs16, const float *sxs, int64_t lds, float *c,
           int64_t ldc)
{
    const __m256i low = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    __m256 f[4];
    for (int i = 0; i < 4; i++) f[i] = _mm256_setzero_ps();
    for (int64_t g = 0; g < G; g++, b += 512) {
        if (h == 0) pf8(b);
        __m256i tt[4];
        for (int sb = 0; sb < (sub ? 2 : 1); sb++) {
            __m256i sl[4], sh[4];
            for (int i = 0; i < M; i++) sl[i] = sh[i] = _mm256_setzero_si256();
            const int t0 = sub ? 4 * sb : 0, t1 = sub ? 4 * sb + 4 : 8;
            for (int t = t0; t < t1; t++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 64 * t + 32 * h));
                const __m256i lo = _mm256_and_si256(v, low);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
                for (int i = 0; i < M; i++) {
                    int32_t w;
                    __builtin_memcpy(&w, qx + i * ldq + g * 32 + 4 * t, 4);
                    const __m256i a = _mm256_set1_epi32(w);
                    sl[i] = _mm256_add_epi16(sl[i], _mm256_maddubs_epi16(lo, a));
                    sh[i] = _mm256_add_epi16(sh[i], _mm256_maddubs_epi16(hi, a));
                    PIN(sl[i]);
                    PIN(sh[i]);
                }
            }
            for (int i = 0; i < M; i++) {
                const __m256i part = _mm256_add_epi32(_mm256_madd_epi16(sl[i], ones),
                                                      _mm256_slli_epi32(_mm256_madd_epi16(sh[i], ones), 4));
                if (!sub) {
                    tt[i] = _mm256_sub_epi32(part, _mm256_set1_epi32(z * xs[i * lds + g]));
                } else {
                    const __m256i sv = _mm256_cvtepi8_epi32(
                        _mm_loadl_epi64((const __m128i *)(sub + g * 32 + 16 * sb + 8 * h)));
                    const __m256i u = _mm256_mullo_epi32(sv, _mm256_sub_epi32(
                        part, _mm256_set1_epi32(z * xs16[i * 2 * lds + 2 * g + sb])));
                    tt[i] = sb ? _mm256_add_epi32(tt[i], u) : u;
                }
            }
        }
        const __m256 dv = scales8(d, g * 16 + 8 * h, H16);
        const __m256 mv = mn ? scales8(mn, g * 16 + 8 * h, H16) : _mm256_setzero_ps();
        for (int i = 0; i < M; i++) {
            const __m256 ds = _mm256_mul_ps(dv, _mm256_set1_ps(sx[i * lds + g]));
            f[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tt[i]), ds, f[i]);
            if (mn) f[i] = _mm256_fmadd_ps(mv, _mm256_set1_ps(sxs[i * lds + g]), f[i]);
        }
    }
    for (int i = 0; i < M; i++) _mm256_storeu_ps(c + i * ldc + 8 * h, f[i]);
}

/* z = 128 without sub-scales (GGUF's Q8_0: u = q + 128): the signed value
 * q = u ^ 0x80 against s8 activations by the sign trick, |q| (u8, <= 128)
 * times sign(a, q) (vpsignb; |a| <= 127): a pair is at most 2 * 128 * 127
 * = 32512, so each chunk goes to int32 at once (vpmaddwd). One product a
 * byte instead of one per nibble, and t = sum q a = isum - 128 xs (the
 * same integer) with no correction. One or two rows: both halves in one
 * pass, the accumulators in registers (two passes lost 8-27% of a decode
 * step's stream). */
static inline __attribute__((always_inline)) void
tile8_z128_rows(int64_t G, const uint8_t *b, const void *d, const void *mn, const int H16,
                const int M, const int8_t *qx, int64_t ldq, const float *sx, const float *sxs,
                int64_t lds, float *c, int64_t ldc)
{
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    __m256 f[2][2];
    for (int i = 0; i < 2; i++) f[i][0] = f[i][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < G; g++, b += 512) {
        pf8(b);
        __m256i tt[2][2];
        for (int i = 0; i < M; i++) tt[i][0] = tt[i][1] = _mm256_setzero_si256();
        for (int t = 0; t < 8; t++) {
            const __m256i q0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(b + 64 * t)), flip);
            const __m256i q1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(b + 64 * t + 32)), flip);
            const __m256i aq0 = _mm256_abs_epi8(q0), aq1 = _mm256_abs_epi8(q1);
            for (int i = 0; i < M; i++) {
                int32_t w;
                __builtin_memcpy(&w, qx + i * ldq + g * 32 + 4 * t, 4);
                const __m256i a = _mm256_set1_epi32(w);
                tt[i][0] = _mm256_add_epi32(tt[i][0], _mm256_madd_epi16(
                    _mm256_maddubs_epi16(aq0, _mm256_sign_epi8(a, q0)), ones));
                tt[i][1] = _mm256_add_epi32(tt[i][1], _mm256_madd_epi16(
                    _mm256_maddubs_epi16(aq1, _mm256_sign_epi8(a, q1)), ones));
            }
        }
        const __m256 d0 = scales8(d, g * 16, H16), d1 = scales8(d, g * 16 + 8, H16);
        for (int i = 0; i < M; i++) {
            const __m256 s = _mm256_set1_ps(sx[i * lds + g]);
            f[i][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tt[i][0]), _mm256_mul_ps(d0, s), f[i][0]);
            f[i][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tt[i][1]), _mm256_mul_ps(d1, s), f[i][1]);
            if (mn) {
                const __m256 m = _mm256_set1_ps(sxs[i * lds + g]);
                f[i][0] = _mm256_fmadd_ps(scales8(mn, g * 16, H16), m, f[i][0]);
                f[i][1] = _mm256_fmadd_ps(scales8(mn, g * 16 + 8, H16), m, f[i][1]);
            }
        }
    }
    for (int i = 0; i < M; i++) {
        _mm256_storeu_ps(c + i * ldc, f[i][0]);
        _mm256_storeu_ps(c + i * ldc + 8, f[i][1]);
    }
}

/* three or four rows: tile8_z128_rows with the float accumulators in
 * memory (an fma from and a store to L1 per row, half and group), each
 * activation word broadcast once for both halves; same bits (one half at
 * a time instead: a 4-row Qwen2.5 Q4_0 decode step 4% slower, Zen 3) */
static inline __attribute__((always_inline)) void
tile8_z128_both(int64_t G, const uint8_t *b, const void *d, const void *mn, const int H16,
                const int M, const int8_t *qx, int64_t ldq, const float *sx, const float *sxs,
                int64_t lds, float *c, int64_t ldc)
{
    const __m256i flip = _mm256_set1_epi8((char)0x80), ones = _mm256_set1_epi16(1);
    float f[4][16] __attribute__((aligned(32)));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 16; j++) f[i][j] = 0.0f;
    for (int64_t g = 0; g < G; g++, b += 512) {
        pf8(b);
        __m256i tt[4][2];
        for (int t = 0; t < 8; t++) {
            const __m256i q0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(b + 64 * t)), flip);
            const __m256i q1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(b + 64 * t + 32)), flip);
            const __m256i aq0 = _mm256_abs_epi8(q0), aq1 = _mm256_abs_epi8(q1);
            for (int i = 0; i < M; i++) {
                int32_t w;
                __builtin_memcpy(&w, qx + i * ldq + g * 32 + 4 * t, 4);
                const __m256i a = _mm256_set1_epi32(w);
                const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(aq0, _mm256_sign_epi8(a, q0)), ones);
                const __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(aq1, _mm256_sign_epi8(a, q1)), ones);
                tt[i][0] = t ? _mm256_add_epi32(tt[i][0], p0) : p0;
                tt[i][1] = t ? _mm256_add_epi32(tt[i][1], p1) : p1;
                PIN(tt[i][0]);
                PIN(tt[i][1]);
            }
        }
        for (int h = 0; h < 2; h++) {
            const __m256 dv = scales8(d, g * 16 + 8 * h, H16);
            const __m256 mv = mn ? scales8(mn, g * 16 + 8 * h, H16) : _mm256_setzero_ps();
            for (int i = 0; i < M; i++) {
                const __m256 ds = _mm256_mul_ps(dv, _mm256_set1_ps(sx[i * lds + g]));
                __m256 fv = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tt[i][h]), ds, _mm256_load_ps(f[i] + 8 * h));
                if (mn) fv = _mm256_fmadd_ps(mv, _mm256_set1_ps(sxs[i * lds + g]), fv);
                _mm256_store_ps(f[i] + 8 * h, fv);
            }
        }
    }
    for (int i = 0; i < M; i++) {
        _mm256_storeu_ps(c + i * ldc, _mm256_load_ps(f[i]));
        _mm256_storeu_ps(c + i * ldc + 8, _mm256_load_ps(f[i] + 8));
    }
}

/* every u < 64 (6-bit values: Q5_x, Q5_K, Q6_K): vpmaddubsw on the bytes
 * themselves (a pair is at most 2 * 63 * 127 = 16002, two chunks' pairs
 * 32004 in 16 bits), one product a byte instead of one per nibble; the
 * same integer sub-block sums, sub-scales and zero points as tile8_half. */
static inline __attribute__((always_inline)) void
tile8n_half(int64_t G, const uint8_t *b, int h, const void *d, const void *mn, const int8_t *sub,
            const int H16, int z, const int M, const int8_t *qx, int64_t ldq, const float *sx,
            const int32_t *xs, const int32_t *xs16, const float *sxs, int64_t lds, float *c,
            int64_t ldc)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[4];
    for (int i = 0; i < 4; i++) f[i] = _mm256_setzero_ps();
    for (int64_t g = 0; g < G; g++, b += 512) {
        if (h == 0) pf8(b);
        __m256i tt[4];
        for (int sb = 0; sb < 2; sb++) {
            __m256i acc[4];
            for (int i = 0; i < M; i++) acc[i] = _mm256_setzero_si256();
            for (int t = 4 * sb; t < 4 * sb + 4; t += 2) {
                const __m256i v0 = _mm256_loadu_si256((const __m256i *)(b + 64 * t + 32 * h));
                const __m256i v1 = _mm256_loadu_si256((const __m256i *)(b + 64 * t + 64 + 32 * h));
                for (int i = 0; i < M; i++) {
                    int32_t w0, w1;
                    __builtin_memcpy(&w0, qx + i * ldq + g * 32 + 4 * t, 4);
                    __builtin_memcpy(&w1, qx + i * ldq + g * 32 + 4 * t + 4, 4);
                    const __m256i p = _mm256_add_epi16(
                        _mm256_maddubs_epi16(v0, _mm256_set1_epi32(w0)),
                        _mm256_maddubs_epi16(v1, _mm256_set1_epi32(w1)));
                    acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(p, ones));
                    PIN(acc[i]);
                }
            }
            for (int i = 0; i < M; i++) {
                if (!sub) {
                    tt[i] = sb ? _mm256_add_epi32(tt[i], acc[i]) : acc[i];
                } else {
                    const __m256i sv = _mm256_cvtepi8_epi32(
                        _mm_loadl_epi64((const __m128i *)(sub + g * 32 + 16 * sb + 8 * h)));
                    const __m256i u = _mm256_mullo_epi32(sv, _mm256_sub_epi32(
                        acc[i], _mm256_set1_epi32(z * xs16[i * 2 * lds + 2 * g + sb])));
                    tt[i] = sb ? _mm256_add_epi32(tt[i], u) : u;
                }
            }
        }
        const __m256 dv = scales8(d, g * 16 + 8 * h, H16);
        const __m256 mv = mn ? scales8(mn, g * 16 + 8 * h, H16) : _mm256_setzero_ps();
        for (int i = 0; i < M; i++) {
            const __m256i t = sub ? tt[i] : _mm256_sub_epi32(tt[i], _mm256_set1_epi32(z * xs[i * lds + g]));
            const __m256 ds = _mm256_mul_ps(dv, _mm256_set1_ps(sx[i * lds + g]));
            f[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), ds, f[i]);
            if (mn) f[i] = _mm256_fmadd_ps(mv, _mm256_set1_ps(sxs[i * lds + g]), f[i]);
        }
    }
    for (int i = 0; i < M; i++) _mm256_storeu_ps(c + i * ldc + 8 * h, f[i]);
}

/* the same for one row, both halves in one pass (the decode's stream) */
static inline __attribute__((always_inline)) void
tile8n_row(int64_t G, const uint8_t *b, const void *d, const void *mn, const int8_t *sub,
           const int H16, int z, const int8_t *qx, const float *sx, const int32_t *xs,
           const int32_t *xs16, const float *sxs, float *c)
{
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t g = 0; g < G; g++, b += 512) {
        pf8(b);
        __m256i tt[2];
        for (int sb = 0; sb < 2; sb++) {
            __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
            for (int t = 4 * sb; t < 4 * sb + 4; t += 2) {
                int32_t w0, w1;
                __builtin_memcpy(&w0, qx + g * 32 + 4 * t, 4);
                __builtin_memcpy(&w1, qx + g * 32 + 4 * t + 4, 4);
                const __m256i a0 = _mm256_set1_epi32(w0), a1 = _mm256_set1_epi32(w1);
                for (int h = 0; h < 2; h++) {
                    const __m256i p = _mm256_add_epi16(
                        _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(b + 64 * t + 32 * h)), a0),
                        _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(b + 64 * t + 64 + 32 * h)), a1));
                    acc[h] = _mm256_add_epi32(acc[h], _mm256_madd_epi16(p, ones));
                }
            }
            for (int h = 0; h < 2; h++) {
                if (!sub) {
                    tt[h] = sb ? _mm256_add_epi32(tt[h], acc[h]) : acc[h];
                } else {
                    const __m256i sv = _mm256_cvtepi8_epi32(
                        _mm_loadl_epi64((const __m128i *)(sub + g * 32 + 16 * sb + 8 * h)));
                    const __m256i u = _mm256_mullo_epi32(sv, _mm256_sub_epi32(
                        acc[h], _mm256_set1_epi32(z * xs16[2 * g + sb])));
                    tt[h] = sb ? _mm256_add_epi32(tt[h], u) : u;
                }
            }
        }
        const __m256 s = _mm256_set1_ps(sx[g]);
        for (int h = 0; h < 2; h++) {
            const __m256i t = sub ? tt[h] : _mm256_sub_epi32(tt[h], _mm256_set1_epi32(z * xs[g]));
            f[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), _mm256_mul_ps(scales8(d, g * 16 + 8 * h, H16), s), f[h]);
            if (mn) f[h] = _mm256_fmadd_ps(scales8(mn, g * 16 + 8 * h, H16), _mm256_set1_ps(sxs[g]), f[h]);
        }
    }
    _mm256_storeu_ps(c, f[0]);
    _mm256_storeu_ps(c + 8, f[1]);
}

#define HALVES8N(M, H)                                                                           \
    do {                                                                                         \
        tile8n_half(G, b, 0, d, mn, sub, H, z, M, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);      \
        tile8n_half(G, b, 1, d, mn, sub, H, z, M, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);      \
    } while (0)

#define TILES8N(H)                                                                               \
    switch (m) {                                                                                 \
    case 1: tile8n_row(G, b, d, mn, sub, H, z, qx, sx, xs, xs16, sxs, c); break;                 \
    case 2: HALVES8N(2, H); break;                                                               \
    case 3: HALVES8N(3, H); break;                                                               \
    default: HALVES8N(4, H); break;                                                              \
    }

void Q4NAME(cattn_ukr_avx2_q8g_n)(int64_t G, const uint8_t *b, const void *d, const void *mn,
                          const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                          const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                          int64_t lds, float *c, int64_t ldc)
{
    if (h16) {
        TILES8N(1)
    } else {
        TILES8N(0)
    }
}

#define HALVES8(M, H)                                                                            \
    do {                                                                                         \
        if (z == 128 && !sub) {                                                                  \
            tile8_z128_both(G, b, d, mn, H, M, qx, ldq, sx, sxs, lds, c, ldc);                   \
        } else {                                                                                 \
            tile8_half(G, b, 0, d, mn, sub, H, z, M, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);   \
            tile8_half(G, b, 1, d, mn, sub, H, z, M, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);   \
        }                                                                                        \
    } while (0)

#define TILES8(H)                                                                              \
    switch (m) {                                                                               \
    case 1:                                                                                    \
        if (z == 128 && !sub) tile8_z128_rows(G, b, d, mn, H, 1, qx, ldq, sx, sxs, lds, c, ldc); \
        else tile8(G, b, d, mn, sub, H, z, 1, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);        \
        break;                                                                                 \
    case 2:                                                                                    \
        if (z == 128 && !sub) tile8_z128_rows(G, b, d, mn, H, 2, qx, ldq, sx, sxs, lds, c, ldc); \
        else HALVES8(2, H);                                                                    \
        break;                                                                                 \
    case 3: HALVES8(3, H); break;                                                              \
    default: HALVES8(4, H); break;                                                             \
    }

void Q4NAME(cattn_ukr_avx2_q8g)(int64_t G, const uint8_t *b, const void *d, const void *mn,
                        const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                        const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                        int64_t lds, float *c, int64_t ldc)
{
    if (h16) {
        TILES8(1)
    } else {
        TILES8(0)
    }
}
/* int6g (dispatch.h, ukr_q6g): sub-block s (16 k) of half h is int4's
 * nibbles of chunks 2s and 2s + 1 with their top 2 bits from one 32-byte
 * word X (bits 2f: f = 0 chunk 2s's low nibbles, 1 its high ones, 2 and 3
 * chunk 2s + 1's), put back as bytes u = nibble | top << 4 < 64; int5g
 * (ukr_q5g, TB = 1): the top bit of quarter f of the group from bit f of
 * one 32-byte word X per half (u < 32). Then tile8n's sums: vpmaddubsw on
 * the bytes, two products' pairs in 16 bits (2 * 2 * 63 * 127 = 32004),
 * vpmaddwd to int32 per 8 k. NH = 2: both halves in one pass (one row: the
 * decode's stream); NH = 1: half h0. TB: the top plane's bits (2 or 1). */
static inline __attribute__((always_inline)) __m256i top1(__m256i X, int f)
{
    const __m256i m16 = _mm256_set1_epi8(16);     /* bit f of each byte to bit 4 */
    return _mm256_and_si256(f < 4 ? _mm256_slli_epi16(X, 4 - f) : f > 4 ? _mm256_srli_epi16(X, f - 4) : X,
                            m16);
}

static inline __attribute__((always_inline)) void
tile6(int64_t G, const uint8_t *b, const int TB, const int h0, const int NH, const void *d, const void *mn,
      const int8_t *sub, const int H16, int z, const int M, const int8_t *qx, int64_t ldq,
      const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs, int64_t lds,
      float *c, int64_t ldc)
{
    const __m256i ones = _mm256_set1_epi16(1), m15 = _mm256_set1_epi8(15),
                  m48 = _mm256_set1_epi8(0x30);
    __m256 f[4][2];
    for (int i = 0; i < 4; i++) f[i][0] = f[i][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < G; g++, b += 256 + 64 * TB) {
        if (h0 == 0) {
            for (int t = 0; t < 4 + TB; t++) _mm_prefetch((const char *)b + PF + 64 * t, _MM_HINT_T0);
        }
        for (int hh = 0; hh < NH; hh++) {
            const int h = h0 + hh;
            __m256i tt[4];
            for (int sb = 0; sb < 2; sb++) {
                const __m256i v0 = _mm256_loadu_si256((const __m256i *)(b + 128 * sb + 32 * h));
                const __m256i v1 = _mm256_loadu_si256((const __m256i *)(b + 128 * sb + 64 + 32 * h));
                const __m256i l0 = _mm256_and_si256(v0, m15), l1 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), m15),
                              l2 = _mm256_and_si256(v1, m15), l3 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), m15);
                __m256i u0, u1, u2, u3;
                if (TB == 2) {
                    const __m256i X = _mm256_loadu_si256((const __m256i *)(b + 256 + 64 * sb + 32 * h));
                    u0 = _mm256_or_si256(l0, _mm256_and_si256(_mm256_slli_epi16(X, 4), m48));
                    u1 = _mm256_or_si256(l1, _mm256_and_si256(_mm256_slli_epi16(X, 2), m48));
                    u2 = _mm256_or_si256(l2, _mm256_and_si256(X, m48));
                    u3 = _mm256_or_si256(l3, _mm256_and_si256(_mm256_srli_epi16(X, 2), m48));
                } else {
                    const __m256i X = _mm256_loadu_si256((const __m256i *)(b + 256 + 32 * h));
                    u0 = _mm256_or_si256(l0, top1(X, 4 * sb));
                    u1 = _mm256_or_si256(l1, top1(X, 4 * sb + 1));
                    u2 = _mm256_or_si256(l2, top1(X, 4 * sb + 2));
                    u3 = _mm256_or_si256(l3, top1(X, 4 * sb + 3));
                }
                for (int i = 0; i < M; i++) {
                    const int8_t *a = qx + i * ldq + g * 32 + 16 * sb;
                    int32_t w0, w1, w2, w3;
                    __builtin_memcpy(&w0, a, 4);
                    __builtin_memcpy(&w1, a + 4, 4);
                    __builtin_memcpy(&w2, a + 8, 4);
                    __builtin_memcpy(&w3, a + 12, 4);
                    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(u0, _mm256_set1_epi32(w0)),
                                                       _mm256_maddubs_epi16(u1, _mm256_set1_epi32(w1)));
                    const __m256i q = _mm256_add_epi16(_mm256_maddubs_epi16(u2, _mm256_set1_epi32(w2)),
                                                       _mm256_maddubs_epi16(u3, _mm256_set1_epi32(w3)));
                    __m256i acc = _mm256_add_epi32(_mm256_madd_epi16(p, ones), _mm256_madd_epi16(q, ones));
                    if (sub) {
                        const __m256i sv = _mm256_cvtepi8_epi32(
                            _mm_loadl_epi64((const __m128i *)(sub + g * 32 + 16 * sb + 8 * h)));
                        acc = _mm256_mullo_epi32(sv, _mm256_sub_epi32(
                            acc, _mm256_set1_epi32(z * xs16[i * 2 * lds + 2 * g + sb])));
                    }
                    tt[i] = sb ? _mm256_add_epi32(tt[i], acc) : acc;
                    PIN(tt[i]);
                }
            }
            const __m256 dv = scales8(d, g * 16 + 8 * h, H16);
            const __m256 mv = mn ? scales8(mn, g * 16 + 8 * h, H16) : _mm256_setzero_ps();
            for (int i = 0; i < M; i++) {
                const __m256i t = sub ? tt[i] : _mm256_sub_epi32(tt[i], _mm256_set1_epi32(z * xs[i * lds + g]));
                const __m256 ds = _mm256_mul_ps(dv, _mm256_set1_ps(sx[i * lds + g]));
                f[i][hh] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t), ds, f[i][hh]);
                if (mn) f[i][hh] = _mm256_fmadd_ps(mv, _mm256_set1_ps(sxs[i * lds + g]), f[i][hh]);
            }
        }
    }
    for (int i = 0; i < M; i++)
        for (int hh = 0; hh < NH; hh++) _mm256_storeu_ps(c + i * ldc + 8 * (h0 + hh), f[i][hh]);
}

#define HALVES6(TB, M, H)                                                                       \
    do {                                                                                        \
        tile6(G, b, TB, 0, 1, d, mn, sub, H, z, M, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);    \
        tile6(G, b, TB, 1, 1, d, mn, sub, H, z, M, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);    \
    } while (0)

#define TILES6(TB, H)                                                                           \
    switch (m) {                                                                                \
    case 1: tile6(G, b, TB, 0, 2, d, mn, sub, H, z, 1, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc); break; \
    case 2: HALVES6(TB, 2, H); break;                                                           \
    case 3: HALVES6(TB, 3, H); break;                                                           \
    default: HALVES6(TB, 4, H); break;                                                          \
    }

void Q4NAME(cattn_ukr_avx2_q6g)(int64_t G, const uint8_t *b, const void *d, const void *mn,
                        const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                        const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                        int64_t lds, float *c, int64_t ldc)
{
    if (h16) {
        TILES6(2, 1)
    } else {
        TILES6(2, 0)
    }
}

void Q4NAME(cattn_ukr_avx2_q5g)(int64_t G, const uint8_t *b, const void *d, const void *mn,
                        const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                        const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                        int64_t lds, float *c, int64_t ldc)
{
    if (h16) {
        TILES6(1, 1)
    } else {
        TILES6(1, 0)
    }
}
#ifdef CATTN_Q4_F16C
void cattn_kernels_avx2_f16c(cattn_dispatch_t *kt)
{
    if (kt->ukr_q4 == cattn_ukr_avx2_q4) kt->ukr_q4 = cattn_ukr_avx2_q4_f16c;
    if (kt->ukr_q4k == cattn_ukr_avx2_q4k) kt->ukr_q4k = cattn_ukr_avx2_q4k_f16c;
    if (kt->ukr_q8g == cattn_ukr_avx2_q8g) kt->ukr_q8g = cattn_ukr_avx2_q8g_f16c;
    if (kt->ukr_q8g_n == cattn_ukr_avx2_q8g_n) kt->ukr_q8g_n = cattn_ukr_avx2_q8g_n_f16c;
    if (kt->ukr_q6g == cattn_ukr_avx2_q6g) kt->ukr_q6g = cattn_ukr_avx2_q6g_f16c;
    if (kt->ukr_q5g == cattn_ukr_avx2_q5g) kt->ukr_q5g = cattn_ukr_avx2_q5g_f16c;
    if (kt->ukr_q4 == cattn_ukr_avx2_q4_f16c) kt->int4_kernel = "avx2 (vpmaddubsw; F16C scales)";
}
#endif
#endif
