/* decoder.c — the decoder step's row operations between its kernels: the
 * rotary embedding of q and k, the KV-cache append and the gated product
 * of a SwiGLU MLP. Single-threaded loops over a step's token rows (a few
 * microseconds per decode step); float32 only; every * and + rounded on
 * its own (-ffp-contract=off, as the NumPy they replace), so results are
 * those of nn.RotaryEmbedding / KVCache.append / GatedMLP bit for bit.
 * Not here: the step itself (cattn/_decoder.pxi) or any GEMM/attention.
 * Legend: T token rows (B sequences x L new tokens, sequence-major), D head
 * dim, h = D/2, W a row's width in elements (rs: row stride).
 *
 * cattn_rope_f32 (RoPE, the half-split layout of GPT-NeoX / Llama):
 *   for row r, head j < heads, i < h, with c = cos[pos[r]*h + i], s = sin[...]:
 *     x1 = x[r*rs + j*D + i], x2 = x[r*rs + j*D + h + i]
 *     x[.. + i]     = x1*c - x2*s        (each product rounded, then the sum)
 *     x[.. + h + i] = x2*c + x1*s
 *   in place; pos[r] indexes the (positions, h) cos/sin tables.
 *
 * cattn_kv_append_f32:
 *   cache[((b*Hk + k)*max_len + start + t)*D + d] = src[(b*L + t)*rs + k*D + d]
 *   for b < B, k < Hk, t < L, d < D (cache (B, Hk, max_len, D) contiguous).
 *
 * cattn_kv_append_f32_h: the same into a float16 cache, each value
 *   rounded to nearest-even (cattn_f2h); returns the count of finite values
 *   that became infinities.
 *
 * cattn_gate_pack_f32 (GatedMLP's act(gate) * up, the act already applied,
 *   in place over x (rows, 2n) = [act(gate) | up] rows):
 *     x[r*n + i] = x[r*2n + i] * x[r*2n + n + i]
 *   rows in increasing order (row r's destination ends before its gate
 *   begins for r >= 1; row 0's is its own gate, read before written), so
 *   x's first rows*n floats become the (rows, n) product, contiguous.
 */
#include <string.h>
#include "cattn.h"
#include "common.h"

void cattn_rope_f32(float *x, int64_t rows, int64_t rs, int64_t heads, int64_t D,
                    const int64_t *pos, const float *cos, const float *sin)
{
    const int64_t h = D / 2;
    for (int64_t r = 0; r < rows; r++) {
        const float *CATTN_RESTRICT c = cos + pos[r] * h, *CATTN_RESTRICT s = sin + pos[r] * h;
        for (int64_t j = 0; j < heads; j++) {
            float *CATTN_RESTRICT a = x + r * rs + j * D, *CATTN_RESTRICT b = a + h;
            for (int64_t i = 0; i < h; i++) {
                const float x1 = a[i], x2 = b[i];
                const float p = x1 * c[i], q = x2 * s[i];
                const float u = x2 * c[i], v = x1 * s[i];
                a[i] = p - q;
                b[i] = u + v;
            }
        }
    }
}

void cattn_kv_append_f32(float *cache, int64_t B, int64_t Hk, int64_t max_len, int64_t D,
                         int64_t start, const float *src, int64_t L, int64_t rs)
{
    for (int64_t b = 0; b < B; b++)
        for (int64_t k = 0; k < Hk; k++)
            for (int64_t t = 0; t < L; t++)
                memcpy(cache + ((b * Hk + k) * max_len + start + t) * D,
                       src + (b * L + t) * rs + k * D, sizeof(float) * (size_t)D);
}

int64_t cattn_kv_append_f32_h(uint16_t *cache, int64_t B, int64_t Hk, int64_t max_len, int64_t D,
                              int64_t start, const float *src, int64_t L, int64_t rs)
{
    int64_t over = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t k = 0; k < Hk; k++)
            for (int64_t t = 0; t < L; t++) {
                uint16_t *CATTN_RESTRICT dst = cache + ((b * Hk + k) * max_len + start + t) * D;
                const float *CATTN_RESTRICT x = src + (b * L + t) * rs + k * D;
                for (int64_t d = 0; d < D; d++) {
                    const uint16_t h = cattn_f2h(x[d]);
                    over += (h & 0x7FFFu) == 0x7C00u && x[d] - x[d] == 0.0f;   /* finite -> inf */
                    dst[d] = h;
                }
            }
    return over;
}

void cattn_gate_pack_f32(float *x, int64_t rows, int64_t n)
{
    for (int64_t r = 0; r < rows; r++) {        /* row r's product lands before its gate */
        const float *g = x + r * 2 * n, *u = g + n;
        float *y = x + r * n;
        for (int64_t i = 0; i < n; i++) y[i] = g[i] * u[i];
    }
}
