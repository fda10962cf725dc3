/* cattn.h — the C API of cattn's kernels.
 *
 * Shape legend used everywhere:  B batch, H heads, L query length,
 * S key length, E head dim (Ev for values), M/N/K GEMM sizes.
 * Conventions: outputs first, then inputs, then sizes (int64_t), strides in
 * elements (may be negative or zero), then n_threads. Every function trusts
 * its inputs (Python validated them) and returns a status code; none exits.
 */
#ifndef CATTN_H
#define CATTN_H

#include <stdint.h>
#include <stddef.h>

/* status codes */
#define CATTN_OK 0
#define CATTN_ENOMEM 1
#define CATTN_EKIND 2   /* cattn_linear_weight: no such weight kind */
#define CATTN_EARGS 3   /* arguments the kernel does not take (cattn_attn_args.slen) */

/* epilogue activations, applied after bias while the C tile is in cache */
#define CATTN_ACT_NONE 0
#define CATTN_ACT_RELU 1
#define CATTN_ACT_GELU 2       /* x * Phi(x), erf form */
#define CATTN_ACT_GELU_TANH 3  /* GPT-2's tanh approximation */
#define CATTN_ACT_SILU 4

/* ---- cpu.c: feature detection and kernel dispatch ---- */
/* Fills the dispatch table once (idempotent). Honours CATTN_ISA=<path> and
 * CATTN_FORCE_PORTABLE=1. */
void cattn_init(void);
/* Name of the selected path: "avx2" or "portable". */
const char *cattn_kernel_path(void);
/* the int8 micro-kernel in use, e.g. "avx512 vnni (vpdpbusd)" */
const char *cattn_int8_kernel(void);
const char *cattn_int4_kernel(void);
/* the bfloat16dot tile in use, e.g. "avx512_bf16 (vdpbf16ps)" */
const char *cattn_bf16dot_kernel(void);
/* Why CATTN_ISA could not be honoured (the portable path runs then), or NULL. */
const char *cattn_isa_error(void);
/* Comma-separated kernel paths: of this build / that this CPU runs, best first. */
const char *cattn_built_paths(void);
const char *cattn_available_paths(void);
int cattn_cpu_has_avx2_fma(void);
int cattn_have_openmp(void);
int cattn_omp_max_threads(void);
const char *cattn_compiler(void);

/* ---- gemm.c ----
 * C[M,N] = A[M,K] · B[K,N], then C[i,j] += bias[j] and
 * C = act(C) if bias / act are given.
 *   A: (M, K) element (i,p) at A[i*rsa + p*csa]
 *   B: (K, N) element (p,j) at B[p*rsb + j*csb]
 *   C: (M, N) element (i,j) at C[i*rsc + j*csc]; must not overlap A or B
 *   bias: (N,) contiguous or NULL
 * C is only written, never read (NaN in C does not propagate). */
int cattn_gemm_f32(float *C, int64_t rsc, int64_t csc,
                   const float *A, int64_t rsa, int64_t csa,
                   const float *B, int64_t rsb, int64_t csb,
                   int64_t M, int64_t N, int64_t K,
                   const float *bias, int act,
                   int n_threads);
int cattn_gemm_f64(double *C, int64_t rsc, int64_t csc,
                   const double *A, int64_t rsa, int64_t csa,
                   const double *B, int64_t rsb, int64_t csb,
                   int64_t M, int64_t N, int64_t K,
                   const double *bias, int act,
                   int n_threads);

/* Batched: for b in [0, nb): the GEMM above on A + offa[b], B + offb[b],
 * C + offc[b] (offsets in elements; broadcasting = repeated offsets, but
 * the C offsets must address disjoint matrices). One parallel region: small
 * GEMMs are spread over threads, large ones run cooperatively in turn. */
int cattn_gemm_batched_f32(float *C, const int64_t *offc, int64_t rsc, int64_t csc,
                           const float *A, const int64_t *offa, int64_t rsa, int64_t csa,
                           const float *B, const int64_t *offb, int64_t rsb, int64_t csb,
                           int64_t nb, int64_t M, int64_t N, int64_t K,
                           const float *bias, int act,
                           int n_threads);
