/* kernels/avx2/gemm.c — AVX2/FMA kernels of the GEMM family: the exported
 * micro-kernel (ukr.h, with a prefetch of the C rows), multi-row dots, the small-M GEMM and the
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

void cattn_ukr_avx2_f64(int64_t k, const double *a, int64_t lak, int64_t lai,
                        const double *b, int64_t ldb, double *c, int64_t ldc, int acc)
{
    for (int r = 0; r < 6; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
    ukr_avx2_f64_inl(k, a, lak, lai, b, ldb, c, ldc, acc);
}

/* Multi-row dot products (GEMV with a transposed matrix; attention decode):
 *   out[s] = q[0:E] · K[s*rsk : s*rsk+E]   for s < n
 * q: (E,) contiguous; K: (n, E) rows contiguous, row stride rsk. */
/* out[s] = q · K[s]: 4 keys per pass; E tail handled by scalar adds */
void cattn_dotn_avx2_f32(float *out, const float *q, const float *K, int64_t rsk,
                         int64_t n, int64_t E)
{
    const int64_t E8 = E & ~(int64_t)7;
    int64_t s = 0;
    for (; s + 8 <= n; s += 8) {                        /* 8 keys: 8 FMA chains */
        const float *k0 = K + s * rsk;
        __m256 a[8];
        for (int r = 0; r < 8; r++) a[r] = _mm256_setzero_ps();
        for (int64_t e = 0; e < E8; e += 8) {
            const __m256 qv = _mm256_loadu_ps(q + e);
            for (int r = 0; r < 8; r++)
                a[r] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + r * rsk + e), a[r]);
        }
        __m256 sums = hsum8_ps(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
        if (E8 < E) {                                                    /* tail */
            float t[8];
            _mm256_storeu_ps(t, sums);
            for (int r = 0; r < 8; r++)
                for (int64_t e = E8; e < E; e++) t[r] += q[e] * k0[r * rsk + e];
            sums = _mm256_loadu_ps(t);
        }
        _mm256_storeu_ps(out + s, sums);
    }
    for (; s < n; s++) {
        const float *k0 = K + s * rsk;
        __m256 a0 = _mm256_setzero_ps();
        for (int64_t e = 0; e < E8; e += 8)
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + e), _mm256_loadu_ps(k0 + e), a0);
        float r0 = hsum_ps(a0);
        for (int64_t e = E8; e < E; e++) r0 += q[e] * k0[e];
        out[s] = r0;
    }
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


/* Small-M GEMM against a weight in (N, K) layout, no packing:
 *   C[m*ldc + j] = A[m*lda : +K] · W[j*ldw : +K]   for m < M, j < n
 * 2 rows of A x 6 rows of W per pass (12 ymm accumulators: per 8-wide k
 * step 2 + 6 loads and 12 FMAs, the micro-kernel's ratio); each 6-row W
 * group is reused from L1 across all A rows. Every C element is reduced in
 * the same lane order (hsum8), whatever M, so row grouping changes no bits. */
