/* kernels/avx512/q4gemm.c — the group-wise formats' micro-kernels on
 * AVX-512 (contracts in dispatch.h: cattn_ukr_q4_t, cattn_ukr_q4k_t,
 * cattn_ukr_q8g_t; same bits as the portable and AVX2 ones). Not here: the
 * driver (q4gemm.c: row quantization, panels, threads) and the activation
 * quantization (AVX2's, kernels/avx2/quant.c: a zmm form of it measured
 * the same, 0.99-1.01x, on Zen 4 and was not kept).
 *
 * A group's 64-byte chunk is one zmm: 16 columns x 4 bytes, so one m x 16
 * tile (m = 1..4 rows) keeps every accumulator in registers (32 zmm).
 * int4 (tile_bw, tile_vnni; two-level Q4_K scales in tile_vnni, K2): the
 * low and high nibbles (vpandd; vpsrlw 4 + vpandd) are u8 weights against
 * row i's 4 broadcast s8 activations:
 *   AVX512_VNNI: vpdpbusd adds the column's 4 products in int32 (exact);
 *   AVX-512BW: vpmaddubsw pairs into s16 (|.| <= 2 * 15 * 127), the 8 of a
 *     group add in s16 (|.| <= 30480), vpmaddwd with ones into int32.
 * int8g (tile8_vnni), int6g and int5g (tile6_vnni): VNNI only (without it
 * the table keeps AVX2's): vpdpbusd on the u8 values, rebuilt from nibbles
 * and top-bit planes for int6g / int5g, one int32 sum per sub-block of 16
 * (but Q8_0's one row, z = 128 without sub-scales: AVX2's sign-trick tile,
 * which streams from memory faster here; cattn_ukr_avx512vnni_q8g).
 * Then the contract's float steps, 16 columns per instruction.
 *
 * Measured on Zen 4 (EPYC family 25 model 17, 2 threads; 512-bit ops run
 * as two 256-bit halves there): these 512-bit forms run 1.2-2.1x AVX2's
 * 256-bit kernels in cache at 1, 4 and 128 rows (benchmarks/bench_paths.py),
 * so the path has one form; a 256-bit VNNI form (AVX512-VL) was not
 * written, and Intel cores (full-width 512-bit units) are not measured.
 * A one-row kernel over four panels at once (four weight streams, as
 * int8's ukr_i8_row4) read slower here too: a Q4_0 9728 x 896 GEMV from
 * memory 67% of the C read loop's bandwidth against 97% one panel at a
 * time (Q4_K 6144 x 1024: 65-89% against 99-102%), as on Zen 3.
 */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include <immintrin.h>
#include "kernels.h"

#if CATTN_MR_Q4 != 4 || CATTN_NR_Q4 != 16 || CATTN_Q4_GROUP != 32
#error "kernels/avx512/q4gemm.c: the tile is 4 rows x 16 columns, groups of 32"
#endif

#define PF 4096          /* decode (one row): prefetch this many weight bytes ahead */

#ifdef CATTN_SIMDE
#define TARGET_VNNI
#else
#define TARGET_VNNI __attribute__((target("avx512vnni")))
#endif

static inline __attribute__((always_inline)) int32_t word(const int8_t *a)
{
    int32_t w;
    __builtin_memcpy(&w, a, 4);
    return w;
}

/* the float steps of group g for M rows: f[i] from the int32 sums s[i] */
/* 16 scales at a + i (float32, or float16 when H16: vcvtph2ps, exact) */
static inline __attribute__((always_inline)) __m512 scales16(const void *a, int64_t i, const int H16)
{
    if (H16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)a + i)));
    return _mm512_loadu_ps((const float *)a + i);
}

