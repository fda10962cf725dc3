/* weights.c — a linear layer's weight, whatever its format: the one switch
 * from a weight kind (CATTN_W_*, cattn.h) to the kernel that multiplies by
 * it. The programs (cattn/_encoder.pxi, _decoder.pxi) and cattn.linear
 * (cattn/ops/formats.py) call every float32 linear through it. Not here:
 * any arithmetic (gemm.c, qgemm.c, q4gemm.c and the kernel folders hold it).
 *
 *   y[i, j] = act(sum_k x[i, k] W[j, k] + bias[j])   y (M, N), x (M, K) contiguous rows
 */
#include "cattn.h"

int cattn_linear_weight_ld(const cattn_weight *w, float *y, int64_t ldy, const float *x,
                           int64_t M, int act, int n_threads)
{
    switch (w->kind) {
    case CATTN_W_INT8:
        return cattn_linear_int8(y, ldy, 1, x, w->K, 1, (const int8_t *)w->P, w->sw, w->colsum,
                                 M, w->N, w->K, w->bias, act, n_threads);
    case CATTN_W_INT4:
    case CATTN_W_INT8G:
    case CATTN_W_INT6G:
    case CATTN_W_INT5G:
        return cattn_linear_group_weight(w, y, ldy, x, M, act, n_threads);
    case CATTN_W_BF16:
        return cattn_linear_packed_bf16(y, ldy, 1, x, w->K, 1, (const uint16_t *)w->P, M, w->N,
                                        w->K, w->bias, act, n_threads);
    case CATTN_W_BF16DOT:
        return cattn_linear_bf16dot(y, ldy, x, w->K, (const uint16_t *)w->P, M, w->N, w->K,
                                    w->bias, act, n_threads);
    case CATTN_W_PLAIN:
        return cattn_gemm_f32(y, ldy, 1, x, w->K, 1, (const float *)w->P, w->csw, w->rsw, M,
                              w->N, w->K, w->bias, act, n_threads);
    case CATTN_W_F32:
        return cattn_linear_packed_f32(y, ldy, 1, x, w->K, 1, (const float *)w->P, M, w->N,
                                       w->K, w->bias, act, n_threads);
    case CATTN_W_STACK: {
        int64_t n = 0;
        for (int64_t i = 0; i < w->nparts; i++) {
            const cattn_weight *p = w->parts + i;
            if (p->kind == CATTN_W_STACK || p->K != w->K || p->N < 0) return CATTN_EKIND;
            n += p->N;
        }
        if (n != w->N) return CATTN_EKIND;
        n = 0;
        for (int64_t i = 0; i < w->nparts; i++) {
            const int st = cattn_linear_weight_ld(w->parts + i, y + n, ldy, x, M, act, n_threads);
            if (st != CATTN_OK) return st;
            n += w->parts[i].N;
        }
        return CATTN_OK;
    }
    default:
        return CATTN_EKIND;
    }
}

int cattn_linear_weight(const cattn_weight *w, float *y, const float *x, int64_t M, int act,
                        int n_threads)
{
    return cattn_linear_weight_ld(w, y, w->N, x, M, act, n_threads);
}