int cattn_gemm_batched_f64(double *C, const int64_t *offc, int64_t rsc, int64_t csc,
                           const double *A, const int64_t *offa, int64_t rsa, int64_t csa,
                           const double *B, const int64_t *offb, int64_t rsb, int64_t csb,
                           int64_t nb, int64_t M, int64_t N, int64_t K,
                           const double *bias, int act,
                           int n_threads);

/* Shared CPUs (contention.c): 1 while short parallel regions run on one
 * thread because a worker recently started late; cattn_set_contended marks
 * the CPU so for `seconds` (0 clears it: a test hook); cattn_note_late_start
 * records a late start as a region does, returning the window (s) it chose. */
int cattn_contended(void);
void cattn_set_contended(double seconds);
double cattn_note_late_start(void);
/* Late starts mark the CPU contended (1, the default) or are ignored (0:
 * a process whose own other threads (a server's event loop) cause them);
 * returns the previous setting. */
int cattn_set_contention_detection(int on);

/* Prepacked weights (cattn.pack_weight): a weight W (N, K) in torch's
 * layout (element (j, p) at W[j*rsw + p*csw]) packed once into the panels
 * the GEMM reads (gemm_tmpl.h states the layout; *_packed_size elements,
 * valid for the KC that *_packed_kc returns), then
 *   C[M,N] = A[M,K] · W^T (+ bias, act)
 * from them for any M, in cattn_gemm's accumulation order (the same bits). */
size_t cattn_packed_size_f32(int64_t N, int64_t K);
size_t cattn_packed_size_f64(int64_t N, int64_t K);
int64_t cattn_packed_kc_f32(void);
int64_t cattn_packed_kc_f64(void);
void cattn_pack_weight_f32(float *P, const float *W, int64_t rsw, int64_t csw,
                           int64_t N, int64_t K);
void cattn_pack_weight_f64(double *P, const double *W, int64_t rsw, int64_t csw,
                           int64_t N, int64_t K);
int cattn_linear_packed_f32(float *C, int64_t rsc, int64_t csc, const float *A, int64_t rsa,
                            int64_t csa, const float *P, int64_t M, int64_t N, int64_t K,
                            const float *bias, int act, int n_threads);
int cattn_linear_packed_f64(double *C, int64_t rsc, int64_t csc, const double *A, int64_t rsa,
                            int64_t csa, const double *P, int64_t M, int64_t N, int64_t K,
                            const double *bias, int act, int n_threads);

/* bfloat16 weights: P16 holds the high 16 bits of the float32 panels (the
 * same layout; the weight rounded to bfloat16 beforehand). Each panel is
 * expanded to float32 before use, so the result is the float32 linear on
 * the bfloat16 values, bit for bit. */
int cattn_linear_packed_bf16(float *C, int64_t rsc, int64_t csc, const float *A, int64_t rsa,
                             int64_t csa, const uint16_t *P16, int64_t M, int64_t N, int64_t K,
                             const float *bias, int act, int n_threads);

/* bfloat16 weights and bfloat16 activations, vdpbf16ps's arithmetic
 * (bf16dot.c; the "bfloat16dot" format): P16 the bfloat16 panels above (the
 * same layout and values), w[j, k] their values. Each row of A is rounded
 * to bfloat16 first:
 *   xb[k] = bfloat16(x[k]): a subnormal x taken as 0 with its sign (DAZ),
 *           then to nearest, ties to even (NaN stays a quiet NaN, its top
 *           bits kept; past the range: +-inf); xb[K] = w[j, K] = 0 for odd K
 * then per output one chain over the pairs of k, in order:
 *   acc = +0
 *   for q = 0 .. ceil(K/2) - 1:
 *     t   = ftz(fma(xb[2q+1], w[j, 2q+1], acc))
 *     acc = ftz(fma(xb[2q],   w[j, 2q],   t))
 *   C[i, j] = act(acc + bias[j])            (the + rounded as float32)
 * fma: the exact product plus the addend rounded once to float32, to
 * nearest even; a subnormal w is taken as 0 with its sign; ftz: a
 * subnormal result becomes 0 with its sign (vdpbf16ps: DAZ, FTZ, RNE
 * whatever MXCSR says; measured on Zen 4). act: this path's activation
 * kernel. The same bits on every kernel path (the portable one emulates
 * vdpbf16ps), thread count, and for a row alone or among any others.
 * Not the float32 linear's bits on the widened weight (cattn_linear_packed_bf16):
 * the activations lose their low 16 bits, the sum runs over pairs. */
