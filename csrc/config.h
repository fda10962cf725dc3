/* config.h — every block size, chunk and thread threshold of cattn's
 * kernels, in one place (the drivers and every ISA folder read them).
 *
 * GEMM (BLIS naming): C[M,N] += A[M,K] · B[K,N] is cut into
 *   NC columns of B   (jc loop; packed B panel KC x NC lives in L3)
 *   KC depth          (pc loop; one B micro-panel KC x NR fills part of L1)
 *   MC rows of A      (ic loop; packed A block MC x KC lives in L2)
 *   NR, MR            (jr, ir loops; the micro-kernel's register tile)
 * The accumulation order over K depends on KC only, never on the thread
 * count, the row count or MC / NC, which is what keeps results bitwise
 * reproducible (and a row's result independent of the other rows).
 */
#ifndef CATTN_CONFIG_H
#define CATTN_CONFIG_H

/* float32: 6 x 16 register tile (12 ymm accumulators) */
#define CATTN_MR_F32 6
#define CATTN_NR_F32 16
/* float64: 6 x 8 register tile (12 ymm accumulators) */
#define CATTN_MR_F64 6
#define CATTN_NR_F64 8

/* KC, MC, NC are derived at run time from the CPU's caches (cpuinfo.h:
 * cattn_gemm_blocks_for; `cattn info` shows them) within these bounds.
 * KC fixes the order of the sums over K: capped at 256 so every CPU with a
 * 32 KiB or larger L1d (every x86-64 CPU since 2008) sums in the same
 * order, and a result is the same bits on any machine of one kernel path.
 * MC and NC only move work between loops: they never change a result. */
#define CATTN_KC_MAX 256
#define CATTN_MC_MAX 480
#define CATTN_NC_MAX 8192

/* Up to this many rows of A, a GEMM with a transposed B (linear layers)
 * packs B one (KC x GEMV_CHUNK) block at a time instead of a whole KC x NC
 * panel (same micro-kernel and order: results do not depend on M). */
#define CATTN_GEMV_MAX_M 12

/* The small-M GEMM splits the weight's columns in fixed chunks of this many
 * (results do not depend on threads), and takes one more thread per this
 * much work (M*N*K). */
#define CATTN_GEMV_CHUNK 192
#define CATTN_GEMV_WORK_PER_THREAD 65536.0

/* The few-row GEMM's first pass over prepacked float32 panels (the weight
 * streaming from memory) prefetches this many floats ahead of its reads:
 * the stream keeps going while the core computes (a scheduling hint only:
 * no result depends on it). */
#ifndef CATTN_STREAM_PF
#define CATTN_STREAM_PF 2048
#endif

/* The int8 one-row kernel (decode) prefetches its weight stream this many
 * bytes ahead (the float32 stream's distance in bytes; a hint only). */
#ifndef CATTN_STREAM_PF_I8
#define CATTN_STREAM_PF_I8 8192
#endif

/* bfloat16dot (bf16dot.c): the tile is BF16DOT_MR rows x BF16DOT_NP panels
 * of 16 columns; a task is up to BF16DOT_MC rows (a multiple of MR) x
 * BF16DOT_NP panels over the whole K, a KC block at a time. Only the order
 * of independent outputs depends on these: never a result. */
#define CATTN_BF16DOT_MR 6
#define CATTN_BF16DOT_NP 4
#define CATTN_BF16DOT_MC 192
/* one row (decode): tasks of ROW_TASK panels in tiles of ROW_NP (8 weight
 * streams in flight per thread; Zen 4, a 4864 x 896 GEMV from memory: the
 * float32 GEMV's bytes/s x 0.88 with 4 x 4, x 0.95 with 16 x 8) */
#define CATTN_BF16DOT_ROW_TASK 16
#define CATTN_BF16DOT_ROW_NP 8

/* Below this many flops (2*M*N*K) a GEMM runs on one thread. */
#define CATTN_GEMM_MIN_FLOPS_PER_THREAD (1 << 18)

/* int8 linear (qgemm.c): a 5 x 16 int32 register tile over the whole K
 * (exact integer sums: no K blocking is needed for the order); threads take
 * tasks of QMC rows x QNC columns (A block and B columns in L2). */
