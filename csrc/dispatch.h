/* dispatch.h — the kernel table: every entry the drivers (gemm.c, qgemm.c,
 * attention.c, rows.c) call, with its contract. cpu.c
 * fills the table once at load: the portable kernels (kernels/ref/), then
 * each ISA the CPU supports overrides its entries (kernels/<isa>/table.c).
 * Adding an ISA: a folder under kernels/ with its table.c, its prototype
 * below, one row of cpu.c's REGISTRY (name, CPU test, table fill), its
 * feature flags in cpuinfo.h and cattn/_cpu.pxi (set by the CPU file:
 * cpu_x86.c, or a new architecture's, cpuinfo.h), its compiler flags in
 * setup.py (ISA_FLAGS) and a row in tests/cattn_testing/paths.py.
 *
 * Legend: MR x NR the register tile (config.h); L queries, S keys, E head
 * dim, Ev value dim; T = float (f32) or double (f64) in every pair below.
 */
#ifndef CATTN_DISPATCH_H
#define CATTN_DISPATCH_H

#include "common.h"
#include "cpuinfo.h"

/* ---- the micro-kernel: one strided contract for the GEMM and attention ----
 *   c[i][j] (= or +=) sum_{p<k} a[p*lak + i*lai] * b[p*ldb + j],  i < MR, j < NR
 *   a: MR rows by strides (packed A panel: lak = MR, lai = 1; K rows read in
 *      place: lak = 1, lai = row stride; transposed probabilities: lak = ld, lai = 1)
 *   b: k rows of NR values, row stride ldb (packed B panel: ldb = NR)
 *   c: (MR, NR), row stride ldc; acc = 0 writes c without reading it. */
typedef void (*cattn_ukr_f32_t)(int64_t k, const float *a, int64_t lak, int64_t lai,
                                const float *b, int64_t ldb, float *c, int64_t ldc, int acc);
typedef void (*cattn_ukr_f64_t)(int64_t k, const double *a, int64_t lak, int64_t lai,
                                const double *b, int64_t ldb, double *c, int64_t ldc, int acc);

/* ukr_stream (float32, NULL-able: ukr): the micro-kernel, same contract and
 * bits, that also prefetches b + CATTN_STREAM_PF (config.h) at each step:
 * the few-row GEMM's first pass over prepacked panels coming from memory.
 *
 * two packed A panels against one packed B panel (NULL-able; the GEMM
 * driver's full row panels): rows 0..MR-1 from a, MR..2MR-1 from a2, both
 * (k, MR) panels (lak = MR, lai = 1), b a (k, NR) panel (ldb = NR), c
 * (2 MR, NR) with row stride ldc: exactly two ukr calls' results (each
 * element the same chain), in one register tile. */
typedef void (*cattn_ukr2_f32_t)(int64_t k, const float *a, const float *a2, const float *b,
                                 float *c, int64_t ldc, int acc);
typedef void (*cattn_ukr2_f64_t)(int64_t k, const double *a, const double *a2,
                                 const double *b, double *c, int64_t ldc, int acc);

/* multi-row dot: out[s] = q[0:E] · K[s*rsk : +E] for s < n */
typedef void (*cattn_dotn_f32_t)(float *out, const float *q, const float *K, int64_t rsk,
                                 int64_t n, int64_t E);
typedef void (*cattn_dotn_f64_t)(double *out, const double *q, const double *K, int64_t rsk,
                                 int64_t n, int64_t E);

/* few-row GEMM against a weight W (N, K) read in place, in the blocked
 * path's order (float32; NULL: the driver packs W and runs the micro-kernel):
 *   c[i*ldc + j] = sum over KC blocks, in order, of the block's FMA chain
 *                  sum_{p in block} at[p*mp + i] * w[j*ldw + p]
 * for i < mp, j < n, K blocks of kc (the GEMM's KC). at: A^T, (K, mp), mp 1
 * or a multiple of 8 (zero past M).
 * Each c equals what the micro-kernel gives on packed panels, bit for bit. */
typedef void (*cattn_rows_tn_f32_t)(float *c, int64_t ldc, const float *at, int64_t mp,
                                    const float *w, int64_t ldw, int64_t n, int64_t K,
                                    int64_t kc);

