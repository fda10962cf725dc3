/* q4gemm.c — group-wise linear layers: int4, int8g, int6g, int5g
 * (cattn.pack_weight(w, dtype="int4" | "int8g" | "int6g" | "int5g")). int4:
 *   C[M,N] = act(sum_g (d[j,g] sx[i,g] (isum - z xs) + mn[j,g] sx[i,g] xs) + bias[N])
 * The weight: groups of 32 k, q[j, k] in [0, 15] with a scale d and
 * (optionally) a min mn per group and output, float32 or float16 (h16), its values
 * w[j, k] = d * q + mn (mn NULL: d * (q - z), z = 0 or 8); GGUF's Q4_0,
 * Q4_1 and Q4_K blocks are such values exactly (cattn/ops/formats.py).
 * The activations: each row's groups of 32 quantized at call time to int8,
 * symmetric (cattn_quantize_q8_blocks), as llama.cpp's Q8_0; the group
 * sums are exact int32 and the float steps are fixed (dispatch.h,
 * cattn_ukr_q4_t), so threads, blocking and the other rows never change a
 * result's bits.
 *
 * int8g: the same with 8-bit values u in [0, 255] (value (d s) (u - z) +
 * mn, s an optional int8 sub-scale per 16: GGUF's Q8_0). int6g: int8g's
 * values and formula with u < 64 held in 6 bits (GGUF's Q6_K); int5g: u <
 * 32 in 5 bits (GGUF's Q5_0, Q5_1, Q5_K).
 *
 * Loops: quantize the rows (in the region when there are many) -> tasks
 * of a few 16-column panels x all rows (dynamic), MR-row tiles by the
 * path's micro-kernel, bias and activation per 16 columns, stored into C.
 * Legend: M rows, N outputs, K inputs, Kp = K rounded up to 32, G = Kp/32
 * groups, Np = N rounded up to 16.
 */
#include <math.h>
#include <string.h>
#include "dispatch.h"
#include "threads.h"

#define QG CATTN_Q4_GROUP
#define NR CATTN_NR_Q4
#define MR CATTN_MR_Q4

size_t cattn_q4_packed_bytes(int64_t N, int64_t K)
{
    return (size_t)cattn_round_up(N, NR) * (size_t)(cattn_round_up(K, QG) / 2);
}

size_t cattn_q8g_packed_bytes(int64_t N, int64_t K)
{
    return (size_t)cattn_round_up(N, NR) * (size_t)cattn_round_up(K, QG);
}

size_t cattn_q6g_packed_bytes(int64_t N, int64_t K)
{
    return (size_t)cattn_round_up(N, NR) * (size_t)(cattn_round_up(K, QG) / 4 * 3);
}

size_t cattn_q5g_packed_bytes(int64_t N, int64_t K)
{
    return (size_t)cattn_round_up(N, NR) * (size_t)(cattn_round_up(K, QG) / 8 * 5);
}

static inline float rint_smallf(float v)      /* to nearest even, |v| < 2^22 */
{
    const float magic = 12582912.0f;
    return (v + magic) - magic;
}

/* one row x[0:K] into qx[0:Kp] (0 past K) with sx, xs, sxs per group;
 * returns 1 when the row holds NaN or +-inf (then all 0, sx NaN). The
 * path's quant_q8g does the full groups it can (the same bits) and flags
 * NaN and +-inf among them, this loop the rest. */