static inline __attribute__((always_inline)) void
group_end(__m512 *f, const __m512i *s, const int M, int64_t g, const void *d, const void *mn,
          const int H16, int z, const float *sx, const int32_t *xs, const float *sxs, int64_t lds)
{
    const __m512 dv = scales16(d, g * 16, H16);
    const __m512 mv = mn ? scales16(mn, g * 16, H16) : _mm512_setzero_ps();
    for (int i = 0; i < M; i++) {
        const __m512i isum = _mm512_sub_epi32(s[i], _mm512_set1_epi32(z * xs[i * lds + g]));
        const __m512 ds = _mm512_mul_ps(dv, _mm512_set1_ps(sx[i * lds + g]));
        f[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), ds, f[i]);
        if (mn) f[i] = _mm512_fmadd_ps(mv, _mm512_set1_ps(sxs[i * lds + g]), f[i]);
    }
}

static inline __attribute__((always_inline)) void
tile_bw(int64_t G, const uint8_t *b, const void *d, const void *mn, const int H16, int z,
        const int M,
        const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs, const float *sxs,
        int64_t lds, float *c, int64_t ldc)
{
    const __m512i low = _mm512_set1_epi8(15), ones = _mm512_set1_epi16(1);
    __m512 f[4];
    for (int i = 0; i < 4; i++) f[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < G; g++, b += 256) {
        __m512i s[4];
        for (int i = 0; i < M; i++) s[i] = _mm512_setzero_si512();
        for (int t = 0; t < 4; t++) {
            const __m512i v = _mm512_loadu_si512((const void *)(b + 64 * t));
            const __m512i lo = _mm512_and_si512(v, low);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
            for (int i = 0; i < M; i++) {
                const int8_t *a = qx + i * ldq + g * 32 + 8 * t;
                s[i] = _mm512_add_epi16(s[i], _mm512_maddubs_epi16(lo, _mm512_set1_epi32(word(a))));
                s[i] = _mm512_add_epi16(s[i], _mm512_maddubs_epi16(hi, _mm512_set1_epi32(word(a + 4))));
            }
        }
        for (int i = 0; i < M; i++) s[i] = _mm512_madd_epi16(s[i], ones);
        group_end(f, s, M, g, d, mn, H16, z, sx, xs, sxs, lds);
    }
    for (int i = 0; i < M; i++) _mm512_storeu_ps(c + i * ldc, f[i]);
}

/* group g's prefetches: the weight stream PF bytes ahead and its scales
 * (K2: the two-level scales' u8 arrays; their float16 D, Dmin per 8 groups
 * ride along) */
static inline __attribute__((always_inline)) void
pf_group(const uint8_t *b, int64_t g, const void *d, const void *mn, const int H16,
         const cattn_q4k_scales *k, const int K2)
{
    for (int t = 0; t < 4; t++) _mm_prefetch((const char *)b + PF + 64 * t, _MM_HINT_T0);
    if (K2) {
        _mm_prefetch((const char *)k->sc + g * 16 + PF / 16, _MM_HINT_T0);
        _mm_prefetch((const char *)k->m + g * 16 + PF / 16, _MM_HINT_T0);
    } else {
        const int64_t sb = (H16 ? 2 : 4) * g * 16, spf = H16 ? PF / 8 : PF / 4;
        _mm_prefetch((const char *)d + sb + spf, _MM_HINT_T0);
        if (mn) _mm_prefetch((const char *)mn + sb + spf, _MM_HINT_T0);
    }
}

/* two-level scales (GGUF Q4_K; dispatch.h, cattn_ukr_q4k_t): the 16
 * columns' D (float16, widened exactly by vcvtph2ps) times their u8
 * sub-scales of group g: exact float32 products, the driver's values */
static inline __attribute__((always_inline)) __m512 kmul16(__m512 Dv, const uint8_t *s, int64_t g)
{
    const __m512i u = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(s + g * 16)));
    return _mm512_mul_ps(Dv, _mm512_cvtepi32_ps(u));
}

/* M rows x 16 columns: each row's group sum one int32 vector (vpdpbusd on
 * the 8 nibble vectors of a group), the float accumulators f[i] in
 * registers (2 M + 4 zmm: no spills at M = 4). K2: d and mn from the
 * two-level scales (z = 0), D and Dmin widened once per 8 groups. */
