/* qgemm.c — int8 linear layers (cattn.pack_weight(w, dtype="int8")):
 *   C[M,N] = act(dequant(qa[M,K] · qw[N,K]^T) + bias[N])
 * qw: the weight in int8 [-127, 127] with a scale per output channel
 * (symmetric, packed once: cattn.h states the layout); qa: each row of A
 * quantized at call time to u8 [0, 255] with its own scale and zero point
 * (asymmetric: the full 8 bits span [min(0, min x), max(0, max x)]).
 * The sums are exact int32 (cattn_qweight_ok bounds them), so blocking,
 * threads and the other rows never change a result's bits.
 *
 * Loops: quantize + pack A (pairs of k per 32-bit word) -> tasks of QMC
 * rows x QNC columns (dynamic; with many row blocks a task is QMC rows x
 * all N and quantizes its own rows first) -> per MR-row panel: the
 * micro-kernel on each 16-column panel over the whole K with the whole
 * epilogue (zero point, scales, bias, activation) in registers, stored
 * into C (or a row buffer for partial panels and strided C). Legend: M rows, N outputs, K inputs, k2 = ceil(K/2),
 * ka = the packed A's words per row (a_words).
 */
#include <math.h>
#include <string.h>
#include "dispatch.h"
#include "threads.h"

#define QMR CATTN_MR_I8
#define QNR CATTN_NR_I8

size_t cattn_qpacked_size(int64_t N, int64_t K)
{
    return (size_t)cattn_round_up(N, QNR) * (size_t)(2 * cattn_cdiv(K, 2));
}

/* 1 if every 255 * sum_k |qw[j, k]| fits in int32 (then so does every
 * partial sum of every accumulator and acc - za * colsum) */
int cattn_qweight_ok(const int32_t *abs_rowsum, int64_t N)
{
    for (int64_t j = 0; j < N; j++)
        if (abs_rowsum[j] < 0 || (int64_t)abs_rowsum[j] * 255 > INT32_MAX) return 0;
    return 1;
}

/* to nearest, ties to even, for |v| < 2^51: v + 1.5 * 2^52 lands where the
 * spacing of doubles is 1 (no libm call: vectorizes) */
static inline double rint_small(double v)
{
    const double magic = 6755399441055744.0;
    return (v + magic) - magic;
}

/* the same in float for |v| < 2^22 (1.5 * 2^23) */
static inline float rint_smallf(float v)
{
    const float magic = 12582912.0f;
    return (v + magic) - magic;
}

/* one row (cattn.h: cattn_quantize_rows), element k at x[k*csx] */
static void quantize_row(uint8_t *q, float *sa, int32_t *za, uint8_t *bad, const float *x,
                         int64_t csx, int64_t K)
{
    float lo = 0.0f, hi = 0.0f;
    int nonfinite = 0;
    for (int64_t k = 0; k < K; k++) {
        const float v = x[k * csx];
        nonfinite |= !(v - v == 0.0f);                 /* NaN or +-inf */
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
    }
    *bad = (uint8_t)nonfinite;
    const double d = (double)hi - (double)lo;
    if (nonfinite || d == 0.0) {
        if (K > 0) memset(q, 0, (size_t)K);
        *za = 0;
        *sa = nonfinite ? NAN : 0.0f;
        return;
    }
    const double inv = 255.0 / d;
    double z = rint_small(-(double)lo * inv);
    z = z < 0 ? 0 : z > 255 ? 255 : z;
    /* the product x * invf is a rounded float (this file is compiled
     * without contraction: no FMA with the rounding constant); a row so
     * small that (float)inv would overflow is first scaled by pre = 2^64
     * (exact) */
    const float pre = inv > 0x1p126 ? 0x1p64f : 1.0f;
    const float invf = (float)(inv / pre), zf = (float)z;
    for (int64_t k = 0; k < K; k++) {
        float v = rint_smallf((x[k * csx] * pre) * invf) + zf;
        v = v < 0.0f ? 0.0f : v > 255.0f ? 255.0f : v;
        q[k] = (uint8_t)v;
    }
    *za = (int32_t)z;
    *sa = (float)(d / 255.0);
}