static int quantize_row(int8_t *qx, float *sx, int32_t *xs, int32_t *xs16, float *sxs,
                        const float *x, int64_t K)
{
    const int64_t G = cattn_cdiv(K, QG);
    const int64_t full = cattn_kt.quant_q8g ? K / QG : 0;   /* the path's groups */
    int nonfinite = full ? cattn_kt.quant_q8g(qx, sx, xs, xs16, sxs, x, full) : 0;
    for (int64_t k = full * QG; k < K; k++) nonfinite |= !(x[k] - x[k] == 0.0f);
    if (nonfinite) {
        memset(qx, 0, (size_t)(G * QG));
        for (int64_t g = 0; g < G; g++) {
            sx[g] = NAN; xs[g] = 0; sxs[g] = NAN; xs16[2 * g] = xs16[2 * g + 1] = 0;
        }
        return 1;
    }
    for (int64_t g = 0; g < G; g++) {
        if (g < full && sx[g] >= 0.0f) continue;
        const int64_t k0 = g * QG, n = cattn_min64(QG, K - k0);
        float v[QG] = {0}, amax = 0.0f;
        memcpy(v, x + k0, sizeof(float) * (size_t)n);
        for (int k = 0; k < QG; k++) {          /* finite here: fmaxf's NaN rule unneeded */
            const float a = fabsf(v[k]);         /* (and fmaxf is a libm call without -ffast-math) */
            amax = a > amax ? a : amax;
        }
        int8_t *q = qx + k0;
        int32_t s = 0;
        if (amax == 0.0f) {
            memset(q, 0, QG);
            sx[g] = 0.0f; xs[g] = 0; sxs[g] = 0.0f; xs16[2 * g] = xs16[2 * g + 1] = 0;
            continue;
        } else if (amax >= 0x1p-100f) {
            const float inv = 127.0f / amax;
            for (int k = 0; k < QG; k++) {
                float r = rint_smallf(v[k] * inv);
                r = r < -127.0f ? -127.0f : r > 127.0f ? 127.0f : r;
                q[k] = (int8_t)r;
            }
        } else {                               /* tiny: 127 / amax past float's range */
            const double inv = 127.0 / (double)amax;
            for (int k = 0; k < QG; k++) {
                double r = nearbyint((double)v[k] * inv);
                r = r < -127.0 ? -127.0 : r > 127.0 ? 127.0 : r;
                q[k] = (int8_t)r;
            }
        }
        int32_t s0 = 0;
        for (int k = 0; k < QG / 2; k++) s0 += q[k];
        for (int k = 0; k < QG; k++) s += q[k];
        sx[g] = (float)((double)amax / 127.0);
        xs[g] = s;
        xs16[2 * g] = s0;
        xs16[2 * g + 1] = s - s0;
        sxs[g] = sx[g] * (float)s;
    }
    return 0;
}

void cattn_quantize_q8_blocks(int8_t *qx, float *sx, int32_t *xs, int32_t *xs16, float *sxs,
                              uint8_t *bad, const float *X, int64_t M, int64_t K)
{
    const int64_t G = cattn_cdiv(K, QG);
    for (int64_t i = 0; i < M; i++)
        bad[i] = (uint8_t)quantize_row(qx + i * G * QG, sx + i * G, xs + i * G, xs16 + 2 * i * G,
                                       sxs + i * G, X + i * K, K);
}

/* float16 bits -> float32, exact for finite values (the bits shifted into
 * float32's fields are the value times 2^-112) */
static inline float h2f(uint16_t h)
{
    const uint32_t u = (uint32_t)(h & 0x8000u) << 16 | (uint32_t)(h & 0x7FFFu) << 13;
    float f;
    memcpy(&f, &u, 4);
    return f * 0x1p112f;
}

typedef struct {
    float *C; int64_t ldc;
    const int8_t *qx; const float *sx; const int32_t *xs; const int32_t *xs16; const float *sxs;
    const uint8_t *bad;
    const uint8_t *P; const void *d; const void *mn; const int8_t *sub; int h16, z, bits;
    const cattn_q4k_scales *k; float *kbuf;      /* two-level scales; per thread 2 G 16 floats */
    const float *bias; int act;
    int64_t M, N, G;
    int narrow;                                   /* int8g: every u < 64 */
} q4_args;

