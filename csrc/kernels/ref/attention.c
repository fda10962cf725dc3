/* kernels/ref/attention.c — the portable instantiation of the attention
 * tiles (kernels/attention_tiles_tmpl.h) for float and double, with the
 * primitives it needs: the shared micro-kernel (gemm.c of this folder),
 * exp-and-sum of score rows, and the decode path's P·V.
 */
#include <math.h>
#include "../../dispatch.h"
#include "kernels.h"
#include "vexp.h"

#define T float
#define SFX f32
#define EXP cattn_exp_f32
#include "attention_prims_tmpl.h"
#define T double
#define SFX f64
#define EXP cattn_exp_f64
#include "attention_prims_tmpl.h"

#define PATH ref
#define T float
#define SFX f32
#define ukr cattn_ukr_ref_f32
#define expsub expsub_ref_f32
#define dot_rows cattn_dotn_ref_f32
#define expsum expsum_ref_f32
#define pv_rows pv_rows_ref_f32
#define expf1 cattn_exp_f32
#include "../attention_tiles_tmpl.h"

#define PATH ref
#define T double
#define SFX f64
#define ukr cattn_ukr_ref_f64
#define expsub expsub_ref_f64
#define dot_rows cattn_dotn_ref_f64
#define expsum expsum_ref_f64
#define pv_rows pv_rows_ref_f64
#define expf1 cattn_exp_f64
#include "../attention_tiles_tmpl.h"
