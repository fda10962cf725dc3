/* gemm.c — packed, cache-blocked, OpenMP-parallel GEMM for float32 and
 * float64: the driver (gemm_tmpl.h, instantiated here), calling the
 * micro-kernel, activation and packing of the dispatch table.
 * Not here: any ISA-specific code (kernels/<isa>/gemm.c).
 */
#include "dispatch.h"
#include "threads.h"

typedef cattn_ukr_f32_t cattn_ukr_t_f32;
typedef cattn_ukr_f64_t cattn_ukr_t_f64;

#define T float
#define SFX f32
#define MR CATTN_MR_F32
#define NR CATTN_NR_F32
#define KC CATTN_KC_F32
#define MC CATTN_MC_F32
#define NC CATTN_NC_F32
#define UKR cattn_kt.ukr_f32
#define PACK_BT cattn_kt.pack_t16_f32
#define ROWS_TN cattn_kt.rows_tn_f32
#define ACT cattn_kt.act_f32
#include "gemm_tmpl.h"

#define T double
#define SFX f64
#define MR CATTN_MR_F64
#define NR CATTN_NR_F64
#define KC CATTN_KC_F64
#define MC CATTN_MC_F64
#define NC CATTN_NC_F64
#define UKR cattn_kt.ukr_f64
#define ACT cattn_kt.act_f64
#define ROWS_TN ((void (*)(double *, int64_t, const double *, int64_t, const double *, int64_t, int64_t, int64_t))0)
#include "gemm_tmpl.h"
