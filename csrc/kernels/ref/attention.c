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

/* the float16-cache decode's primitives (attention_decode_tmpl.h): K and V
 * widened exactly, then cattn_dotn_ref_f32's and pv_rows_ref_f32's steps */
static void dotn_ref_h(float *out, const float *q, const uint16_t *K, int64_t rsk, int64_t n,
                       int64_t E)
{
    for (int64_t s = 0; s < n; s++) {
        float acc = 0;
        for (int64_t e = 0; e < E; e++) acc += q[e] * cattn_h2f(K[s * rsk + e]);
        out[s] = acc;
    }
}

static void pv_rows_ref_h(float *o, const float *p, const uint16_t *V, int64_t rsv, int64_t n,
                          int64_t Ev)
{
    for (int64_t j = 0; j < Ev; j++) o[j] = 0;
    for (int64_t s = 0; s < n; s++) {
        if (p[s] == 0.0f) continue;
        for (int64_t j = 0; j < Ev; j++) o[j] += p[s] * cattn_h2f(V[s * rsv + j]);
    }
}

#define PATH ref
#define T float
#define SFX f32
#define dot_rows_h dotn_ref_h
#define pv_rows_h pv_rows_ref_h
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
