/* kernels.h — internal interface between cattn's C files (not the public API).
 *
 * The dispatch table holds the micro-kernels chosen once at run time
 * (AVX2/FMA or portable C); packing and the epilogue are shared so the
 * fused attention can drive the same micro-kernels on its own tiles.
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

typedef struct {
    const char *name;
    cattn_ukr_f32_t gemm_f32;
    cattn_ukr_f64_t gemm_f64;
    cattn_dotn_f32_t dotn_f32;
    cattn_dotn_f64_t dotn_f64;
} cattn_dispatch_t;

extern cattn_dispatch_t cattn_kt;

/* micro-kernels */
void cattn_ukr_ref_f32(int64_t k, const float *a, const float *b, float *c,
                       int64_t ldc, float alpha, float beta);
void cattn_ukr_ref_f64(int64_t k, const double *a, const double *b, double *c,
                       int64_t ldc, double alpha, double beta);
void cattn_dotn_ref_f32(float *out, const float *q, const float *K, int64_t rsk, int64_t n, int64_t E);
void cattn_dotn_ref_f64(double *out, const double *q, const double *K, int64_t rsk, int64_t n, int64_t E);
#if defined(__x86_64__) || defined(_M_X64)
#define CATTN_X86 1
void cattn_ukr_avx2_f32(int64_t k, const float *a, const float *b, float *c,
                        int64_t ldc, float alpha, float beta);
void cattn_ukr_avx2_f64(int64_t k, const double *a, const double *b, double *c,
                        int64_t ldc, double alpha, double beta);
void cattn_dotn_avx2_f32(float *out, const float *q, const float *K, int64_t rsk, int64_t n, int64_t E);
void cattn_dotn_avx2_f64(double *out, const double *q, const double *K, int64_t rsk, int64_t n, int64_t E);
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

/* activations in place over a contiguous row (act.c) */
void cattn_act_row_f32(float *x, int64_t n, int act);
void cattn_act_row_f64(double *x, int64_t n, int act);

/* scratch */
void *cattn_aligned_alloc(size_t bytes);
void cattn_aligned_free(void *p);

static inline int64_t cattn_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t cattn_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t cattn_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t cattn_round_up(int64_t a, int64_t b) { return cattn_cdiv(a, b) * b; }

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