int cattn_linear_bf16dot(float *C, int64_t rsc, const float *A, int64_t rsa,
                         const uint16_t *P16, int64_t M, int64_t N, int64_t K,
                         const float *bias, int act, int n_threads);
/* the activations' rounding above (a test hook): dst[k] = xb[k] bits, k < n */
void cattn_round_bf16_daz(uint16_t *dst, const float *x, int64_t n);

/* int8 weights (qgemm.c): qw (N, K) int8 in [-127, 127] with a scale sw[j]
 * per output channel, packed by pack_weight into panels of 16 columns:
 *   P[jp*k2*32 + p*32 + 2*j + t] = qw[jp*16 + j, 2*p + t]   (0 past N or K)
 * k2 = ceil(K / 2) pairs (cattn_qpacked_size bytes); colsum[j] = sum_k qw[j, k].
 * Each row i of A is quantized at call time (cattn_quantize_rows), then
 *   C[i, j] = act(((float)(acc[i, j] - za[i] * colsum[j]) * sa[i]) * sw[j] + bias[j])
 * with acc[i, j] = sum_k qa[i, k] * qw[j, k] exact in int32: the caller
 * guarantees 255 * sum_k |qw[j, k]| < 2^31 (cattn_qweight_ok). A row holding
 * NaN or +-inf gives NaN in every output of that row. */
size_t cattn_qpacked_size(int64_t N, int64_t K);
int cattn_qweight_ok(const int32_t *abs_rowsum, int64_t N);
/* sw and colsum have N rounded up to 16 entries (0 past N). */
int cattn_linear_int8(float *C, int64_t rsc, int64_t csc, const float *A, int64_t rsa,
                      int64_t csa, const int8_t *P, const float *sw, const int32_t *colsum,
                      int64_t M, int64_t N, int64_t K, const float *bias, int act, int n_threads);
/* Row quantization (asymmetric, u8): for row i of X (M, K), lo = min(0, min x),
 * hi = max(0, max x), d = (double)hi - (double)lo, inv = 255 / d (double),
 *   za[i] = clamp(rint(-lo * inv), 0, 255),
 *   q[i, k] = clamp(rint(x *f (float)inv) + za, 0, 255),
 *   sa[i] = (float)(d / 255)     (rint: to nearest, ties to even)
 * where x *f (float)inv is the float32 product (rounded once to float; the
 * quantization step is 1, the product's rounding 2^-24 relative); when
 * inv > 2^126 ((float)inv could overflow) it is (x *f 2^64) *f (float)(inv / 2^64).
 * An all-zero row: q = 0, za = 0, sa = 0. bad[i] = 1 when the row holds NaN or
 * +-inf (then q = 0, za = 0, sa = NaN). */
void cattn_quantize_rows(uint8_t *q, float *sa, int32_t *za, uint8_t *bad, const float *X,
                         int64_t rsx, int64_t csx, int64_t M, int64_t K);
/* The int32 accumulators alone (a test hook): acc (M, N) = qa (M, K) u8 · qw^T
 * from the packed P, by the micro-kernel cattn_linear_int8 runs with unit
 * scales and no zero point (exact while |acc| <= 2^24, as float). */
int cattn_qgemm_i32(int32_t *acc, const uint8_t *qa, const int8_t *P, int64_t M, int64_t N,
                    int64_t K, int n_threads);

/* ---- q4gemm.c: int4 linear layers ----
 * C (M, N) rows of N = act(x (M, K) rows of K · W^T + bias), W the int4
 * weight: groups of 32 k, w[j, k] = d[j, g] q[j, k] + mn[j, g] (mn NULL:
 * d[j, g] (q[j, k] - z)), q in [0, 15]. P: ceil(N/16) panels of G =
 * ceil(K/32) groups of 256 bytes (dispatch.h, cattn_ukr_q4_t, states a
 * group's bytes; cattn_q4_packed_bytes in all; 0 past N and K); d, mn:
 * (ceil(N/16), G, 16) float32 (h16 = 0) or float16 (h16 = 1), finite, or
 * k's two-level scales. Each row of x is quantized in groups of 32
 * (cattn_quantize_q8_blocks) and the result is the micro-kernel's formula;
 * a row holding NaN or +-inf gives NaN in every output of that row. */
