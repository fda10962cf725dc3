/* kernels/avx2/simd.h — small AVX2 helpers shared by the files of this
 * folder and the AVX-512 one (compiled with -mavx2 -mfma): horizontal sums
 * and maxima, the row kernels' float-to-double accumulation.
 * Each reduces lanes in a fixed order, so results never depend on threads. */
#ifndef CATTN_SIMD_AVX2_H
#define CATTN_SIMD_AVX2_H

#include <immintrin.h>

static inline float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline double hsum_pd(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

/* 8 horizontal sums at once: out[r] = sum of the lanes of a[r] */
static inline __m256 hsum8_ps(__m256 a0, __m256 a1, __m256 a2, __m256 a3,
                              __m256 a4, __m256 a5, __m256 a6, __m256 a7)
{
    const __m256 s0 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    const __m256 s1 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
    return _mm256_add_ps(_mm256_permute2f128_ps(s0, s1, 0x20), _mm256_permute2f128_ps(s0, s1, 0x31));
}

/* ---- the row kernels' reductions (rows.c; the AVX-512 row kernels
 * reproduce them: same order, same bits) ---- */

static inline float rows_hmax_ps(__m256 v)
{
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
}

static inline float rows_hsum_ps(__m256 v)
{
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_shuffle_ps(a, a, 1));
    return _mm_cvtss_f32(a);
}

static inline double rows_hmax_pd(__m256d v)
{
    __m128d a = _mm_max_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    a = _mm_max_sd(a, _mm_unpackhi_pd(a, a));
    return _mm_cvtsd_f64(a);
}

static inline double rows_hsum_pd(__m256d v)
{
    __m128d a = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    a = _mm_add_sd(a, _mm_unpackhi_pd(a, a));
    return _mm_cvtsd_f64(a);
}

/* the 8 floats of v widened to two double vectors, summed into a, b */
#define ROWS_ACC_PS_PD(v, a, b) do {                                             \
    (a) = _mm256_add_pd((a), _mm256_cvtps_pd(_mm256_castps256_ps128(v)));        \
    (b) = _mm256_add_pd((b), _mm256_cvtps_pd(_mm256_extractf128_ps((v), 1)));    \
} while (0)

#endif
