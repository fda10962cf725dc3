/* kernels/avx2/gemm.c — AVX2/FMA kernels of the GEMM family: the exported
 * micro-kernel (ukr.h, with a prefetch of the C rows) and its streaming form
 * (dispatch.h: ukr_stream), multi-row dots, the few-row GEMM and the
 * transposing pack. Compiled with -mavx2 -mfma only; used only after cpu.c
 * has seen both features.
 */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "ukr.h"
#include "simd.h"

void cattn_ukr_avx2_f32(int64_t k, const float *a, int64_t lak, int64_t lai,
                        const float *b, int64_t ldb, float *c, int64_t ldc, int acc)
{
    for (int r = 0; r < 6; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
    ukr_avx2_f32_inl(k, a, lak, lai, b, ldb, c, ldc, acc);
}

void cattn_ukr_stream_avx2_f32(int64_t k, const float *a, int64_t lak, int64_t lai,
                               const float *b, int64_t ldb, float *c, int64_t ldc, int acc)
{
    for (int r = 0; r < 6; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
    ukr_avx2_f32_pf(k, a, lak, lai, b, ldb, c, ldc, acc, CATTN_STREAM_PF);
}

void cattn_ukr_avx2_f64(int64_t k, const double *a, int64_t lak, int64_t lai,
                        const double *b, int64_t ldb, double *c, int64_t ldc, int acc)
{
    for (int r = 0; r < 6; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
    ukr_avx2_f64_inl(k, a, lak, lai, b, ldb, c, ldc, acc);
}

/* Multi-row dot products (GEMV with a transposed matrix; attention decode):
 *   out[s] = q[0:E] · K[s*rsk : s*rsk+E]   for s < n
 * q: (E,) contiguous; K: (n, E) rows contiguous, row stride rsk:
 * kv_rows_tmpl.h's loop on float32 rows (its float16 copy: attn_rows_h.h). */
#define KV_T float
#define KV_LOAD8(p) _mm256_loadu_ps(p)
#define KV_LOAD1(x) (x)
#define KV_DOTN dotn_f32_rows
#include "kv_rows_tmpl.h"

void cattn_dotn_avx2_f32(float *out, const float *q, const float *K, int64_t rsk,
                         int64_t n, int64_t E)
{
    dotn_f32_rows(out, q, K, rsk, n, E);
}

void cattn_dotn_avx2_f64(double *out, const double *q, const double *K, int64_t rsk,
                                     int64_t n, int64_t E)
{
    const int64_t E4 = E & ~(int64_t)3;
    int64_t s = 0;
    for (; s + 4 <= n; s += 4) {
        const double *k0 = K + s * rsk, *k1 = k0 + rsk, *k2 = k1 + rsk, *k3 = k2 + rsk;
        __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t e = 0; e < E4; e += 4) {
            const __m256d qv = _mm256_loadu_pd(q + e);
            a0 = _mm256_fmadd_pd(qv, _mm256_loadu_pd(k0 + e), a0);
            a1 = _mm256_fmadd_pd(qv, _mm256_loadu_pd(k1 + e), a1);
            a2 = _mm256_fmadd_pd(qv, _mm256_loadu_pd(k2 + e), a2);
            a3 = _mm256_fmadd_pd(qv, _mm256_loadu_pd(k3 + e), a3);
        }
        double r0 = hsum_pd(a0), r1 = hsum_pd(a1), r2 = hsum_pd(a2), r3 = hsum_pd(a3);
        for (int64_t e = E4; e < E; e++) {
            r0 += q[e] * k0[e]; r1 += q[e] * k1[e]; r2 += q[e] * k2[e]; r3 += q[e] * k3[e];
        }
        out[s] = r0; out[s + 1] = r1; out[s + 2] = r2; out[s + 3] = r3;
    }
    for (; s < n; s++) {
        const double *k0 = K + s * rsk;
        __m256d a0 = _mm256_setzero_pd();
        for (int64_t e = 0; e < E4; e += 4)
            a0 = _mm256_fmadd_pd(_mm256_loadu_pd(q + e), _mm256_loadu_pd(k0 + e), a0);
        double r0 = hsum_pd(a0);
        for (int64_t e = E4; e < E; e++) r0 += q[e] * k0[e];
        out[s] = r0;
    }
}


/* Few-row GEMM against a weight read in place (contract in dispatch.h):
 *   c[i*ldc + j] = sum_{KC blocks} (FMA chain over the block's p of
 *                  at[p*mp + i] * w[j*ldw + p]),   i < mp, j < n
 * Lanes are the rows i of A (A^T: 8 rows per vector), 8 weight rows j at a
 * time are broadcast from memory: 8 independent FMA chains, each in
 * increasing p from zero per KC block, blocks added in order (block sum +
 * total), which is exactly the micro-kernel's arithmetic on packed panels.
 * So a row of A gets the same bits here as in a 4096-row GEMM. */
/* One row of A (mp = 1): lanes are 8 weight rows j instead, 4 such groups
 * at a time; each 8 x 8 block of W (8 rows, 8 p) is transposed in
 * registers, then one FMA per p in increasing p: the same chains. */
static inline void transpose8_ps(__m256 r[8])
{
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]),
                 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]),
                 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]),
                 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20); r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20); r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31); r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31); r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