/* the u8 row q[0:K] as a packed row of A: word p (g = 2: q[2p] | q[2p+1] << 16;
 * g = 4: q[4p] | .. | q[4p+3] << 24; 0 past K) at dst[p*stride], p < ceil(K/g) */
static void pack_row(uint32_t *dst, int64_t stride, int g, const uint8_t *r, int64_t K)
{
    const int64_t whole = K / g;
    if (g == 4)
        for (int64_t p = 0; p < whole; p++)
            dst[p * stride] = (uint32_t)r[4 * p] | (uint32_t)r[4 * p + 1] << 8 |
                              (uint32_t)r[4 * p + 2] << 16 | (uint32_t)r[4 * p + 3] << 24;
    else
        for (int64_t p = 0; p < whole; p++)
            dst[p * stride] = (uint32_t)r[2 * p] | (uint32_t)r[2 * p + 1] << 16;
    if (whole * g < K) {                                    /* the last, partial word */
        const int sh = g == 4 ? 8 : 16;
        uint32_t v = 0;
        for (int64_t k = whole * g; k < K; k++) v |= (uint32_t)r[k] << (sh * (k - whole * g));
        dst[whole * stride] = v;
    }
}

/* one row by the selected path's kernel when it is contiguous (g = 1: the
 * bytes into q; g = 2, 4: the packed words into dst at stride, through q
 * on the portable loop) */
static inline void quant_one(uint8_t *q, uint32_t *dst, int64_t stride, int g, float *sa,
                             int32_t *za, uint8_t *bad, const float *x, int64_t csx, int64_t K)
{
    if (csx == 1 && cattn_kt.quant_row_u8) {
        *bad = (uint8_t)cattn_kt.quant_row_u8(g == 1 ? (void *)q : (void *)dst, stride, g, sa,
                                              za, x, K);
        return;
    }
    quantize_row(q, sa, za, bad, x, csx, K);
    if (g != 1) pack_row(dst, stride, g, q, K);
}

void cattn_quantize_rows(uint8_t *q, float *sa, int32_t *za, uint8_t *bad, const float *X,
                         int64_t rsx, int64_t csx, int64_t M, int64_t K)
{
    cattn_init();
    for (int64_t i = 0; i < M; i++)
        quant_one(q + i * K, NULL, 0, 1, sa + i, za + i, bad + i, X + i * rsx, csx, K);
}

/* rows [i0, i1) of q (u8; row i at q0 + (i - i0) K) into MR-row panels of
 * ka words per row (MR = CATTN_MR_I8; 0 past K and M), as the path's
 * micro-kernel reads them (dispatch.h):
 *   pairs (ka = ceil(K/2)): A[(i/MR)*MR*ka + p*MR + i%MR] = q[i, 2p] | q[i, 2p+1] << 16
 *   quads (ka = ceil(K/4)): ... + q*MR + i%MR] = q[i, 4q] | q[i, 4q+1] << 8 | .. << 24 */
static void pack_rows(uint32_t *A, const uint8_t *q0, int64_t i0, int64_t i1, int64_t M,
                      int64_t K, int64_t ka)
{
    const int g = cattn_kt.i8_quads ? 4 : 2;
    for (int64_t i = i0; i < i1; i++) {
        uint32_t *dst = A + (i / QMR) * QMR * ka + i % QMR;
        if (i < M)
            pack_row(dst, QMR, g, q0 + (i - i0) * K, K);
        else
            for (int64_t p = 0; p < ka; p++) dst[p * QMR] = 0;
    }
}

/* rows [i0, i0 + m) of A (m <= MR; row i at x + (i - i0) rsx) quantized
 * (their sa, za, bad at [i0 ..]) into the MR-row panel Ap of ka words per
 * row; the panel's rows past m are 0. q: MR x K bytes of scratch. */
