/* kernels/ref/q4gemm.c — the portable int4 micro-kernel (contract in
 * dispatch.h, cattn_ukr_q4_t): an m x 16 tile over G groups of 32 k in
 * plain C, and the int8g / int6g ones (groups of 32 8-bit values, or
 * 6-bit ones in int4's nibbles and a plane of their top 2 bits). The group sums are exact int32 (|sum| <= 32 * 15 * 127), and
 * the float steps are the contract's (fmaf: one rounding, as the SIMD
 * paths' FMA), so every path gives the same bits. */
#include <math.h>
#include <string.h>
#include "kernels.h"

/* float16 bits -> float32, exact for finite values: the bits shifted into
 * float32's fields are the value times 2^-112 (normal or subnormal alike) */
static inline float h2f(uint16_t h)
{
    const uint32_t u = (uint32_t)(h & 0x8000u) << 16 | (uint32_t)(h & 0x7FFFu) << 13;
    float f;
    memcpy(&f, &u, 4);
    return f * 0x1p112f;
}

static inline float scale_at(const void *a, int h16, int64_t i)
{
    return h16 ? h2f(((const uint16_t *)a)[i]) : ((const float *)a)[i];
}

void cattn_ukr_ref_q4(int64_t G, const uint8_t *b, const void *d, const void *mn, int h16,
                      int z, int m, const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
                      const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    float acc[CATTN_MR_Q4][CATTN_NR_Q4] = {{0}};
    for (int64_t g = 0; g < G; g++) {
        const uint8_t *bg = b + g * 256;
        for (int i = 0; i < m; i++) {
            const int8_t *a = qx + i * ldq + g * 32;
            const float s = sx[i * lds + g];
            const int32_t zs = z * xs[i * lds + g];
            for (int j = 0; j < CATTN_NR_Q4; j++) {
                int32_t t = 0;
                for (int ch = 0; ch < 4; ch++)
                    for (int u = 0; u < 4; u++) {
                        const uint8_t v = bg[ch * 64 + 4 * j + u];
                        t += (int32_t)(v & 15) * a[8 * ch + u] + (int32_t)(v >> 4) * a[8 * ch + 4 + u];
                    }
                const float ds = scale_at(d, h16, g * 16 + j) * s;
                acc[i][j] = fmaf((float)(t - zs), ds, acc[i][j]);
                if (mn) acc[i][j] = fmaf(scale_at(mn, h16, g * 16 + j), sxs[i * lds + g], acc[i][j]);
            }
        }
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < CATTN_NR_Q4; j++) c[i * ldc + j] = acc[i][j];
}

/* u[j, 32g + k] of an int8g group (512 bytes), an int6g one (384: dispatch.h,
 * ukr_q6g) or an int5g one (320: ukr_q5g) */
static inline int32_t value8(const uint8_t *bg, int j, int k)
{
    return bg[(k / 4) * 64 + 4 * j + k % 4];
}
static inline int32_t value6(const uint8_t *bg, int j, int k)
{
    const int t = k / 8, v = k % 4, s = k / 16, f = (k % 16) / 4;
    const uint8_t lo = bg[t * 64 + 4 * j + v];
    return (k % 8 < 4 ? lo & 15 : lo >> 4) | ((bg[256 + s * 64 + 4 * j + v] >> (2 * f)) & 3) << 4;
}

static inline int32_t value5(const uint8_t *bg, int j, int k)
{
    const uint8_t lo = bg[(k / 8) * 64 + 4 * j + k % 4];
    return (k % 8 < 4 ? lo & 15 : lo >> 4) | ((bg[256 + 4 * j + k % 4] >> (k / 4)) & 1) << 4;
}

/* bits: 8 (int8g), 6 (int6g) or 5 (int5g) */
static inline __attribute__((always_inline)) void
tile8(int64_t G, const uint8_t *b, const int bits, const void *d, const void *mn, const int8_t *sub,
      int h16, int z, int m, const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
      const int32_t *xs16, const float *sxs, int64_t lds, float *c, int64_t ldc)
{
    float acc[CATTN_MR_Q4][CATTN_NR_Q4] = {{0}};
    for (int64_t g = 0; g < G; g++) {
        const uint8_t *bg = b + g * 64 * bits;
        for (int i = 0; i < m; i++) {
            const int8_t *a = qx + i * ldq + g * 32;
            const float s = sx[i * lds + g];
            for (int j = 0; j < CATTN_NR_Q4; j++) {
                int32_t part[2] = {0, 0};
                for (int k = 0; k < 32; k++)
                    part[k / 16] += (bits == 6 ? value6(bg, j, k) : bits == 5 ? value5(bg, j, k)
                                     : value8(bg, j, k)) * a[k];
                int32_t tt;
                if (sub)
                    tt = sub[(g * 2) * 16 + j] * (part[0] - z * xs16[i * 2 * lds + 2 * g]) +
                         sub[(g * 2 + 1) * 16 + j] * (part[1] - z * xs16[i * 2 * lds + 2 * g + 1]);
                else
                    tt = part[0] + part[1] - z * xs[i * lds + g];
                const float ds = scale_at(d, h16, g * 16 + j) * s;
                acc[i][j] = fmaf((float)tt, ds, acc[i][j]);
                if (mn) acc[i][j] = fmaf(scale_at(mn, h16, g * 16 + j), sxs[i * lds + g], acc[i][j]);
            }
        }
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < CATTN_NR_Q4; j++) c[i * ldc + j] = acc[i][j];
}

void cattn_ukr_ref_q8g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                       const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                       const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                       int64_t lds, float *c, int64_t ldc)
{
    tile8(G, b, 8, d, mn, sub, h16, z, m, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);
}

void cattn_ukr_ref_q6g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                       const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                       const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                       int64_t lds, float *c, int64_t ldc)
{
    tile8(G, b, 6, d, mn, sub, h16, z, m, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);
}

void cattn_ukr_ref_q5g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                       const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                       const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                       int64_t lds, float *c, int64_t ldc)
{
    tile8(G, b, 5, d, mn, sub, h16, z, m, qx, ldq, sx, xs, xs16, sxs, lds, c, ldc);
}