static void rows_tn1_avx2_f32(float *c, const float *a, const float *w, int64_t ldw,
                              int64_t n, int64_t K, int64_t kc)
{
    for (int64_t j0 = 0; j0 < n; j0 += 32) {
        const float *wr[32];                     /* rows past n repeat row j0 */
        for (int r = 0; r < 32; r++) wr[r] = w + (j0 + (j0 + r < n ? r : 0)) * ldw;
        /* the next 32 rows into L2 while these stream, in address order:
         * row by row, its lines in turn, as many lines per 8 p as the block
         * has lines over K / 8 (the 32 interleaved row streams defeat the
         * hardware prefetcher; a line of each row per 16 p instead, 32
         * DRAM pages at once, read a plain lm_head at 0.6x a packed one's
         * rate) */
        const int64_t npf = cattn_min64(32, n - j0 - 32);
        const float *wn = w + (j0 + 32) * ldw;
        const int64_t lpr = (K + 15) / 16;                 /* 64-byte lines a row */
        const int64_t per = (npf * lpr + K / 8 - 1) / (K / 8 > 0 ? K / 8 : 1);
        int64_t pr = 0, pl = 0;                            /* the next line: row, line */
        __m256 tot[4];
        for (int64_t pc = 0; pc < K; pc += kc) {
            const int64_t p1 = cattn_min64(K, pc + kc);
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(),
                             _mm256_setzero_ps(), _mm256_setzero_ps()};
            int64_t p = pc;
            for (; p + 8 <= p1; p += 8) {
                for (int64_t e = 0; e < per && pr < npf; e++) {
                    _mm_prefetch((const char *)(wn + pr * ldw + pl * 16), _MM_HINT_T1);
                    if (++pl == lpr) {
                        pl = 0;
                        pr++;
                    }
                }
                for (int g = 0; g < 4; g++) {
                    __m256 r[8];
                    for (int q = 0; q < 8; q++) r[q] = _mm256_loadu_ps(wr[8 * g + q] + p);
                    transpose8_ps(r);                       /* r[q]: W[j0+8g.., p+q] */
                    for (int q = 0; q < 8; q++)
                        acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + p + q), r[q], acc[g]);
                }
            }
            for (; p < p1; p++)                                         /* K tail */
                for (int g = 0; g < 4; g++) {
                    const float *const *v = wr + 8 * g;
                    const __m256 col = _mm256_setr_ps(v[0][p], v[1][p], v[2][p], v[3][p],
                                                      v[4][p], v[5][p], v[6][p], v[7][p]);
                    acc[g] = _mm256_fmadd_ps(_mm256_broadcast_ss(a + p), col, acc[g]);
                }
            for (int g = 0; g < 4; g++) tot[g] = pc ? _mm256_add_ps(acc[g], tot[g]) : acc[g];
        }
        float t[32];
        for (int g = 0; g < 4; g++) _mm256_storeu_ps(t + 8 * g, tot[g]);
        for (int64_t j = 0; j < cattn_min64(32, n - j0); j++) c[j0 + j] = t[j];
    }
}

