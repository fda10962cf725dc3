/* kernels/avx2/attention.c — the AVX2/FMA instantiation of the attention
 * tiles (kernels/attention_tiles_tmpl.h), compiled with -mavx2 -mfma and
 * used only when cpu.c selected AVX2.
 *
 * ukr: the micro-kernel of ukr.h, inlined (K rows read in place with
 *   lak = 1, the transposed probabilities with lai = 1: no packing).
 * expsub: x = exp(x - m), l += x, 8 (4) lanes at a time; x - m <= 0 (or
 *   NaN), so the one-scaling cattn_expneg256_* serve (same bits).
 * dot_rows: cattn_dotn_avx2_* from gemm.c (8 keys per pass);
 * pack_qt: cattn_pack_t16_avx2_f32 from gemm.c (8x8 register transposes);
 * expsum / pv_rows: the decode path's exp-sum and register-blocked P·V.
 * dot_rows_h / pv_rows_h: the same over a float16 KV cache (attn_rows_h.h;
 *   attention_h_f16c.c's copy of the task widens with F16C instead).
 */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "kernels.h"
#include "ukr.h"
#include "attn_rows.h"
#define HNAME(f) f##_avx2                  /* the float16-cache helpers, integer widening */
#include "attn_rows_h.h"
#undef HNAME

#define PATH avx2
#define T float
#define SFX f32
#define dot_rows_h dotn_h_avx2
#define pv_rows_h pv_rows_h_avx2
#define ukr ukr_avx2_f32_inl
#define expsub expsub_avx2_f32
#define dot_rows cattn_dotn_avx2_f32
#define expsum expsum_avx2_f32
#define pv_rows pv_rows_avx2_f32
#define expf1 exp1_avx2_f32
#define pack_qt cattn_pack_t16_avx2_f32
#include "../attention_tiles_tmpl.h"

#define PATH avx2
#define T double
#define SFX f64
#define ukr ukr_avx2_f64_inl
#define expsub expsub_avx2_f64
#define dot_rows cattn_dotn_avx2_f64
#define expsum expsum_avx2_f64
#define pv_rows pv_rows_avx2_f64
#define expf1 exp1_avx2_f64
#include "../attention_tiles_tmpl.h"
#endif
