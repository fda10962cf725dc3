/* kernels/avx2/attn_rows_h.h — the float16-cache decode's row helpers
 * (attention_decode_tmpl.h's DDOT and DPV over uint16_t K / V rows): K and
 * V widened exactly to float32, then exactly the operations, in the same
 * order, of cattn_dotn_avx2_f32 (gemm.c) and pv_rows_avx2_f32
 * (attn_rows.h), so a float16 cache gives the bits of its widened float32
 * values. Widening: F16C's vcvtph2ps where the includer defines
 * CATTN_ATTN_F16C (attention_h_f16c.c, under a target pragma), else integer
 * shifts and adds (every value: subnormals, infinities and NaN too).
 * HNAME(f) names this copy's functions. Not here: the float32 helpers.
 * Legend: n keys, E key width, Ev value width, rsk / rsv row strides.
 */
#ifndef HNAME
#error "attn_rows_h.h: the includer defines HNAME"
#endif
#include <immintrin.h>
#include "simd.h"

/* 8 float16 at p -> 8 float32, exact */
static inline __attribute__((always_inline)) __m256 HNAME(widen8)(const uint16_t *p)
{
#ifdef CATTN_ATTN_F16C
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
#else
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    const __m256i em = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x7FFF)), 13);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(h, _mm256_set1_epi32(0x8000)), 16);
    const __m256i e = _mm256_and_si256(em, _mm256_set1_epi32(0x7C00 << 13));
    /* normal: exponent + 112; inf / NaN (exponent 31): + 224, to 255 */
    const __m256i big = _mm256_cmpeq_epi32(e, _mm256_set1_epi32(0x7C00 << 13));
    const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(112 << 23),
                                          _mm256_and_si256(big, _mm256_set1_epi32(112 << 23)));
    const __m256 normal = _mm256_castsi256_ps(_mm256_add_epi32(em, bias));
    /* subnormal (exponent 0): 2^-14 + m 2^-24, minus 2^-14 (exact) */
    const __m256 tiny = _mm256_sub_ps(_mm256_castsi256_ps(_mm256_add_epi32(em, _mm256_set1_epi32(113 << 23))),
                                      _mm256_set1_ps(0x1p-14f));
    const __m256i is_tiny = _mm256_cmpeq_epi32(e, _mm256_setzero_si256());
    return _mm256_or_ps(_mm256_blendv_ps(normal, tiny, _mm256_castsi256_ps(is_tiny)),
                        _mm256_castsi256_ps(sign));
#endif
}

static inline float HNAME(widen1)(uint16_t h)
{
    uint16_t b[8] = {h, 0, 0, 0, 0, 0, 0, 0};
    float f[8];
    _mm256_storeu_ps(f, HNAME(widen8)(b));
    return f[0];
}

/* kv_rows_tmpl.h's two loops on float16 rows: the steps of
 * cattn_dotn_avx2_f32 and pv_rows_avx2_f32, in the same order */
#define KV_T uint16_t
#define KV_LOAD8(p) HNAME(widen8)(p)
#define KV_LOAD1(x) HNAME(widen1)(x)
#define KV_DOTN HNAME(dotn_h)
#define KV_PV HNAME(pv_rows_h)
#include "kv_rows_tmpl.h"