static inline int64_t l0_prefetch_rows(int64_t left)
{
    return left < 0 ? 0 : left < 8 ? left : 8;
}

void cattn_rows_tn_avx2_f32(float *c, int64_t ldc, const float *at, int64_t mp,
                            const float *w, int64_t ldw, int64_t n, int64_t K, int64_t kc)
{
    if (mp == 1) {
        rows_tn1_avx2_f32(c, at, w, ldw, n, K, kc);
        return;
    }
    for (int64_t j0 = 0; j0 < n; j0 += 8) {
        const int64_t nj = cattn_min64(8, n - j0);
        const float *w0 = w + j0 * ldw;          /* rows past n repeat row j0 */
        const float *w1 = w0 + (nj > 1) * ldw, *w2 = w0 + 2 * (nj > 2) * ldw,
                    *w3 = w0 + 3 * (nj > 3) * ldw, *w4 = w0 + 4 * (nj > 4) * ldw,
                    *w5 = w0 + 5 * (nj > 5) * ldw, *w6 = w0 + 6 * (nj > 6) * ldw,
                    *w7 = w0 + 7 * (nj > 7) * ldw;
        /* the next 8 rows of W, prefetched a line of each per 16 p while
         * these stream: rows of short K are too short for the hardware
         * prefetcher to pick up on its own */
        const int64_t npf = l0_prefetch_rows(n - j0 - 8);
        const float *wn = w0 + 8 * ldw;
        for (int64_t l0 = 0; l0 < mp; l0 += 8) {
            float tot[8][8] __attribute__((aligned(32)));      /* [j][lane i] */
            for (int64_t pc = 0; pc < K; pc += kc) {
                const int64_t p1 = cattn_min64(K, pc + kc);
                __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0,
                       s4 = s0, s5 = s0, s6 = s0, s7 = s0;
                const float *a = at + pc * mp + l0;
#pragma GCC unroll 4
                for (int64_t p = pc; p < p1; p++, a += mp) {
                    if (!(p & 15) && l0 == 0)
                        for (int64_t r = 0; r < npf; r++)
                            _mm_prefetch((const char *)(wn + r * ldw + p), _MM_HINT_T0);
                    const __m256 av = _mm256_loadu_ps(a);
                    s0 = _mm256_fmadd_ps(av, _mm256_broadcast_ss(w0 + p), s0);
                    s1 = _mm256_fmadd_ps(av, _mm256_broadcast_ss(w1 + p), s1);
                    s2 = _mm256_fmadd_ps(av, _mm256_broadcast_ss(w2 + p), s2);
                    s3 = _mm256_fmadd_ps(av, _mm256_broadcast_ss(w3 + p), s3);
                    s4 = _mm256_fmadd_ps(av, _mm256_broadcast_ss(w4 + p), s4);
                    s5 = _mm256_fmadd_ps(av, _mm256_broadcast_ss(w5 + p), s5);
                    s6 = _mm256_fmadd_ps(av, _mm256_broadcast_ss(w6 + p), s6);
                    s7 = _mm256_fmadd_ps(av, _mm256_broadcast_ss(w7 + p), s7);
                }
                const __m256 s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
                for (int j = 0; j < 8; j++) {
                    const __m256 t = pc ? _mm256_add_ps(s[j], _mm256_load_ps(tot[j])) : s[j];
                    _mm256_store_ps(tot[j], t);
                }
            }
            for (int i = 0; i < 8; i++)
                for (int64_t j = 0; j < nj; j++) c[(l0 + i) * ldc + j0 + j] = tot[j][i];
        }
    }
}

/* 1-3 rows of A against packed 16-wide panels (contract in dispatch.h):
 * M rows x NP panels per pass, 2 M NP accumulators (8 for one row over 4
 * panels, 12 for three rows over 2): enough independent FMA chains to
 * hide the latency, each chain the micro-kernel's (increasing p from zero,
 * fmadd(a, b, s), then s + c when accumulating). */
