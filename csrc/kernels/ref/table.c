/* kernels/ref/table.c — the portable path: every entry of the table. */
#include "kernels.h"

void cattn_kernels_ref(cattn_dispatch_t *kt)
{
    kt->name = "portable";
    kt->int8_kernel = "portable C";
    kt->ukr_f32 = cattn_ukr_ref_f32;
    kt->ukr_f64 = cattn_ukr_ref_f64;
    kt->ukr_i8 = cattn_ukr_ref_i8;
    kt->quant_row_u8 = NULL;                       /* the driver's loop */
    kt->quant_q8g = NULL;                          /* the driver's loop */
    kt->ukr_q4 = cattn_ukr_ref_q4;
    kt->ukr_q4k = NULL;                            /* the driver's expansion */
    kt->ukr_q8g = cattn_ukr_ref_q8g;
    kt->ukr_q6g = cattn_ukr_ref_q6g;
    kt->ukr_q5g = cattn_ukr_ref_q5g;
    kt->int4_kernel = "portable C";
    kt->dotn_f32 = cattn_dotn_ref_f32;
    kt->dotn_f64 = cattn_dotn_ref_f64;
    kt->pack_t16_f32 = NULL;                       /* the driver's scalar packing */
    kt->bf16_expand_f32 = NULL;                    /* the driver's loop */
    kt->few_rows_bf16 = NULL;                      /* widened panels, float32 kernels */
    kt->bf16dot = cattn_bf16dot_ref;               /* vdpbf16ps's arithmetic in C */
    kt->bf16dot_kernel = "portable C (vdpbf16ps emulated)";
    kt->softmax_row_f32 = cattn_softmax_row_ref_f32;
    kt->softmax_row_f64 = cattn_softmax_row_ref_f64;
    kt->softmax_cols_f32 = cattn_softmax_cols_ref_f32;
    kt->softmax_cols_f64 = cattn_softmax_cols_ref_f64;
    kt->layer_norm_row_f32 = cattn_layer_norm_row_ref_f32;
    kt->layer_norm_row_f64 = cattn_layer_norm_row_ref_f64;
    kt->rms_norm_row_f32 = cattn_rms_norm_row_ref_f32;
    kt->rms_norm_row_f64 = cattn_rms_norm_row_ref_f64;
    kt->act_f32 = cattn_act_ref_f32;
    kt->act_f64 = cattn_act_ref_f64;
    kt->exp_f32 = cattn_exp_ref_f32;
    kt->exp_f64 = cattn_exp_ref_f64;
    kt->attn_f32 = cattn_attn_ref_f32;
    kt->attn_f64 = cattn_attn_ref_f64;
}