void cattn_gemv_tn_avx2_f32(float *C, int64_t ldc, const float *A, int64_t lda, int64_t M,
                            const float *W, int64_t ldw, int64_t n, int64_t K)
{
    const int64_t K8 = K & ~(int64_t)7;
    const __m256 z = _mm256_setzero_ps();
    for (int64_t j0 = 0; j0 < n; j0 += 6) {
        const int64_t nj = cattn_min64(6, n - j0);
        const float *w0 = W + j0 * ldw;
        const float *w1 = W + (j0 + (nj > 1)) * ldw, *w2 = W + (j0 + 2 * (nj > 2)) * ldw,
                    *w3 = W + (j0 + 3 * (nj > 3)) * ldw, *w4 = W + (j0 + 4 * (nj > 4)) * ldw,
                    *w5 = W + (j0 + 5 * (nj > 5)) * ldw;
        for (int64_t m0 = 0; m0 < M; m0 += 2) {
            const int two = m0 + 1 < M;
            const float *a0 = A + m0 * lda, *a1 = A + (m0 + two) * lda;
            __m256 p0 = z, p1 = z, p2 = z, p3 = z, p4 = z, p5 = z;
            __m256 q0 = z, q1 = z, q2 = z, q3 = z, q4 = z, q5 = z;
            for (int64_t e = 0; e < K8; e += 8) {
                const __m256 x0 = _mm256_loadu_ps(a0 + e), x1 = _mm256_loadu_ps(a1 + e);
                __m256 wv;
                wv = _mm256_loadu_ps(w0 + e); p0 = _mm256_fmadd_ps(x0, wv, p0); q0 = _mm256_fmadd_ps(x1, wv, q0);
                wv = _mm256_loadu_ps(w1 + e); p1 = _mm256_fmadd_ps(x0, wv, p1); q1 = _mm256_fmadd_ps(x1, wv, q1);
                wv = _mm256_loadu_ps(w2 + e); p2 = _mm256_fmadd_ps(x0, wv, p2); q2 = _mm256_fmadd_ps(x1, wv, q2);
                wv = _mm256_loadu_ps(w3 + e); p3 = _mm256_fmadd_ps(x0, wv, p3); q3 = _mm256_fmadd_ps(x1, wv, q3);
                wv = _mm256_loadu_ps(w4 + e); p4 = _mm256_fmadd_ps(x0, wv, p4); q4 = _mm256_fmadd_ps(x1, wv, q4);
                wv = _mm256_loadu_ps(w5 + e); p5 = _mm256_fmadd_ps(x0, wv, p5); q5 = _mm256_fmadd_ps(x1, wv, q5);
            }
            float s0[8], s1[8];
            _mm256_storeu_ps(s0, hsum8_ps(p0, p1, p2, p3, p4, p5, z, z));
            _mm256_storeu_ps(s1, hsum8_ps(q0, q1, q2, q3, q4, q5, z, z));
            const float *wr[6] = {w0, w1, w2, w3, w4, w5};
            for (int r = 0; r < nj; r++) {                                    /* tail */
                for (int64_t e = K8; e < K; e++) { s0[r] += a0[e] * wr[r][e]; s1[r] += a1[e] * wr[r][e]; }
                C[m0 * ldc + j0 + r] = s0[r];
                if (two) C[(m0 + 1) * ldc + j0 + r] = s1[r];
            }
        }
    }
}

void cattn_gemv_tn_avx2_f64(double *C, int64_t ldc, const double *A, int64_t lda, int64_t M,
                            const double *W, int64_t ldw, int64_t n, int64_t K)
{
    const int64_t K4 = K & ~(int64_t)3;
    for (int64_t j0 = 0; j0 < n; j0 += 6) {
        const int64_t nj = cattn_min64(6, n - j0);
        const double *wr[6];
        for (int r = 0; r < 6; r++) wr[r] = W + (j0 + (r < nj ? r : 0)) * ldw;
        for (int64_t m0 = 0; m0 < M; m0 += 2) {
            const int two = m0 + 1 < M;
            const double *a0 = A + m0 * lda, *a1 = A + (m0 + two) * lda;
            __m256d p[6], q[6];
            for (int r = 0; r < 6; r++) p[r] = q[r] = _mm256_setzero_pd();
            for (int64_t e = 0; e < K4; e += 4) {
                const __m256d x0 = _mm256_loadu_pd(a0 + e), x1 = _mm256_loadu_pd(a1 + e);
                for (int r = 0; r < 6; r++) {
                    const __m256d wv = _mm256_loadu_pd(wr[r] + e);
                    p[r] = _mm256_fmadd_pd(x0, wv, p[r]);
                    q[r] = _mm256_fmadd_pd(x1, wv, q[r]);
                }
            }
            for (int r = 0; r < nj; r++) {
                double s0 = hsum_pd(p[r]), s1 = hsum_pd(q[r]);
                for (int64_t e = K4; e < K; e++) { s0 += a0[e] * wr[r][e]; s1 += a1[e] * wr[r][e]; }
                C[m0 * ldc + j0 + r] = s0;
                if (two) C[(m0 + 1) * ldc + j0 + r] = s1;
            }
        }
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
#endif
