/* gemm.c — packed, cache-blocked, OpenMP-parallel GEMM for float32 and
 * float64: the driver (gemm_tmpl.h, instantiated here), calling the
 * micro-kernel, activation and packing of the dispatch table.
 * Not here: any ISA-specific code (kernels/<isa>/gemm.c).
 */
#include "dispatch.h"
#include "threads.h"
#include <string.h>

typedef cattn_ukr_f32_t cattn_ukr_t_f32;
typedef cattn_ukr_f64_t cattn_ukr_t_f64;
typedef cattn_ukr2_f32_t cattn_ukr2_t_f32;
typedef cattn_ukr2_f64_t cattn_ukr2_t_f64;

#define T float
#define SFX f32
#define MR CATTN_MR_F32
#define NR CATTN_NR_F32
#define KC cattn_kt.gemm_f32.kc
#define MC cattn_kt.gemm_f32.mc
#define NC cattn_kt.gemm_f32.nc
#define UKR cattn_kt.ukr_f32
#define UKR2 cattn_kt.ukr2_f32
#define UKR_STREAM (cattn_kt.ukr_stream_f32 ? cattn_kt.ukr_stream_f32 : cattn_kt.ukr_f32)
#define PACK_BT cattn_kt.pack_t16_f32
#define PACK_A6 cattn_kt.pack_a6_f32
#define BF16_EXPAND cattn_kt.bf16_expand_f32
#define ROWS_TN cattn_kt.rows_tn_f32
#define FEW_ROWS cattn_kt.few_rows_f32
#define FEW_BF16 cattn_kt.few_rows_bf16
#define ACT cattn_kt.act_f32
#include "gemm_tmpl.h"

/* bfloat16 weights: the float32 driver on P16's expanded panels */
int cattn_linear_packed_bf16(float *C, int64_t rsc, int64_t csc, const float *A, int64_t rsa,
                             int64_t csa, const uint16_t *P16, int64_t M, int64_t N, int64_t K,
                             const float *bias, int act, int n_threads)
{
    cattn_init();
    gemm_args_f32 g = {C, rsc, csc, A, rsa, csa, NULL, 0, 0, M, N, K, bias, act,
                       NULL, P16, cattn_round_up(N, CATTN_NR_F32)};
    return linear_packed_run_f32(&g, n_threads);
}

#define T double
#define SFX f64
#define MR CATTN_MR_F64
#define NR CATTN_NR_F64
#define KC cattn_kt.gemm_f64.kc
#define MC cattn_kt.gemm_f64.mc
#define NC cattn_kt.gemm_f64.nc
#define UKR cattn_kt.ukr_f64
#define UKR2 cattn_kt.ukr2_f64
#define UKR_STREAM cattn_kt.ukr_f64
#define ACT cattn_kt.act_f64
#define ROWS_TN ((void (*)(double *, int64_t, const double *, int64_t, const double *, \
                          int64_t, int64_t, int64_t, int64_t))0)
#define FEW_ROWS ((void (*)(int64_t, const double *, int64_t, int, const double *, int64_t, \
                           int64_t, double *, int64_t, int))0)
#define FEW_BF16 ((void (*)(int64_t, const double *, int64_t, int, const uint16_t *, int64_t, \
                           int64_t, double *, int64_t, int))0)
#include "gemm_tmpl.h"
