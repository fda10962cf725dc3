/* kernels/avx2/qgemm.c — the AVX2 int8 micro-kernel (contract in
 * dispatch.h): c (m x 16 int32) = sum over k pairs of u8 pairs x s8 pairs.
 *
 * Exact by construction: the weight's bytes are sign-extended to 16 bits
 * (vpmovsxbw) and multiplied by the 16-bit activations with vpmaddwd, whose
 * pair sums (|a0 w0 + a1 w1| <= 2 * 255 * 127) cannot saturate, then added
 * in 32 bits (the caller bounds every sum below 2^31). vpmaddubsw's 16-bit
 * saturation is not used.
 * Per pair p: b0/b1 = 8 columns x 2 k each; row i's pair (2 x u16 in one
 * 32-bit word) is broadcast; 2m accumulators (m <= MR_I8 = 5: 10 ymm, + 2 B, a broadcast and a product: no spills). */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include <immintrin.h>
#include "kernels.h"

/* 1-4 rows [0, m) of the tile, m a constant after inlining: named accumulators
 * (GCC keeps them in registers, which it does not do for an array) */
#define ROW_DECL(i) __m256i c##i##0 = _mm256_setzero_si256(), c##i##1 = c##i##0;
#define ROW_STEP(i)                                                              \
    if (m > i) {                                                                 \
        const __m256i ai = _mm256_set1_epi32((int32_t)a[i]);                     \
        c##i##0 = _mm256_add_epi32(c##i##0, _mm256_madd_epi16(ai, b0));         \
        c##i##1 = _mm256_add_epi32(c##i##1, _mm256_madd_epi16(ai, b1));         \
    }
/* ((float)(acc - za colsum) * sa) * sw: two separate products, as the
 * portable kernel (nothing to contract into an FMA) */
#define ROW_STORE(i)                                                             \
    if (m > i) {                                                                 \
        const __m256i zi = _mm256_set1_epi32(za[i]);                             \
        const __m256 si = _mm256_set1_ps(sa[i]);                                 \
        const __m256 t0 = _mm256_cvtepi32_ps(_mm256_sub_epi32(c##i##0,          \
                                             _mm256_mullo_epi32(zi, cs0)));      \
        const __m256 t1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(c##i##1,          \
                                             _mm256_mullo_epi32(zi, cs1)));      \
        _mm256_storeu_ps(c + i * ldc, _mm256_mul_ps(_mm256_mul_ps(t0, si), sw0)); \
        _mm256_storeu_ps(c + i * ldc + 8, _mm256_mul_ps(_mm256_mul_ps(t1, si), sw1)); \
    }

static inline __attribute__((always_inline)) void ukr_rows(
    int64_t k2, const uint32_t *a, const int m, const int8_t *b, const int32_t *za,
    const float *sa, const int32_t *colsum, const float *sw, float *c, int64_t ldc)
{
    ROW_DECL(0) ROW_DECL(1) ROW_DECL(2) ROW_DECL(3)
    for (int64_t p = 0; p < k2; p++, b += 32, a += CATTN_MR_I8) {
        const __m256i b0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b));
        const __m256i b1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16)));
        ROW_STEP(0) ROW_STEP(1) ROW_STEP(2) ROW_STEP(3)
    }
    const __m256i cs0 = _mm256_loadu_si256((const __m256i *)colsum);
    const __m256i cs1 = _mm256_loadu_si256((const __m256i *)(colsum + 8));
    const __m256 sw0 = _mm256_loadu_ps(sw), sw1 = _mm256_loadu_ps(sw + 8);
    ROW_STORE(0) ROW_STORE(1) ROW_STORE(2) ROW_STORE(3)
}

#if CATTN_MR_I8 != 5
#error "kernels/avx2/qgemm.c: the tile has 5 rows (config.h CATTN_MR_I8)"
#endif

/* The full 5-row tile's loop in assembly: compilers hoist the 5 broadcasts
 * and spill accumulators. ymm0-9 accumulate (row i: ymm 2i, 2i+1), ymm10/11
 * the pair's two sign-extended weight halves, ymm12 the row's broadcast
 * pair, ymm13/14 the products. acc: 5 x 16 int32 (32-byte aligned). */
#define QROW(off, r0, r1)                                                        \
    "vpbroadcastd " #off "(%[a]), %%ymm12\n\t"                                  \
    "vpmaddwd %%ymm10, %%ymm12, %%ymm13\n\t"                                    \
    "vpmaddwd %%ymm11, %%ymm12, %%ymm14\n\t"                                    \
    "vpaddd %%ymm13, %%ymm" #r0 ", %%ymm" #r0 "\n\t"                            \
    "vpaddd %%ymm14, %%ymm" #r1 ", %%ymm" #r1 "\n\t"
