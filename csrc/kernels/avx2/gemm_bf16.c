/* kernels/avx2/gemm_bf16.c — a few rows of float32 A against packed
 * bfloat16 panels, widened in registers (contract in dispatch.h,
 * cattn_few_rows_bf16_t):
 *   c[i*ldc + jp*16 + j] (=|+=) sum_{p<k} a[i*lda + p] * float(b[jp*ps + p*16 + j])
 * for i < m (1..CATTN_GEMV_MAX_M), jp < npan, j < 16.
 *
 * Widening: one 32-byte load holds a panel row's 16 bfloat16 values; as
 * eight 32-bit words, w << 16 is the float of the even column of each
 * pair and w & 0xFFFF0000 the odd one (exact; two ops per 16 values: the
 * AND runs on any vector pipe, and took 10-13% off 2- and 8-row calls on
 * Zen 3 against the two shifts it replaced). The accumulators hold
 * columns (0, 2, .., 14) and (1, 3, .., 15); the store interleaves them
 * back (unpack, then swap 128-bit halves). Each output is the
 * micro-kernel's FMA chain (p increasing from zero, fmadd(a, b, s), then
 * s + c when accumulating), so the bits are those of the float32 kernels
 * on the widened panels, for any m.
 * Rows go in groups of up to 6 (two groups for 7..12 rows), each group
 * over 1 (3-6 rows), 2 (2 rows) or 4 (1 row) panels per pass: 6-12
 * independent FMA chains. The widening runs beside the FMAs.
 */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include <immintrin.h>
#include "kernels.h"

static inline __attribute__((always_inline)) void
bf16_pass(int64_t k, const float *a, int64_t lda, const int M, const int NP,
          const uint16_t *b, int64_t ps, float *c, int64_t ldc, int acc, const int pf)
{
    const __m256i odd = _mm256_set1_epi32((int)0xFFFF0000u);
    __m256 s[6][4][2];                         /* [row][panel][even/odd columns] */
    for (int i = 0; i < M; i++)
        for (int q = 0; q < NP; q++) s[i][q][0] = s[i][q][1] = _mm256_setzero_ps();
    for (int64_t p = 0; p < k; p++) {
        for (int q = 0; q < NP; q++) {
            if (pf)        /* the weight stream, CATTN_STREAM_PF floats' bytes ahead */
                _mm_prefetch((const char *)(b + q * ps + p * 16) + 4 * CATTN_STREAM_PF,
                             _MM_HINT_T0);
            const __m256i w = _mm256_loadu_si256((const __m256i *)(b + q * ps + p * 16));
            const __m256 be = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
            const __m256 bo = _mm256_castsi256_ps(_mm256_and_si256(w, odd));
            for (int i = 0; i < M; i++) {
                const __m256 ai = _mm256_broadcast_ss(a + i * lda + p);
                s[i][q][0] = _mm256_fmadd_ps(ai, be, s[i][q][0]);
                s[i][q][1] = _mm256_fmadd_ps(ai, bo, s[i][q][1]);
            }
        }
    }
    for (int i = 0; i < M; i++)
        for (int q = 0; q < NP; q++) {
            float *cr = c + i * ldc + q * 16;
            const __m256 u = _mm256_unpacklo_ps(s[i][q][0], s[i][q][1]);   /* 0-3 | 8-11 */
            const __m256 v = _mm256_unpackhi_ps(s[i][q][0], s[i][q][1]);   /* 4-7 | 12-15 */
            __m256 lo = _mm256_permute2f128_ps(u, v, 0x20), hi = _mm256_permute2f128_ps(u, v, 0x31);
            if (acc) {
                lo = _mm256_add_ps(lo, _mm256_loadu_ps(cr));
                hi = _mm256_add_ps(hi, _mm256_loadu_ps(cr + 8));
            }
            _mm256_storeu_ps(cr, lo);
            _mm256_storeu_ps(cr + 8, hi);
        }
}

/* one group of M rows over npan panels, NP at a time, then one by one */
#define BF16_GROUP(M, NP, PF)                                                          \
    do {                                                                               \
        int64_t jp = 0;                                                                \
        for (; jp + (NP) <= npan; jp += (NP))                                          \
            bf16_pass(k, a, lda, M, NP, b + jp * ps, ps, c + jp * 16, ldc, acc, PF);   \
        for (; jp < npan; jp++)                                                        \
            bf16_pass(k, a, lda, M, 1, b + jp * ps, ps, c + jp * 16, ldc, acc, PF);    \
    } while (0)

/* pf: the first group prefetches the panels (from memory or L3; the later
 * groups find them in L1 / L2) */
static void bf16_group(int64_t k, const float *a, int64_t lda, int m, const uint16_t *b,
                       int64_t npan, int64_t ps, float *c, int64_t ldc, int acc, int pf)
{
#define BF16_CASES(PF)                                                    \
    switch (m) {                                                          \
    case 1: BF16_GROUP(1, 4, PF); break;                                  \
    case 2: BF16_GROUP(2, 2, PF); break;                                  \
    case 3: BF16_GROUP(3, 1, PF); break;      /* 3 x 2 would spill */     \
    case 4: BF16_GROUP(4, 1, PF); break;                                  \
    case 5: BF16_GROUP(5, 1, PF); break;                                  \
    default: BF16_GROUP(6, 1, PF); break;                                 \
    }
    if (pf) BF16_CASES(1) else BF16_CASES(0)
#undef BF16_CASES
}

void cattn_few_rows_bf16_avx2(int64_t k, const float *a, int64_t lda, int m,
                              const uint16_t *b, int64_t npan, int64_t ps, float *c,
                              int64_t ldc, int acc)
{
    const int groups = (m + 5) / 6;
    for (int g = 0, i0 = 0; g < groups; g++) {
        const int mg = (m - i0) / (groups - g);        /* near-equal groups of <= 6 */
        bf16_group(k, a + i0 * lda, lda, mg, b, npan, ps, c + i0 * ldc, ldc, acc, g == 0);
        i0 += mg;
    }
}
#endif
