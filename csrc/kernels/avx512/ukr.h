/* kernels/avx512/ukr.h — THE micro-kernel on AVX-512F, inlined into the
 * attention tiles and exported for the GEMM driver (kernels/avx512/gemm.c).
 * Contract (dispatch.h): c[MR,NR] (=|+=) sum_p a[p*lak + i*lai] * b[p*ldb + j].
 * float32 6x16: per k step one zmm load of b (16 floats), 6 broadcasts of a,
 * 6 FMAs into 6 zmm accumulators; float64 6x8: the same in doubles.
 * Each c element is the same FMA chain over p as the AVX2 kernel's (one
 * fused multiply-add per p, in order; then one add of the old c when
 * acc): the same bits, with half the instructions.
 * ukr2_*: two packed A panels (rows 0-5 at a, rows 6-11 at a2; lak = MR,
 * lai = 1, ldb = NR) against one B panel: a 12 x NR tile in 12 of the 32
 * zmm registers, each element's chain again the same (the GEMM driver
 * pairs its full row panels with it).
 */
#ifndef CATTN_AVX512_UKR_H
#define CATTN_AVX512_UKR_H

#include <immintrin.h>
#include "../../common.h"

#define UKR512_ST(VT, ST, LD, ADD, cr, v)                                         \
    do {                                                                        \
        if (acc) v = ADD(v, LD(cr));                                            \
        ST(cr, v);                                                              \
    } while (0)

/* pf > 0: prefetch b + pf each step (the few-row GEMM's first pass over a
 * weight streaming from memory: ukr_stream); 0 at every other call site */
static inline void ukr_avx512_f32_pf(int64_t k, const float *a, int64_t lak, int64_t lai,
                                     const float *b, int64_t ldb, float *c, int64_t ldc,
                                     int acc, int64_t pf)
{
    __m512 c0 = _mm512_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    const float *a0 = a, *a1 = a + lai, *a2 = a + 2 * lai, *a3 = a + 3 * lai,
                *a4 = a + 4 * lai, *a5 = a + 5 * lai;
#pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        if (pf) _mm_prefetch((const char *)(b + pf), _MM_HINT_T0);
        const __m512 bv = _mm512_loadu_ps(b);
        c0 = _mm512_fmadd_ps(_mm512_set1_ps(*a0), bv, c0);
        c1 = _mm512_fmadd_ps(_mm512_set1_ps(*a1), bv, c1);
        c2 = _mm512_fmadd_ps(_mm512_set1_ps(*a2), bv, c2);
        c3 = _mm512_fmadd_ps(_mm512_set1_ps(*a3), bv, c3);
        c4 = _mm512_fmadd_ps(_mm512_set1_ps(*a4), bv, c4);
        c5 = _mm512_fmadd_ps(_mm512_set1_ps(*a5), bv, c5);
        a0 += lak; a1 += lak; a2 += lak; a3 += lak; a4 += lak; a5 += lak;
        b += ldb;
    }
#define ST(r, v) UKR512_ST(__m512, _mm512_storeu_ps, _mm512_loadu_ps, _mm512_add_ps, c + (r) * ldc, v)
    ST(0, c0); ST(1, c1); ST(2, c2); ST(3, c3); ST(4, c4); ST(5, c5);
#undef ST
}

static inline void ukr_avx512_f32_inl(int64_t k, const float *a, int64_t lak, int64_t lai,
                                      const float *b, int64_t ldb, float *c, int64_t ldc,
                                      int acc)
{
    ukr_avx512_f32_pf(k, a, lak, lai, b, ldb, c, ldc, acc, 0);
}

