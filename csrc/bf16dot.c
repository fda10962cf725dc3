/* bf16dot.c — the "bfloat16dot" linear layer (cattn.h states the formula,
 * cattn_linear_bf16dot): bfloat16 weights in the bfloat16 format's panels,
 * each activation row rounded to bfloat16, and vdpbf16ps's arithmetic (one
 * chain of pairs of k per output) in the dispatch table's tile
 * (kernels/avx512/bf16dot.c with AVX512_BF16, kernels/ref/bf16dot.c
 * elsewhere: the same bits).
 * Not here: ISA code; the "bfloat16" format's widened float32 linear (gemm.c).
 *
 * Loops: round + pair A (M rows of k2 = ceil(K/2) words) -> tasks of up to
 * BF16DOT_MC rows x BF16DOT_NP panels (one row: BF16DOT_ROW_TASK panels;
 * dynamic) -> KC blocks of the panels (pc, the packed layout's) -> tiles
 * of NP panels (one row: BF16DOT_ROW_NP) -> MR-row tiles: the chain goes on
 * in the task's float32 tile buffer (exact: the accumulator is stored and
 * loaded as it is) -> bias, activation, into C. A row's outputs are the
 * same chain whatever the rows, tiles and threads around it: decode and
 * prefill give the same bits. Legend: M rows, N outputs, K inputs,
 * Np = N rounded up to 16, KC the panels' K block.
 */
#include <string.h>
#include "dispatch.h"
#include "threads.h"

#define BMR CATTN_BF16DOT_MR
#define BNP CATTN_BF16DOT_NP
#define BMC CATTN_BF16DOT_MC
#define BNR 16

#if BMC % BMR
#error "bf16dot.c: BF16DOT_MC must be a multiple of BF16DOT_MR"
#endif
#if CATTN_BF16DOT_ROW_TASK > BMC * BNP
#error "bf16dot.c: a one-row task's tile buffer must fit the many-row one"
#endif

/* cattn.h's rounding of one value: DAZ, then to nearest even; NaN quiet */
static inline uint16_t round_bf16_daz(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    if (!(u & 0x7F800000u)) u &= 0x80000000u;                     /* DAZ */
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);   /* NaN */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

void cattn_round_bf16_daz(uint16_t *dst, const float *x, int64_t n)
{
    for (int64_t k = 0; k < n; k++) dst[k] = round_bf16_daz(x[k]);
}

/* row x[0:K] -> k2 words xb[2q] | xb[2q+1] << 16 (0 past K) */
static void pair_row(uint32_t *CATTN_RESTRICT dst, const float *CATTN_RESTRICT x, int64_t K)
{
    const int64_t k2 = K / 2;
    for (int64_t q = 0; q < k2; q++)
        dst[q] = (uint32_t)round_bf16_daz(x[2 * q]) |
                 (uint32_t)round_bf16_daz(x[2 * q + 1]) << 16;
    if (K & 1) dst[k2] = round_bf16_daz(x[K - 1]);
}

/* K == 0: C = act(0 + bias) */
static void bf16dot_empty_k(float *C, int64_t rsc, int64_t M, int64_t N, const float *bias,
                            int act)
{
    for (int64_t i = 0; i < M; i++) {
        float *c = C + i * rsc;
        for (int64_t j = 0; j < N; j++) c[j] = bias ? 0.0f + bias[j] : 0.0f;
        if (act != CATTN_ACT_NONE) cattn_kt.act_f32(c, c, N, act);
    }
}

/* one task: rows [i0, i1) x panels [jp0, jp0 + np) of C, tiles of tp
 * panels; tbuf (BMC, np*16) */
