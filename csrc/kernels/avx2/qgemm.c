/* kernels/avx2/qgemm.c — the AVX2 int8 micro-kernel (contract in
 * dispatch.h): c (m x 16 int32) = sum over k pairs of u8 pairs x s8 pairs.
 *
 * Exact by construction: the weight's bytes are sign-extended to 16 bits
 * (vpmovsxbw) and multiplied by the 16-bit activations with vpmaddwd, whose
 * pair sums (|a0 w0 + a1 w1| <= 2 * 255 * 127) cannot saturate, then added
 * in 32 bits (the caller bounds every sum below 2^31). vpmaddubsw's 16-bit
 * saturation is not used.
 * Per pair p: b0/b1 = 8 columns x 2 k each; row i's pair (2 x u16 in one
 * 32-bit word) is broadcast; 2m accumulators (m <= MR_I8 = 5: 10 ymm, + 2
 * of B, a broadcast and two products). Then the dequantization, the bias
 * and the activation in registers (dispatch.h; act_f32.h: each element as
 * cattn.gelu etc. compute it).
 * On Zen 3 the 5-row loop issues 22 vector ops on 4 pipes per 160 MACs:
 * ~29 MACs per cycle, 1.8x the float32 FMA peak. */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include <immintrin.h>
#include "kernels.h"
#include "act_f32.h"

#if CATTN_MR_I8 != 5
#error "kernels/avx2/qgemm.c: the tile has 5 rows (config.h CATTN_MR_I8)"
#endif

/* The tile's loop in assembly, one body per row count 1-5: compilers hoist
 * the broadcasts and spill accumulators. ymm0-9 accumulate (row i: ymm 2i, 2i+1), ymm10/11
 * the pair's two sign-extended weight halves, ymm12 the row's broadcast
 * pair, ymm13/14 the products. acc: 5 x 16 int32 (32-byte aligned). */
#define QROW(off, r0, r1)                                                        \
    "vpbroadcastd " #off "(%[a]), %%ymm12\n\t"                                  \
    "vpmaddwd %%ymm10, %%ymm12, %%ymm13\n\t"                                    \
    "vpmaddwd %%ymm11, %%ymm12, %%ymm14\n\t"                                    \
    "vpaddd %%ymm13, %%ymm" #r0 ", %%ymm" #r0 "\n\t"                            \
    "vpaddd %%ymm14, %%ymm" #r1 ", %%ymm" #r1 "\n\t"
#define QSTORE(r, off) "vmovdqa %%ymm" #r ", " #off "(%[acc])\n\t"

