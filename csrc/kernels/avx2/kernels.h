/* kernels/avx2/kernels.h — the AVX2/FMA kernels' entries (contracts in
 * dispatch.h); table.c puts them in the dispatch table. */
#ifndef CATTN_AVX2_KERNELS_H
#define CATTN_AVX2_KERNELS_H

#include "../../dispatch.h"

void cattn_ukr_avx2_f32(int64_t k, const float *a, int64_t lak, int64_t lai,
                       const float *b, int64_t ldb, float *c, int64_t ldc, int acc);
void cattn_ukr_stream_avx2_f32(int64_t k, const float *a, int64_t lak, int64_t lai,
                               const float *b, int64_t ldb, float *c, int64_t ldc, int acc);
void cattn_ukr_avx2_f64(int64_t k, const double *a, int64_t lak, int64_t lai,
                       const double *b, int64_t ldb, double *c, int64_t ldc, int acc);
void cattn_ukr_avx2_i8(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                         const int32_t *za, const float *sa, const int32_t *colsum,
                         const float *sw, const float *bias, int act, float *c, int64_t ldc);
void cattn_ukr_avx2_i8_row4(int64_t k2, const uint32_t *a, const int8_t *b, int64_t ps,
                            const int32_t *za, const float *sa, const int32_t *colsum,
                            const float *sw, const float *bias, int act, float *c);
void cattn_i8_epilogue_avx2(const int32_t *acc, int m, const int32_t *za, const float *sa,
                            const int32_t *colsum, const float *sw, const float *bias,
                            int act, float *c, int64_t ldc);
void cattn_bf16_expand_avx2(float *dst, const uint16_t *src, int64_t n);
void cattn_few_rows_bf16_avx2(int64_t k, const float *a, int64_t lda, int m,
                              const uint16_t *b, int64_t npan, int64_t ps, float *c,
                              int64_t ldc, int acc);
int cattn_quant_q8g_avx2(int8_t *qx, float *sx, int32_t *xs, int32_t *xs16, float *sxs,
                          const float *x, int64_t G);
int cattn_quant_row_avx2_u8(void *dst, int64_t stride, int g, float *sa, int32_t *za,
                            const float *x, int64_t K);
void cattn_dotn_avx2_f32(float *out, const float *q, const float *K, int64_t rsk, int64_t n, int64_t E);
void cattn_dotn_avx2_f64(double *out, const double *q, const double *K, int64_t rsk, int64_t n, int64_t E);
void cattn_softmax_row_avx2_f32(float *y, const float *x, int64_t n, int logsm);
void cattn_softmax_row_avx2_f64(double *y, const double *x, int64_t n, int logsm);
void cattn_softmax_cols_avx2_f32(float *y, int64_t ys, const float *x, int64_t xs,
                                int64_t n, int64_t w, int logsm);
void cattn_softmax_cols_avx2_f64(double *y, int64_t ys, const double *x, int64_t xs,
                                int64_t n, int64_t w, int logsm);
void cattn_layer_norm_row_avx2_f32(float *y, const float *x, const float *w,
                                  const float *b, int64_t n, double eps);
void cattn_layer_norm_row_avx2_f64(double *y, const double *x, const double *w,
                                  const double *b, int64_t n, double eps);
void cattn_rms_norm_row_avx2_f32(float *y, const float *x, const float *w, int64_t n, double eps);
void cattn_rms_norm_row_avx2_f64(double *y, const double *x, const double *w, int64_t n, double eps);
void cattn_act_avx2_f32(float *y, const float *x, int64_t n, int act);
void cattn_act_avx2_f64(double *y, const double *x, int64_t n, int act);
void cattn_exp_avx2_f32(float *y, const float *x, int64_t n, int nonpos);
void cattn_exp_avx2_f64(double *y, const double *x, int64_t n, int nonpos);
extern const cattn_attn_kernels cattn_attn_avx2_f32;
extern const cattn_attn_kernels cattn_attn_avx2_f64;
void cattn_rows_tn_avx2_f32(float *c, int64_t ldc, const float *at, int64_t mp,
                            const float *w, int64_t ldw, int64_t n, int64_t K, int64_t kc);
void cattn_few_rows_avx2_f32(int64_t k, const float *a, int64_t lda, int m, const float *b,
                             int64_t npan, int64_t ps, float *c, int64_t ldc, int acc);
void cattn_pack_a6_avx2_f32(float *dst, const float *A, int64_t rsa, int64_t mc, int64_t kc);
void cattn_pack_t16_avx2_f32(float *dst, const float *src, int64_t ld, int64_t rows,
                             int64_t rows_pad, int64_t k, float scale);

void cattn_ukr_avx2_q4(int64_t G, const uint8_t *b, const void *d, const void *mn, int h16,
    int z, int m, const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
    const float *sxs, int64_t lds, float *c, int64_t ldc);

void cattn_ukr_avx2_q4k(int64_t G, const uint8_t *b, const cattn_q4k_scales *k, int m,
                        const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
                        const float *sxs, int64_t lds, float *c, int64_t ldc);
void cattn_ukr_avx2_q8g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                        const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                        const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                        int64_t lds, float *c, int64_t ldc);
void cattn_ukr_avx2_q5g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                        const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                        const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                        int64_t lds, float *c, int64_t ldc);
void cattn_ukr_avx2_q6g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                        const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                        const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                        int64_t lds, float *c, int64_t ldc);
void cattn_ukr_avx2_q8g_n(int64_t G, const uint8_t *b, const void *d, const void *mn,
                          const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                          const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                          int64_t lds, float *c, int64_t ldc);

#endif