static void quant_panel(uint32_t *Ap, uint8_t *q, float *sa, int32_t *za, uint8_t *bad,
                        const float *x, int64_t rsx, int64_t csx, int m, int64_t K, int64_t ka)
{
    const int g = cattn_kt.i8_quads ? 4 : 2;
    for (int i = 0; i < QMR; i++) {
        if (i < m)
            quant_one(q + i * K, Ap + i, QMR, g, sa + i, za + i, bad + i, x + i * rsx, csx, K);
        else
            for (int64_t p = 0; p < ka; p++) Ap[p * QMR + i] = 0;
    }
}

/* words per packed row of A for the path's micro-kernel */
static inline int64_t a_words(int64_t K)
{
    return cattn_kt.i8_quads ? cattn_cdiv(K, 4) : cattn_cdiv(K, 2);
}

typedef struct {
    float *C; int64_t rsc, csc;
    const uint32_t *A;                /* packed words (pairs or quads), ceil(M/MR) panels */
    const float *sa; const int32_t *za;
    const int8_t *P; const float *sw; const int32_t *colsum;    /* sw, colsum: Np */
    const float *bias; int act;
    int64_t M, N, k2;
} qgemm_args;

/* rows [r0, r0+mr) (one MR-row panel, its pairs at a) x columns [c0, c0+nc): the
 * micro-kernel (sums, dequantization, bias and activation) per 16-column
 * panel, straight into C when its rows are contiguous and the panel is
 * whole, else into buf (mr x QNC) and then into C. The bias of a panel past
 * N is read from a zero-padded copy. */
/* a row block's columns per sweep (config.h: CATTN_QGEMM_B_BYTES); the
 * per-thread tile buffer (buf) has rows of QBUF_LD >= any sweep's columns */
#define QBUF_LD CATTN_QGEMM_ROW_NC_MAX
#if CATTN_QGEMM_ROW_NC_MAX < CATTN_QGEMM_NC || CATTN_QGEMM_ROW_NC_MAX % CATTN_NR_I8
#error "config.h: CATTN_QGEMM_ROW_NC_MAX must be a multiple of the tile's columns >= QNC"
#endif
static int64_t row_block_cols(int64_t K)
{
    const int64_t nc = CATTN_QGEMM_B_BYTES / (K > 0 ? K : 1) / QNR * QNR;
    return nc < CATTN_QGEMM_NC ? CATTN_QGEMM_NC : nc > QBUF_LD ? QBUF_LD : nc;
}

static void qgemm_panel(const qgemm_args *g, const uint32_t *a, int64_t r0, int mr, int64_t c0,
                        int64_t nc, float *buf)
{
    const int64_t rsc = g->rsc, csc = g->csc;
    float *C0 = g->C + r0 * rsc + c0 * csc;
    const int direct = csc == 1;
    float bpad[QNR];
    const cattn_ukr_i8_row4_t row4 = mr == 1 && direct ? cattn_kt.ukr_i8_row4 : NULL;
    for (int64_t jl = 0; jl < nc; jl += QNR) {
        const int64_t c = c0 + jl;
        if (row4 && jl + 4 * QNR <= nc && (!g->bias || c + 4 * QNR <= g->N)) {
            /* one row, four whole panels at once (four weight streams) */
            row4(g->k2, a, g->P + (c / QNR) * g->k2 * 2 * QNR, g->k2 * 2 * QNR, g->za + r0,
                 g->sa + r0, g->colsum + c, g->sw + c, g->bias ? g->bias + c : NULL, g->act,
                 C0 + jl);
            jl += 3 * QNR;
            continue;
        }
        const int whole = direct && jl + QNR <= nc;
        const float *bias = NULL;
        if (g->bias && c + QNR <= g->N) {
            bias = g->bias + c;
        } else if (g->bias) {
            for (int j = 0; j < QNR; j++) bpad[j] = c + j < g->N ? g->bias[c + j] : 0.0f;
            bias = bpad;
        }
        cattn_kt.ukr_i8(g->k2, a, mr, g->P + (c / QNR) * g->k2 * 2 * QNR, g->za + r0,
                        g->sa + r0, g->colsum + c, g->sw + c, bias, g->act,
                        whole ? C0 + jl : buf + jl, whole ? rsc : QBUF_LD);
    }
    const int64_t nbuf = direct ? nc % QNR : nc;      /* columns still in buf */
    const int64_t jb = nc - nbuf;
    if (nbuf)
        for (int i = 0; i < mr; i++) {
            float *CATTN_RESTRICT y = C0 + i * rsc;
            const float *t = buf + i * QBUF_LD + jb;
            for (int64_t j = 0; j < nbuf; j++) y[(jb + j) * csc] = t[j];
        }
}

