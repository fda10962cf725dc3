/* kernels/avx512/attention.c — the AVX-512 instantiation of the attention
 * tiles (kernels/attention_tiles_tmpl.h), compiled with the avx512
 * folder's flags and used only when cpu.c selected AVX-512.
 *
 * ukr: ukr.h's 6 x NR kernel in zmm registers, inlined (the AVX2 tile's
 *   chains: the same bits);
 * expsub: x = exp(x - m), l += x, 16 (8) lanes at a time with vexp.h's
 *   cattn_expneg512_* (the AVX2 lanes' bits);
 * dot_rows, pack_qt, expsum, pv_rows, expf1: the AVX2 path's (the decode
 *   path and the Q pack are memory-bound; same bits as that path).
 * So every attention result equals the AVX2 path's, bit for bit.
 */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "kernels.h"
#include "ukr.h"
#include "vexp.h"
#include "../avx2/kernels.h"
#include "../avx2/attn_rows.h"

static inline void expsub_avx512_f32(float *x, const float *m, float *l, int64_t n)
{
    for (int64_t i = 0; i < n; i += 16) {                       /* n % 16 == 0 */
        const __m512 e = cattn_expneg512_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(m + i)));
        _mm512_storeu_ps(x + i, e);
        _mm512_storeu_ps(l + i, _mm512_add_ps(_mm512_loadu_ps(l + i), e));
    }
}

static inline void expsub_avx512_f64(double *x, const double *m, double *l, int64_t n)
{
    for (int64_t i = 0; i < n; i += 8) {                         /* n % 8 == 0 */
        const __m512d e = cattn_expneg512_pd(_mm512_sub_pd(_mm512_loadu_pd(x + i), _mm512_loadu_pd(m + i)));
        _mm512_storeu_pd(x + i, e);
        _mm512_storeu_pd(l + i, _mm512_add_pd(_mm512_loadu_pd(l + i), e));
    }
}

#define PATH avx512
#define T float
#define SFX f32
#define ukr ukr_avx512_f32_inl
#define expsub expsub_avx512_f32
#define dot_rows cattn_dotn_avx2_f32
#define expsum expsum_avx2_f32
#define pv_rows pv_rows_avx2_f32
#define expf1 exp1_avx2_f32
#define pack_qt cattn_pack_t16_avx2_f32
#include "../attention_tiles_tmpl.h"

#define PATH avx512
#define T double
#define SFX f64
#define ukr ukr_avx512_f64_inl
#define expsub expsub_avx512_f64
#define dot_rows cattn_dotn_avx2_f64
#define expsum expsum_avx2_f64
#define pv_rows pv_rows_avx2_f64
#define expf1 exp1_avx2_f64
#include "../attention_tiles_tmpl.h"
#endif