/* sums_m(k2, a, b, acc): the m-row tile's int32 sums into acc (m x 16) */
#define QSUMS(name, ROWS, STORES)                                                \
    static void name(int64_t k2, const uint32_t *a, const int8_t *b, int32_t *acc) \
    {                                                                            \
        __asm__ volatile(                                                        \
            "vpxor %%xmm0, %%xmm0, %%xmm0\n\t"                                   \
            "vmovdqa %%ymm0, %%ymm1\n\t" "vmovdqa %%ymm0, %%ymm2\n\t"            \
            "vmovdqa %%ymm0, %%ymm3\n\t" "vmovdqa %%ymm0, %%ymm4\n\t"            \
            "vmovdqa %%ymm0, %%ymm5\n\t" "vmovdqa %%ymm0, %%ymm6\n\t"            \
            "vmovdqa %%ymm0, %%ymm7\n\t" "vmovdqa %%ymm0, %%ymm8\n\t"            \
            "vmovdqa %%ymm0, %%ymm9\n\t"                                         \
            "test %[k2], %[k2]\n\t"                                              \
            "jle 2f\n\t"                                                         \
            "1:\n\t"                                                             \
            "vpmovsxbw (%[b]), %%ymm10\n\t"                                      \
            "vpmovsxbw 16(%[b]), %%ymm11\n\t"                                    \
            ROWS                                                                 \
            "add $32, %[b]\n\t"                                                  \
            "add $20, %[a]\n\t"                                                  \
            "dec %[k2]\n\t"                                                      \
            "jnz 1b\n\t"                                                         \
            "2:\n\t"                                                             \
            STORES                                                               \
            : [a] "+r"(a), [b] "+r"(b), [k2] "+r"(k2)                            \
            : [acc] "r"(acc)                                                     \
            : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5",    \
              "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", \
              "xmm14");                                                          \
    }
#define R0 QROW(0, 0, 1)
#define R1 QROW(4, 2, 3)
#define R2 QROW(8, 4, 5)
#define R3 QROW(12, 6, 7)
#define R4 QROW(16, 8, 9)
#define S0 QSTORE(0, 0) QSTORE(1, 32)
#define S1 QSTORE(2, 64) QSTORE(3, 96)
#define S2 QSTORE(4, 128) QSTORE(5, 160)
#define S3 QSTORE(6, 192) QSTORE(7, 224)
#define S4 QSTORE(8, 256) QSTORE(9, 288)
QSUMS(sums_1, R0, S0)
QSUMS(sums_2, R0 R1, S0 S1)
QSUMS(sums_3, R0 R1 R2, S0 S1 S2)
QSUMS(sums_4, R0 R1 R2 R3, S0 S1 S2 S3)
QSUMS(sums_5, R0 R1 R2 R3 R4, S0 S1 S2 S3 S4)

/* the int8 tile's epilogue (dispatch.h, cattn_ukr_i8_t) on its int32 sums
 * acc (m x 16, 32-byte aligned); inlined with m = 5 (the tile's vectors stay
 * in registers), else (and for the AVX-512 kernels) cattn_i8_epilogue_avx2 */
static inline __attribute__((always_inline)) void
i8_epilogue(const int32_t *acc, const int m, const int32_t *za, const float *sa,
            const int32_t *colsum, const float *sw, const float *bias, int act, float *c,
            int64_t ldc)
{
    /* ((float)(acc - za colsum) * sa) * sw: two separate products, as the
     * portable kernel (nothing to contract into an FMA) */
    const __m256i cs0 = _mm256_loadu_si256((const __m256i *)colsum);
    const __m256i cs1 = _mm256_loadu_si256((const __m256i *)(colsum + 8));
    const __m256 sw0 = _mm256_loadu_ps(sw), sw1 = _mm256_loadu_ps(sw + 8);
    __m256 y[2 * 5];
    for (int i = 0; i < m; i++) {
        const __m256i zi = _mm256_set1_epi32(za[i]);
        const __m256 si = _mm256_set1_ps(sa[i]);
        const __m256i a0 = _mm256_load_si256((const __m256i *)(acc + 16 * i));
        const __m256i a1 = _mm256_load_si256((const __m256i *)(acc + 16 * i + 8));
        const __m256 t0 = _mm256_cvtepi32_ps(_mm256_sub_epi32(a0, _mm256_mullo_epi32(zi, cs0)));
        const __m256 t1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(a1, _mm256_mullo_epi32(zi, cs1)));
        y[2 * i] = _mm256_mul_ps(_mm256_mul_ps(t0, si), sw0);
        y[2 * i + 1] = _mm256_mul_ps(_mm256_mul_ps(t1, si), sw1);
    }
    if (bias) {                        /* + bias, then act: in registers */
        const __m256 b0 = _mm256_loadu_ps(bias), b1 = _mm256_loadu_ps(bias + 8);
        for (int i = 0; i < m; i++) {
            /* the products stay rounded (no contraction into an FMA) */
            __asm__("" : "+x"(y[2 * i]), "+x"(y[2 * i + 1]));
            y[2 * i] = _mm256_add_ps(y[2 * i], b0);
            y[2 * i + 1] = _mm256_add_ps(y[2 * i + 1], b1);
        }
    }
    if (act != CATTN_ACT_NONE) act_f32_tile(y, 2 * m, act);
    for (int i = 0; i < m; i++) {
        _mm256_storeu_ps(c + i * ldc, y[2 * i]);
        _mm256_storeu_ps(c + i * ldc + 8, y[2 * i + 1]);
    }
}

void cattn_i8_epilogue_avx2(const int32_t *acc, int m, const int32_t *za, const float *sa,
                            const int32_t *colsum, const float *sw, const float *bias,
                            int act, float *c, int64_t ldc)
{
    i8_epilogue(acc, m, za, sa, colsum, sw, bias, act, c, ldc);
}

/* One row, four panels (dispatch.h cattn_ukr_i8_row4_t): four weight
 * streams ps bytes apart, eight accumulators (panel q: 2q, 2q + 1), one
 * broadcast pair a step; integer sums, exact in any order, so the values of
 * sums_1 per panel; then each panel's epilogue as ukr_i8 with m = 1. */
void cattn_ukr_avx2_i8_row4(int64_t k2, const uint32_t *a, const int8_t *b, int64_t ps,
                            const int32_t *za, const float *sa, const int32_t *colsum,
                            const float *sw, const float *bias, int act, float *c)
{
    __m256i s[8];
    for (int q = 0; q < 8; q++) s[q] = _mm256_setzero_si256();
    for (int64_t p = 0; p < k2; p++, b += 32) {                /* pair p of every panel */
        const __m256i x = _mm256_set1_epi32((int)a[p * CATTN_MR_I8]);
        for (int q = 0; q < 4; q++) {
            const int8_t *bq = b + q * ps;
            s[2 * q] = _mm256_add_epi32(s[2 * q], _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)bq)), x));
            s[2 * q + 1] = _mm256_add_epi32(s[2 * q + 1], _mm256_madd_epi16(
                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(bq + 16))), x));
        }
    }
    int32_t acc[4 * 16] __attribute__((aligned(32)));
    for (int q = 0; q < 8; q++) _mm256_store_si256((__m256i *)(acc + 8 * q), s[q]);
    for (int q = 0; q < 4; q++)
        i8_epilogue(acc + 16 * q, 1, za, sa, colsum + 16 * q, sw + 16 * q,
                    bias ? bias + 16 * q : NULL, act, c + 16 * q, 0);
}

void cattn_ukr_avx2_i8(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                       const int32_t *za, const float *sa, const int32_t *colsum,
                       const float *sw, const float *bias, int act, float *c, int64_t ldc)
{
    int32_t acc[5 * 16] __attribute__((aligned(32)));
    switch (m) {
    case 1: sums_1(k2, a, b, acc); break;
    case 2: sums_2(k2, a, b, acc); break;
    case 3: sums_3(k2, a, b, acc); break;
    case 4: sums_4(k2, a, b, acc); break;
    default:
        sums_5(k2, a, b, acc);
        i8_epilogue(acc, 5, za, sa, colsum, sw, bias, act, c, ldc);
        return;
    }
    cattn_i8_epilogue_avx2(acc, m, za, sa, colsum, sw, bias, act, c, ldc);
}
#endif
