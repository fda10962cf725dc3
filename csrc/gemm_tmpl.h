/* gemm_tmpl.h — the blocked GEMM driver, written once for T = float and
 * T = double. Included by gemm.c with these macros defined:
 *   T, SFX (f32/f64), MR, NR, KC, MC, NC, and the dispatch entries
 *   UKR, UKR2 (NULL-able: two row panels at once), UKR_STREAM (the few-row
 *   path's first pass), ACT, ROWS_TN, FEW_ROWS and FEW_BF16 (NULL-able; NULL
 *   for double), PACK_BT, PACK_A6 and BF16_EXPAND (float only, NULL-able).
 *
 * C[M,N] = A[M,K] · B[K,N]   (+ bias[N], act)
 * Loops (BLIS): jc (NC) -> pc (KC) -> pack B -> ic (MC) -> pack A
 *               -> jr (NR) -> ir (MR) -> micro-kernel.
 * Threads own disjoint blocks of C (a tm x tn grid) and pack privately.
 */

typedef struct {
    T *C; int64_t rsc, csc;
    const T *A; int64_t rsa, csa;
    const T *B; int64_t rsb, csb;
    int64_t M, N, K;
    const T *bias;
    int act;
    const T *P;           /* prepacked B (pack_weight) or NULL; */
    const uint16_t *P16;  /* or prepacked bfloat16 panels (same layout), or NULL */
    int64_t np;           /* its panel width: N rounded up to NR */
} FN(gemm_args);

/* bfloat16 panels to T: dst[i] = the float whose high 16 bits are src[i]
 * (exact: every bfloat16 is a float) */