/* panels [p0, p1) x all rows into C */
static void q4_task(const q4_args *a, int64_t p0, int64_t p1)
{
    const int64_t G = a->G, Kp = G * QG;
    float buf[MR * NR];
    for (int64_t p = p0; p < p1; p++) {
        const int64_t c0 = p * NR, nc = cattn_min64(NR, a->N - c0);
        const uint8_t *b = a->P + p * G * (a->bits == 4 ? 256 : a->bits * 64);
        const size_t off = (size_t)(p * G * NR) * (a->h16 ? 2 : 4);
        const void *d = a->d ? (const char *)a->d + off : NULL;
        const void *mn = a->mn ? (const char *)a->mn + off : NULL;
        cattn_q4k_scales kp = {0};                /* two-level scales: the panel's */
        if (a->k) {
            kp.sc = a->k->sc + p * G * NR;
            kp.m = a->k->m + p * G * NR;
            kp.D = a->k->D + p * (G / 8) * NR;
            kp.Dmin = a->k->Dmin + p * (G / 8) * NR;
        }
        if (a->k && !cattn_kt.ukr_q4k) {   /* d = D sc, mn = -(Dmin m): the float32 values */
            float *dd = a->kbuf + (size_t)(2 * G * NR) * CATTN_TID(), *mm = dd + G * NR;
            for (int64_t g8 = 0; g8 < G / 8; g8++) {
                float Dv[NR], Dmv[NR];
                for (int j = 0; j < NR; j++) {
                    Dv[j] = h2f(kp.D[g8 * NR + j]);
                    Dmv[j] = h2f(kp.Dmin[g8 * NR + j]);
                }
                for (int64_t i = g8 * 8 * NR; i < (g8 + 1) * 8 * NR; i++) {
                    dd[i] = Dv[i % NR] * (float)kp.sc[i];
                    mm[i] = -(Dmv[i % NR] * (float)kp.m[i]);
                }
            }
            d = dd;
            mn = mm;
        }
        for (int64_t r = 0; r < a->M; r += MR) {
            const int m = (int)cattn_min64(MR, a->M - r);
            /* a full panel's tile straight into C (no copy, and no 32-byte
             * stores read back as 16-byte loads); a ragged one through buf */
            float *t0 = nc == NR ? a->C + r * a->ldc + c0 : buf;
            const int64_t ldt = nc == NR ? a->ldc : NR;
            if (a->bits == 4 && a->k && cattn_kt.ukr_q4k)
                cattn_kt.ukr_q4k(G, b, &kp, m, a->qx + r * Kp, Kp, a->sx + r * G, a->xs + r * G,
                                 a->sxs + r * G, G, t0, ldt);
            else if (a->bits == 4)
                cattn_kt.ukr_q4(G, b, d, mn, a->k ? 0 : a->h16, a->z, m, a->qx + r * Kp, Kp, a->sx + r * G,
                                a->xs + r * G, a->sxs + r * G, G, t0, ldt);
            else
                (a->bits == 6 ? cattn_kt.ukr_q6g : a->bits == 5 ? cattn_kt.ukr_q5g
                 : a->narrow && cattn_kt.ukr_q8g_n ? cattn_kt.ukr_q8g_n : cattn_kt.ukr_q8g)(G, b, d, mn, a->sub ? a->sub + p * G * 2 * NR : NULL, a->h16,
                                 a->z, m, a->qx + r * Kp, Kp, a->sx + r * G, a->xs + r * G,
                                 a->xs16 + 2 * r * G, a->sxs + r * G, G, t0, ldt);
            for (int i = 0; i < m; i++) {
                float *t = t0 + i * ldt;
                if (a->bad[r + i]) {
                    for (int j = 0; j < NR; j++) t[j] = NAN;      /* t: NR columns (C's or buf's) */
                } else {
                    if (a->bias && nc == NR)      /* a fixed count: vectorized */
                        for (int j = 0; j < NR; j++) t[j] += a->bias[c0 + j];
                    else if (a->bias)
                        for (int j = 0; j < nc; j++) t[j] += a->bias[c0 + j];
                    if (a->act != CATTN_ACT_NONE) cattn_kt.act_f32(t, t, NR, a->act);
                }
                if (t0 == buf)
                    memcpy(a->C + (r + i) * a->ldc + c0, t, sizeof(float) * (size_t)nc);
            }
        }
    }
}

static int linear_groups(float *C, int64_t ldc, const float *A, const uint8_t *P, const void *d,
                         const void *mn, const int8_t *sub, const cattn_q4k_scales *k, int h16,
                         int z, int bits, int narrow, int64_t M, int64_t N, int64_t K,
                         const float *bias, int act, int n_threads)
{
    cattn_init();
    if (M <= 0 || N <= 0) return CATTN_OK;
    const int64_t G = cattn_cdiv(K, QG), Kp = G * QG, np = cattn_cdiv(N, NR);
    if (G == 0) {                                  /* K = 0: bias only */
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) C[i * ldc + j] = bias ? bias[j] : 0.0f;
        if (act != CATTN_ACT_NONE)
            for (int64_t i = 0; i < M; i++) cattn_kt.act_f32(C + i * ldc, C + i * ldc, N, act);
        return CATTN_OK;
    }
    const size_t qsz = cattn_round_up((size_t)(M * Kp), 64);
    const size_t gsz = cattn_round_up(sizeof(float) * (size_t)(M * G), 64);
    uint8_t *mem = cattn_aligned_alloc(qsz + 5 * gsz + (size_t)M);
    if (!mem) return CATTN_ENOMEM;
    int8_t *qx = (int8_t *)mem;
    float *sx = (float *)(mem + qsz), *sxs = (float *)(mem + qsz + gsz);
    int32_t *xs = (int32_t *)(mem + qsz + 2 * gsz), *xs16 = (int32_t *)(mem + qsz + 3 * gsz);
    uint8_t *bad = mem + qsz + 5 * gsz;
    const double work = (double)M * (double)N * (double)K;
    const int nt = cattn_short_threads(
        cattn_threads_for(work, CATTN_GEMV_WORK_PER_THREAD, np, n_threads), work);
    /* about 4 tasks a thread, each a run of contiguous panels: a thread
     * streams long runs of the weight (tasks of at most 8 panels, which the
     * threads took in turn, made a decode step 4-11% slower on Zen 3) */
    const int64_t chunk = cattn_cdiv(np, 4 * (int64_t)nt);
    const int64_t ntask = cattn_cdiv(np, chunk);
    float *kbuf = NULL;
    if (k && G % 8) { cattn_aligned_free(mem); return CATTN_EKIND; }
    if (k && !cattn_kt.ukr_q4k) {
        kbuf = cattn_aligned_alloc(sizeof(float) * (size_t)(2 * G * NR) * (size_t)nt);
        if (!kbuf) { cattn_aligned_free(mem); return CATTN_ENOMEM; }
    }
    const q4_args g = {C, ldc, qx, sx, xs, xs16, sxs, bad, P, d, mn, sub, h16, z, bits, k, kbuf,
                       bias, act, M, N, G, narrow};
    const int quant_in_region = nt > 1 && M >= 8;
    if (!quant_in_region)
        for (int64_t i = 0; i < M; i++)
            bad[i] = (uint8_t)quantize_row(qx + i * Kp, sx + i * G, xs + i * G,
                                           xs16 + 2 * i * G, sxs + i * G, A + i * K, K);
    cattn_region_t reg;
    cattn_region_begin(&reg, nt);
    CATTN_OMP(omp parallel num_threads(nt) if (nt > 1))
    {
        cattn_region_arrive(&reg);
        if (quant_in_region) {
            CATTN_OMP(omp for schedule(dynamic, 1))
            for (int64_t i = 0; i < M; i++)
                bad[i] = (uint8_t)quantize_row(qx + i * Kp, sx + i * G, xs + i * G,
                                               xs16 + 2 * i * G, sxs + i * G, A + i * K, K);
        }
        CATTN_OMP(omp for schedule(dynamic, 1))
        for (int64_t t = 0; t < ntask; t++)
            q4_task(&g, t * chunk, cattn_min64(np, (t + 1) * chunk));
    }
    cattn_region_end(&reg);
    cattn_aligned_free(kbuf);
    cattn_aligned_free(mem);
    return CATTN_OK;
}

