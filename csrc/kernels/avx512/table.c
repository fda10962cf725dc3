/* kernels/avx512/table.c — the AVX-512 path (F, BW, VL, DQ; VNNI used when
 * present): the AVX2 path's table (every AVX-512 CPU has AVX2 and FMA)
 * with these entries overridden:
 *   ukr_f32/f64, ukr2_f32/f64,  zmm micro-kernels (same bits as AVX2's)
 *   ukr_stream_f32
 *   ukr_i8                      16 columns per instruction; vpdpbusd on
 *                               quads of k with VNNI (A packed in quads,
 *                               i8_quads; exact sums: same bits as AVX2's),
 *                               once it has matched the AVX-512BW kernel
 *                               on a test tile at load (vnni_agrees)
 *   attn_f32/f64                the attention tiles on those (same bits)
 *   softmax_row_f32/f64,        the row kernels with arithmetic to gain:
 *   act_f32, exp_f32/f64        16 floats / 8 doubles a vector (rows.c,
 *                               act.c; same bits)
 * The softmax column blocks, layer / RMS norm, the float64 activations, the
 * few-row and bfloat16 kernels and the packs stay AVX2's: memory-bound at
 * the sizes cattn meets (or float64, rarely hot); the same bits either way.
 */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "kernels.h"

/* The VNNI kernel (A in quads) against the AVX-512BW one (A in pairs) on
 * one 5-row tile with the extreme values (u8 255 and 0 against s8 -127..127,
 * K = 73: 37 pairs, the last one alone): the int32 sums are exact in both,
 * so the outputs must match bit for bit. Run once at load on a VNNI CPU:
 * the VNNI kernel is used only after it has given the right answer on this
 * CPU. */
static int vnni_agrees(void)
{
    enum { K = 73, K2 = (K + 1) / 2, K4 = (K + 3) / 4 };
    uint8_t q[5][K4 * 4] = {{0}};
    uint32_t a2[K2 * 5], a4[K4 * 5];
    int8_t b[K2 * 32];
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < K; k++) q[i][k] = (uint8_t)((k + i) % 3 ? (k * 97 + i * 31) % 256 : 255);
    for (int i = 0; i < 5; i++) {
        for (int p = 0; p < K2; p++)
            a2[p * 5 + i] = (uint32_t)q[i][2 * p] | (uint32_t)q[i][2 * p + 1] << 16;
        for (int p = 0; p < K4; p++)
            a4[p * 5 + i] = (uint32_t)q[i][4 * p] | (uint32_t)q[i][4 * p + 1] << 8 |
                            (uint32_t)q[i][4 * p + 2] << 16 | (uint32_t)q[i][4 * p + 3] << 24;
    }
    for (int i = 0; i < K2 * 32; i++) b[i] = (int8_t)((i * 53) % 255 - 127);
    int32_t za[5] = {0, 3, 128, 255, 7}, colsum[16];
    float sa[5] = {1.0f, 0.5f, 0.25f, 2.0f, 1e-3f}, sw[16], c1[5 * 16], c2[5 * 16];
    for (int j = 0; j < 16; j++) { colsum[j] = j * 11 - 80; sw[j] = 0.125f * (float)(j + 1); }
    cattn_ukr_avx512_i8(K2, a2, 5, b, za, sa, colsum, sw, NULL, 0, c1, 16);
    cattn_ukr_avx512vnni_i8(K2, a4, 5, b, za, sa, colsum, sw, NULL, 0, c2, 16);
    for (int i = 0; i < 5 * 16; i++)
        if (c1[i] != c2[i]) return 0;
    return 1;
}

void cattn_kernels_avx512(cattn_dispatch_t *kt, int vnni)
{
    cattn_kernels_avx2(kt);
    kt->name = "avx512";
    kt->ukr_f32 = cattn_ukr_avx512_f32;
    kt->ukr_f64 = cattn_ukr_avx512_f64;
    kt->ukr_stream_f32 = cattn_ukr_stream_avx512_f32;
    kt->ukr2_f32 = cattn_ukr2_avx512_f32;
    kt->ukr2_f64 = cattn_ukr2_avx512_f64;
    const int use_vnni = vnni && vnni_agrees();
    kt->ukr_i8 = use_vnni ? cattn_ukr_avx512vnni_i8 : cattn_ukr_avx512_i8;
    kt->i8_quads = use_vnni;                  /* the VNNI kernel reads A in quads */
    kt->int8_kernel = use_vnni ? "avx512 vnni (vpdpbusd)"
                      : vnni ? "avx512bw (vpmaddwd; the VNNI kernel failed its load check)"
                             : "avx512bw (vpmaddwd)";
    kt->ukr_q4 = use_vnni ? cattn_ukr_avx512vnni_q4 : cattn_ukr_avx512_q4;
    if (use_vnni) kt->ukr_q8g = cattn_ukr_avx512vnni_q8g;  /* else AVX2's (same bits) */
    kt->int4_kernel = use_vnni ? "avx512 vnni (vpdpbusd)" : "avx512bw (vpmaddubsw)";
    kt->softmax_row_f32 = cattn_softmax_row_avx512_f32;
    kt->softmax_row_f64 = cattn_softmax_row_avx512_f64;
    kt->act_f32 = cattn_act_avx512_f32;
    kt->exp_f32 = cattn_exp_avx512_f32;
    kt->exp_f64 = cattn_exp_avx512_f64;
    kt->attn_f32 = cattn_attn_avx512_f32;
    kt->attn_f64 = cattn_attn_avx512_f64;
}
#endif