TARGET_VNNI static inline __attribute__((always_inline)) void
tile_vnni(int64_t G, const uint8_t *b, const void *d, const void *mn, const int H16, int z,
          const int M, const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
          const float *sxs, int64_t lds, float *c, int64_t ldc, const cattn_q4k_scales *k,
          const int K2)
{
    const __m512i low = _mm512_set1_epi8(15);
    const __m512 neg = _mm512_set1_ps(-0.0f);
    __m512 f[4], kD = neg, kDm = neg;
    for (int i = 0; i < 4; i++) f[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < G; g++, b += 256) {
        __m512i s[4];
        for (int i = 0; i < M; i++) s[i] = _mm512_setzero_si512();
        pf_group(b, g, d, mn, H16, k, K2);      /* every M: a tile's first rows stream the weights */
        if (K2 && (g & 7) == 0) {
            kD = scales16(k->D, (g >> 3) * 16, 1);
            kDm = scales16(k->Dmin, (g >> 3) * 16, 1);
        }
        for (int t = 0; t < 4; t++) {
            const __m512i v = _mm512_loadu_si512((const void *)(b + 64 * t));
            const __m512i lo = _mm512_and_si512(v, low);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
            for (int i = 0; i < M; i++) {
                const int8_t *a = qx + i * ldq + g * 32 + 8 * t;
                s[i] = _mm512_dpbusd_epi32(s[i], lo, _mm512_set1_epi32(word(a)));
                s[i] = _mm512_dpbusd_epi32(s[i], hi, _mm512_set1_epi32(word(a + 4)));
            }
        }
        if (K2) {
            const __m512 dv = kmul16(kD, k->sc, g);
            const __m512 mv = _mm512_xor_ps(kmul16(kDm, k->m, g), neg);
            for (int i = 0; i < M; i++) {
                const __m512 ds = _mm512_mul_ps(dv, _mm512_set1_ps(sx[i * lds + g]));
                f[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[i]), ds, f[i]);
                f[i] = _mm512_fmadd_ps(mv, _mm512_set1_ps(sxs[i * lds + g]), f[i]);
            }
        } else {
            group_end(f, s, M, g, d, mn, H16, z, sx, xs, sxs, lds);
        }
    }
    for (int i = 0; i < M; i++) _mm512_storeu_ps(c + i * ldc, f[i]);
}

#define TILES(fn, H)                                                                    \
    switch (m) {                                                                        \
    case 1: fn(G, b, d, mn, H, z, 1, qx, ldq, sx, xs, sxs, lds, c, ldc); break;         \
    case 2: fn(G, b, d, mn, H, z, 2, qx, ldq, sx, xs, sxs, lds, c, ldc); break;         \
    case 3: fn(G, b, d, mn, H, z, 3, qx, ldq, sx, xs, sxs, lds, c, ldc); break;         \
    default: fn(G, b, d, mn, H, z, 4, qx, ldq, sx, xs, sxs, lds, c, ldc); break;        \
    }

void cattn_ukr_avx512_q4(int64_t G, const uint8_t *b, const void *d, const void *mn, int h16,
                         int z, int m, const int8_t *qx, int64_t ldq, const float *sx,
                         const int32_t *xs, const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    if (h16) {
        TILES(tile_bw, 1)
    } else {
        TILES(tile_bw, 0)
    }
}

#define TILES_K(H, K2)                                                                       \
    switch (m) {                                                                             \
    case 1: tile_vnni(G, b, d, mn, H, z, 1, qx, ldq, sx, xs, sxs, lds, c, ldc, k, K2); break; \
    case 2: tile_vnni(G, b, d, mn, H, z, 2, qx, ldq, sx, xs, sxs, lds, c, ldc, k, K2); break; \
    case 3: tile_vnni(G, b, d, mn, H, z, 3, qx, ldq, sx, xs, sxs, lds, c, ldc, k, K2); break; \
    default: tile_vnni(G, b, d, mn, H, z, 4, qx, ldq, sx, xs, sxs, lds, c, ldc, k, K2); break; \
    }