int cattn_linear_int8(float *C, int64_t rsc, int64_t csc, const float *A, int64_t rsa,
                      int64_t csa, const int8_t *P, const float *sw, const int32_t *colsum,
                      int64_t M, int64_t N, int64_t K, const float *bias, int act, int n_threads)
{
    cattn_init();
    if (M <= 0 || N <= 0) return CATTN_OK;
    const int64_t k2 = cattn_cdiv(K, 2), ka = a_words(K), mp = cattn_round_up(M, QMR);
    const int64_t nrb = cattn_cdiv(M, CATTN_QGEMM_MC), ncb = cattn_cdiv(N, CATTN_QGEMM_NC);
    const int64_t npanels = cattn_cdiv(M, QMR);
    const double work = (double)M * (double)N * (double)K;
    const int nt = cattn_short_threads(
        cattn_threads_for(work, CATTN_GEMV_WORK_PER_THREAD, nrb * ncb, n_threads), work);
    /* many row blocks: a task is one QMC-row block over all of N, which
     * quantizes and packs its own rows first (no pass over all of A, no
     * barrier, its pairs stay in L2); else (few rows, e.g. one sentence)
     * all rows are quantized first and tasks split the columns too */
    const int by_rows = nrb >= 4 * (int64_t)nt;
    const int64_t row_nc = row_block_cols(K);
    /* scratch: A words (mp x ka u32; by_rows: one QMC-row block per
     * thread), sa, za, bad; per thread: one panel's u8 rows (MR x K, in L1
     * between quantizing and packing) */
    const size_t blk = sizeof(uint32_t) * (size_t)(cattn_round_up(CATTN_QGEMM_MC, QMR) * ka);
    const size_t asz = cattn_round_up(by_rows ? blk * (size_t)nt
                                              : sizeof(uint32_t) * (size_t)(mp * ka), 64);
    const size_t rsz = cattn_round_up((size_t)M * (2 * sizeof(float) + 1), 64);
    const size_t qsz = cattn_round_up((size_t)(QMR * K), 64);
    uint8_t *mem = cattn_aligned_alloc(asz + rsz + qsz * (size_t)nt);
    if (!mem) return CATTN_ENOMEM;
    uint32_t *Ap = (uint32_t *)mem;
    float *sa = (float *)(mem + asz);
    int32_t *za = (int32_t *)(sa + M);
    uint8_t *bad = (uint8_t *)(za + M);
    uint8_t *qs = mem + asz + rsz;
    const qgemm_args g = {C, rsc, csc, Ap, sa, za, P, sw, colsum, bias, act, M, N, k2};
    float *bufs = cattn_aligned_alloc(sizeof(float) * QMR * QBUF_LD * (size_t)nt);
    if (!bufs) { cattn_aligned_free(mem); return CATTN_ENOMEM; }
    cattn_region_t reg;
    cattn_region_begin(&reg, nt);
    CATTN_OMP(omp parallel num_threads(nt) if (nt > 1))
    {
        cattn_region_arrive(&reg);
        uint8_t *q = qs + qsz * CATTN_TID();
        float *buf = bufs + QMR * QBUF_LD * CATTN_TID();
        if (by_rows) {
            uint32_t *Ab = (uint32_t *)((char *)Ap + blk * (size_t)CATTN_TID());
            CATTN_OMP(omp for schedule(dynamic, 1))
            for (int64_t rb = 0; rb < nrb; rb++) {          /* QMC rows x all N */
                const int64_t r0 = rb * CATTN_QGEMM_MC, r1 = cattn_min64(M, r0 + CATTN_QGEMM_MC);
                for (int64_t i0 = r0; i0 < r1; i0 += QMR)     /* quantize + pack */
                    quant_panel(Ab + (i0 - r0) * ka, q, sa + i0, za + i0, bad + i0,
                                A + i0 * rsa, rsa, csa, (int)cattn_min64(QMR, M - i0), K, ka);
                for (int64_t c0 = 0; c0 < N; c0 += row_nc)
                    for (int64_t r = r0; r < r1; r += QMR)
                        qgemm_panel(&g, Ab + (r - r0) * ka, r, (int)cattn_min64(QMR, r1 - r), c0,
                                    cattn_min64(row_nc, N - c0), buf);
            }
        } else {
            CATTN_OMP(omp for schedule(dynamic, 1))
            for (int64_t ip = 0; ip < npanels; ip++) {        /* quantize + pack A */
                const int64_t i0 = ip * QMR;
                quant_panel(Ap + i0 * ka, q, sa + i0, za + i0, bad + i0, A + i0 * rsa, rsa, csa,
                            (int)cattn_min64(QMR, M - i0), K, ka);
            }
            CATTN_OMP(omp for schedule(dynamic, 1))
            for (int64_t t = 0; t < nrb * ncb; t++) {          /* QMC x QNC tasks */
                const int64_t r0 = t / ncb * CATTN_QGEMM_MC, c0 = t % ncb * CATTN_QGEMM_NC;
                const int64_t r1 = cattn_min64(M, r0 + CATTN_QGEMM_MC);
                const int64_t nc = cattn_min64(CATTN_QGEMM_NC, N - c0);
                for (int64_t r = r0; r < r1; r += QMR)
                    qgemm_panel(&g, Ap + r * ka, r, (int)cattn_min64(QMR, r1 - r), c0, nc, buf);
            }
        }
    }
    cattn_region_end(&reg);
    cattn_aligned_free(bufs);
    cattn_aligned_free(mem);
    return CATTN_OK;
}