size_t cattn_q4_packed_bytes(int64_t N, int64_t K);
/* int8g: the same loops with 8-bit values u[j, k] in [0, 255]: w[j, k] =
 * (d[j, g] s[j, h]) (u - z) + mn[j, g] (s: int8 per 16 k, h = k/16, or
 * NULL: 1; mn NULL: 0); P: ceil(N/16) panels of G groups of 512 bytes
 * (dispatch.h, cattn_ukr_q8g_t); sub: (ceil(N/16), G, 2, 16) int8. ubits:
 * every u < 2^ubits (8 when unknown; <= 6 lets a path sum more products in
 * 16 bits: the same results). */
size_t cattn_q8g_packed_bytes(int64_t N, int64_t K);
/* int6g: int8g's values and formula with every u < 64, held in 6 bits: P
 * ceil(N/16) panels of G groups of 384 bytes (dispatch.h, ukr_q6g) */
size_t cattn_q6g_packed_bytes(int64_t N, int64_t K);
int cattn_linear_int6g(float *C, const float *A, const uint8_t *P, const void *d,
                       const void *mn, const int8_t *sub, int h16, int z, int64_t M, int64_t N,
                       int64_t K, const float *bias, int act, int n_threads);
/* int5g: int8g's values and formula with every u < 32, held in 5 bits: P
 * ceil(N/16) panels of G groups of 320 bytes (dispatch.h, ukr_q5g) */
size_t cattn_q5g_packed_bytes(int64_t N, int64_t K);
int cattn_linear_int5g(float *C, const float *A, const uint8_t *P, const void *d,
                       const void *mn, const int8_t *sub, int h16, int z, int64_t M, int64_t N,
                       int64_t K, const float *bias, int act, int n_threads);
int cattn_linear_int8g(float *C, const float *A, const uint8_t *P, const void *d,
                       const void *mn, const int8_t *sub, int h16, int z, int ubits, int64_t M,
                       int64_t N, int64_t K, const float *bias, int act, int n_threads);
/* int4's two-level scales (GGUF Q4_K: 4.6 bits a weight instead of 6): per
 * panel and group, d = D sc and mn = -(Dmin m) (float32 products, exact),
 * D, Dmin float16 per 8 groups. sc, m: (ceil(N/16), G, 16) u8; D, Dmin:
 * (ceil(N/16), G/8, 16) float16 bits; G a multiple of 8. With them, d and mn
 * are NULL and the result is the float32-scale weight's, bit for bit. */
typedef struct {
    const uint8_t *sc, *m;
    const uint16_t *D, *Dmin;
} cattn_q4k_scales;
int cattn_linear_int4(float *C, const float *A, const uint8_t *P, const void *d,
                      const void *mn, const cattn_q4k_scales *k, int h16, int z, int64_t M,
                      int64_t N, int64_t K, const float *bias, int act, int n_threads);
/* The activations' quantization (a test hook; rows of K contiguous): per
 * row and group g of 32 (0 past K), amax = max |x|; sx = (float)(amax / 127)
 * (in double); qx = rint(x *f (127 /f amax)) in [-127, 127] (for amax <
 * 2^-100: in double); xs = sum qx, xs16 the sums of its two halves
 * (rows of 2 ceil(K/32)); sxs = sx *f (float)xs; amax = 0: all 0.
 * bad[i] = 1 when row i holds NaN or +-inf (then qx = xs = 0, sx = sxs = NaN).
 * qx: rows of 32 ceil(K/32); sx, xs, sxs: rows of ceil(K/32). */
void cattn_quantize_q8_blocks(int8_t *qx, float *sx, int32_t *xs, int32_t *xs16, float *sxs,
                              uint8_t *bad, const float *X, int64_t M, int64_t K);

/* ---- probe.c: a memory-read probe for the benchmarks ----
 * The xor of the 64-bit words of p[0:bytes) (bytes a multiple of 8), read
 * once by nt threads in contiguous parts. */
uint64_t cattn_read_probe(const void *p, size_t bytes, int nt);