/* 1-3 rows against packed panels (float32, NR = 16; NULL: the driver pads
 * the rows to MR and uses the micro-kernel):
 *   c[i*ldc + jp*16 + j] (=|+=) sum_{p<k} a[i*lda + p] * b[jp*ps + p*16 + j]
 * for i < m (1..3), jp < npan, j < 16: the micro-kernel's arithmetic, bit
 * for bit, with fewer wasted rows. */
typedef void (*cattn_few_rows_f32_t)(int64_t k, const float *a, int64_t lda, int m,
                                     const float *b, int64_t npan, int64_t ps,
                                     float *c, int64_t ldc, int acc);

/* 1..CATTN_GEMV_MAX_M rows against packed bfloat16 panels (float32
 * arithmetic; NULL: the driver widens the panels for the float32 kernels):
 *   c[i*ldc + jp*16 + j] (=|+=) sum_{p<k} a[i*lda + p] * float(b[jp*ps + p*16 + j])
 * for i < m, jp < npan, j < 16: the micro-kernel's arithmetic, bit for bit. */
typedef void (*cattn_few_rows_bf16_t)(int64_t k, const float *a, int64_t lda, int m,
                                      const uint16_t *b, int64_t npan, int64_t ps,
                                      float *c, int64_t ldc, int acc);

/* the "bfloat16dot" tile (bf16dot.c; cattn.h states the formula): m rows
 * (1..CATTN_BF16DOT_MR) x np panels (1..CATTN_BF16DOT_NP; m = 1: up to
 * CATTN_BF16DOT_ROW_NP) of 16 columns over
 * one K block of kc values (kc even but for K's last block):
 *   for q < ceil(kc/2) in order, for each (i, jp, j):
 *     t = ftz(fma(x[2q+1], w[2q+1], acc));  acc = ftz(fma(x[2q], w[2q], t))
 *   x[2q] | x[2q+1] << 16 = a[i*lda + q] (bfloat16 bits, the driver's
 *   rounding; 0 past K); w[p] = the bfloat16 b[jp*ps + p*16 + j] (p < kc;
 *   w[kc] = 0 for odd kc), a subnormal w taken as 0 with its sign; fma
 *   rounded once to float32 (to nearest even), ftz: a subnormal result
 *   becomes 0 with its sign (vdpbf16ps: DAZ, FTZ, RNE)
 *   acc starts at +0 (acc = 0) or at c[i*ldc + jp*16 + j] (acc = 1: the
 *   chain goes on from an earlier K block); the result goes to c.
 * Every path gives the same bits (NULL: never; the portable kernel emulates). */
typedef void (*cattn_bf16dot_t)(int64_t kc, const uint32_t *a, int64_t lda, int m,
                                const uint16_t *b, int np, int64_t ps, float *c, int64_t ldc,
                                int acc);

/* bfloat16 to float32 (exact): dst[i] = the float with high half src[i]
 * (NULL: the driver's loop) */
typedef void (*cattn_bf16_expand_t)(float *dst, const uint16_t *src, int64_t n);

/* A rows into MR = 6 row panels (float32, rows contiguous: csa = 1;
 * NULL: the driver's loops): for each panel r of ceil(mc/6),
 *   dst[r*6*kc + p*6 + i] = A[(6r + i)*rsa + p], 0 for rows past mc */
typedef void (*cattn_pack_a6_f32_t)(float *dst, const float *A, int64_t rsa, int64_t mc,
                                    int64_t kc);

/* transposing pack into NR = 16 wide panels (float32; NULL: scalar packing):
 *   dst[jp][p][j] = src[(jp*16 + j)*ld + p] * scale for rows < rows, 0 up to rows_pad */
typedef void (*cattn_pack_t16_f32_t)(float *dst, const float *src, int64_t ld, int64_t rows,
                                     int64_t rows_pad, int64_t k, float scale);

