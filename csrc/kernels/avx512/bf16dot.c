/* kernels/avx512/bf16dot.c — the "bfloat16dot" tile on AVX512_BF16
 * (vdpbf16ps; contract in dispatch.h, cattn_bf16dot_t; the formula in
 * cattn.h, cattn_linear_bf16dot).
 *
 * vdpbf16ps adds, per 32-bit lane, two products of bfloat16 pairs to a
 * float32 accumulator: acc = ftz(fma(a[2j], b[2j], ftz(fma(a[2j+1], b[2j+1],
 * acc)))) with subnormal inputs taken as 0 (DAZ, FTZ, RNE whatever MXCSR
 * says: measured on Zen 4, family 25 model 17, 3.2 million random lanes,
 * denormals, zeros, infinities and NaN included; the portable kernel
 * computes the same). One instruction does 16 columns x 2 k.
 *
 * The panels are the bfloat16 format's (16 columns a row of k): rows 2q and
 * 2q + 1 are 64 contiguous bytes, words j and 16 + j the column-j pair;
 * vpermw puts them in lane j (one permute per panel and k pair, shared by
 * the m rows). An odd last row is loaded alone (upper half zero). Row i's
 * pair word (x[2q] | x[2q+1] << 16) is broadcast.
 * Register tile: m <= 6 rows x np <= 4 panels (24 accumulators, 4 weights);
 * one row: up to 8 panels (8 chains and weight streams: decode). A software
 * prefetch of the streams 1-8 KiB ahead made the one-row GEMV from memory
 * 5-25% slower on Zen 4: none.
 *
 * Not here: the activations' rounding to bfloat16, the K blocks, threads
 * and the epilogue (csrc/bf16dot.c); the portable kernel (kernels/ref/).
 * Compiled with the avx512 folder's flags; the BF16 functions carry their
 * own target attribute and run only where cpu.c saw AVX512_BF16.
 */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include <immintrin.h>
#include <string.h>
#include "kernels.h"

#if CATTN_BF16DOT_MR != 6 || CATTN_BF16DOT_NP != 4 || CATTN_BF16DOT_ROW_NP != 8
#error "kernels/avx512/bf16dot.c: the tiles are 6 rows x 4 panels, 1 row x 8 (config.h)"
#endif

#define TARGET_BF16 __attribute__((target("avx512bf16,avx512bw,avx512f")))


/* vpermw's index: lane j (words 2j, 2j+1) = words j, 16 + j (rows 2q, 2q+1) */
static const int16_t pair_idx[32] __attribute__((aligned(64))) = {
    0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
    8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};

/* M rows x NP panels over kc values of k (acc: start from c) */
static inline __attribute__((always_inline)) TARGET_BF16 void
tile(int64_t kc, const uint32_t *a, int64_t lda, const uint16_t *b, int64_t ps, float *c,
     int64_t ldc, int acc, const int M, const int NP)
{
    const __m512i idx = _mm512_load_si512((const void *)pair_idx);
    __m512 s[6][8];
    for (int i = 0; i < M; i++)
        for (int q = 0; q < NP; q++)
            s[i][q] = acc ? _mm512_loadu_ps(c + i * ldc + q * 16) : _mm512_setzero_ps();
    const int64_t k2 = kc / 2;
    for (int64_t p = 0; p < k2; p++) {
        __m512i w[8];
        for (int q = 0; q < NP; q++)
            w[q] = _mm512_permutexvar_epi16(
                idx, _mm512_loadu_si512((const void *)(b + q * ps + p * 32)));
        for (int i = 0; i < M; i++) {
            const __m512bh x = (__m512bh)_mm512_set1_epi32((int)a[i * lda + p]);
            for (int q = 0; q < NP; q++)
                s[i][q] = _mm512_dpbf16_ps(s[i][q], x, (__m512bh)w[q]);
        }
    }
    if (kc & 1) {                            /* tail: the last row alone, its pair 0 */
        __m512i w[8];
        for (int q = 0; q < NP; q++)
            w[q] = _mm512_permutexvar_epi16(
                idx, _mm512_zextsi256_si512(
                         _mm256_loadu_si256((const __m256i *)(b + q * ps + k2 * 32))));
        for (int i = 0; i < M; i++) {
            const __m512bh x = (__m512bh)_mm512_set1_epi32((int)a[i * lda + k2]);
            for (int q = 0; q < NP; q++)
                s[i][q] = _mm512_dpbf16_ps(s[i][q], x, (__m512bh)w[q]);
        }
    }
    for (int i = 0; i < M; i++)
        for (int q = 0; q < NP; q++) _mm512_storeu_ps(c + i * ldc + q * 16, s[i][q]);
}