static void FN(bf16_expand)(T *CATTN_RESTRICT dst, const uint16_t *CATTN_RESTRICT src, int64_t n)
{
#ifdef BF16_EXPAND
    if (BF16_EXPAND) {
        BF16_EXPAND(dst, src, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) {
        const uint32_t u = (uint32_t)src[i] << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        dst[i] = (T)f;
    }
}

/* dst: ceil(mc/MR) panels of (kc, MR); A: (mc, kc) strided; zero-padded rows */
static void FN(cattn_pack_a)(T *CATTN_RESTRICT dst, const T *A, int64_t rsa, int64_t csa,
                      int64_t mc, int64_t kc)
{
#ifdef PACK_A6
    if (csa == 1 && MR == 6 && PACK_A6) {      /* rows contiguous (activations) */
        PACK_A6(dst, A, rsa, mc, kc);
        return;
    }
#endif
    for (int64_t i0 = 0; i0 < mc; i0 += MR, dst += MR * kc) {
        const int64_t mr = cattn_min64(MR, mc - i0);
        const T *a = A + i0 * rsa;
        if (mr == MR && rsa == 1) {            /* column-major A: MR contiguous */
            for (int64_t p = 0; p < kc; p++)
                for (int i = 0; i < MR; i++) dst[p * MR + i] = a[p * csa + i];
        } else if (mr == MR) {                 /* row-major or strided A */
            for (int i = 0; i < MR; i++) {
                const T *ai = a + i * rsa;
                if (csa == 1)
                    for (int64_t p = 0; p < kc; p++) dst[p * MR + i] = ai[p];
                else
                    for (int64_t p = 0; p < kc; p++) dst[p * MR + i] = ai[p * csa];
            }
        } else {                               /* edge: zero padding */
            for (int64_t p = 0; p < kc; p++)
                for (int i = 0; i < MR; i++)
                    dst[p * MR + i] = i < mr ? a[i * rsa + p * csa] : (T)0;
        }
    }
}

/* dst: ceil(nc/NR) panels of (kc, NR); B: (kc, nc) strided; zero-padded cols */
static void FN(cattn_pack_b)(T *CATTN_RESTRICT dst, const T *B, int64_t rsb, int64_t csb,
                      int64_t kc, int64_t nc)
{
#ifdef PACK_BT
    if (rsb == 1 && NR == 16 && PACK_BT) {     /* B = W^T of a (N, K) weight */
        PACK_BT(dst, B, csb, nc, cattn_round_up(nc, NR), kc, (T)1);
        return;
    }
#endif
    for (int64_t j0 = 0; j0 < nc; j0 += NR, dst += NR * kc) {
        const int64_t nr = cattn_min64(NR, nc - j0);
        const T *b = B + j0 * csb;
        if (nr == NR && csb == 1) {            /* row-major B: NR contiguous */
            for (int64_t p = 0; p < kc; p++)
                for (int j = 0; j < NR; j++) dst[p * NR + j] = b[p * rsb + j];
        } else if (nr == NR) {                 /* transposed (e.g. a weight W^T) */
            for (int j = 0; j < NR; j++) {
                const T *bj = b + j * csb;
                if (rsb == 1)
                    for (int64_t p = 0; p < kc; p++) dst[p * NR + j] = bj[p];
                else
                    for (int64_t p = 0; p < kc; p++) dst[p * NR + j] = bj[p * rsb];
            }
        } else {
            for (int64_t p = 0; p < kc; p++)
                for (int j = 0; j < NR; j++)
                    dst[p * NR + j] = j < nr ? b[p * rsb + j * csb] : (T)0;
        }
    }
}

/* jr / ir loops over one packed A block (mc rows) and packed B panels
 * [jp0, jp1) of the current (kc, nc) slice; C points at the block's (0,0). */
static void FN(gemm_macro)(const FN(gemm_args) *g, T *C, const T *pa, const T *pb,
                           int64_t mc, int64_t nc, int64_t kc, int64_t jp0, int64_t jp1,
                           int acc, const T *bias, int epilogue)
{
    const FN(cattn_ukr_t) ukr = UKR;
    const FN(cattn_ukr2_t) ukr2 = UKR2;
    const int64_t rsc = g->rsc, csc = g->csc;
    for (int64_t jp = jp0; jp < jp1; jp++) {                       /* jr */
        const int64_t j = jp * NR, nr = cattn_min64(NR, nc - j);
        const T *b = pb + jp * NR * kc;
        for (int64_t i = 0; i < mc; i += MR) {                     /* ir */
            const int64_t mr = cattn_min64(MR, mc - i);
            const T *a = pa + (i / MR) * MR * kc;
            T *c = C + i * rsc + j * csc;
            if (ukr2 && i + 2 * MR <= mc && nr == NR && csc == 1) {  /* two panels */
                ukr2(kc, a, a + MR * kc, b, c, rsc, acc);
                i += MR;
            } else if (mr == MR && nr == NR && csc == 1) {
                ukr(kc, a, MR, 1, b, NR, c, rsc, acc);
            } else {                                  /* tail tile via stack */
                T tmp[MR * NR] __attribute__((aligned(CATTN_ALIGN)));
                ukr(kc, a, MR, 1, b, NR, tmp, NR, 0);
                for (int64_t ii = 0; ii < mr; ii++)
                    for (int64_t jj = 0; jj < nr; jj++) {
                        T *cij = c + ii * rsc + jj * csc;
                        *cij = acc ? tmp[ii * NR + jj] + *cij : tmp[ii * NR + jj];
                    }
            }
        }
        /* epilogue over the whole (mc, nr) micro-panel while it is in L1:
         * gathered into one contiguous buffer so the bias and activation
         * run as one long vector pass, not one call per 16-value tile row */
        if (epilogue) {
            T pbuf[CATTN_MC_MAX * NR] __attribute__((aligned(CATTN_ALIGN)));
            const T *bj = bias ? bias + j : NULL;
            for (int64_t ii = 0; ii < mc; ii++)
                for (int64_t jj = 0; jj < nr; jj++)
                    pbuf[ii * nr + jj] = bj ? C[ii * rsc + (j + jj) * csc] + bj[jj]
                                            : C[ii * rsc + (j + jj) * csc];
            if (g->act != CATTN_ACT_NONE) ACT(pbuf, pbuf, mc * nr, g->act);
            for (int64_t ii = 0; ii < mc; ii++)
                for (int64_t jj = 0; jj < nr; jj++)
                    C[ii * rsc + (j + jj) * csc] = pbuf[ii * nr + jj];
        }
    }
}

/* The C block [m0, m1) x [n0, n1) computed by one thread with its own
 * packing buffers (bufB: KC x NC, bufA: MC x KC): no barrier, no sharing.
 * jc -> pc -> pack B -> ic -> pack A -> jr -> ir (in gemm_macro). */
static void FN(gemm_run)(const FN(gemm_args) *g, T *bufB, T *bufA,
                         int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    const int64_t K = g->K;
    for (int64_t jc = n0; jc < n1; jc += NC) {                     /* jc */
        const int64_t nc = cattn_min64(NC, n1 - jc);
        const int64_t npan = cattn_cdiv(nc, NR);
        for (int64_t pc = 0; pc < K; pc += KC) {                   /* pc */
            const int64_t kc = cattn_min64(KC, K - pc);
            const int acc = pc > 0;               /* later K blocks add to C */
            const int epilogue = pc + kc >= K && (g->bias || g->act);
            const T *pb = bufB;
            if (g->P16)                /* bfloat16 panels: expanded per block */
                FN(bf16_expand)(bufB, g->P16 + pc * g->np + jc * kc, npan * NR * kc);
            else if (g->P)             /* prepacked: block pc, panels from jc */
                pb = g->P + pc * g->np + jc * kc;
            else
                FN(cattn_pack_b)(bufB, g->B + pc * g->rsb + jc * g->csb, g->rsb, g->csb, kc, nc);
            for (int64_t ic = m0; ic < m1; ic += MC) {             /* ic */
                const int64_t mc = cattn_min64(MC, m1 - ic);
                FN(cattn_pack_a)(bufA, g->A + ic * g->rsa + pc * g->csa, g->rsa, g->csa, mc, kc);
                FN(gemm_macro)(g, g->C + ic * g->rsc + jc * g->csc, bufA, pb, mc, nc, kc,
                               0, npan, acc, g->bias ? g->bias + jc : NULL, epilogue);
            }
        }
    }
}

/* Thread t of nt in a tm x tn grid over C. Each thread packs the A rows
 * and B columns of its block itself, so the grid is the one that packs
 * least per thread: (M/tm) K ceil(N/(tn NC)) of A plus K N/tn of B (B is
 * prepacked: A only), among the tn dividing nt that leave each part at
 * least 4 micro-panels of N (ties: more columns split). Boundaries fall on
 * MR / NR multiples; the grid never changes a result. */
static void FN(gemm_run_part)(const FN(gemm_args) *g, T *bufB, T *bufA, int t, int nt)
{
    int tn = 1;
    double best = -1.0;
    for (int d = nt; d >= 1; d--) {
        if (nt % d || (d > 1 && g->N < (int64_t)d * 4 * NR)) continue;
        const double mt = (double)g->M / (nt / d), nt_cols = (double)g->N / d;
        const double cost = mt * (double)g->K * (double)cattn_cdiv(cattn_cdiv(g->N, d), NC)
                            + (g->P ? 0.0 : (double)g->K * nt_cols);
        if (best < 0 || cost < best) { best = cost; tn = d; }
    }
    const int tm = nt / tn, ti = t / tn, tj = t % tn;
    const int64_t mu = cattn_cdiv(g->M, MR), nu = cattn_cdiv(g->N, NR);
    const int64_t m0 = mu * ti / tm * MR, m1 = cattn_min64(g->M, mu * (ti + 1) / tm * MR);
    const int64_t n0 = nu * tj / tn * NR, n1 = cattn_min64(g->N, nu * (tj + 1) / tn * NR);
    if (m0 < m1 && n0 < n1) FN(gemm_run)(g, bufB, bufA, m0, m1, n0, n1);
}

/* K == 0: C = 0 (+ bias, act) */
static void FN(gemm_empty_k)(const FN(gemm_args) *g)
{
    for (int64_t i = 0; i < g->M; i++) {
        for (int64_t j = 0; j < g->N; j++) {
            T v = g->bias ? g->bias[j] : (T)0;
            if (g->act != CATTN_ACT_NONE) ACT(&v, &v, 1, g->act);
            g->C[i * g->rsc + j * g->csc] = v;
        }
    }
}

static size_t FN(gemm_b_size)(int64_t N, int64_t K)
{
    return (size_t)cattn_min64(KC, K) * (size_t)cattn_round_up(cattn_min64(N, NC), NR);
}

static size_t FN(gemm_a_size)(int64_t M, int64_t K)
{
    return (size_t)cattn_min64(KC, K) * (size_t)cattn_min64(MC, cattn_round_up(M, MR));
}

static int FN(gemm_threads)(int64_t M, int64_t N, int64_t K, int n_threads)
{
#ifdef _OPENMP
    const double flops = 2.0 * (double)M * (double)N * (double)K;
    int64_t nt = (int64_t)(flops / CATTN_GEMM_MIN_FLOPS_PER_THREAD);
    return (int)cattn_max64(1, cattn_min64(nt, n_threads));
#else
    (void)M; (void)N; (void)K; (void)n_threads;
    return 1;
#endif
}

/* Few rows of A (M <= GEMV_MAX_M) against a transposed B (a linear
 * layer's weight W (N, K), rsb == 1), without packing a whole KC x NC
 * panel of B:
 *   C[i, j0:j0+n] = A[i, :] · W[j0:j0+n, :]^T (+ bias, act)
 * for chunks of n <= GEMV_CHUNK columns (threads take whole chunks).
 * Every output takes the blocked path's accumulation order (the same
 * micro-kernel arithmetic, K blocks and epilogue), so a row gives the same
 * bits alone or among 4096 rows (batch invariance), for any thread count:
 *  - ROWS_TN (an ISA's few-row kernel) reads W in place, with A^T as `a`;
 *  - else each chunk's B is packed one KC block at a time (kc x n, in L2)
 *    for the micro-kernel, with A as `a`.
 * a: (MP, K) A rows or (K, MP) A^T, zero past row M; bp: (KC, GEMV_LD)
 * packed panels; tmp: (MP, GEMV_LD). */
#define GEMV_CHUNK CATTN_GEMV_CHUNK
#define GEMV_LD ((GEMV_CHUNK + NR - 1) / NR * NR)
static void FN(gemv_chunk)(const FN(gemm_args) *g, int64_t j0, int64_t width, const T *a,
                           int64_t MP, T *bp, T *tmp)
{
    const int64_t n = cattn_min64(width, g->N - j0), npan = cattn_cdiv(n, NR);
    const int64_t M = g->M, K = g->K;
    if (g->P || g->P16) {          /* prepacked panels: rows of A in place */
        /* two panels at a time (bfloat16: expanded into bp), all rows on them
         * while they are in L1 (two: the few-row kernel keeps 8 FMA chains);
         * one row: four (the few-row kernels' one-row pass reads four panels
         * at once: four streams in flight and 8 FMA chains; two panels ran
         * as two one-panel passes, and a Qwen2.5-0.5B-shaped float32 decode
         * step was 16% slower, bfloat16 14%, on Zen 3) */
        const int64_t step = M == 1 && (g->P || (g->P16 && FEW_BF16)) ? 4 : 2;
        for (int64_t pc = 0; pc < K; pc += KC) {
            const int64_t kc = cattn_min64(KC, K - pc);
            for (int64_t jq = 0; jq < npan; jq += step) {
                const int64_t nq = cattn_min64(step, npan - jq);
                T *tq = tmp + jq * NR;
                if (g->P16 && FEW_BF16) {      /* widened in registers, all rows */
                    FEW_BF16(kc, a + pc, K, (int)M, g->P16 + pc * g->np + (j0 + jq * NR) * kc,
                             nq, NR * kc, tq, GEMV_LD, pc > 0);
                    continue;
                }
                const T *pb;
                if (g->P16) {
                    FN(bf16_expand)(bp, g->P16 + pc * g->np + (j0 + jq * NR) * kc, nq * NR * kc);
                    pb = bp;
                } else {
                    pb = g->P + pc * g->np + (j0 + jq * NR) * kc;
                }
                int64_t i = 0;
                for (; i + MR <= M; i += MR)                  /* full MR rows */
                    for (int64_t jp = 0; jp < nq; jp++)       /* the first: streams W */
                        (i ? UKR : UKR_STREAM)(kc, a + i * K + pc, 1, K, pb + jp * NR * kc,
                                               NR, tq + i * GEMV_LD + jp * NR, GEMV_LD, pc > 0);
                if (i < M && FEW_ROWS && M - i <= 3) {            /* 1-3 rows */
                    FEW_ROWS(kc, a + i * K + pc, K, (int)(M - i), pb, nq, NR * kc,
                             tq + i * GEMV_LD, GEMV_LD, pc > 0);
                } else if (i < M) {              /* zero rows up to MR: a is MP */
                    for (int64_t jp = 0; jp < nq; jp++)
                        (i ? UKR : UKR_STREAM)(kc, a + i * K + pc, 1, K, pb + jp * NR * kc,
                                               NR, tq + i * GEMV_LD + jp * NR, GEMV_LD, pc > 0);
                }
            }
        }
    } else if (ROWS_TN) {
        ROWS_TN(tmp, GEMV_LD, a, MP, g->B + j0 * g->csb, g->csb, n, K, KC);
    } else {
        for (int64_t pc = 0; pc < K; pc += KC) {                   /* pc */
            const int64_t kc = cattn_min64(KC, K - pc);
            FN(cattn_pack_b)(bp, g->B + pc * g->rsb + j0 * g->csb, g->rsb, g->csb, kc, n);
            for (int64_t jp = 0; jp < npan; jp++)                   /* jr */
                for (int64_t i = 0; i < MP; i += MR)               /* ir */
                    UKR(kc, a + i * K + pc, 1, K, bp + jp * NR * kc, NR,
                        tmp + i * GEMV_LD + jp * NR, GEMV_LD, pc > 0);
        }
    }
    /* the blocked path's epilogue; g's fields in locals (the stores could
     * alias them without strict aliasing: the loops would stay scalar) */
    const T *CATTN_RESTRICT bias = g->bias ? g->bias + j0 : NULL;
    const int64_t csc = g->csc;
    for (int64_t i = 0; i < M; i++) {
        T *CATTN_RESTRICT t = tmp + i * GEMV_LD;
        T *CATTN_RESTRICT c = g->C + i * g->rsc + j0 * csc;
        if (bias)
            for (int64_t j = 0; j < n; j++) t[j] += bias[j];
        if (g->act != CATTN_ACT_NONE) ACT(t, t, n, g->act);
        if (csc == 1)
            memcpy(c, t, sizeof(T) * (size_t)n);
        else
            for (int64_t j = 0; j < n; j++) c[j * csc] = t[j];
    }
}

static int FN(gemv)(const FN(gemm_args) *g, int n_threads)
{
    const int64_t nch = cattn_cdiv(g->N, GEMV_CHUNK), M = g->M, K = g->K;
    const int packed = g->P || g->P16;
    const int rows_tn = !packed && ROWS_TN != NULL;
    const int64_t MP = rows_tn ? (M == 1 ? 1 : cattn_round_up(M, 8)) : cattn_round_up(M, MR);
    const int nt = cattn_short_threads(
        cattn_threads_for((double)M * g->N * K, CATTN_GEMV_WORK_PER_THREAD, nch, n_threads),
        (double)M * g->N * K);
    /* few chunks: a width whose count nt divides, a multiple of 4 panels
     * (the one-row pass reads four) if one fits, else of one (5 chunks of a
     * 896-output weight on 2 threads left one thread a third chunk alone:
     * a Qwen2.5-0.5B-shaped float32 decode step 4% slower; 6 chunks of 11
     * panels instead of 14 of 4: 3% slower, Zen 3) */
    int64_t width = GEMV_CHUNK;
    if (nt > 1 && nch < 16 * (int64_t)nt) {
        int found = 0;
        for (int64_t unit = 4 * NR; unit >= NR && !found; unit -= 3 * NR)
            for (int64_t v = GEMV_CHUNK / unit * unit; v >= 4 * NR && !found; v -= unit)
                if (cattn_cdiv(g->N, v) % nt == 0) {
                    width = v;
                    found = 1;
                }
    }
    const int64_t nchunks = cattn_cdiv(g->N, width);
    const size_t asz = cattn_round_up((size_t)(MP * K), 16);
    const size_t bsz = rows_tn || g->P ? 0
                       : g->P16 ? (size_t)cattn_min64(KC, K) * 2 * NR
                       : (size_t)cattn_min64(KC, K) * GEMV_LD;
    const size_t per = cattn_round_up(bsz + (size_t)MP * GEMV_LD, 16);
    T *buf = cattn_aligned_alloc(sizeof(T) * (asz + per * nt));
    if (!buf) return CATTN_ENOMEM;
    for (int64_t i = 0; i < MP; i++) {          /* A (or A^T), zero rows past M */
        if (!rows_tn && (i >= M || g->csa == 1)) {  /* whole rows (a short sentence's copy
                                                       took 5% of it element by element) */
            if (i < M) memcpy(buf + i * K, g->A + i * g->rsa, sizeof(T) * (size_t)K);
            else memset(buf + i * K, 0, sizeof(T) * (size_t)K);
            continue;
        }
        for (int64_t p = 0; p < K; p++)
            buf[rows_tn ? p * MP + i : i * K + p] = i < M ? g->A[i * g->rsa + p * g->csa] : (T)0;
    }
    cattn_region_t reg;
    cattn_region_begin(&reg, nt);
    CATTN_OMP(omp parallel num_threads(nt) if (nt > 1))
    {
        cattn_region_arrive(&reg);
        T *w = buf + asz + per * CATTN_TID();
        CATTN_OMP(omp for schedule(dynamic, 1))
        for (int64_t c = 0; c < nchunks; c++)
            FN(gemv_chunk)(g, c * width, width, buf, MP, w + MP * GEMV_LD, w);
    }
    cattn_region_end(&reg);
    cattn_aligned_free(buf);
    return CATTN_OK;
}

int FN(cattn_gemm_batched)(T *C, const int64_t *offc, int64_t rsc, int64_t csc,
                           const T *A, const int64_t *offa, int64_t rsa, int64_t csa,
                           const T *B, const int64_t *offb, int64_t rsb, int64_t csb,
                           int64_t nb, int64_t M, int64_t N, int64_t K,
                           const T *bias, int act, int n_threads)
{
    cattn_init();
    if (nb <= 0 || M <= 0 || N <= 0) return CATTN_OK;
    FN(gemm_args) g0 = {C, rsc, csc, A, rsa, csa, B, rsb, csb, M, N, K, bias, act, NULL, NULL, 0};
    if (K <= 0) {
        for (int64_t b = 0; b < nb; b++) {
            FN(gemm_args) g = g0; g.C = C + offc[b];
            FN(gemm_empty_k)(&g);
        }
        return CATTN_OK;
    }
    const int item_nt = FN(gemm_threads)(M, N, K, n_threads);
    const int nt = cattn_short_threads(FN(gemm_threads)(M * nb, N, K, n_threads),
                                       (double)(M * nb) * N * K);
    /* many small items: one item per thread at a time; few large: split each */
    const int independent = nb >= 4 * (int64_t)nt || item_nt < nt;
    const size_t bsz = cattn_round_up(FN(gemm_b_size)(N, K), 64);
    const size_t per = cattn_round_up(bsz + FN(gemm_a_size)(M, K), 64);   /* keeps 64-byte alignment */
    T *buf = cattn_aligned_alloc(sizeof(T) * per * nt);
    if (!buf) return CATTN_ENOMEM;
    cattn_region_t reg;
    cattn_region_begin(&reg, nt);
    CATTN_OMP(omp parallel num_threads(nt) if (nt > 1))
    {
        cattn_region_arrive(&reg);
        T *mine = buf + per * CATTN_TID();
        if (independent) {
            CATTN_OMP(omp for schedule(dynamic, 1))
            for (int64_t b = 0; b < nb; b++) {
                FN(gemm_args) g = g0;
                g.A = A + offa[b]; g.B = B + offb[b]; g.C = C + offc[b];
                FN(gemm_run)(&g, mine, mine + bsz, 0, M, 0, N);
            }
        } else {
            for (int64_t b = 0; b < nb; b++) {
                FN(gemm_args) g = g0;
                g.A = A + offa[b]; g.B = B + offb[b]; g.C = C + offc[b];
                FN(gemm_run_part)(&g, mine, mine + bsz, CATTN_TID(), CATTN_NT());
            }
        }
    }
    cattn_region_end(&reg);
    cattn_aligned_free(buf);
    return CATTN_OK;
}

/* One GEMM: the small-M kernel for a few rows against a transposed B,
 * else the batched driver with one item (offsets 0). */
int FN(cattn_gemm)(T *C, int64_t rsc, int64_t csc,
                   const T *A, int64_t rsa, int64_t csa,
                   const T *B, int64_t rsb, int64_t csb,
                   int64_t M, int64_t N, int64_t K,
                   const T *bias, int act, int n_threads)
{
    static const int64_t zero = 0;
    cattn_init();
    if (M > 0 && N > 0 && K > 0 && M <= CATTN_GEMV_MAX_M && rsb == 1) {
        FN(gemm_args) g = {C, rsc, csc, A, rsa, csa, B, rsb, csb, M, N, K, bias, act, NULL, NULL, 0};
        return FN(gemv)(&g, n_threads);
    }
    return FN(cattn_gemm_batched)(C, &zero, rsc, csc, A, &zero, rsa, csa, B, &zero, rsb, csb,
                                  1, M, N, K, bias, act, n_threads);
}

/* ---- prepacked weights (cattn.h: cattn_pack_weight, cattn_linear_packed) ----
 * P holds B = W^T (W: (N, K), element (j, p) at W[j*rsw + p*csw]) exactly
 * as the blocked path packs it, all of it: for each KC block pc (kc =
 * min(KC, K - pc)) and each NR-column panel jp,
 *   P[pc*Np + jp*NR*kc + p*NR + j] = W[(jp*NR + j)*rsw + (pc + p)*csw]
 * (0 past N), Np = N rounded up to NR: K * Np elements. */
size_t FN(cattn_packed_size)(int64_t N, int64_t K)
{
    return (size_t)K * (size_t)cattn_round_up(N, NR);
}

int64_t FN(cattn_packed_kc)(void)
{
    cattn_init();
    return KC;
}

void FN(cattn_pack_weight)(T *P, const T *W, int64_t rsw, int64_t csw, int64_t N, int64_t K)
{
    cattn_init();
    const int64_t np = cattn_round_up(N, NR);
    for (int64_t pc = 0; pc < K; pc += KC)
        FN(cattn_pack_b)(P + pc * np, W + pc * csw, csw, rsw, cattn_min64(KC, K - pc), N);
}

/* C = A · W^T (+ bias, act) on prepacked panels (g->P, or bfloat16 g->P16
 * expanded per block: then each thread expands its B panels like the
 * plain path packs them). The same accumulation order as cattn_gemm. */
static int FN(linear_packed_run)(FN(gemm_args) *g, int n_threads)
{
    if (g->M <= 0 || g->N <= 0) return CATTN_OK;
    if (g->K <= 0) {
        FN(gemm_empty_k)(g);
        return CATTN_OK;
    }
    if (g->M <= CATTN_GEMV_MAX_M) return FN(gemv)(g, n_threads);
    const int nt = cattn_short_threads(FN(gemm_threads)(g->M, g->N, g->K, n_threads),
                                       (double)g->M * g->N * g->K);
    const size_t bsz = g->P16 ? cattn_round_up(FN(gemm_b_size)(g->N, g->K), 64) : 0;
    const size_t per = cattn_round_up(bsz + FN(gemm_a_size)(g->M, g->K), 64);
    T *buf = cattn_aligned_alloc(sizeof(T) * per * nt);
    if (!buf) return CATTN_ENOMEM;
    cattn_region_t reg;
    cattn_region_begin(&reg, nt);
    CATTN_OMP(omp parallel num_threads(nt) if (nt > 1))
    {
        cattn_region_arrive(&reg);
        T *mine = buf + per * CATTN_TID();
        FN(gemm_run_part)(g, mine, mine + bsz, CATTN_TID(), CATTN_NT());
    }
    cattn_region_end(&reg);
    cattn_aligned_free(buf);
    return CATTN_OK;
}

int FN(cattn_linear_packed)(T *C, int64_t rsc, int64_t csc, const T *A, int64_t rsa,
                            int64_t csa, const T *P, int64_t M, int64_t N, int64_t K,
                            const T *bias, int act, int n_threads)
{
    cattn_init();
    FN(gemm_args) g = {C, rsc, csc, A, rsa, csa, NULL, 0, 0, M, N, K, bias, act,
                       P, NULL, cattn_round_up(N, NR)};
    return FN(linear_packed_run)(&g, n_threads);
}

#undef GEMV_CHUNK
#undef GEMV_LD
/* the includer's parameters */
#undef T
#undef SFX
#undef MR
#undef UKR2
#undef UKR_STREAM
#undef PACK_A6
#undef NR
#undef KC
#undef MC
#undef NC
#undef UKR
#undef ACT
#undef ROWS_TN
#undef FEW_ROWS
#undef FEW_BF16
#undef PACK_BT
#undef BF16_EXPAND