TARGET_VNNI void
cattn_ukr_avx512vnni_q4(int64_t G, const uint8_t *b, const void *d, const void *mn, int h16,
                        int z, int m, const int8_t *qx, int64_t ldq, const float *sx,
                        const int32_t *xs, const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    const cattn_q4k_scales *k = NULL;
    if (h16) {
        TILES_K(1, 0)
    } else {
        TILES_K(0, 0)
    }
}

/* two-level scales (dispatch.h, cattn_ukr_q4k_t): d and mn computed per
 * group from k's panel arrays, z = 0 (the same float32 values and bits as
 * ukr_q4 on the driver's expansion) */
TARGET_VNNI void
cattn_ukr_avx512vnni_q4k(int64_t G, const uint8_t *b, const cattn_q4k_scales *k, int m,
                         const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
                         const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    const void *d = NULL, *mn = NULL;
    const int z = 0;
    TILES_K(0, 1)
}

/* int8g on VNNI (dispatch.h, cattn_ukr_q8g_t): vpdpbusd on the u8 values
 * directly, one int32 sum per sub-block of 16; without VNNI the table
 * keeps the AVX2 kernel (same bits). */
TARGET_VNNI static inline __attribute__((always_inline)) void
tile8_vnni(int64_t G, const uint8_t *b, const void *d, const void *mn, const int8_t *sub,
           const int H16, int z, const int M, const int8_t *qx, int64_t ldq, const float *sx,
           const int32_t *xs, const int32_t *xs16, const float *sxs, int64_t lds, float *c,
           int64_t ldc)
{
    __m512 f[4];
    for (int i = 0; i < 4; i++) f[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < G; g++, b += 512) {
        __m512i part[4][2];
        for (int t = 0; t < 8; t++) _mm_prefetch((const char *)b + 2 * PF + 64 * t, _MM_HINT_T0);
        for (int sb = 0; sb < 2; sb++) {
            for (int i = 0; i < M; i++) part[i][sb] = _mm512_setzero_si512();
            for (int t = 4 * sb; t < 4 * sb + 4; t++) {
                const __m512i v = _mm512_loadu_si512((const void *)(b + 64 * t));
                for (int i = 0; i < M; i++)
                    part[i][sb] = _mm512_dpbusd_epi32(part[i][sb], v,
                                                      _mm512_set1_epi32(word(qx + i * ldq + g * 32 + 4 * t)));
            }
        }
        const __m512 dv = scales16(d, g * 16, H16);
        const __m512 mv = mn ? scales16(mn, g * 16, H16) : _mm512_setzero_ps();
        __m512i s0 = _mm512_setzero_si512(), s1 = s0;
        if (sub) {
            s0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sub + g * 32)));
            s1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sub + g * 32 + 16)));
        }
        for (int i = 0; i < M; i++) {
            __m512i t;
            if (sub) {
                const __m512i t0 = _mm512_sub_epi32(part[i][0], _mm512_set1_epi32(z * xs16[i * 2 * lds + 2 * g]));
                const __m512i t1 = _mm512_sub_epi32(part[i][1], _mm512_set1_epi32(z * xs16[i * 2 * lds + 2 * g + 1]));
                t = _mm512_add_epi32(_mm512_mullo_epi32(s0, t0), _mm512_mullo_epi32(s1, t1));
            } else {
                t = _mm512_sub_epi32(_mm512_add_epi32(part[i][0], part[i][1]),
                                     _mm512_set1_epi32(z * xs[i * lds + g]));
            }
            const __m512 ds = _mm512_mul_ps(dv, _mm512_set1_ps(sx[i * lds + g]));
            f[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), ds, f[i]);
            if (mn) f[i] = _mm512_fmadd_ps(mv, _mm512_set1_ps(sxs[i * lds + g]), f[i]);
        }
    }
    for (int i = 0; i < M; i++) _mm512_storeu_ps(c + i * ldc, f[i]);
}

#define TILES8(H)                                                                                  \
    switch (m) {                                                                                   \
    case 1: tile8_vnni(G, b, d, mn, sub, H, z, 1, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc); break; \
    case 2: tile8_vnni(G, b, d, mn, sub, H, z, 2, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc); break; \
    case 3: tile8_vnni(G, b, d, mn, sub, H, z, 3, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc); break; \
    default: tile8_vnni(G, b, d, mn, sub, H, z, 4, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc); break; \
    }