/* int8 micro-kernel (qgemm.c): an m x 16 tile over all k2 pairs of K, the
 * sums exact in int32 (no saturation), dequantized:
 *   acc[i][j] = sum_{p<k2} lo(a[p*MR + i]) * b[p*32 + 2j] + hi(a[p*MR + i]) * b[p*32 + 2j + 1]
 *   c[i*ldc + j] = ((float)(acc[i][j] - za[i] * colsum[j]) * sa[i]) * sw[j]
 * for i < m (1..MR), j < 16, MR = CATTN_MR_I8; each * rounded on its own (no
 * FMA), int32 -> float to nearest. a: a packed A panel, (k2, MR) uint32
 * pairs of u8 values (lo = bits 0-15, hi = bits 16-31), or when the table's
 * i8_quads is 1, (ceil(k2/2), MR) uint32 quads (bytes a[4q] .. a[4q+3],
 * low byte first; the sums are the same); b: a packed weight
 * panel (int8, cattn.h states the layout); za, sa: the m rows'; colsum, sw:
 * the panel's 16 columns. Then c += bias[j] when bias is not NULL (16
 * values) and c = act(c) (CATTN_ACT_*), each element as this path's
 * activation kernel computes it: the epilogue of the int8 linear. */
typedef void (*cattn_ukr_i8_t)(int64_t k2, const uint32_t *a, int m, const int8_t *b,
                               const int32_t *za, const float *sa, const int32_t *colsum,
                               const float *sw, const float *bias, int act, float *c,
                               int64_t ldc);

/* int8 one-row kernel over four panels (qgemm.c; NULL-able: ukr_i8 per
 * panel): the m = 1 case of ukr_i8 for the 64 columns of four consecutive
 * 16-column panels, panel q's weights at b + q * ps (ps = k2 * 32 bytes),
 * its columns' colsum, sw and bias at + 16 q and its outputs at c + 16 q
 * (bias NULL or 64 values): the values of four ukr_i8 calls with m = 1.
 * Four weight streams at once: a core streaming one panel at a time keeps
 * too few lines in flight (Zen 3, one thread, a one-row int8 GEMV from
 * memory: 13.4 GB/s one stream, 18.4 four, float32's 17.4). */
typedef void (*cattn_ukr_i8_row4_t)(int64_t k2, const uint32_t *a, const int8_t *b,
                                    int64_t ps, const int32_t *za, const float *sa,
                                    const int32_t *colsum, const float *sw, const float *bias,
                                    int act, float *c);

/* int4 micro-kernel (q4gemm.c, the "int4" format): an m x 16 tile over G
 * groups of 32 k, m = 1..CATTN_MR_Q4 rows:
 *   isum[i][j] = sum_{k<32} q[j, 32g + k] * qx[i*ldq + 32g + k]   (exact int32)
 *   acc[i][j] = fma((float)(isum - z * xs[i*lds + g]), d[g*16 + j] * sx[i*lds + g], acc)
 *   then, when mn is not NULL, acc = fma(mn[g*16 + j], sxs[i*lds + g], acc)
 * with d, mn float32 (h16 = 0) or float16 (h16 = 1: widened exactly; finite)
 * for g = 0 .. G-1 in order from acc = 0 (each * and fma rounded once, so
 * every path gives the same bits); c[i*ldc + j] = acc. b: the panel, G
 * groups of 256 bytes: group g's chunk t (t < 4) is 64 bytes, byte 4j + u
 * (u < 4) holding q[j, 32g + 8t + u] in its low nibble and q[j, 32g + 8t
 * + 4 + u] in its high one; d, mn: the panel's (G, 16) scales and mins;
 * qx: int8 [-127, 127], rows of 32 G; sx, xs, sxs: per row and group. */
typedef void (*cattn_ukr_q4_t)(int64_t G, const uint8_t *b, const void *d, const void *mn,
                               int h16, int z, int m, const int8_t *qx, int64_t ldq, const float *sx,
                               const int32_t *xs, const float *sxs, int64_t lds, float *c,
                               int64_t ldc);

/* int4 with two-level scales (GGUF Q4_K; cattn.h, cattn_q4k_scales), k's
 * pointers at the panel's arrays: the int4 contract above with h16 = 0,
 * z = 0 and the float32 values
 *   d[g*16 + j] = D[(g/8)*16 + j] * sc[g*16 + j],  mn[g*16 + j] = -(Dmin[(g/8)*16 + j] * m[g*16 + j])
 * (D, Dmin float16 widened exactly; the products exact), so the same bits
 * as ukr_q4 on the expanded scales. G a multiple of 8. NULL-able: the
 * driver expands a panel's scales and calls ukr_q4. */
