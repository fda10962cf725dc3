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
 *   ukr_q4, ukr_q4k, ukr_q8g,   the group-wise formats: one zmm a 16-column
 *   ukr_q6g, ukr_q5g            chunk, vpdpbusd with VNNI (q4gemm.c; exact
 *                               sums: same bits as AVX2's), once they have
 *                               matched the BW / AVX2 kernels at load
 *                               (vnni_group_kernels_agree); without VNNI
 *                               only ukr_q4 (AVX-512BW), the rest AVX2's
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
#include <string.h>
#include "kernels.h"
#include "../avx2/kernels.h"

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

/* a normal float16's bits -> float32 (exact) */
static float h2f_normal(uint16_t h)
{
    const uint32_t u = ((uint32_t)(h & 0x8000u) << 16) | (((uint32_t)(h & 0x7FFFu) << 13) + (112u << 23));
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The VNNI int4 and int8g kernels against the AVX-512BW int4 kernel and the
 * AVX2 int8g one on a 3-row tile of 2 groups with extreme values (u8 255,
 * nibbles 15, s8 +-127, sub-scales -128..127, float16 and float32 scales,
 * mins), the int6g / int5g ones against AVX2's (1-3 rows, sub-scales and
 * mins; any panel bytes are valid values), the two-level int4 kernel against the BW kernel on its expanded
 * scales (8 groups, 1-3 rows): the group sums are exact in all of them, so the outputs must match
 * bit for bit. Run once at load on a VNNI CPU, as vnni_agrees. */
static int vnni_group_kernels_agree(void)
{
    enum { G = 2, M = 3 };
    uint8_t b4[G * 256], b8[G * 512];
    int8_t qx[M * 32 * G], sub[G * 32];
    float d[G * 16], mn[G * 16], sx[M * G], sxs[M * G], c1[M * 16], c2[M * 16];
    uint16_t d16[G * 16], mn16[G * 16];
    int32_t xs[M * G], xs16[M * 2 * G];
    for (int i = 0; i < G * 256; i++) b4[i] = (uint8_t)(i % 7 ? (i * 37) % 256 : 255);
    for (int i = 0; i < G * 512; i++) b8[i] = (uint8_t)(i % 5 ? (i * 91) % 256 : 255);
    for (int i = 0; i < M * 32 * G; i++) qx[i] = (int8_t)(i % 3 ? (i * 53) % 255 - 127 : 127);
    for (int i = 0; i < G * 32; i++) sub[i] = (int8_t)((i * 29) % 256 - 128);
    for (int i = 0; i < G * 16; i++) {
        d[i] = 0.001f * (float)(i + 1);
        mn[i] = -0.01f * (float)(i % 5);
        d16[i] = (uint16_t)(0x1400 + i * 16);              /* float16 ~ 2^-10 .. */
        mn16[i] = (uint16_t)(0x9000 + i * 8);
    }
    for (int r = 0; r < M; r++)
        for (int g = 0; g < G; g++) {
            int32_t s0 = 0, s1 = 0;
            for (int k = 0; k < 16; k++) s0 += qx[r * 32 * G + g * 32 + k];
            for (int k = 16; k < 32; k++) s1 += qx[r * 32 * G + g * 32 + k];
            xs[r * G + g] = s0 + s1;
            xs16[r * 2 * G + 2 * g] = s0;
            xs16[r * 2 * G + 2 * g + 1] = s1;
            sx[r * G + g] = 0.01f * (float)(r + g + 1);
            sxs[r * G + g] = sx[r * G + g] * (float)(s0 + s1);
        }
    {                                   /* two-level scales (8 groups): D sc, -(Dmin m) */
        enum { G8 = 8 };
        uint8_t bk[G8 * 256], ksc[G8 * 16], km[G8 * 16];
        uint16_t kD[16], kDm[16];
        int8_t qk[M * 32 * G8];
        float dk[G8 * 16], mk[G8 * 16], sxk[M * G8], sxsk[M * G8], k1[M * 16], k2[M * 16];
        int32_t xsk[M * G8];
        for (int i = 0; i < G8 * 256; i++) bk[i] = (uint8_t)(i % 7 ? (i * 37) % 256 : 255);
        for (int i = 0; i < M * 32 * G8; i++) qk[i] = (int8_t)(i % 3 ? (i * 53) % 255 - 127 : 127);
        for (int j = 0; j < 16; j++) {
            kD[j] = (uint16_t)(0x1400 + j * 16);
            kDm[j] = (uint16_t)(0x1000 + j * 8);
        }
        for (int i = 0; i < G8 * 16; i++) {
            ksc[i] = (uint8_t)(i % 5 ? (i * 13) % 64 : 63);
            km[i] = (uint8_t)((i * 7) % 64);
            const int j = i % 16;
            const float Dv = h2f_normal(kD[j]), Dmv = h2f_normal(kDm[j]);
            dk[i] = Dv * (float)ksc[i];
            mk[i] = -(Dmv * (float)km[i]);
        }
        for (int r = 0; r < M; r++)
            for (int g = 0; g < G8; g++) {
                int32_t sum = 0;
                for (int t = 0; t < 32; t++) sum += qk[r * 32 * G8 + g * 32 + t];
                xsk[r * G8 + g] = sum;
                sxk[r * G8 + g] = 0.01f * (float)(r + g + 1);
                sxsk[r * G8 + g] = sxk[r * G8 + g] * (float)sum;
            }
        const cattn_q4k_scales ks = {ksc, km, kD, kDm};
        for (int m = 1; m <= M; m++) {
            cattn_ukr_avx512_q4(G8, bk, dk, mk, 0, 0, m, qk, 32 * G8, sxk, xsk, sxsk, G8, k1, 16);
            cattn_ukr_avx512vnni_q4k(G8, bk, &ks, m, qk, 32 * G8, sxk, xsk, sxsk, G8, k2, 16);
            for (int i = 0; i < m * 16; i++)
                if (k1[i] != k2[i]) return 0;
        }
    }
    for (int h16 = 0; h16 < 2; h16++) {
        const void *dd = h16 ? (const void *)d16 : (const void *)d;
        const void *mm = h16 ? (const void *)mn16 : (const void *)mn;
        cattn_ukr_avx512_q4(G, b4, dd, mm, h16, 0, M, qx, 32 * G, sx, xs, sxs, G, c1, 16);
        cattn_ukr_avx512vnni_q4(G, b4, dd, mm, h16, 0, M, qx, 32 * G, sx, xs, sxs, G, c2, 16);
        for (int i = 0; i < M * 16; i++)
            if (c1[i] != c2[i]) return 0;
        cattn_ukr_avx512_q4(G, b4, dd, NULL, h16, 8, M, qx, 32 * G, sx, xs, sxs, G, c1, 16);
        cattn_ukr_avx512vnni_q4(G, b4, dd, NULL, h16, 8, M, qx, 32 * G, sx, xs, sxs, G, c2, 16);
        for (int i = 0; i < M * 16; i++)
            if (c1[i] != c2[i]) return 0;
        cattn_ukr_avx2_q8g(G, b8, dd, NULL, sub, h16, 32, M, qx, 32 * G, sx, xs, xs16, sxs, G,
                           c1, 16);
        cattn_ukr_avx512vnni_q8g(G, b8, dd, NULL, sub, h16, 32, M, qx, 32 * G, sx, xs, xs16,
                                 sxs, G, c2, 16);
        for (int i = 0; i < M * 16; i++)
            if (c1[i] != c2[i]) return 0;
        cattn_ukr_avx2_q8g(G, b8, dd, mm, NULL, h16, 128, M, qx, 32 * G, sx, xs, xs16, sxs, G,
                           c1, 16);
        cattn_ukr_avx512vnni_q8g(G, b8, dd, mm, NULL, h16, 128, M, qx, 32 * G, sx, xs, xs16,
                                 sxs, G, c2, 16);
        for (int i = 0; i < M * 16; i++)
            if (c1[i] != c2[i]) return 0;
        /* int6g, int5g: any panel bytes are valid values (u < 64, < 32) */
        for (int m = 1; m <= M; m++) {
            cattn_ukr_avx2_q6g(G, b8, dd, NULL, sub, h16, 32, m, qx, 32 * G, sx, xs, xs16, sxs,
                               G, c1, 16);
            cattn_ukr_avx512vnni_q6g(G, b8, dd, NULL, sub, h16, 32, m, qx, 32 * G, sx, xs, xs16,
                                     sxs, G, c2, 16);
            for (int i = 0; i < m * 16; i++)
                if (c1[i] != c2[i]) return 0;
            cattn_ukr_avx2_q5g(G, b8, dd, mm, NULL, h16, 16, m, qx, 32 * G, sx, xs, xs16, sxs,
                               G, c1, 16);
            cattn_ukr_avx512vnni_q5g(G, b8, dd, mm, NULL, h16, 16, m, qx, 32 * G, sx, xs, xs16,
                                     sxs, G, c2, 16);
            for (int i = 0; i < m * 16; i++)
                if (c1[i] != c2[i]) return 0;
        }
    }
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
    /* its own one-row kernels per panel (AVX2's four-stream form reads A in
     * pairs; a four-stream AVX-512 form is not written or measured yet) */
    kt->ukr_i8_row4 = NULL;
    kt->int8_kernel = use_vnni ? "avx512 vnni (vpdpbusd)"
                      : vnni ? "avx512bw (vpmaddwd; the VNNI kernel failed its load check)"
                             : "avx512bw (vpmaddwd)";
#ifdef CATTN_SIMDE
    /* tools/emu/simde.sh: only the int8 kernels are on SIMDe's intrinsics;
     * the group kernels are native AVX-512 code, never run there */
    const int group_vnni = 0;
    (void)vnni_group_kernels_agree;
#else
    const int group_vnni = vnni && vnni_group_kernels_agree();
#endif
    kt->ukr_q4 = group_vnni ? cattn_ukr_avx512vnni_q4 : cattn_ukr_avx512_q4;
    /* two-level int4 scales inside the kernel (the driver's expansion per
     * panel made a one-row Q4_K GEMV 2-3x slower than AVX2's fused kernel
     * on Zen 4); without VNNI, AVX2's fused kernel (same bits) */
    if (group_vnni) kt->ukr_q4k = cattn_ukr_avx512vnni_q4k;
    if (group_vnni) {                   /* else AVX2's, int6g and int5g included (same bits) */
        kt->ukr_q8g = cattn_ukr_avx512vnni_q8g;
        kt->ukr_q8g_n = NULL;           /* vpdpbusd takes any u8 at full rate */
        kt->ukr_q6g = cattn_ukr_avx512vnni_q6g;
        kt->ukr_q5g = cattn_ukr_avx512vnni_q5g;
    }
    kt->int4_kernel = group_vnni ? "avx512 vnni (vpdpbusd)"
                      : vnni ? "avx512bw (vpmaddubsw; the VNNI kernels failed their load check)"
                             : "avx512bw (vpmaddubsw)";
    kt->softmax_row_f32 = cattn_softmax_row_avx512_f32;
    kt->softmax_row_f64 = cattn_softmax_row_avx512_f64;
    kt->act_f32 = cattn_act_avx512_f32;
    kt->exp_f32 = cattn_exp_avx512_f32;
    kt->exp_f64 = cattn_exp_avx512_f64;
    kt->attn_f32 = cattn_attn_avx512_f32;
    kt->attn_f64 = cattn_attn_avx512_f64;
    /* the float16-cache decode: AVX2's (this path's float32 decode runs
     * AVX2's row helpers too: the same bits) */
    kt->attn_f32.decode_task_h = cattn_attn_avx2_f32.decode_task_h;
}
#endif