/* kernels/avx2/q4gemm_f16c.c's int8g kernel (every AVX-512 CPU has F16C) */
void cattn_ukr_avx2_q8g_f16c(int64_t G, const uint8_t *b, const void *d, const void *mn,
                             const int8_t *sub, int h16, int z, int m, const int8_t *qx,
                             int64_t ldq, const float *sx, const int32_t *xs,
                             const int32_t *xs16, const float *sxs, int64_t lds, float *c,
                             int64_t ldc);

TARGET_VNNI void
cattn_ukr_avx512vnni_q8g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                         const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                         const float *sx, const int32_t *xs, const int32_t *xs16,
                         const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    if (m == 1 && z == 128 && !sub) {   /* Q8_0's one row: AVX2's sign-trick tile (same bits) */
        cattn_ukr_avx2_q8g_f16c(G, b, d, mn, sub, h16, z, m, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);
        return;
    }
    if (h16) {
        TILES8(1)
    } else {
        TILES8(0)
    }
}
/* int6g and int5g on VNNI (dispatch.h, ukr_q6g / ukr_q5g): sub-block s (16
 * k) of a group is int4's nibbles of chunks 2s and 2s + 1 (quarters f = 0,
 * 1: chunk 2s's low and high nibbles; 2, 3: chunk 2s + 1's) with their top
 * bits put back as bytes u = nibble | top << 4 (TB = 2: bits 2f, 2f + 1 of
 * the 64-byte plane word of s; TB = 1: bit 4s + f of the group's one plane
 * word), then vpdpbusd on the bytes against the quarter's 4 broadcast
 * activations: the exact int32 sum per sub-block (u < 64), the sub-scales
 * and zero points in int32 as int8g's, the contract's float steps. 16
 * columns per zmm, 1-4 rows, everything in registers. */
static inline __attribute__((always_inline)) __m512i top_bits(__m512i X, const int TB, int f)
{
    const __m512i m48 = _mm512_set1_epi8(0x30), m16 = _mm512_set1_epi8(16);
    if (TB == 2) {                                  /* bits 2f, 2f + 1 to bits 4, 5 */
        const __m512i y = f == 0 ? _mm512_slli_epi16(X, 4) : f == 1 ? _mm512_slli_epi16(X, 2)
                          : f == 2 ? X : _mm512_srli_epi16(X, 2);
        return _mm512_and_si512(y, m48);
    }
    const __m512i y = f < 4 ? _mm512_slli_epi16(X, 4 - f) : f > 4 ? _mm512_srli_epi16(X, f - 4) : X;
    return _mm512_and_si512(y, m16);                /* bit f to bit 4 */
}

