/* kernels.h — internal interface between cattn's C files (not the public API).
 *
 * The dispatch table holds the kernels chosen once at run time (AVX2/FMA
 * or portable C): GEMM micro-kernels, the small-M GEMM, multi-row dots,
 * the transposing pack, and the row kernels (softmax, norms, activations).
 * The fused attention has its own strided micro-kernels (attention_*.c)
 * and shares the dots and the transposing pack from here.
 */
#ifndef CATTN_KERNELS_H
#define CATTN_KERNELS_H

#include "cattn.h"
#include "config.h"

/* Micro-kernel: c[MR,NR] = alpha * a · b + beta * c, c row-major with row
 * stride ldc (column stride 1); beta == 0 never reads c.
 *   a: packed A micro-panel, k steps of MR values (column p at a + p*MR)
 *   b: packed B micro-panel, k steps of NR values (row p at b + p*NR),
 *      aligned to CATTN_ALIGN */
typedef void (*cattn_ukr_f32_t)(int64_t k, const float *a, const float *b,
                                float *c, int64_t ldc, float alpha, float beta);
typedef void (*cattn_ukr_f64_t)(int64_t k, const double *a, const double *b,
                                double *c, int64_t ldc, double alpha, double beta);

/* multi-row dot: out[s] = q · K[s*rsk : +E] for s < n */
typedef void (*cattn_dotn_f32_t)(float *out, const float *q, const float *K, int64_t rsk,
                                 int64_t n, int64_t E);
typedef void (*cattn_dotn_f64_t)(double *out, const double *q, const double *K, int64_t rsk,
                                 int64_t n, int64_t E);
/* Row kernels (softmax.c, norm.c, act.c; AVX2 versions in rows_avx2.c and
 * act_avx2.c). Each handles one contiguous row (or one block of columns)
 * on the calling thread; y may equal x exactly, nothing else may overlap.
 *   softmax_row: y[n] = softmax(x[n]) (logsm = 0) or log_softmax (logsm = 1)
 *   softmax_cols: the same along n rows for w <= CATTN_SMX_COLS_* adjacent
 *     columns: element (i, j) at x[i*xs + j] / y[i*ys + j]
 *   layer_norm_row / rms_norm_row: y[n] from x[n], weight / bias (n,) or NULL
 *   act: y[n] = act(x[n]) for a CATTN_ACT_* code; exp: y[n] = exp(x[n]),
 *     nonpos = 1: the x <= 0 variant (cattn_expneg256_*; test hook) */
#define CATTN_SMX_COLS_F32 32
#define CATTN_SMX_COLS_F64 16
typedef void (*cattn_smx_row_f32_t)(float *y, const float *x, int64_t n, int logsm);
typedef void (*cattn_smx_row_f64_t)(double *y, const double *x, int64_t n, int logsm);
typedef void (*cattn_smx_cols_f32_t)(float *y, int64_t ys, const float *x, int64_t xs,
                                     int64_t n, int64_t w, int logsm);
typedef void (*cattn_smx_cols_f64_t)(double *y, int64_t ys, const double *x, int64_t xs,
                                     int64_t n, int64_t w, int logsm);
typedef void (*cattn_ln_row_f32_t)(float *y, const float *x, const float *w,
                                   const float *b, int64_t n, double eps);
typedef void (*cattn_ln_row_f64_t)(double *y, const double *x, const double *w,
                                   const double *b, int64_t n, double eps);
typedef void (*cattn_rms_row_f32_t)(float *y, const float *x, const float *w,
                                    int64_t n, double eps);
typedef void (*cattn_rms_row_f64_t)(double *y, const double *x, const double *w,
                                    int64_t n, double eps);
typedef void (*cattn_act_f32_t)(float *y, const float *x, int64_t n, int act);
typedef void (*cattn_act_f64_t)(double *y, const double *x, int64_t n, int act);
typedef void (*cattn_vexp_f32_t)(float *y, const float *x, int64_t n, int nonpos);
typedef void (*cattn_vexp_f64_t)(double *y, const double *x, int64_t n, int nonpos);

/* small-M GEMM with W in (N, K) layout: C[m*ldc + j] = A[m*lda:+K] · W[j*ldw:+K] */
typedef void (*cattn_gemv_tn_f32_t)(float *C, int64_t ldc, const float *A, int64_t lda,
                                    int64_t M, const float *W, int64_t ldw, int64_t n, int64_t K);
typedef void (*cattn_gemv_tn_f64_t)(double *C, int64_t ldc, const double *A, int64_t lda,
                                    int64_t M, const double *W, int64_t ldw, int64_t n, int64_t K);

/* transposing pack into 16-wide panels, see gemm_avx2.c (float32 only) */
typedef void (*cattn_pack_t16_f32_t)(float *dst, const float *src, int64_t ld, int64_t rows,
                                     int64_t rows_pad, int64_t k, float scale);

