/* kernels/ref/bf16dot.c — the "bfloat16dot" tile in portable C (contract
 * in dispatch.h, cattn_bf16dot_t): vdpbf16ps's arithmetic, one lane at a
 * time, on every CPU without AVX512_BF16. Correct, not fast: a CPU without
 * the instruction runs the "bfloat16" format (widened to float32) instead
 * unless asked for this one.
 *
 * fma(x, w, t) rounded once to float32: x w is exact in double (8 x 8
 * significant bits), and double's sum of it and the float t rounds to the
 * same float as the exact sum (one of the two is far below the other's
 * float32 half-ulp whenever the double sum is inexact, so it cannot land on
 * a float32 tie). Subnormal inputs are 0 (DAZ), subnormal results 0 (FTZ),
 * each with its sign.
 */
#include <string.h>
#include "kernels.h"

static inline float bf16_daz(uint16_t h)
{
    const uint32_t u = (h & 0x7F80u) ? (uint32_t)h << 16 : (uint32_t)(h & 0x8000u) << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float ftz(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (!(u & 0x7F800000u)) u &= 0x80000000u;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* ftz(fma(x, w, t)) for bfloat16 x, w (t already flushed) */
static inline float dp_step(float x, float w, float t)
{
    return ftz((float)((double)x * (double)w + (double)t));
}

void cattn_bf16dot_ref(int64_t kc, const uint32_t *a, int64_t lda, int m, const uint16_t *b,
                       int np, int64_t ps, float *c, int64_t ldc, int acc)
{
    const int64_t k2 = (kc + 1) / 2;
    for (int i = 0; i < m; i++)
        for (int q = 0; q < np; q++)
            for (int j = 0; j < 16; j++) {
                const uint16_t *w = b + q * ps + j;
                float s = acc ? ftz(c[i * ldc + q * 16 + j]) : 0.0f;
                for (int64_t p = 0; p < k2; p++) {
                    const uint32_t x = a[i * lda + p];
                    const float w1 = 2 * p + 1 < kc ? bf16_daz(w[(2 * p + 1) * 16]) : 0.0f;
                    s = dp_step(bf16_daz((uint16_t)(x >> 16)), w1, s);
                    s = dp_step(bf16_daz((uint16_t)x), bf16_daz(w[2 * p * 16]), s);
                }
                c[i * ldc + q * 16 + j] = s;
            }
}
