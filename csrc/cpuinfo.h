/* cpuinfo.h — what the CPU is: the instruction sets usable (CPU and OS),
 * its data caches, and the kernel block sizes derived from them.
 *
 * Two halves: a CPU file per architecture reads the CPU (cpu_x86.c: CPUID;
 * it defines cattn_cpu_detect), and cpuinfo.c derives the block sizes and
 * keeps this machine's description (cattn_cpu_this), with typical sizes
 * where the build has no CPU file. cattn_cpu_parse decodes CPUID leaves
 * given by a callback (the real instruction in cpu_x86.c; recorded leaves
 * in the tests), so the decoding and the block-size model are checked on
 * CPUs the build machine is not.
 *
 * Adding an architecture (ARM, say): its test below (#elif, defining
 * CATTN_CPU_ARM and CATTN_HAVE_CPU_FILE); csrc/cpu_arm.c, defining
 * cattn_cpu_detect under CATTN_CPU_ARM (setup.py compiles every C file of
 * csrc/ on every platform: off its architecture a CPU file keeps only what
 * every build links, as cpu_x86.c keeps its decoder); a kernel folder under
 * kernels/ and a row of cpu.c's REGISTRY. Exactly one CPU file defines
 * cattn_cpu_detect in a build; with none, cpuinfo.c's fallback does.
 */
#ifndef CATTN_CPUINFO_H
#define CATTN_CPUINFO_H

#include <stdint.h>

/* The CPU file this build compiles (the CPU is read wherever the compiler
 * can, CATTN_PORTABLE_ONLY builds included: it picks the kernels, not the
 * reading) */
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
#define CATTN_CPU_X86 1
#define CATTN_HAVE_CPU_FILE 1
#endif

typedef struct {
    int64_t bytes;     /* total size of one instance */
    int ways, line;    /* associativity, line size in bytes */
    int shared;        /* logical CPUs sharing one instance (as CPUID reports) */
} cattn_cache;

typedef struct {
    char vendor[13];
    char brand[49];
    int family, model;
    /* usable: CPU flag set and the OS saves the registers (XCR0) */
    int avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512dq, avx512_bf16, avx512_vnni;
    cattn_cache l1d, l2, l3;
    const char *cache_source;   /* which CPUID leaves gave the caches */
} cattn_cpu;

/* GEMM blocks of one precision (BLIS naming; config.h) */
typedef struct { int64_t mc, kc, nc; } cattn_gemm_blocks;

/* out[0..3] = eax, ebx, ecx, edx of CPUID(leaf, sub) */
typedef void (*cattn_cpuid_fn)(void *ctx, uint32_t leaf, uint32_t sub, uint32_t out[4]);

/* Decodes vendor, family/model, brand, ISA and caches from CPUID; xcr0 is
 * XGETBV(0) (ignored unless CPUID says OSXSAVE). Missing cache leaves fall
 * back to AMD's legacy leaves 0x80000005/6, then to typical sizes. */
void cattn_cpu_parse(cattn_cpuid_fn cpuid, void *ctx, uint64_t xcr0, cattn_cpu *cpu);

/* The block sizes for an MR x NR micro-kernel on elements of `elt` bytes
 * (BLIS's analytical model, Low et al. 2016, simplified):
 *   KC = the depth whose B micro-panel (KC x NR) fills half of L1d, at most
 *        CATTN_KC_MAX (results depend on KC: capped so every CPU with a
 *        32 KiB or larger L1d sums in the same order);
 *   MC = the rows whose packed A block (MC x KC) fills 9/32 of L2, a
 *        multiple of MR, in [MR, CATTN_MC_MAX];
 *   NC = the columns whose packed B panel (KC x NC) fills a quarter of one
 *        core's L3 share, a multiple of NR, in [16 NR, CATTN_NC_MAX]. */
void cattn_gemm_blocks_for(const cattn_cpu *cpu, int mr, int nr, int elt, cattn_gemm_blocks *b);

/* The kernel paths of this build that `cpu` runs, comma-separated, best
 * first, into buf (at least 64 bytes): what cattn would choose among (cpu.c). */
void cattn_paths_for(const cattn_cpu *cpu, char *buf);

/* Fills *cpu from this machine's hardware and returns 1, or returns 0 when
 * the build has no CPU file for its architecture (cpuinfo.c's fallback;
 * *cpu untouched). Defined by the one CPU file of the build (cpu_x86.c). */
int cattn_cpu_detect(cattn_cpu *cpu);

/* This machine, decoded once (thread-safe after cattn_init); typical cache
 * sizes and no instruction sets where cattn_cpu_detect returns 0. */
const cattn_cpu *cattn_cpu_this(void);

#endif