typedef void (*cattn_ukr_q4k_t)(int64_t G, const uint8_t *b, const cattn_q4k_scales *k, int m,
                                const int8_t *qx, int64_t ldq, const float *sx, const int32_t *xs,
                                const float *sxs, int64_t lds, float *c, int64_t ldc);

/* int8g micro-kernel (q4gemm.c, the "int8g" format: 8-bit values in groups
 * of 32, e.g. GGUF's Q8_0, Q5_x, Q6_K): an m x 16 tile over G groups,
 * m = 1..CATTN_MR_Q4, the int4 kernel's float steps with
 *   t = isum - z * xs[i*lds + g]                        (s NULL)
 *   t = s[.., 0] (isum_0 - z xs16_0) + s[.., 1] (isum_1 - z xs16_1)   (s: sub-scales)
 * isum_h the exact int32 sum over k in [32g + 16h, +16) of u[j, k] qx[i, k],
 * xs16[i*2*lds + 2g + h] the matching activation sums, s[(g*2 + h)*16 + j]
 * int8; u in [0, 255]. b: the panel, G groups of 512 bytes: chunk t (t <
 * 8) is 64 bytes, byte 4j + v holding u[j, 32g + 4t + v]. */
/* ukr_q8g_n: the same contract for a weight whose every u < 64 (GGUF's
 * Q5_x, Q5_K, Q6_K values; the driver knows it from the format's ubits), so
 * a path may sum more products in 16 bits; NULL: ukr_q8g serves it. */
typedef void (*cattn_ukr_q8g_t)(int64_t G, const uint8_t *b, const void *d, const void *mn,
                                const int8_t *s, int h16, int z, int m, const int8_t *qx,
                                int64_t ldq, const float *sx, const int32_t *xs,
                                const int32_t *xs16, const float *sxs, int64_t lds, float *c,
                                int64_t ldc);
/* ukr_q6g (the "int6g" format): the int8g contract for u < 64 held in 6
 * bits, b G groups of 384 bytes: bytes [0, 256) int4's layout of the low 4
 * bits (chunk t < 4: byte 64t + 4j + v holds u[j, 32g + 8t + v] & 15 in its
 * low nibble, u[j, 32g + 8t + 4 + v] & 15 in its high one); bytes 256 + 64s
 * + 4j + v (s < 2, the sub-block of 16) hold u[j, 32g + 16s + 4f + v] >> 4
 * in bits 2f, 2f + 1 (f < 4). */
/* ukr_q5g (the "int5g" format): the int8g contract for u < 32 held in 5
 * bits, b G groups of 320 bytes: bytes [0, 256) the low 4 bits as int6g's;
 * byte 256 + 4j + v holds u[j, 32g + 4f + v] >> 4 in bit f (f < 8). */

/* int8 row quantization of one contiguous row x[0:K] (NULL: the driver's
 * portable loop), cattn.h's formula (cattn_quantize_rows) bit for bit:
 * *sa, *za, and the u8 values q[k] written as g = 1: bytes dst[k]
 * (stride unused); g = 2 / 4: the packed A words the micro-kernel reads
 * (above: pairs / quads, 0 past K), word p at ((uint32_t *)dst)[p*stride]
 * for p < ceil(K/g). Returns 1 when the row holds NaN or +-inf. */
typedef int (*cattn_quant_row_t)(void *dst, int64_t stride, int g, float *sa, int32_t *za,
                                 const float *x, int64_t K);

/* the group-wise formats' activations (NULL: the driver's portable loop,
 * q4gemm.c, quantize_row): groups g < G of 32 values of a row x, each whose
 * amax = max |x| >= 2^-100 quantized by the driver's formula bit for bit
 * into qx[32g, 32g + 32), sx[g], xs[g], xs16[2g], xs16[2g + 1] and sxs[g];
 * every other group gets sx[g] = -1 (the driver does it). Returns 1 when
 * one of the 32 G values is NaN or +-inf (the outputs are then
 * unspecified: the driver writes the row's NaN form), else 0. */
typedef int (*cattn_quant_q8g_t)(int8_t *qx, float *sx, int32_t *xs, int32_t *xs16, float *sxs,
                                  const float *x, int64_t G);

