/* kernels/ref/gemm.c — the portable micro-kernel and multi-row dots
 * for float and double (any CPU; the forced fallback). */
#include "../../dispatch.h"
#include "kernels.h"

#define T float
#define SFX f32
#define MR CATTN_MR_F32
#define NR CATTN_NR_F32
#include "gemm_tmpl.h"

#define T double
#define SFX f64
#define MR CATTN_MR_F64
#define NR CATTN_NR_F64
#include "gemm_tmpl.h"
