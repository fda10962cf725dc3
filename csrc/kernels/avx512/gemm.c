/* kernels/avx512/gemm.c — AVX-512F kernels of the GEMM family: the exported
 * micro-kernel (ukr.h, with a prefetch of the C rows) and its two-panel
 * form for the GEMM driver's full row panels (dispatch.h: ukr2). Compiled
 * with the avx512 folder's flags; used only after cpu.c has seen AVX-512
 * F, BW, VL and DQ and the OS saving the ZMM state.
 */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "kernels.h"
#include "ukr.h"

void cattn_ukr_avx512_f32(int64_t k, const float *a, int64_t lak, int64_t lai,
                          const float *b, int64_t ldb, float *c, int64_t ldc, int acc)
{
    for (int r = 0; r < 6; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
    ukr_avx512_f32_inl(k, a, lak, lai, b, ldb, c, ldc, acc);
}

void cattn_ukr_stream_avx512_f32(int64_t k, const float *a, int64_t lak, int64_t lai,
                                 const float *b, int64_t ldb, float *c, int64_t ldc, int acc)
{
    for (int r = 0; r < 6; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
    ukr_avx512_f32_pf(k, a, lak, lai, b, ldb, c, ldc, acc, CATTN_STREAM_PF);
}

void cattn_ukr_avx512_f64(int64_t k, const double *a, int64_t lak, int64_t lai,
                          const double *b, int64_t ldb, double *c, int64_t ldc, int acc)
{
    for (int r = 0; r < 6; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
    ukr_avx512_f64_inl(k, a, lak, lai, b, ldb, c, ldc, acc);
}

void cattn_ukr2_avx512_f32(int64_t k, const float *a, const float *a2, const float *b,
                           float *c, int64_t ldc, int acc)
{
    enum { NRV = 16 };
    for (int r = 0; r < 12; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
    UKR2_BODY(__m512, _mm512_set1_ps, _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_storeu_ps,
              _mm512_add_ps, _mm512_setzero_ps);
}

void cattn_ukr2_avx512_f64(int64_t k, const double *a, const double *a2, const double *b,
                           double *c, int64_t ldc, int acc)
{
    enum { NRV = 8 };
    for (int r = 0; r < 12; r++) _mm_prefetch((const char *)(c + r * ldc), _MM_HINT_T0);
    UKR2_BODY(__m512d, _mm512_set1_pd, _mm512_loadu_pd, _mm512_fmadd_pd, _mm512_storeu_pd,
              _mm512_add_pd, _mm512_setzero_pd);
}
#endif
