/* kernels/avx2/attention_h_f16c.c — the float16-cache decode task
 * (attention_decode_tmpl.h) again, its K and V widened by F16C's vcvtph2ps
 * instead of integer shifts and adds: the same bits. The AVX2 and AVX-512
 * tables take it where the CPU has F16C (cpu.c; CATTN_NO_F16C=1 keeps the
 * other). Not here: the float32 tiles (attention.c).
 */
#include <math.h>
#include "../../dispatch.h"

#ifdef CATTN_X86
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("f16c"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC target("f16c")
#endif
#include "kernels.h"
#include "attn_rows.h"
#define CATTN_ATTN_F16C 1
#define HNAME(f) f##_avx2_f16c
#include "attn_rows_h.h"

#define T float
#define SFX f32
#define expsum expsum_avx2_f32
#define expf1 exp1_avx2_f32
#define DKT uint16_t
#define DNAME attn_decode_task_h_f16c
#define DDOT dotn_h_avx2_f16c
#define DPV pv_rows_h_avx2_f16c
#include "../attention_decode_tmpl.h"

void cattn_attn_avx2_f16c(cattn_dispatch_t *kt)
{
    if (kt->attn_f32.decode_task_h) kt->attn_f32.decode_task_h = FN(attn_decode_task_h_f16c);
}
#if defined(__clang__)
#pragma clang attribute pop
#endif
#endif