/* ---- weights.c: one linear layer's weight, whatever its format ----
 * The weight kinds (cattn/ops/formats.py names them; a new format is a new
 * kind here, a case in cattn_linear_weight and its kernels):
 *   CATTN_W_F32    float32 panels (cattn_pack_weight_f32)
 *   CATTN_W_BF16   bfloat16 panels (cattn_linear_packed_bf16)
 *   CATTN_W_BF16DOT the same panels, vdpbf16ps's formula (cattn_linear_bf16dot)
 *   CATTN_W_INT8   int8 panels with sw and colsum (cattn_linear_int8)
 *   CATTN_W_PLAIN  a plain float32 (N, K) array, element (j, p) at P[j*rsw + p*csw]
 *   CATTN_W_INT4   int4 panels with sw = d, mn and z (cattn_linear_int4)
 *   CATTN_W_INT8G  int8g panels with sw = d, mn, sub and z (cattn_linear_int8g)
 *   CATTN_W_INT6G  int6g panels, the same fields (cattn_linear_int6g)
 *   CATTN_W_INT5G  int5g panels, the same fields (cattn_linear_int5g)
 *   CATTN_W_STACK  rows stacked from nparts weights of the kinds above (parts:
 *                  part i gives the next parts[i].N outputs; the same K; no
 *                  stack inside a stack), each part's kernel writing its
 *                  columns of y: each part's bits, as if called alone
 * cattn_linear_weight: y (M, N) rows of N = act(x (M, K) rows of K · W^T + bias)
 * by the kind's kernel, the same bits as that kernel called directly. */
#define CATTN_W_F32 0
#define CATTN_W_BF16 1
#define CATTN_W_INT8 2
#define CATTN_W_PLAIN 3
#define CATTN_W_INT4 4
#define CATTN_W_INT8G 5
#define CATTN_W_INT6G 6
#define CATTN_W_INT5G 7
#define CATTN_W_STACK 8
#define CATTN_W_BF16DOT 9
typedef struct cattn_weight cattn_weight;
struct cattn_weight {
    int kind;
    const void *P;              /* the panels (stored type), or the plain array */
    const float *sw;            /* int8: per-channel scales (N rounded up to 16) */
    const int32_t *colsum;      /* int8: sum_k qw[j, k] */
    const float *bias;          /* (N,) or NULL */
    int64_t N, K;
    int64_t rsw, csw;           /* CATTN_W_PLAIN's strides (elements) */
    const void *mn;             /* int4: the groups' mins, or NULL (then z) */
    int h16;                    /* int4: sw and mn are float16 (else float32) */
    const int8_t *sub;          /* int8g, int6g, int5g: sub-scales per 16, or NULL */
    cattn_q4k_scales k;         /* int4: two-level scales (k.sc NULL: none) */
    int z;                      /* int4: the zero point without mins (0 or 8) */
    int ubits;                  /* int8g: every u < 2^ubits (8: unknown) */
    const cattn_weight *parts;  /* CATTN_W_STACK: its nparts weights */
    int64_t nparts;
};
int cattn_linear_weight(const cattn_weight *w, float *y, const float *x, int64_t M, int act,
                        int n_threads);
/* the same into y rows of ldy >= N floats (a stack's parts write their columns) */
int cattn_linear_weight_ld(const cattn_weight *w, float *y, int64_t ldy, const float *x,
                           int64_t M, int act, int n_threads);
/* q4gemm.c: the group kinds (CATTN_W_INT4, INT8G, INT6G, INT5G) into y rows of ldy */
int cattn_linear_group_weight(const cattn_weight *w, float *y, int64_t ldy, const float *x,
                              int64_t M, int act, int n_threads);

