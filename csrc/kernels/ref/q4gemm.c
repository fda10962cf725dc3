/* kernels/ref/q4gemm.c — the portable int4 micro-kernel (contract in
 * dispatch.h, cattn_ukr_q4_t): an m x 16 tile over G groups of 32 k in
 * plain C. The group sums are exact int32 (|sum| <= 32 * 15 * 127), and
 * the float steps are the contract's (fmaf: one rounding, as the SIMD
 * paths' FMA), so every path gives the same bits. */
#include <math.h>
#include "kernels.h"

void cattn_ukr_ref_q4(int64_t G, const uint8_t *b, const float *d, const float *mn, int z,
                      int m, const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
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
                const float ds = d[g * 16 + j] * s;
                acc[i][j] = fmaf((float)(t - zs), ds, acc[i][j]);
                if (mn) acc[i][j] = fmaf(mn[g * 16 + j], sxs[i * lds + g], acc[i][j]);
            }
        }
    }
    for (int i = 0; i < m; i++)
        for (int j = 0; j < CATTN_NR_Q4; j++) c[i * ldc + j] = acc[i][j];
}
