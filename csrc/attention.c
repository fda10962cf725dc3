/* attention.c — fused attention: the portable C instantiation of
 * attention_tmpl.h and the public entry points, which pick the AVX2/FMA
 * build (attention_avx2.c) when cpu.c selected it.
 */
#include <math.h>
#include "kernels.h"
#include "vexp.h"

#define ATTN_REF_UKR(SFX, T, MR_, NR_)                                            \
static inline void ukr_ref_##SFX(int64_t k, const T *a, int64_t lak, int64_t lai,  \
                                 const T *b, int64_t ldb, T *c, int64_t ldc, int acc) \
{                                                                                 \
    T t[MR_][NR_] = {{0}};                                                        \
    for (int64_t p = 0; p < k; p++)                                               \
        for (int i = 0; i < MR_; i++) {                                           \
            const T ai = a[p * lak + i * lai];                                    \
            for (int j = 0; j < NR_; j++) t[i][j] += ai * b[p * ldb + j];         \
        }                                                                         \
    for (int i = 0; i < MR_; i++)                                                 \
        for (int j = 0; j < NR_; j++)                                             \
            c[i * ldc + j] = acc ? c[i * ldc + j] + t[i][j] : t[i][j];            \
}                                                                                 \
static inline void expsub_ref_##SFX(T *x, const T *m, T *l, int64_t n)            \
{                                                                                 \
    for (int64_t i = 0; i < n; i++) { x[i] = cattn_exp_##SFX(x[i] - m[i]); l[i] += x[i]; } \
}

#define ATTN_REF_DECODE(SFX, T)                                                   \
static inline T expsum_ref_##SFX(T *x, T m, int64_t n)                            \
{                                                                                 \
    T sum = 0;                                                                    \
    for (int64_t s = 0; s < n; s++) { x[s] = cattn_exp_##SFX(x[s] - m); sum += x[s]; } \
    return sum;                                                                   \
}                                                                                 \
static inline void pv_rows_ref_##SFX(T *o, const T *p, const T *V, int64_t rsv,   \
                                     int64_t n, int64_t Ev)                       \
{                                                                                 \
    for (int64_t j = 0; j < Ev; j++) o[j] = 0;                                    \
    for (int64_t s = 0; s < n; s++) {                                             \
        if (p[s] == (T)0) continue;                                               \
        for (int64_t j = 0; j < Ev; j++) o[j] += p[s] * V[s * rsv + j];           \
    }                                                                             \
}

ATTN_REF_DECODE(f32, float)
ATTN_REF_DECODE(f64, double)
ATTN_REF_UKR(f32, float, CATTN_MR_F32, CATTN_NR_F32)
ATTN_REF_UKR(f64, double, CATTN_MR_F64, CATTN_NR_F64)

#define PATH ref
#define T float
#define SFX f32
#define MR CATTN_MR_F32
#define NR CATTN_NR_F32
#define BR CATTN_ATTN_BR_F32
#define BC CATTN_ATTN_BC_F32
#define ukr ukr_ref_f32
#define expsub expsub_ref_f32
#define dot_rows cattn_dotn_ref_f32
#define expsum expsum_ref_f32
#define pv_rows pv_rows_ref_f32
#define expf1 cattn_exp_f32
#include "attention_tmpl.h"
#undef T
#undef SFX
#undef MR
#undef NR
#undef BR
#undef BC
#undef ukr
#undef expsub
#undef dot_rows
#undef expsum
#undef pv_rows
#undef expf1

#define T double
#define SFX f64
#define MR CATTN_MR_F64
#define NR CATTN_NR_F64
#define BR CATTN_ATTN_BR_F64
#define BC CATTN_ATTN_BC_F64
#define ukr ukr_ref_f64
#define expsub expsub_ref_f64
#define dot_rows cattn_dotn_ref_f64
#define expsum expsum_ref_f64
#define pv_rows pv_rows_ref_f64
#define expf1 cattn_exp_f64
#include "attention_tmpl.h"

int cattn_attention_f32(cattn_attn_args *args, int n_threads)
{
    cattn_init();
#ifdef CATTN_X86
    if (cattn_kt.gemm_f32 == cattn_ukr_avx2_f32) return cattn_attention_avx2_f32(args, n_threads);
#endif
    return cattn_attention_ref_f32(args, n_threads);
}

int cattn_attention_f64(cattn_attn_args *args, int n_threads)
{
    cattn_init();
#ifdef CATTN_X86
    if (cattn_kt.gemm_f64 == cattn_ukr_avx2_f64) return cattn_attention_avx2_f64(args, n_threads);
#endif
    return cattn_attention_ref_f64(args, n_threads);
}