/* ---- row kernels: one contiguous row (or block of columns) on the calling
 * thread; y may equal x exactly, nothing else may overlap ----
 *   softmax_row: y[n] = softmax(x[n]) (logsm = 0) or log_softmax (logsm = 1)
 *   softmax_cols: the same along n rows of w <= CATTN_SMX_COLS_* adjacent
 *     columns, element (i, j) at x[i*xs + j] / y[i*ys + j]
 *   layer_norm_row / rms_norm_row: y[n] from x[n], weight / bias (n,) or NULL
 *   act: y[n] = act(x[n]) for a CATTN_ACT_* code
 *   exp: y[n] = exp(x[n]); nonpos = 1: the x <= 0 variant (a test hook) */
typedef void (*cattn_smx_row_f32_t)(float *y, const float *x, int64_t n, int logsm);
typedef void (*cattn_smx_row_f64_t)(double *y, const double *x, int64_t n, int logsm);
typedef void (*cattn_smx_cols_f32_t)(float *y, int64_t ys, const float *x, int64_t xs,
                                     int64_t n, int64_t w, int logsm);
typedef void (*cattn_smx_cols_f64_t)(double *y, int64_t ys, const double *x, int64_t xs,
                                     int64_t n, int64_t w, int logsm);
typedef void (*cattn_ln_row_f32_t)(float *y, const float *x, const float *w,
                                   const float *b, int64_t n, double eps);
typedef void (*cattn_ln_row_f64_t)(double *y, const double *x, const double *w,
                                   const double *b, int64_t n, double eps);
typedef void (*cattn_rms_row_f32_t)(float *y, const float *x, const float *w,
                                    int64_t n, double eps);
typedef void (*cattn_rms_row_f64_t)(double *y, const double *x, const double *w,
                                    int64_t n, double eps);
typedef void (*cattn_act_f32_t)(float *y, const float *x, int64_t n, int act);
typedef void (*cattn_act_f64_t)(double *y, const double *x, int64_t n, int act);
typedef void (*cattn_vexp_f32_t)(float *y, const float *x, int64_t n, int nonpos);
typedef void (*cattn_vexp_f64_t)(double *y, const double *x, int64_t n, int nonpos);

/* ---- attention tiles (kernels/attention_tiles_tmpl.h, per ISA and dtype) ----
 * The driver (attention.c) owns threads and memory; one call's state: */
typedef struct {
    const cattn_attn_args *a;   /* the public arguments (cattn.h) */
    int64_t nblk;               /* kv blocks of bc keys */
    uint8_t *vflags;            /* (nkv, nblk): bit 0 non-finite V, bit 1 huge V */
    void *vpk;                  /* V packed per kv block for P·V: unit u's block b at
                                   (u S + b bc) round_up(Ev, nr), as [Ev/nr][n][nr] */
    int64_t nch;                /* decode: key chunks of CATTN_DECODE_CHUNK */
    void *part;                 /* decode: partials (nkv, nch, rows, 2 + Ev) */
} cattn_attn_run;

typedef struct {
    int64_t br, bc;             /* flash tile: queries per task, keys per block */
    int64_t nr;                 /* column panel of the packed V (the micro-kernel's NR) */
    /* scratch of one flash task, in elements */
    size_t (*task_scratch)(const cattn_attn_args *a);
    /* flags of kv block b of unit u into vflags; the block packed into vpk */
    void (*scan_v)(const cattn_attn_run *r, int64_t u, int64_t b);
    /* query rows [qb*br, +br) of query head uq: O, or W when a->W is set */
    void (*flash_task)(const cattn_attn_run *r, int64_t uq, int64_t qb, void *work);
    /* decode: unit u's query rows over key chunk c into the partials (into O
     * directly when there is one chunk; decode_combine is then not called);
     * work: rows x (round_up(E, 16) + CATTN_DECODE_CHUNK) elements */
    void (*decode_task)(const cattn_attn_run *r, int64_t u, int64_t c, void *work);
    /* decode: the partials of row `row` of unit u into O; work: Ev doubles */
    void (*decode_combine)(const cattn_attn_run *r, int64_t u, int64_t row, void *work);
    /* decode_task over a float16 K and V (uint16_t, IEEE binary16; float
     * only, NULL for double): the bits decode_task gives on the widened
     * float32 values (attention_decode_tmpl.h) */
    void (*decode_task_h)(const cattn_attn_run *r, int64_t u, int64_t c, void *work);
} cattn_attn_kernels;