static inline __attribute__((always_inline)) void
few_rows_pass(int64_t k, const float *a, int64_t lda, const int M, const int NP,
              const float *b, int64_t ps, float *c, int64_t ldc, int acc)
{
    __m256 s[3][4][2];
    for (int i = 0; i < M; i++)
        for (int q = 0; q < NP; q++) s[i][q][0] = s[i][q][1] = _mm256_setzero_ps();
    for (int64_t p = 0; p < k; p++) {
        for (int q = 0; q < NP; q++) {
            const __m256 b0 = _mm256_loadu_ps(b + q * ps + p * 16);
            const __m256 b1 = _mm256_loadu_ps(b + q * ps + p * 16 + 8);
            for (int i = 0; i < M; i++) {
                const __m256 ai = _mm256_broadcast_ss(a + i * lda + p);
                s[i][q][0] = _mm256_fmadd_ps(ai, b0, s[i][q][0]);
                s[i][q][1] = _mm256_fmadd_ps(ai, b1, s[i][q][1]);
            }
        }
    }
    for (int i = 0; i < M; i++)
        for (int q = 0; q < NP; q++) {
            float *cr = c + i * ldc + q * 16;
            __m256 lo = s[i][q][0], hi = s[i][q][1];
            if (acc) {
                lo = _mm256_add_ps(lo, _mm256_loadu_ps(cr));
                hi = _mm256_add_ps(hi, _mm256_loadu_ps(cr + 8));
            }
            _mm256_storeu_ps(cr, lo);
            _mm256_storeu_ps(cr + 8, hi);
        }
}

void cattn_few_rows_avx2_f32(int64_t k, const float *a, int64_t lda, int m, const float *b,
                             int64_t npan, int64_t ps, float *c, int64_t ldc, int acc)
{
    int64_t jp = 0;
    if (m == 1)
        for (; jp + 4 <= npan; jp += 4)
            few_rows_pass(k, a, lda, 1, 4, b + jp * ps, ps, c + jp * 16, ldc, acc);
    else if (m == 2)
        for (; jp + 2 <= npan; jp += 2)
            few_rows_pass(k, a, lda, 2, 2, b + jp * ps, ps, c + jp * 16, ldc, acc);
    else
        for (; jp + 2 <= npan; jp += 2)
            few_rows_pass(k, a, lda, 3, 2, b + jp * ps, ps, c + jp * 16, ldc, acc);
    for (; jp < npan; jp++) {                                   /* last panels */
        if (m == 1) few_rows_pass(k, a, lda, 1, 1, b + jp * ps, ps, c + jp * 16, ldc, acc);
        else if (m == 2) few_rows_pass(k, a, lda, 2, 1, b + jp * ps, ps, c + jp * 16, ldc, acc);
        else few_rows_pass(k, a, lda, 3, 1, b + jp * ps, ps, c + jp * 16, ldc, acc);
    }
}

/* Transposing pack into 16-wide panels (float32):
 *   qp[(i/16)*16*E + e*16 + i%16] = Q[i*rsq + e] * scale  for i < br, e < E
 * and 0 for br <= i < brp (brp a multiple of 8). Used for the attention's
 * Q^T panels and for packing a GEMM B = W^T from a (N, K) weight. 8x8
 * blocks are transposed in registers; ragged edges are scalar. */
