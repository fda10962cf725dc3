/* kernels/ref/kernels.h — the portable kernels' entries (contracts in
 * dispatch.h); table.c puts them in the dispatch table. */
#ifndef CATTN_REF_KERNELS_H
#define CATTN_REF_KERNELS_H

#include "../../dispatch.h"

void cattn_ukr_ref_f32(int64_t k, const float *a, int64_t lak, int64_t lai,
                       const float *b, int64_t ldb, float *c, int64_t ldc, int acc);
void cattn_ukr_ref_f64(int64_t k, const double *a, int64_t lak, int64_t lai,
                       const double *b, int64_t ldb, double *c, int64_t ldc, int acc);
void cattn_ukr_ref_i8(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                         const int32_t *za, const float *sa, const int32_t *colsum,
                         const float *sw, const float *bias, int act, float *c, int64_t ldc);
void cattn_ukr_ref_q4(int64_t G, const uint8_t *b, const void *d, const void *mn, int h16,
                      int z, int m, const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
                      const float *sxs, int64_t lds, float *c, int64_t ldc);
void cattn_ukr_ref_q8g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                       const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                       const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                       int64_t lds, float *c, int64_t ldc);
void cattn_ukr_ref_q5g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                       const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                       const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                       int64_t lds, float *c, int64_t ldc);
void cattn_ukr_ref_q6g(int64_t G, const uint8_t *b, const void *d, const void *mn,
                       const int8_t *sub, int h16, int z, int m, const int8_t *qx, int64_t ldq,
                       const float *sx, const int32_t *xs, const int32_t *xs16, const float *sxs,
                       int64_t lds, float *c, int64_t ldc);
void cattn_bf16dot_ref(int64_t kc, const uint32_t *a, int64_t lda, int m, const uint16_t *b,
                       int np, int64_t ps, float *c, int64_t ldc, int acc);
void cattn_dotn_ref_f32(float *out, const float *q, const float *K, int64_t rsk, int64_t n, int64_t E);
void cattn_dotn_ref_f64(double *out, const double *q, const double *K, int64_t rsk, int64_t n, int64_t E);
void cattn_softmax_row_ref_f32(float *y, const float *x, int64_t n, int logsm);
void cattn_softmax_row_ref_f64(double *y, const double *x, int64_t n, int logsm);
void cattn_softmax_cols_ref_f32(float *y, int64_t ys, const float *x, int64_t xs,
                                int64_t n, int64_t w, int logsm);
void cattn_softmax_cols_ref_f64(double *y, int64_t ys, const double *x, int64_t xs,
                                int64_t n, int64_t w, int logsm);
void cattn_layer_norm_row_ref_f32(float *y, const float *x, const float *w,
                                  const float *b, int64_t n, double eps);
void cattn_layer_norm_row_ref_f64(double *y, const double *x, const double *w,
                                  const double *b, int64_t n, double eps);
void cattn_rms_norm_row_ref_f32(float *y, const float *x, const float *w, int64_t n, double eps);
void cattn_rms_norm_row_ref_f64(double *y, const double *x, const double *w, int64_t n, double eps);
void cattn_act_ref_f32(float *y, const float *x, int64_t n, int act);
void cattn_act_ref_f64(double *y, const double *x, int64_t n, int act);
void cattn_exp_ref_f32(float *y, const float *x, int64_t n, int nonpos);
void cattn_exp_ref_f64(double *y, const double *x, int64_t n, int nonpos);
extern const cattn_attn_kernels cattn_attn_ref_f32;
extern const cattn_attn_kernels cattn_attn_ref_f64;

#endif