typedef struct {
    const char *name;
    const char *int8_kernel;                /* which int8 micro-kernel ukr_i8 is */
    int i8_quads;                           /* ukr_i8 reads A in quads (above) */
    cattn_gemm_blocks gemm_f32, gemm_f64;   /* KC, MC, NC for this CPU (cpuinfo.h) */
    cattn_ukr_f32_t ukr_f32;
    cattn_ukr_f64_t ukr_f64;
    cattn_ukr_f32_t ukr_stream_f32;         /* NULL-able: ukr_f32 (see above) */
    cattn_ukr2_f32_t ukr2_f32;
    cattn_ukr2_f64_t ukr2_f64;
    cattn_ukr_i8_t ukr_i8;
    cattn_ukr_i8_row4_t ukr_i8_row4;        /* NULL-able (above) */
    cattn_quant_row_t quant_row_u8;
    cattn_quant_q8g_t quant_q8g;
    cattn_ukr_q4_t ukr_q4;
    cattn_ukr_q4k_t ukr_q4k;                /* NULL-able (above) */
    cattn_ukr_q8g_t ukr_q8g;
    cattn_ukr_q8g_t ukr_q8g_n;              /* int8g with every u < 64, or NULL: ukr_q8g */
    cattn_ukr_q8g_t ukr_q6g;                /* int6g */
    cattn_ukr_q8g_t ukr_q5g;                /* int5g */
    const char *int4_kernel;                /* which int4 micro-kernel ukr_q4 is */
    cattn_dotn_f32_t dotn_f32;
    cattn_dotn_f64_t dotn_f64;
    cattn_pack_t16_f32_t pack_t16_f32;
    cattn_pack_a6_f32_t pack_a6_f32;
    cattn_bf16_expand_t bf16_expand_f32;
    cattn_rows_tn_f32_t rows_tn_f32;
    cattn_few_rows_f32_t few_rows_f32;
    cattn_few_rows_bf16_t few_rows_bf16;
    cattn_bf16dot_t bf16dot;                /* the bfloat16dot tile */
    const char *bf16dot_kernel;             /* which one it is */
    cattn_smx_row_f32_t softmax_row_f32;
    cattn_smx_row_f64_t softmax_row_f64;
    cattn_smx_cols_f32_t softmax_cols_f32;
    cattn_smx_cols_f64_t softmax_cols_f64;
    cattn_ln_row_f32_t layer_norm_row_f32;
    cattn_ln_row_f64_t layer_norm_row_f64;
    cattn_rms_row_f32_t rms_norm_row_f32;
    cattn_rms_row_f64_t rms_norm_row_f64;
    cattn_act_f32_t act_f32;
    cattn_act_f64_t act_f64;
    cattn_vexp_f32_t exp_f32;
    cattn_vexp_f64_t exp_f64;
    cattn_attn_kernels attn_f32;
    cattn_attn_kernels attn_f64;
} cattn_dispatch_t;

extern cattn_dispatch_t cattn_kt;

/* each ISA folder's table.c: set that ISA's entries */
void cattn_kernels_ref(cattn_dispatch_t *kt);
#ifdef CATTN_X86
void cattn_kernels_avx2(cattn_dispatch_t *kt);
/* kernels/avx2/q4gemm_f16c.c: where the CPU has F16C, the group kernels
 * (int4, int8g, int6g) that widen float16 scales by vcvtph2ps in place of
 * AVX2's own, entry by entry where the table holds those (same bits) */
void cattn_kernels_avx2_f16c(cattn_dispatch_t *kt);
/* kernels/avx2/attention_h_f16c.c: where the CPU has F16C, the float16-cache
 * decode task that widens by vcvtph2ps (same bits) */
void cattn_attn_avx2_f16c(cattn_dispatch_t *kt);
/* vnni: the CPU has AVX512_VNNI (the int8 kernel then uses vpdpbusd) */
void cattn_kernels_avx512(cattn_dispatch_t *kt, int vnni);
/* kernels/avx512/bf16dot.c: where the CPU has AVX512_BF16 (bf16 = 1), the
 * vdpbf16ps bfloat16dot tile, once it has matched the portable one at load */
void cattn_kernels_avx512_bf16(cattn_dispatch_t *kt, int bf16);
#endif

#endif