/* ---- attention.c: fused scaled-dot-product attention ----
 * O = softmax(Q K^T * scale + mask) V per (batch, head), flash-style: the
 * (L, S) score matrix is never stored. Legend: L queries, S keys, E head
 * dim, Ev value dim. A "unit" is one (batch, kv head) with `group` query
 * heads (GQA: query head h uses kv head h / group).
 *   Q: Q + offq[u*group+g] (L, E), row stride rsq, last axis contiguous
 *   K: K + offk[u] (S, E) rows rsk;  V: V + offv[u] (S, Ev) rows rsv
 *   O: O + offo[u*group+g] (L, Ev) rows rso (must not overlap inputs)
 *   mask: NULL or + offm[u*group+g], element (i, s) at i*rsm + s*csm;
 *     mkind CATTN_MASK_BOOL = bool bytes (nonzero = attend), CATTN_MASK_ADD =
 *     additive (same dtype), CATTN_MASK_NONE without a mask
 *   causal: key s visible to row i iff s <= i + shift
 *   W: NULL, or the probabilities (L, S) at W + offw[u*group+g] rows rsw,
 *     in which case O is not computed (attention_weights).
 *   slen: NULL, or per unit its own key count S_u <= S (a ragged decode
 *     step: the keys of unit u are its first S_u; taken on the decode path
 *     only, L * group <= CATTN_DECODE_MAX_ROWS, without W, else
 *     CATTN_EARGS). Unit u gives the bits it gives alone with S = S_u.
 * A row with no visible key gives 0; masked keys never contribute, even
 * when their K or V holds NaN. */
#define CATTN_MASK_NONE 0
#define CATTN_MASK_BOOL 1
#define CATTN_MASK_ADD 2
typedef struct {
    void *O; const int64_t *offo; int64_t rso;
    const void *Q; const int64_t *offq; int64_t rsq;
    const void *K; const int64_t *offk; int64_t rsk;
    const void *V; const int64_t *offv; int64_t rsv;
    const void *mask; int mkind; const int64_t *offm; int64_t rsm, csm;
    void *W; const int64_t *offw; int64_t rsw;
    int64_t nkv, group, L, S, E, Ev;
    double scale; int causal; int64_t shift;
    const int64_t *slen;
} cattn_attn_args;

int cattn_attention_f32(cattn_attn_args *args, int n_threads);
int cattn_attention_f64(cattn_attn_args *args, int n_threads);
/* As cattn_attention_f32 with K and V IEEE float16 (uint16_t bits, strides
 * in elements; a float16 KV cache): the bits cattn_attention_f32 gives on
 * K and V widened to float32. */
int cattn_attention_f32_kvh(cattn_attn_args *args, int n_threads);
/* ---- rows.c: softmax, norms, activations ----
 * Row-wise kernels: one thread owns a whole row (or block of columns), rows
 * are handed out in fixed chunks, so results are bitwise identical for any n_threads.
 * Inputs below 32768 elements per thread run on fewer threads (one for small). */

/* Softmax along the middle axis of an (outer, n, inner) view:
 *   logsm = 0: y[o,i,j] = exp(x[o,i,j] - m[o,j]) / sum_i' exp(x[o,i',j] - m[o,j])
 *   logsm = 1: y[o,i,j] = x[o,i,j] - m[o,j] - log(sum_i' exp(x[o,i',j] - m[o,j]))
 *   with m = max over i (NaN ignored; -inf when the row has no finite value).
 * A row of all -inf gives 0 (logsm: -inf); a NaN (or +inf) makes its row NaN.
 *   y: (outer, n, inner), element (o,i,j) at y[o*yso + i*ysn + j*ysi]
 *   x: (outer, n, inner), element (o,i,j) at x[o*xso + i*xsn + j*xsi]
 * Unit xsi and ysi with inner > 1 take a column kernel (inner vectorized);
 * everything else runs row by row (rows with non-unit stride are gathered
 * into per-thread scratch). y may equal x exactly (same pointer and
 * strides): the op then runs in place; no other overlap. */
int cattn_softmax_f32(float *y, int64_t yso, int64_t ysn, int64_t ysi,
                      const float *x, int64_t xso, int64_t xsn, int64_t xsi,
                      int64_t outer, int64_t n, int64_t inner, int logsm, int n_threads);
int cattn_softmax_f64(double *y, int64_t yso, int64_t ysn, int64_t ysi,
                      const double *x, int64_t xso, int64_t xsn, int64_t xsi,
                      int64_t outer, int64_t n, int64_t inner, int logsm, int n_threads);

