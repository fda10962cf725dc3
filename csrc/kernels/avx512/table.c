/* kernels/avx512/table.c — the AVX-512 path (F, BW, VL, DQ; VNNI used when
 * present): the AVX2 path's table (every AVX-512 CPU has AVX2 and FMA)
 * with these entries overridden:
 *   ukr_f32/f64, ukr2_f32/f64   zmm micro-kernels (same bits as AVX2's)
 *   ukr_i8                      16 columns per instruction; vpdpbusd with
 *                               VNNI (exact sums: same bits as AVX2's)
 *   attn_f32/f64                the attention tiles on those (same bits)
 * The row kernels (softmax, norms, activations, exp), the few-row and
 * bfloat16 kernels and the packs stay AVX2's: memory-bound at the sizes
 * cattn meets, and their results keep the AVX2 path's bits.
 */
#include "../../dispatch.h"

#ifdef CATTN_X86
#include "kernels.h"

void cattn_kernels_avx512(cattn_dispatch_t *kt, int vnni)
{
    cattn_kernels_avx2(kt);
    kt->name = "avx512";
    kt->ukr_f32 = cattn_ukr_avx512_f32;
    kt->ukr_f64 = cattn_ukr_avx512_f64;
    kt->ukr2_f32 = cattn_ukr2_avx512_f32;
    kt->ukr2_f64 = cattn_ukr2_avx512_f64;
    kt->ukr_i8 = vnni ? cattn_ukr_avx512vnni_i8 : cattn_ukr_avx512_i8;
    kt->attn_f32 = cattn_attn_avx512_f32;
    kt->attn_f64 = cattn_attn_avx512_f64;
}
#endif
