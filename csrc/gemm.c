/* gemm.c — packed, cache-blocked, OpenMP-parallel GEMM for float32 and
 * float64 (the driver; micro-kernels live in gemm_avx2.c and gemm_ref.c).
 * The algorithm is written once in gemm_tmpl.h and instantiated here.
 * Not here: GEMV-shaped special cases beyond what the blocked driver does.
 */
#include "kernels.h"

typedef cattn_ukr_f32_t cattn_ukr_t_f32;
typedef cattn_ukr_f64_t cattn_ukr_t_f64;

#define T float
#define SFX f32
#define MR CATTN_MR_F32
#define NR CATTN_NR_F32
#define KC CATTN_KC_F32
#define MC CATTN_MC_F32
#define NC CATTN_NC_F32
#define UKR cattn_kt.gemm_f32
#define GEMV_TN cattn_kt.gemv_tn_f32
#define PACK_BT cattn_kt.pack_t16_f32
#include "gemm_tmpl.h"
#undef T
#undef SFX
#undef MR
#undef NR
#undef KC
#undef MC
#undef NC
#undef UKR
#undef GEMV_TN

#define T double
#define SFX f64
#define MR CATTN_MR_F64
#define NR CATTN_NR_F64
#define KC CATTN_KC_F64
#define MC CATTN_MC_F64
#define NC CATTN_NC_F64
#define UKR cattn_kt.gemm_f64
#define GEMV_TN cattn_kt.gemv_tn_f64
#include "gemm_tmpl.h"