/* Layer norm over the last axis, two-pass (mean, then centered variance;
 * float32 rows accumulate in double):
 *   y[r,:] = (x[r,:] - mean) / sqrt(var + eps) * weight + bias
 *   y: (rows, n), row r at y + r*ys, unit element stride
 *   x: (rows, n), row r at x + r*xs, unit element stride
 *   weight, bias: (n,) contiguous, or NULL (1 and 0)
 * y may equal x exactly; no other overlap. */
int cattn_layer_norm_f32(float *y, int64_t ys, const float *x, int64_t xs,
                         const float *weight, const float *bias,
                         int64_t rows, int64_t n, double eps, int n_threads);
int cattn_layer_norm_f64(double *y, int64_t ys, const double *x, int64_t xs,
                         const double *weight, const double *bias,
                         int64_t rows, int64_t n, double eps, int n_threads);

/* RMS norm over the last axis: y[r,:] = x[r,:] / sqrt(mean(x[r,:]^2) + eps) * weight
 *   y, x: (rows, n) as for layer norm; weight: (n,) contiguous or NULL.
 * y may equal x exactly; no other overlap. */
int cattn_rms_norm_f32(float *y, int64_t ys, const float *x, int64_t xs,
                       const float *weight, int64_t rows, int64_t n, double eps,
                       int n_threads);
int cattn_rms_norm_f64(double *y, int64_t ys, const double *x, int64_t xs,
                       const double *weight, int64_t rows, int64_t n, double eps,
                       int n_threads);

/* Elementwise activation (CATTN_ACT_*): y[r,i] = act(x[r,i])
 *   y: (rows, n), row r at y + r*ys, unit element stride
 *   x: (rows, n), row r at x + r*xs, unit element stride
 * y may equal x exactly; no other overlap. */
int cattn_act_f32(float *y, int64_t ys, const float *x, int64_t xs,
                  int64_t rows, int64_t n, int act, int n_threads);
int cattn_act_f64(double *y, int64_t ys, const double *x, int64_t xs,
                  int64_t rows, int64_t n, int act, int n_threads);

/* Test hook: y[i] = exp(x[i]) through the selected path's vector exp
 * (kernels/avx2/vexp.h or kernels/ref/vexp.h), single-threaded; nonpos = 1 uses the variant
 * for x <= 0 that softmax and the activations call.
 *   y, x: (n,) contiguous. */
int cattn_vexp_f32(float *y, const float *x, int64_t n, int nonpos);
int cattn_vexp_f64(double *y, const double *x, int64_t n, int nonpos);

/* tokens.c: a sentence model's token rows out (single-threaded).
 * out[b] = mean of sequence b's rows of x (in double, rows in order),
 * divided by max(its L2 norm, 1e-12) when normalize; rounded once.
 * x (sum of lengths, E) holds the sequences' rows one after another;
 * out (B, E); a sequence of no rows gives 0. */
int cattn_mean_pool_f32(float *out, const float *x, const int64_t *lengths, int64_t B,
                        int64_t E, int normalize);

/* decoder.c: a decoder step's row operations (single-threaded; the
 * formulas are in decoder.c's header). RoPE in place on `heads` heads of D
 * per row, at positions pos[r] of the (positions, D/2) cos/sin tables: */
void cattn_rope_f32(float *x, int64_t rows, int64_t rs, int64_t heads, int64_t D,
                    const int64_t *pos, const float *cos, const float *sin);
/* The L new rows of each sequence (rows b*L + t of src, Hk heads of D from
 * the row's start) into cache (B, Hk, max_len, D) at positions start.. : */
void cattn_kv_append_f32(float *cache, int64_t B, int64_t Hk, int64_t max_len, int64_t D,
                         int64_t start, const float *src, int64_t L, int64_t rs);
/* The same into a float16 cache (uint16_t bits), each value rounded to the
 * nearest float16 (ties to even, NumPy's astype); returns how many finite
 * values overflowed to an infinity (|x| >= 65520): */
int64_t cattn_kv_append_f32_h(uint16_t *cache, int64_t B, int64_t Hk, int64_t max_len, int64_t D,
                              int64_t start, const float *src, int64_t L, int64_t rs);
/* x (rows, 2n) = [act(gate) | up] rows -> their product (rows, n) in x's
 * first rows*n floats, in place (each product rounded once): */
void cattn_gate_pack_f32(float *x, int64_t rows, int64_t n);

#endif
