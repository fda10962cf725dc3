/* cpu.c — CPU feature detection, the dispatch table (dispatch.h) filled
 * once at load, scratch memory, build information.
 *
 * The table starts as the portable path (kernels/ref/table.c); the chosen
 * ISA then overrides its entries: the best one this build has and the CPU
 * and OS support (cpuinfo.c), or the one CATTN_ISA names (CATTN_FORCE_PORTABLE=1:
 * portable). The GEMM block sizes come from the CPU's caches (cpuinfo.c).
 * Adding an ISA: its folder under kernels/, PATHS and runs() below, and one
 * line in cattn_init.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dispatch.h"
#include "threads.h"

cattn_dispatch_t cattn_kt;

int cattn_cpu_has_avx2_fma(void)
{
    const cattn_cpu *cpu = cattn_cpu_this();
    return cpu->avx2 && cpu->fma;
}

static int env_set(const char *name)
{
    const char *s = getenv(name);
    return s && s[0] && strcmp(s, "0") != 0;
}

/* the paths this build has, best first, and whether this CPU runs them */
static const char *const PATHS[] = {
#ifdef CATTN_X86
    "avx512", "avx2",
#endif
    "portable"};
#define NPATHS ((int)(sizeof PATHS / sizeof PATHS[0]))

/* the avx512 path: AVX-512 F, BW, VL and DQ (Skylake-SP, Zen 4 and later;
 * not Knights Landing), on top of AVX2 + FMA, whose kernels it reuses */
static int runs(const char *path, const cattn_cpu *cpu)
{
    if (strcmp(path, "avx512") == 0)
        return cpu->avx2 && cpu->fma && cpu->avx512f && cpu->avx512bw && cpu->avx512vl &&
               cpu->avx512dq;
    if (strcmp(path, "avx2") == 0) return cpu->avx2 && cpu->fma;
    return strcmp(path, "portable") == 0;
}

static char isa_error[256];
static int initialized = 0;

/* The path: CATTN_ISA if set (a path this build has and this CPU runs,
 * else no path and cattn_isa_error() says why), CATTN_FORCE_PORTABLE=1,
 * or the best path this CPU runs. */
static const char *choose_path(const cattn_cpu *cpu)
{
    const char *want = getenv("CATTN_ISA");
    if (want && want[0]) {
        int known = 0;
        for (int i = 0; i < NPATHS; i++) {
            if (strcmp(want, PATHS[i]) != 0) continue;
            known = 1;
            if (runs(want, cpu)) return want;
        }
        if (known)
            snprintf(isa_error, sizeof isa_error, "CATTN_ISA=%s: this CPU (%s) lacks %s",
                     want, cpu->brand[0] ? cpu->brand : cpu->vendor,
                     strcmp(want, "avx512") == 0 ? "AVX-512 F, BW, VL and DQ (or the OS does "
                     "not save the ZMM registers)" : "AVX2 and FMA");
        else
            snprintf(isa_error, sizeof isa_error, "CATTN_ISA=%.40s: not a kernel path of "
                     "this build of cattn (it has: %s%s%s; unset CATTN_ISA for the best one "
                     "this CPU runs)", want, PATHS[0], NPATHS > 1 ? ", " : "",
                     NPATHS > 1 ? PATHS[NPATHS - 1] : "");
        return "portable";
    }
    if (env_set("CATTN_FORCE_PORTABLE")) return "portable";
    for (int i = 0; i < NPATHS; i++)
        if (runs(PATHS[i], cpu)) return PATHS[i];
    return "portable";
}

void cattn_init(void)
{
    if (initialized) return;
    cattn_dispatch_t kt = {0};
    const cattn_cpu *cpu = cattn_cpu_this();
    cattn_kernels_ref(&kt);
    cattn_gemm_blocks_for(cpu, CATTN_MR_F32, CATTN_NR_F32, sizeof(float), &kt.gemm_f32);
    cattn_gemm_blocks_for(cpu, CATTN_MR_F64, CATTN_NR_F64, sizeof(double), &kt.gemm_f64);
#ifdef CATTN_X86
    const char *path = choose_path(cpu);
    if (strcmp(path, "avx512") == 0) cattn_kernels_avx512(&kt, cpu->avx512_vnni);
    else if (strcmp(path, "avx2") == 0) cattn_kernels_avx2(&kt);
#else
    (void)choose_path(cpu);
#endif
    cattn_kt = kt;   /* same values on every call: a benign race at worst */
    initialized = 1;
}

const char *cattn_isa_error(void)
{
    cattn_init();
    return isa_error[0] ? isa_error : NULL;
}

/* the paths of this build that `cpu` runs, comma-separated, best first,
 * into buf (64 bytes) */
void cattn_paths_for(const cattn_cpu *cpu, char *buf)
{
    buf[0] = 0;
    for (int i = 0; i < NPATHS; i++)
        if (runs(PATHS[i], cpu)) {
            if (buf[0]) strcat(buf, ",");
            strcat(buf, PATHS[i]);
        }
}

/* the paths of this build that this CPU runs, comma-separated, best first */
const char *cattn_available_paths(void)
{
    static char buf[64];
    cattn_paths_for(cattn_cpu_this(), buf);
    return buf;
}

/* the paths this build has, comma-separated */
const char *cattn_built_paths(void)
{
    static char buf[64];
    buf[0] = 0;
    for (int i = 0; i < NPATHS; i++) {
        if (buf[0]) strcat(buf, ",");
        strcat(buf, PATHS[i]);
    }
    return buf;
}

const char *cattn_kernel_path(void)
{
    cattn_init();
    return cattn_kt.name;
}

const char *cattn_int8_kernel(void)
{
    cattn_init();
    return cattn_kt.int8_kernel;
}

int cattn_have_openmp(void)
{
#ifdef _OPENMP
    return _OPENMP;
#else
    return 0;
#endif
}

int cattn_omp_max_threads(void)
{
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

const char *cattn_compiler(void)
{
#if defined(__clang__)
    return "clang " __clang_version__;
#elif defined(__GNUC__)
    return "gcc " __VERSION__;
#else
    return "unknown";
#endif
}