#define QSTORE(r, off) "vmovdqa %%ymm" #r ", " #off "(%[acc])\n\t"

static void sums_5(int64_t k2, const uint32_t *a, const int8_t *b, int32_t *acc)
{
    __asm__ volatile(
        "vpxor %%xmm0, %%xmm0, %%xmm0\n\t"
        "vmovdqa %%ymm0, %%ymm1\n\t" "vmovdqa %%ymm0, %%ymm2\n\t"
        "vmovdqa %%ymm0, %%ymm3\n\t" "vmovdqa %%ymm0, %%ymm4\n\t"
        "vmovdqa %%ymm0, %%ymm5\n\t" "vmovdqa %%ymm0, %%ymm6\n\t"
        "vmovdqa %%ymm0, %%ymm7\n\t" "vmovdqa %%ymm0, %%ymm8\n\t"
        "vmovdqa %%ymm0, %%ymm9\n\t"
        "test %[k2], %[k2]\n\t"
        "jle 2f\n\t"
        "1:\n\t"
        "vpmovsxbw (%[b]), %%ymm10\n\t"
        "vpmovsxbw 16(%[b]), %%ymm11\n\t"
        QROW(0, 0, 1) QROW(4, 2, 3) QROW(8, 4, 5) QROW(12, 6, 7) QROW(16, 8, 9)
        "add $32, %[b]\n\t"
        "add $20, %[a]\n\t"
        "dec %[k2]\n\t"
        "jnz 1b\n\t"
        "2:\n\t"
        QSTORE(0, 0) QSTORE(1, 32) QSTORE(2, 64) QSTORE(3, 96) QSTORE(4, 128)
        QSTORE(5, 160) QSTORE(6, 192) QSTORE(7, 224) QSTORE(8, 256) QSTORE(9, 288)
        : [a] "+r"(a), [b] "+r"(b), [k2] "+r"(k2)
        : [acc] "r"(acc)
        : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7",
          "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14");
}

static void tile_5(int64_t k2, const uint32_t *a, const int8_t *b, const int32_t *za,
                   const float *sa, const int32_t *colsum, const float *sw, float *c,
                   int64_t ldc)
{
    int32_t acc[5 * 16] __attribute__((aligned(32)));
    sums_5(k2, a, b, acc);
    const __m256i cs0 = _mm256_loadu_si256((const __m256i *)colsum);
    const __m256i cs1 = _mm256_loadu_si256((const __m256i *)(colsum + 8));
    const __m256 sw0 = _mm256_loadu_ps(sw), sw1 = _mm256_loadu_ps(sw + 8);
    for (int i = 0; i < 5; i++) {
        const __m256i zi = _mm256_set1_epi32(za[i]);
        const __m256 si = _mm256_set1_ps(sa[i]);
        const __m256i a0 = _mm256_load_si256((const __m256i *)(acc + 16 * i));
        const __m256i a1 = _mm256_load_si256((const __m256i *)(acc + 16 * i + 8));
        const __m256 t0 = _mm256_cvtepi32_ps(_mm256_sub_epi32(a0, _mm256_mullo_epi32(zi, cs0)));
        const __m256 t1 = _mm256_cvtepi32_ps(_mm256_sub_epi32(a1, _mm256_mullo_epi32(zi, cs1)));
        _mm256_storeu_ps(c + i * ldc, _mm256_mul_ps(_mm256_mul_ps(t0, si), sw0));
        _mm256_storeu_ps(c + i * ldc + 8, _mm256_mul_ps(_mm256_mul_ps(t1, si), sw1));
    }
}

void cattn_ukr_avx2_i8(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                       const int32_t *za, const float *sa, const int32_t *colsum,
                       const float *sw, float *c, int64_t ldc)
{
    switch (m) {                       /* one unrolled body per row count */
    case 1: ukr_rows(k2, a, 1, b, za, sa, colsum, sw, c, ldc); break;
    case 2: ukr_rows(k2, a, 2, b, za, sa, colsum, sw, c, ldc); break;
    case 3: ukr_rows(k2, a, 3, b, za, sa, colsum, sw, c, ldc); break;
    case 4: ukr_rows(k2, a, 4, b, za, sa, colsum, sw, c, ldc); break;
    default: tile_5(k2, a, b, za, sa, colsum, sw, c, ldc); break;
    }
}
#endif