#define TILE_NP(M)                                                                        \
    switch (np) {                                                                         \
    case 1: tile(kc, a, lda, b, ps, c, ldc, acc, M, 1); break;                            \
    case 2: tile(kc, a, lda, b, ps, c, ldc, acc, M, 2); break;                            \
    case 3: tile(kc, a, lda, b, ps, c, ldc, acc, M, 3); break;                            \
    default: tile(kc, a, lda, b, ps, c, ldc, acc, M, 4); break;                           \
    }

TARGET_BF16 void cattn_bf16dot_avx512bf16(int64_t kc, const uint32_t *a, int64_t lda, int m,
                                          const uint16_t *b, int np, int64_t ps, float *c,
                                          int64_t ldc, int acc)
{
    if (m == 1 && np > 4) {                   /* decode: up to 8 panels, 8 streams */
        switch (np) {
        case 5: tile(kc, a, lda, b, ps, c, ldc, acc, 1, 5); break;
        case 6: tile(kc, a, lda, b, ps, c, ldc, acc, 1, 6); break;
        case 7: tile(kc, a, lda, b, ps, c, ldc, acc, 1, 7); break;
        default: tile(kc, a, lda, b, ps, c, ldc, acc, 1, 8); break;
        }
        return;
    }
    switch (m) {
    case 1: TILE_NP(1); break;
    case 2: TILE_NP(2); break;
    case 3: TILE_NP(3); break;
    case 4: TILE_NP(4); break;
    case 5: TILE_NP(5); break;
    default: TILE_NP(6); break;
    }
}
#undef TILE_NP
#endif

#ifdef CATTN_X86
#include "../ref/kernels.h"

/* The vdpbf16ps tile against the portable kernel on a 5-row, 3-panel tile
 * over an odd kc = 37 (values of every exponent, subnormals, zeros of both
 * signs, infinities; acc = 1 from a start that holds subnormals): the
 * contract is exact, so the outputs must match bit for bit (NaN by
 * NaN-ness). Run once at load on an AVX512_BF16 CPU: the kernel is used
 * only after it has given the portable kernel's answer on this CPU. */
static int bf16dot_agrees(void)
{
    enum { KC = 37, K2 = (KC + 1) / 2, M = 5, NP = 3 };
    uint32_t a[M * K2];
    uint16_t b[NP * KC * 16];
    float c1[M * NP * 16], c2[M * NP * 16];
    uint32_t s = 12345u;
#define NEXT() (s = s * 1103515245u + 12345u, s >> 8)
    for (int i = 0; i < M * K2; i++) {
        const uint32_t lo = NEXT() & 0xFFFFu, hi = NEXT() & 0xFFFFu;
        /* exponents near 1 (sums that round) or tiny ones (subnormal results) */
        const uint32_t e0 = i % 7 ? 120 + NEXT() % 16 : NEXT() % 4;
        a[i] = ((lo & 0x807Fu) | e0 << 7) | ((hi & 0x807Fu) | (120u + NEXT() % 16) << 7) << 16;
    }
    for (int i = 0; i < NP * KC * 16; i++) {
        uint32_t h = NEXT() & 0xFFFFu;
        h = (h & 0x807Fu) | (i % 11 ? 118u + NEXT() % 20 : NEXT() % 3) << 7;   /* subnormals */
        if (i % 97 == 5) h = (h & 0x8000u) | 0x7F80u;                          /* +-inf */
        if (i % 89 == 3) h &= 0x8000u;                                        /* +-0 */
        b[i] = (uint16_t)h;
    }
    for (int i = 0; i < M * NP * 16; i++) {
        const uint32_t u = i % 5 ? (NEXT() & 0x807FFFFFu) | (100u + NEXT() % 40) << 23
                                 : NEXT() & 0x807FFFFFu;                      /* subnormal */
        memcpy(&c1[i], &u, sizeof u);
        c2[i] = c1[i];
    }
#undef NEXT
    cattn_bf16dot_ref(KC, a, K2, M, b, NP, KC * 16, c1, NP * 16, 1);
    cattn_bf16dot_avx512bf16(KC, a, K2, M, b, NP, KC * 16, c2, NP * 16, 1);
    for (int i = 0; i < M * NP * 16; i++)
        if (memcmp(&c1[i], &c2[i], sizeof(float)) && !(c1[i] != c1[i] && c2[i] != c2[i]))
            return 0;
    return 1;
}

void cattn_kernels_avx512_bf16(cattn_dispatch_t *kt, int bf16)
{
    if (!bf16) return;                         /* the portable kernel stays */
    if (bf16dot_agrees()) {
        kt->bf16dot = cattn_bf16dot_avx512bf16;
        kt->bf16dot_kernel = "avx512_bf16 (vdpbf16ps)";
    } else {
        kt->bf16dot_kernel = "portable C (the vdpbf16ps kernel failed its load check)";
    }
}
#endif
