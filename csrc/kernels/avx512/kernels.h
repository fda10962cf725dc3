/* kernels/avx512/kernels.h — the AVX-512 kernels' entries (contracts in
 * dispatch.h); table.c puts them in the dispatch table over the AVX2 ones. */
#ifndef CATTN_AVX512_KERNELS_H
#define CATTN_AVX512_KERNELS_H

#include "../../dispatch.h"

void cattn_ukr_avx512_f32(int64_t k, const float *a, int64_t lak, int64_t lai,
                          const float *b, int64_t ldb, float *c, int64_t ldc, int acc);
void cattn_ukr_stream_avx512_f32(int64_t k, const float *a, int64_t lak, int64_t lai,
                                 const float *b, int64_t ldb, float *c, int64_t ldc, int acc);
void cattn_ukr_avx512_f64(int64_t k, const double *a, int64_t lak, int64_t lai,
                          const double *b, int64_t ldb, double *c, int64_t ldc, int acc);
void cattn_ukr2_avx512_f32(int64_t k, const float *a, const float *a2, const float *b,
                           float *c, int64_t ldc, int acc);
void cattn_ukr2_avx512_f64(int64_t k, const double *a, const double *a2, const double *b,
                           double *c, int64_t ldc, int acc);
void cattn_ukr_avx512_i8(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                         const int32_t *za, const float *sa, const int32_t *colsum,
                         const float *sw, const float *bias, int act, float *c, int64_t ldc);
void cattn_ukr_avx512vnni_i8(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                             const int32_t *za, const float *sa, const int32_t *colsum,
                             const float *sw, const float *bias, int act, float *c,
                             int64_t ldc);
void cattn_softmax_row_avx512_f32(float *y, const float *x, int64_t n, int logsm);
void cattn_softmax_row_avx512_f64(double *y, const double *x, int64_t n, int logsm);
void cattn_act_avx512_f32(float *y, const float *x, int64_t n, int act);
void cattn_exp_avx512_f32(float *y, const float *x, int64_t n, int nonpos);
void cattn_exp_avx512_f64(double *y, const double *x, int64_t n, int nonpos);
extern const cattn_attn_kernels cattn_attn_avx512_f32;
extern const cattn_attn_kernels cattn_attn_avx512_f64;

void cattn_ukr_avx512_q4(int64_t G, const uint8_t *b, const void *d, const void *mn, int h16,
    int z, int m, const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
    const float *sxs, int64_t lds, float *c, int64_t ldc);
void cattn_ukr_avx512vnni_q4(int64_t G, const uint8_t *b, const void *d, const void *mn, int h16,
    int z, int m, const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
    const float *sxs, int64_t lds, float *c, int64_t ldc);
void cattn_ukr_avx512vnni_q4k(int64_t G, const uint8_t *b, const cattn_q4k_scales *k, int m,
                              const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
                              const float *sxs, int64_t lds, float *c, int64_t ldc);

void cattn_ukr_avx512vnni_q8g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                         const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                         const float *sx, const int32_t *xs, const int32_t *xs16,
                         const float *sxs, int64_t lds, float *c, int64_t ldc);
void cattn_ukr_avx512vnni_q6g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                              const int8_t *sub, int h16, int z, int m, const int8_t *qx,
                              int64_t ldq, const float *sx, const int32_t *xs, const int32_t *xs16,
                              const float *sxs, int64_t lds, float *c, int64_t ldc);
void cattn_ukr_avx512vnni_q5g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                              const int8_t *sub, int h16, int z, int m, const int8_t *qx,
                              int64_t ldq, const float *sx, const int32_t *xs, const int32_t *xs16,
                              const float *sxs, int64_t lds, float *c, int64_t ldc);

/* bf16dot.c: the bfloat16dot tile with vdpbf16ps (AVX512_BF16 CPUs only) */
void cattn_bf16dot_avx512bf16(int64_t kc, const uint32_t *a, int64_t lda, int m,
                              const uint16_t *b, int np, int64_t ps, float *c, int64_t ldc,
                              int acc);

#endif