typedef struct {
    const char *name;
    cattn_ukr_f32_t gemm_f32;
    cattn_ukr_f64_t gemm_f64;
    cattn_dotn_f32_t dotn_f32;
    cattn_dotn_f64_t dotn_f64;
    cattn_gemv_tn_f32_t gemv_tn_f32;
    cattn_gemv_tn_f64_t gemv_tn_f64;
    cattn_pack_t16_f32_t pack_t16_f32;     /* NULL: use the scalar packing */
    /* ---- rows: softmax, norms, activations, exp ---- */
    cattn_smx_row_f32_t softmax_row_f32;
    cattn_smx_row_f64_t softmax_row_f64;
    cattn_smx_cols_f32_t softmax_cols_f32;
    cattn_smx_cols_f64_t softmax_cols_f64;
    cattn_ln_row_f32_t layer_norm_row_f32;
    cattn_ln_row_f64_t layer_norm_row_f64;
    cattn_rms_row_f32_t rms_norm_row_f32;
    cattn_rms_row_f64_t rms_norm_row_f64;
    cattn_act_f32_t act_f32;
    cattn_act_f64_t act_f64;
    cattn_vexp_f32_t exp_f32;
    cattn_vexp_f64_t exp_f64;
} cattn_dispatch_t;

extern cattn_dispatch_t cattn_kt;

/* micro-kernels */
void cattn_ukr_ref_f32(int64_t k, const float *a, const float *b, float *c,
                       int64_t ldc, float alpha, float beta);
void cattn_ukr_ref_f64(int64_t k, const double *a, const double *b, double *c,
                       int64_t ldc, double alpha, double beta);
void cattn_dotn_ref_f32(float *out, const float *q, const float *K, int64_t rsk, int64_t n, int64_t E);
void cattn_dotn_ref_f64(double *out, const double *q, const double *K, int64_t rsk, int64_t n, int64_t E);
void cattn_gemv_tn_ref_f32(float *C, int64_t ldc, const float *A, int64_t lda, int64_t M,
                           const float *W, int64_t ldw, int64_t n, int64_t K);
void cattn_gemv_tn_ref_f64(double *C, int64_t ldc, const double *A, int64_t lda, int64_t M,
                           const double *W, int64_t ldw, int64_t n, int64_t K);
#if defined(__x86_64__) || defined(_M_X64)
#define CATTN_X86 1
void cattn_ukr_avx2_f32(int64_t k, const float *a, const float *b, float *c,
                        int64_t ldc, float alpha, float beta);
void cattn_ukr_avx2_f64(int64_t k, const double *a, const double *b, double *c,
                        int64_t ldc, double alpha, double beta);
void cattn_dotn_avx2_f32(float *out, const float *q, const float *K, int64_t rsk, int64_t n, int64_t E);
void cattn_dotn_avx2_f64(double *out, const double *q, const double *K, int64_t rsk, int64_t n, int64_t E);
void cattn_pack_t16_avx2_f32(float *dst, const float *src, int64_t ld, int64_t rows,
                             int64_t rows_pad, int64_t k, float scale);
void cattn_gemv_tn_avx2_f32(float *C, int64_t ldc, const float *A, int64_t lda, int64_t M,
                            const float *W, int64_t ldw, int64_t n, int64_t K);
void cattn_gemv_tn_avx2_f64(double *C, int64_t ldc, const double *A, int64_t lda, int64_t M,
                            const double *W, int64_t ldw, int64_t n, int64_t K);
int cattn_attention_avx2_f32(cattn_attn_args *args, int n_threads);
int cattn_attention_avx2_f64(cattn_attn_args *args, int n_threads);
#endif

/* packing (gemm.c): A block (mc, kc) into MR-row micro-panels, B block
 * (kc, nc) into NR-column micro-panels; edges zero-padded. */
void cattn_pack_a_f32(float *dst, const float *A, int64_t rsa, int64_t csa,
                      int64_t mc, int64_t kc);
void cattn_pack_b_f32(float *dst, const float *B, int64_t rsb, int64_t csb,
                      int64_t kc, int64_t nc);
void cattn_pack_a_f64(double *dst, const double *A, int64_t rsa, int64_t csa,
                      int64_t mc, int64_t kc);
void cattn_pack_b_f64(double *dst, const double *B, int64_t rsb, int64_t csb,
                      int64_t kc, int64_t nc);

/* activations in place over a contiguous row (act.c): the GEMM epilogue;
 * goes through the dispatch table (cattn_kt.act_*) */
void cattn_act_row_f32(float *x, int64_t n, int act);
void cattn_act_row_f64(double *x, int64_t n, int act);