int cattn_linear_int4(float *C, const float *A, const uint8_t *P, const void *d,
                      const void *mn, const cattn_q4k_scales *k, int h16, int z, int64_t M,
                      int64_t N, int64_t K, const float *bias, int act, int n_threads)
{
    return linear_groups(C, N, A, P, d, mn, NULL, k, h16, z, 4, 0, M, N, K, bias, act, n_threads);
}

int cattn_linear_int6g(float *C, const float *A, const uint8_t *P, const void *d,
                       const void *mn, const int8_t *sub, int h16, int z, int64_t M, int64_t N,
                       int64_t K, const float *bias, int act, int n_threads)
{
    return linear_groups(C, N, A, P, d, mn, sub, NULL, h16, z, 6, 1, M, N, K, bias, act, n_threads);
}

int cattn_linear_int5g(float *C, const float *A, const uint8_t *P, const void *d,
                       const void *mn, const int8_t *sub, int h16, int z, int64_t M, int64_t N,
                       int64_t K, const float *bias, int act, int n_threads)
{
    return linear_groups(C, N, A, P, d, mn, sub, NULL, h16, z, 5, 1, M, N, K, bias, act, n_threads);
}

int cattn_linear_int8g(float *C, const float *A, const uint8_t *P, const void *d,
                       const void *mn, const int8_t *sub, int h16, int z, int ubits, int64_t M,
                       int64_t N, int64_t K, const float *bias, int act, int n_threads)
{
    return linear_groups(C, N, A, P, d, mn, sub, NULL, h16, z, 8, ubits <= 6, M, N, K, bias, act,
                         n_threads);
}

int cattn_linear_group_weight(const cattn_weight *w, float *y, int64_t ldy, const float *x,
                              int64_t M, int act, int n_threads)
{
    const uint8_t *P = (const uint8_t *)w->P;
    switch (w->kind) {
    case CATTN_W_INT4:
        return linear_groups(y, ldy, x, P, w->sw, w->mn, NULL, w->k.sc ? &w->k : NULL, w->h16,
                             w->z, 4, 0, M, w->N, w->K, w->bias, act, n_threads);
    case CATTN_W_INT8G:
        return linear_groups(y, ldy, x, P, w->sw, w->mn, w->sub, NULL, w->h16, w->z, 8,
                             w->ubits <= 6, M, w->N, w->K, w->bias, act, n_threads);
    case CATTN_W_INT6G:
    case CATTN_W_INT5G:
        return linear_groups(y, ldy, x, P, w->sw, w->mn, w->sub, NULL, w->h16, w->z,
                             w->kind == CATTN_W_INT6G ? 6 : 5, 1, M, w->N, w->K, w->bias, act,
                             n_threads);
    default:
        return CATTN_EKIND;
    }
}