TARGET_VNNI static inline __attribute__((always_inline)) void
tile6_vnni(int64_t G, const uint8_t *b, const int TB, const void *d, const void *mn,
           const int8_t *sub, const int H16, int z, const int M, const int8_t *qx, int64_t ldq,
           const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
           int64_t lds, float *c, int64_t ldc)
{
    const __m512i m15 = _mm512_set1_epi8(15);
    __m512 f[4];
    for (int i = 0; i < 4; i++) f[i] = _mm512_setzero_ps();
    for (int64_t g = 0; g < G; g++, b += 256 + 64 * TB) {
        for (int t = 0; t < 4 + TB; t++) _mm_prefetch((const char *)b + PF + 64 * t, _MM_HINT_T0);
        __m512i part[4][2];
        const __m512i X1 = TB == 1 ? _mm512_loadu_si512((const void *)(b + 256)) : m15;
        for (int sb = 0; sb < 2; sb++) {
            const __m512i v0 = _mm512_loadu_si512((const void *)(b + 128 * sb));
            const __m512i v1 = _mm512_loadu_si512((const void *)(b + 128 * sb + 64));
            const __m512i X = TB == 2 ? _mm512_loadu_si512((const void *)(b + 256 + 64 * sb)) : X1;
            const int f0 = TB == 2 ? 0 : 4 * sb;
            /* u = (nibble & 15) | top: vpternlogd 0xEA = (A & B) | C */
            const __m512i u0 = _mm512_ternarylogic_epi32(v0, m15, top_bits(X, TB, f0), 0xEA);
            const __m512i u1 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v0, 4), m15,
                                                         top_bits(X, TB, f0 + 1), 0xEA);
            const __m512i u2 = _mm512_ternarylogic_epi32(v1, m15, top_bits(X, TB, f0 + 2), 0xEA);
            const __m512i u3 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(v1, 4), m15,
                                                         top_bits(X, TB, f0 + 3), 0xEA);
            for (int i = 0; i < M; i++) {
                const int8_t *a = qx + i * ldq + g * 32 + 16 * sb;
                __m512i acc = sub || sb == 0 ? _mm512_setzero_si512() : part[i][0];
                acc = _mm512_dpbusd_epi32(acc, u0, _mm512_set1_epi32(word(a)));
                acc = _mm512_dpbusd_epi32(acc, u1, _mm512_set1_epi32(word(a + 4)));
                acc = _mm512_dpbusd_epi32(acc, u2, _mm512_set1_epi32(word(a + 8)));
                acc = _mm512_dpbusd_epi32(acc, u3, _mm512_set1_epi32(word(a + 12)));
                part[i][sb] = acc;
            }
        }
        const __m512 dv = scales16(d, g * 16, H16);
        const __m512 mv = mn ? scales16(mn, g * 16, H16) : _mm512_setzero_ps();
        __m512i s0 = _mm512_setzero_si512(), s1 = s0;
        if (sub) {
            s0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sub + g * 32)));
            s1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sub + g * 32 + 16)));
        }
        for (int i = 0; i < M; i++) {
            __m512i t;
            if (sub) {
                const __m512i t0 = _mm512_sub_epi32(part[i][0], _mm512_set1_epi32(z * xs16[i * 2 * lds + 2 * g]));
                const __m512i t1 = _mm512_sub_epi32(part[i][1], _mm512_set1_epi32(z * xs16[i * 2 * lds + 2 * g + 1]));
                t = _mm512_add_epi32(_mm512_mullo_epi32(s0, t0), _mm512_mullo_epi32(s1, t1));
            } else {                                /* part[i][1]: both sub-blocks' sum */
                t = _mm512_sub_epi32(part[i][1], _mm512_set1_epi32(z * xs[i * lds + g]));
            }
            const __m512 ds = _mm512_mul_ps(dv, _mm512_set1_ps(sx[i * lds + g]));
            f[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), ds, f[i]);
            if (mn) f[i] = _mm512_fmadd_ps(mv, _mm512_set1_ps(sxs[i * lds + g]), f[i]);
        }
    }
    for (int i = 0; i < M; i++) _mm512_storeu_ps(c + i * ldc, f[i]);
}

#define TILES6(TB, H)                                                                              \
    switch (m) {                                                                                   \
    case 1: tile6_vnni(G, b, TB, d, mn, sub, H, z, 1, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc); break; \
    case 2: tile6_vnni(G, b, TB, d, mn, sub, H, z, 2, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc); break; \
    case 3: tile6_vnni(G, b, TB, d, mn, sub, H, z, 3, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc); break; \
    default: tile6_vnni(G, b, TB, d, mn, sub, H, z, 4, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc); break; \
    }

TARGET_VNNI void
cattn_ukr_avx512vnni_q6g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                         const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                         const float *sx, const int32_t *xs, const int32_t *xs16,
                         const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    if (h16) {
        TILES6(2, 1)
    } else {
        TILES6(2, 0)
    }
}

TARGET_VNNI void
cattn_ukr_avx512vnni_q5g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                         const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                         const float *sx, const int32_t *xs, const int32_t *xs16,
                         const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    if (h16) {
        TILES6(1, 1)
    } else {
        TILES6(1, 0)
    }
}
#endif