int cattn_qgemm_i32(int32_t *acc, const uint8_t *qa, const int8_t *P, int64_t M, int64_t N,
                    int64_t K, int n_threads)
{
    cattn_init();
    (void)n_threads;
    if (M <= 0 || N <= 0) return CATTN_OK;
    const int64_t k2 = cattn_cdiv(K, 2), ka = a_words(K), mp = cattn_round_up(M, QMR);
    const size_t asz = cattn_round_up(sizeof(uint32_t) * (size_t)(mp * ka), 64);
    uint8_t *mem = cattn_aligned_alloc(asz + 64);
    if (!mem) return CATTN_ENOMEM;
    uint32_t *Ap = (uint32_t *)mem;
    pack_rows(Ap, qa, 0, mp, M, K, ka);
    static const int32_t zero[QNR > QMR ? QNR : QMR];
    float one[QNR > QMR ? QNR : QMR], tile[QMR * QNR];
    for (int i = 0; i < (QNR > QMR ? QNR : QMR); i++) one[i] = 1.0f;
    for (int64_t r = 0; r < M; r += QMR) {
        const int mr = (int)cattn_min64(QMR, M - r);
        for (int64_t c = 0; c < N; c += QNR) {
            cattn_kt.ukr_i8(k2, Ap + r * ka, mr, P + (c / QNR) * k2 * 2 * QNR, zero, one,
                            zero, one, NULL, CATTN_ACT_NONE, tile, QNR);
            for (int i = 0; i < mr; i++)
                for (int64_t j = 0; j < cattn_min64(QNR, N - c); j++)
                    acc[(r + i) * N + c + j] = (int32_t)tile[i * QNR + j];
        }
    }
    cattn_aligned_free(mem);
    return CATTN_OK;
}
