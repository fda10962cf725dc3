/* gemm_ref.c — portable C micro-kernels (any CPU; also the forced fallback).
 *
 * c[MR,NR] = alpha * sum_p a[p,:]^T b[p,:] + beta * c
 *   a: (k, MR) packed, b: (k, NR) packed, c: (MR, NR) row stride ldc.
 * Same packing format and tile as the AVX2 kernels; accumulation in
 * increasing p, so the two paths differ only by FMA rounding.
 */
#include "kernels.h"

#define REF_UKR(SFX, T, MR, NR)                                                  \
void cattn_ukr_ref_##SFX(int64_t k, const T *CATTN_RESTRICT a,                   \
                         const T *CATTN_RESTRICT b, T *CATTN_RESTRICT c,         \
                         int64_t ldc, T alpha, T beta)                           \
{                                                                                \
    T acc[MR][NR] = {{0}};                                                       \
    for (int64_t p = 0; p < k; p++, a += MR, b += NR)                            \
        for (int i = 0; i < MR; i++) {                                           \
            const T ai = a[i];                                                   \
            for (int j = 0; j < NR; j++) acc[i][j] += ai * b[j];                 \
        }                                                                        \
    for (int i = 0; i < MR; i++)                                                 \
        for (int j = 0; j < NR; j++)                                             \
            c[i * ldc + j] = beta == (T)0 ? alpha * acc[i][j]                    \
                                          : alpha * acc[i][j] + beta * c[i * ldc + j]; \
}

REF_UKR(f32, float, CATTN_MR_F32, CATTN_NR_F32)
REF_UKR(f64, double, CATTN_MR_F64, CATTN_NR_F64)

/* out[s] = q · K[s*rsk : +E] for s < n (portable multi-row dot) */
#define REF_DOTN(SFX, T)                                                         \
void cattn_dotn_ref_##SFX(T *out, const T *q, const T *K, int64_t rsk,           \
                          int64_t n, int64_t E)                                  \
{                                                                                \
    for (int64_t s = 0; s < n; s++) {                                            \
        T acc = 0;                                                               \
        for (int64_t e = 0; e < E; e++) acc += q[e] * K[s * rsk + e];            \
        out[s] = acc;                                                            \
    }                                                                            \
}

REF_DOTN(f32, float)
REF_DOTN(f64, double)

/* C[m*ldc + j] = A[m*lda : +K] · W[j*ldw : +K] (portable small-M GEMM) */
#define REF_GEMV_TN(SFX, T)                                                      \
void cattn_gemv_tn_ref_##SFX(T *C, int64_t ldc, const T *A, int64_t lda, int64_t M, \
                             const T *W, int64_t ldw, int64_t n, int64_t K)      \
{                                                                                \
    for (int64_t m = 0; m < M; m++)                                              \
        cattn_dotn_ref_##SFX(C + m * ldc, A + m * lda, W, ldw, n, K);            \
}

REF_GEMV_TN(f32, float)
REF_GEMV_TN(f64, double)
