/* kernels/ref/qgemm.c — the portable int8 micro-kernel (contract in
 * dispatch.h): an m x 16 tile over all k2 pairs in plain C, then the
 * dequantization. The sums are exact (the caller bounds them below 2^31),
 * so every path gives the same integers and the same floats. */
#include "kernels.h"

void cattn_ukr_ref_i8(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                      const int32_t *za, const float *sa, const int32_t *colsum,
                      const float *sw, const float *bias, int act, float *c, int64_t ldc)
{
    int32_t acc[CATTN_MR_I8][CATTN_NR_I8] = {{0}};
    for (int64_t p = 0; p < k2; p++) {
        const int8_t *bp = b + p * 2 * CATTN_NR_I8;
        for (int i = 0; i < m; i++) {
            const uint32_t pr = a[p * CATTN_MR_I8 + i];
            const int32_t lo = (int32_t)(pr & 0xFFFFu), hi = (int32_t)(pr >> 16);
            for (int j = 0; j < CATTN_NR_I8; j++)
                acc[i][j] += lo * bp[2 * j] + hi * bp[2 * j + 1];
        }
    }
    for (int i = 0; i < m; i++) {
        float *ci = c + i * ldc;
        for (int j = 0; j < CATTN_NR_I8; j++) {
            const float t = (float)(acc[i][j] - za[i] * colsum[j]);
            ci[j] = (t * sa[i]) * sw[j];
        }
        if (bias)
            for (int j = 0; j < CATTN_NR_I8; j++) ci[j] += bias[j];
        if (act != CATTN_ACT_NONE) cattn_act_ref_f32(ci, ci, CATTN_NR_I8, act);
    }
}