static inline void ukr_avx512_f64_inl(int64_t k, const double *a, int64_t lak, int64_t lai,
                                      const double *b, int64_t ldb, double *c, int64_t ldc,
                                      int acc)
{
    __m512d c0 = _mm512_setzero_pd(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0;
    const double *a0 = a, *a1 = a + lai, *a2 = a + 2 * lai, *a3 = a + 3 * lai,
                 *a4 = a + 4 * lai, *a5 = a + 5 * lai;
#pragma GCC unroll 4
    for (int64_t p = 0; p < k; p++) {
        const __m512d bv = _mm512_loadu_pd(b);
        c0 = _mm512_fmadd_pd(_mm512_set1_pd(*a0), bv, c0);
        c1 = _mm512_fmadd_pd(_mm512_set1_pd(*a1), bv, c1);
        c2 = _mm512_fmadd_pd(_mm512_set1_pd(*a2), bv, c2);
        c3 = _mm512_fmadd_pd(_mm512_set1_pd(*a3), bv, c3);
        c4 = _mm512_fmadd_pd(_mm512_set1_pd(*a4), bv, c4);
        c5 = _mm512_fmadd_pd(_mm512_set1_pd(*a5), bv, c5);
        a0 += lak; a1 += lak; a2 += lak; a3 += lak; a4 += lak; a5 += lak;
        b += ldb;
    }
#define ST(r, v) UKR512_ST(__m512d, _mm512_storeu_pd, _mm512_loadu_pd, _mm512_add_pd, c + (r) * ldc, v)
    ST(0, c0); ST(1, c1); ST(2, c2); ST(3, c3); ST(4, c4); ST(5, c5);
#undef ST
}

/* 12 x NR from two packed panels (a: rows 0-5, a2: rows 6-11) */
#define UKR2_BODY(VT, SET1, LOAD, FMA, STORE, ADD, ZERO)                          \
    VT c0 = ZERO(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0,  \
       c8 = c0, c9 = c0, c10 = c0, c11 = c0;                                       \
    for (int64_t p = 0; p < k; p++) {                                              \
        const VT bv = LOAD(b);                                                     \
        c0 = FMA(SET1(a[0]), bv, c0); c1 = FMA(SET1(a[1]), bv, c1);                \
        c2 = FMA(SET1(a[2]), bv, c2); c3 = FMA(SET1(a[3]), bv, c3);                \
        c4 = FMA(SET1(a[4]), bv, c4); c5 = FMA(SET1(a[5]), bv, c5);                \
        c6 = FMA(SET1(a2[0]), bv, c6); c7 = FMA(SET1(a2[1]), bv, c7);              \
        c8 = FMA(SET1(a2[2]), bv, c8); c9 = FMA(SET1(a2[3]), bv, c9);              \
        c10 = FMA(SET1(a2[4]), bv, c10); c11 = FMA(SET1(a2[5]), bv, c11);          \
        a += 6; a2 += 6; b += NRV;                                                 \
    }                                                                              \
    UKR512_ST(VT, STORE, LOAD, ADD, c, c0); UKR512_ST(VT, STORE, LOAD, ADD, c + ldc, c1); \
    UKR512_ST(VT, STORE, LOAD, ADD, c + 2 * ldc, c2);                              \
    UKR512_ST(VT, STORE, LOAD, ADD, c + 3 * ldc, c3);                              \
    UKR512_ST(VT, STORE, LOAD, ADD, c + 4 * ldc, c4);                              \
    UKR512_ST(VT, STORE, LOAD, ADD, c + 5 * ldc, c5);                              \
    UKR512_ST(VT, STORE, LOAD, ADD, c + 6 * ldc, c6);                              \
    UKR512_ST(VT, STORE, LOAD, ADD, c + 7 * ldc, c7);                              \
    UKR512_ST(VT, STORE, LOAD, ADD, c + 8 * ldc, c8);                              \
    UKR512_ST(VT, STORE, LOAD, ADD, c + 9 * ldc, c9);                              \
    UKR512_ST(VT, STORE, LOAD, ADD, c + 10 * ldc, c10);                            \
    UKR512_ST(VT, STORE, LOAD, ADD, c + 11 * ldc, c11)

#endif
