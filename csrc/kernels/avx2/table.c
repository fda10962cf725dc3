/* kernels/avx2/table.c — the AVX2/FMA path: every entry it overrides (all of them). */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "kernels.h"

void cattn_kernels_avx2(cattn_dispatch_t *kt)
{
    kt->name = "avx2";
    kt->int8_kernel = "avx2 (vpmaddwd)";
    kt->ukr_f32 = cattn_ukr_avx2_f32;
    kt->ukr_f64 = cattn_ukr_avx2_f64;
    kt->ukr_stream_f32 = cattn_ukr_stream_avx2_f32;
    kt->ukr_i8 = cattn_ukr_avx2_i8;
    kt->ukr_i8_row4 = cattn_ukr_avx2_i8_row4;
    kt->quant_row_u8 = cattn_quant_row_avx2_u8;
    kt->quant_q8g = cattn_quant_q8g_avx2;
    kt->ukr_q4 = cattn_ukr_avx2_q4;
    kt->ukr_q4k = cattn_ukr_avx2_q4k;
    kt->ukr_q8g = cattn_ukr_avx2_q8g;
    kt->ukr_q8g_n = cattn_ukr_avx2_q8g_n;
    kt->ukr_q6g = cattn_ukr_avx2_q6g;
    kt->ukr_q5g = cattn_ukr_avx2_q5g;
    kt->int4_kernel = "avx2 (vpmaddubsw)";
    kt->dotn_f32 = cattn_dotn_avx2_f32;
    kt->dotn_f64 = cattn_dotn_avx2_f64;
    kt->pack_t16_f32 = cattn_pack_t16_avx2_f32;
    kt->pack_a6_f32 = cattn_pack_a6_avx2_f32;
    kt->bf16_expand_f32 = cattn_bf16_expand_avx2;
    kt->rows_tn_f32 = cattn_rows_tn_avx2_f32;
    kt->few_rows_f32 = cattn_few_rows_avx2_f32;
    kt->few_rows_bf16 = cattn_few_rows_bf16_avx2;
    kt->softmax_row_f32 = cattn_softmax_row_avx2_f32;
    kt->softmax_row_f64 = cattn_softmax_row_avx2_f64;
    kt->softmax_cols_f32 = cattn_softmax_cols_avx2_f32;
    kt->softmax_cols_f64 = cattn_softmax_cols_avx2_f64;
    kt->layer_norm_row_f32 = cattn_layer_norm_row_avx2_f32;
    kt->layer_norm_row_f64 = cattn_layer_norm_row_avx2_f64;
    kt->rms_norm_row_f32 = cattn_rms_norm_row_avx2_f32;
    kt->rms_norm_row_f64 = cattn_rms_norm_row_avx2_f64;
    kt->act_f32 = cattn_act_avx2_f32;
    kt->act_f64 = cattn_act_avx2_f64;
    kt->exp_f32 = cattn_exp_avx2_f32;
    kt->exp_f64 = cattn_exp_avx2_f64;
    kt->attn_f32 = cattn_attn_avx2_f32;
    kt->attn_f64 = cattn_attn_avx2_f64;
}
#endif