/* row kernels: portable (softmax.c, norm.c, act.c) */
void cattn_softmax_row_ref_f32(float *y, const float *x, int64_t n, int logsm);
void cattn_softmax_row_ref_f64(double *y, const double *x, int64_t n, int logsm);
void cattn_softmax_cols_ref_f32(float *y, int64_t ys, const float *x, int64_t xs,
                                int64_t n, int64_t w, int logsm);
void cattn_softmax_cols_ref_f64(double *y, int64_t ys, const double *x, int64_t xs,
                                int64_t n, int64_t w, int logsm);
void cattn_layer_norm_row_ref_f32(float *y, const float *x, const float *w,
                                  const float *b, int64_t n, double eps);
void cattn_layer_norm_row_ref_f64(double *y, const double *x, const double *w,
                                  const double *b, int64_t n, double eps);
void cattn_rms_norm_row_ref_f32(float *y, const float *x, const float *w, int64_t n, double eps);
void cattn_rms_norm_row_ref_f64(double *y, const double *x, const double *w, int64_t n, double eps);
void cattn_act_ref_f32(float *y, const float *x, int64_t n, int act);
void cattn_act_ref_f64(double *y, const double *x, int64_t n, int act);
void cattn_exp_ref_f32(float *y, const float *x, int64_t n, int nonpos);
void cattn_exp_ref_f64(double *y, const double *x, int64_t n, int nonpos);
#ifdef CATTN_X86
/* row kernels: AVX2/FMA (rows_avx2.c, act_avx2.c) */
void cattn_softmax_row_avx2_f32(float *y, const float *x, int64_t n, int logsm);
void cattn_softmax_row_avx2_f64(double *y, const double *x, int64_t n, int logsm);
void cattn_softmax_cols_avx2_f32(float *y, int64_t ys, const float *x, int64_t xs,
                                 int64_t n, int64_t w, int logsm);
void cattn_softmax_cols_avx2_f64(double *y, int64_t ys, const double *x, int64_t xs,
                                 int64_t n, int64_t w, int logsm);
void cattn_layer_norm_row_avx2_f32(float *y, const float *x, const float *w,
                                   const float *b, int64_t n, double eps);
void cattn_layer_norm_row_avx2_f64(double *y, const double *x, const double *w,
                                   const double *b, int64_t n, double eps);
void cattn_rms_norm_row_avx2_f32(float *y, const float *x, const float *w, int64_t n, double eps);
void cattn_rms_norm_row_avx2_f64(double *y, const double *x, const double *w, int64_t n, double eps);
void cattn_act_avx2_f32(float *y, const float *x, int64_t n, int act);
void cattn_act_avx2_f64(double *y, const double *x, int64_t n, int act);
void cattn_exp_avx2_f32(float *y, const float *x, int64_t n, int nonpos);
void cattn_exp_avx2_f64(double *y, const double *x, int64_t n, int nonpos);
#endif

/* Threads for an elementwise / row-wise pass over `elems` elements: 1 below
 * CATTN_ROWS_MIN_PER_THREAD elements per thread (fork/join would dominate).
 * The result never depends on it: rows and chunks are computed alone. */
#define CATTN_ROWS_MIN_PER_THREAD 32768
/* Rows are handed out dynamically, ~CATTN_ROWS_CHUNK elements at a time, so
 * a thread that loses its core (shared machines) does not hold the others
 * up; which thread computes a row never changes its result. */
#define CATTN_ROWS_CHUNK 16384
static inline int64_t cattn_rows_chunk(int64_t n)
{
    return n >= CATTN_ROWS_CHUNK ? 1 : CATTN_ROWS_CHUNK / (n > 0 ? n : 1);
}
static inline int cattn_rows_threads(int64_t elems, int n_threads)
{
#ifdef _OPENMP
    int64_t nt = elems / CATTN_ROWS_MIN_PER_THREAD;
    if (nt > n_threads) nt = n_threads;
    return nt < 1 ? 1 : (int)nt;
#else
    (void)elems; (void)n_threads;
    return 1;
#endif
}

/* scratch */
void *cattn_aligned_alloc(size_t bytes);
void cattn_aligned_free(void *p);

static inline int64_t cattn_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t cattn_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t cattn_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t cattn_round_up(int64_t a, int64_t b) { return cattn_cdiv(a, b) * b; }

/* an OpenMP directive inside a macro body; nothing without OpenMP */
#ifdef _OPENMP
#define CATTN_OMP(...) _Pragma(#__VA_ARGS__)
#else
#define CATTN_OMP(...)
#endif

#ifdef _OPENMP
#include <omp.h>
#define CATTN_TID() omp_get_thread_num()
#define CATTN_NT() omp_get_num_threads()
#define CATTN_BARRIER() _Pragma("omp barrier") do {} while (0)
#else
#define CATTN_TID() 0
#define CATTN_NT() 1
#define CATTN_BARRIER() ((void)0)
#endif

#endif