static void bf16dot_task(float *C, int64_t rsc, const uint32_t *aw, int64_t lda,
                         const uint16_t *P16, int64_t N, int64_t K, int64_t kcb,
                         const float *bias, int act, int64_t i0, int64_t i1, int64_t jp0,
                         int np, int tp, float *tbuf)
{
    const cattn_bf16dot_t tile = cattn_kt.bf16dot;
    const int64_t Np = cattn_round_up(N, BNR), ldt = (int64_t)np * BNR;
    for (int64_t pc = 0; pc < K; pc += kcb) {                  /* pc: the panels' K blocks */
        const int64_t kc = cattn_min64(kcb, K - pc);
        for (int g = 0; g < np; g += tp) {                     /* jr */
            const uint16_t *b = P16 + pc * Np + (jp0 + g) * BNR * kc;
            const int n = np - g < tp ? np - g : tp;
            for (int64_t i = i0; i < i1; i += BMR) {           /* ir */
                const int m = (int)cattn_min64(BMR, i1 - i);
                tile(kc, aw + i * lda + pc / 2, lda, m, b, n, BNR * kc,
                     tbuf + (i - i0) * ldt + g * BNR, ldt, pc > 0);
            }
        }
    }
    /* epilogue: bias, activation, the task's columns of C */
    const int64_t j0 = jp0 * BNR, n = cattn_min64((int64_t)np * BNR, N - j0);
    const float *bj = bias ? bias + j0 : NULL;
    for (int64_t i = i0; i < i1; i++) {
        float *CATTN_RESTRICT t = tbuf + (i - i0) * ldt;
        float *CATTN_RESTRICT c = C + i * rsc + j0;
        if (bj)
            for (int64_t j = 0; j < n; j++) t[j] += bj[j];
        if (act != CATTN_ACT_NONE) cattn_kt.act_f32(t, t, n, act);
        memcpy(c, t, sizeof(float) * (size_t)n);
    }
}

int cattn_linear_bf16dot(float *C, int64_t rsc, const float *A, int64_t rsa,
                         const uint16_t *P16, int64_t M, int64_t N, int64_t K,
                         const float *bias, int act, int n_threads)
{
    cattn_init();
    if (M <= 0 || N <= 0) return CATTN_OK;
    if (K <= 0) {
        bf16dot_empty_k(C, rsc, M, N, bias, act);
        return CATTN_OK;
    }
    const int64_t kcb = cattn_kt.gemm_f32.kc;       /* the panels' K block (even) */
    if (kcb & 1) return CATTN_EARGS;
    const int64_t k2 = cattn_cdiv(K, 2), lda = cattn_round_up(k2, 16);
    const int64_t npan = cattn_cdiv(N, BNR);
    /* one row (decode): wider tasks and tiles, more weight streams at once */
    const int gp = M == 1 ? CATTN_BF16DOT_ROW_TASK : BNP;
    const int tp = M == 1 ? CATTN_BF16DOT_ROW_NP : BNP;
    const int64_t ncol = cattn_cdiv(npan, gp);
    const int64_t nrow = cattn_cdiv(M, BMC), ntask = nrow * ncol;
    const int nt = cattn_short_threads(
        cattn_threads_for((double)M * N * K, CATTN_GEMV_WORK_PER_THREAD, ntask, n_threads),
        (double)M * N * K);
    const size_t asz = (size_t)(M * lda), per = (size_t)BMC * BNP * BNR;
    uint32_t *aw = cattn_aligned_alloc(sizeof(uint32_t) * asz);
    float *tb = cattn_aligned_alloc(sizeof(float) * per * (size_t)nt);
    if (!aw || !tb) {
        cattn_aligned_free(aw);
        cattn_aligned_free(tb);
        return CATTN_ENOMEM;
    }
    cattn_region_t reg;
    cattn_region_begin(&reg, nt);
    CATTN_OMP(omp parallel num_threads(nt) if (nt > 1))
    {
        cattn_region_arrive(&reg);
        float *mine = tb + per * CATTN_TID();
        CATTN_OMP(omp for schedule(static))
        for (int64_t i = 0; i < M; i++) pair_row(aw + i * lda, A + i * rsa, K);
        /* tasks: row blocks outer, column groups inner (a row block's A in L2) */
        CATTN_OMP(omp for schedule(dynamic, 1))
        for (int64_t t = 0; t < ntask; t++) {
            const int64_t r = t / ncol, g = t % ncol;
            const int64_t i0 = r * BMC, i1 = cattn_min64(M, i0 + BMC);
            const int np = (int)cattn_min64(gp, npan - g * gp);
            bf16dot_task(C, rsc, aw, lda, P16, N, K, kcb, bias, act, i0, i1, g * gp, np,
                         tp, mine);
        }
    }
    cattn_region_end(&reg);
    cattn_aligned_free(aw);
    cattn_aligned_free(tb);
    return CATTN_OK;
}