#define CATTN_MR_I8 5
#define CATTN_NR_I8 16
/* int4 (q4gemm.c): rows per micro-kernel tile, k per group, columns per panel */
#define CATTN_MR_Q4 4
#define CATTN_Q4_GROUP 32
#define CATTN_NR_Q4 16
#define CATTN_QGEMM_MC 40
#define CATTN_QGEMM_NC 64
/* With many rows a task is one QMC-row block over all columns, swept
 * CATTN_QGEMM_B_BYTES of packed weight (L2) at a time: nc = that / K
 * columns, within [QNC, CATTN_QGEMM_ROW_NC_MAX]. Zen 3, 4096 rows, against
 * nc = 64 for every K: K = 384 3.6-10% faster (nc = 256), K = 768 and 1536
 * unchanged (128, 64). Only the order of independent tiles changes. */
#define CATTN_QGEMM_B_BYTES 98304
#define CATTN_QGEMM_ROW_NC_MAX 256

/* Shared CPUs (contention.c): a worker starting this late (s) marks the CPU
 * contended for a window of CATTN_CONTENDED_MIN_S, doubling while late
 * starts keep coming (within CATTN_CONTENDED_QUIET_S of the last window's
 * end), up to CATTN_CONTENDED_S; meanwhile regions of fewer than
 * CATTN_SHORT_WORK multiply-adds (about a millisecond on one core) run on
 * one thread. */
#define CATTN_LATE_START_S 2e-4
#define CATTN_CONTENDED_MIN_S 0.01
#define CATTN_CONTENDED_S 0.1
#define CATTN_CONTENDED_QUIET_S 0.5
#define CATTN_SHORT_WORK 3e7

/* Alignment of every scratch buffer (a cache line). */
#define CATTN_ALIGN 64
/* scratch.c: each calling thread keeps up to CATTN_SCRATCH_KEEP freed
 * scratch blocks of at most CATTN_SCRATCH_KEEP_BYTES for its next calls */
#define CATTN_SCRATCH_KEEP 2
#define CATTN_SCRATCH_KEEP_BYTES ((size_t)64 << 20)


/* Fused attention (flash) tiles: BR queries per task (a multiple of the
 * micro-kernel NR), BC keys per kv block. Working set per task with E=64:
 * Q^T 16 KiB + S^T BC x BR + O acc BR x Ev + K/V blocks: well inside L2. */
#define CATTN_ATTN_BR_F32 96
#define CATTN_ATTN_BC_F32 192
#define CATTN_ATTN_BR_F64 32
#define CATTN_ATTN_BC_F64 96
/* Decode path (few query rows): keys in fixed chunks, combined by
 * log-sum-exp in chunk order, so results do not depend on threads. */
#define CATTN_DECODE_MAX_ROWS 8
#define CATTN_DECODE_CHUNK 256
/* Decode scores are taken per block of this many keys for all query rows,
 * while those K rows sit in L1. */
#define CATTN_DECODE_KEY_BLOCK 16
/* Attention takes one more thread per this many flops (4 L S (E + Ev) per head). */
#define CATTN_ATTN_FLOPS_PER_THREAD 1e6

/* Row kernels (softmax, norms, activations): one thread below this many
 * elements per thread (fork/join would dominate); rows handed out about
 * CATTN_ROWS_CHUNK elements at a time; activations split long rows into
 * chunks of CATTN_ACT_CHUNK. Which thread computes a value never changes it. */
#define CATTN_ROWS_MIN_PER_THREAD 32768
#define CATTN_ROWS_CHUNK 16384
#define CATTN_ACT_CHUNK 8192
/* activations (an exp and a divide a value, ~1 ns on Zen 3) take one more
 * thread per this many elements: a 4-row SwiGLU decode step's 4 x 4864
 * gate values ran on one thread while the other waited (3% of the step) */
#define CATTN_ACT_MIN_PER_THREAD 4096
/* softmax along a non-last axis: blocks of this many adjacent columns
 * (vector lanes across columns, no transpose) */
#define CATTN_SMX_COLS_F32 32
#define CATTN_SMX_COLS_F64 16

#endif