void cattn_pack_t16_avx2_f32(float *qp, const float *Q, int64_t rsq, int64_t br, int64_t brp,
                             int64_t E, float scale)
{
    const __m256 vs = _mm256_set1_ps(scale);
    const int64_t E8 = E & ~(int64_t)7;
    for (int64_t i0 = 0; i0 < brp; i0 += 8) {
        float *dst = qp + (i0 / 16) * 16 * E + (i0 % 16);
        if (i0 + 8 <= br) {
            const float *q = Q + i0 * rsq;
            for (int64_t e = 0; e < E8; e += 8) {
                __m256 r0 = _mm256_loadu_ps(q + 0 * rsq + e), r1 = _mm256_loadu_ps(q + 1 * rsq + e),
                       r2 = _mm256_loadu_ps(q + 2 * rsq + e), r3 = _mm256_loadu_ps(q + 3 * rsq + e),
                       r4 = _mm256_loadu_ps(q + 4 * rsq + e), r5 = _mm256_loadu_ps(q + 5 * rsq + e),
                       r6 = _mm256_loadu_ps(q + 6 * rsq + e), r7 = _mm256_loadu_ps(q + 7 * rsq + e);
                __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
                       t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
                       t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                       t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
                __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
                       u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
                       u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
                       u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
                float *d = dst + e * 16;
                _mm256_storeu_ps(d + 0 * 16, _mm256_mul_ps(vs, _mm256_permute2f128_ps(u0, u4, 0x20)));
                _mm256_storeu_ps(d + 1 * 16, _mm256_mul_ps(vs, _mm256_permute2f128_ps(u1, u5, 0x20)));
                _mm256_storeu_ps(d + 2 * 16, _mm256_mul_ps(vs, _mm256_permute2f128_ps(u2, u6, 0x20)));
                _mm256_storeu_ps(d + 3 * 16, _mm256_mul_ps(vs, _mm256_permute2f128_ps(u3, u7, 0x20)));
                _mm256_storeu_ps(d + 4 * 16, _mm256_mul_ps(vs, _mm256_permute2f128_ps(u0, u4, 0x31)));
                _mm256_storeu_ps(d + 5 * 16, _mm256_mul_ps(vs, _mm256_permute2f128_ps(u1, u5, 0x31)));
                _mm256_storeu_ps(d + 6 * 16, _mm256_mul_ps(vs, _mm256_permute2f128_ps(u2, u6, 0x31)));
                _mm256_storeu_ps(d + 7 * 16, _mm256_mul_ps(vs, _mm256_permute2f128_ps(u3, u7, 0x31)));
            }
            for (int64_t e = E8; e < E; e++)                                   /* tail */
                for (int j = 0; j < 8; j++) dst[e * 16 + j] = q[j * rsq + e] * scale;
        } else {                                        /* ragged or padded rows */
            for (int64_t e = 0; e < E; e++)
                for (int j = 0; j < 8; j++)
                    dst[e * 16 + j] = i0 + j < br ? Q[(i0 + j) * rsq + e] * scale : 0.0f;
        }
    }
}
/* A rows into MR = 6 row panels (contract in dispatch.h, pack_a6): per 8
 * values of K, the 6 rows' 8-value pieces transposed (two zero rows make
 * it 8 x 8) and written as 8 groups of 6; K tail and edge rows scalar */
void cattn_pack_a6_avx2_f32(float *dst, const float *A, int64_t rsa, int64_t mc, int64_t kc)
{
    const int64_t k8 = kc & ~(int64_t)7;
    for (int64_t i0 = 0; i0 < mc; i0 += 6, dst += 6 * kc) {
        const int64_t mr = cattn_min64(6, mc - i0);
        const float *a = A + i0 * rsa;
        int64_t p = 0;
        if (mr == 6)
            for (; p < k8; p += 8) {
                __m256 r[8];
                for (int i = 0; i < 6; i++) r[i] = _mm256_loadu_ps(a + i * rsa + p);
                r[6] = r[7] = _mm256_setzero_ps();
                transpose8_ps(r);                   /* r[q] = rows 0-5 at p + q, 0, 0 */
                float *d = dst + p * 6;
                for (int q = 0; q < 7; q++) _mm256_storeu_ps(d + 6 * q, r[q]);  /* 2 over: */
                _mm_storeu_ps(d + 42, _mm256_castps256_ps128(r[7]));         /* rewritten */
                _mm_storel_pi((__m64 *)(d + 46), _mm256_extractf128_ps(r[7], 1));
            }
        for (; p < kc; p++)
            for (int i = 0; i < 6; i++) dst[p * 6 + i] = i < mr ? a[i * rsa + p] : 0.0f;
    }
}
#endif
