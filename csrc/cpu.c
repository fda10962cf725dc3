/* cpu.c — the registry of kernel paths and the dispatch table (dispatch.h)
 * filled once at load from it, and build information (what the CPU is:
 * cpuinfo.h and its CPU file).
 *
 * The table starts as the portable path (kernels/ref/table.c); the chosen
 * ISA then overrides its entries: the best one this build has and the CPU
 * and OS support (cattn_cpu_this: cpuinfo.c, read by the CPU file, cpu_x86.c),
 * or the one CATTN_ISA names (CATTN_FORCE_PORTABLE=1: portable). The GEMM
 * block sizes come from the CPU's caches (cpuinfo.c).
 * Adding an ISA: its folder under kernels/ and one row of REGISTRY below;
 * a new architecture also its CPU file (cpuinfo.h says how).
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

/* The ISA registry (as BLIS's config_registry): one row per kernel path
 * this build has, best first. A row: its name (what cattn_kernel_path()
 * reports and CATTN_ISA takes), the CPU test, what that test asks (for
 * error messages), the path whose entries its table fill starts from, and
 * the fill (its folder's table.c). Adding a path: its folder under
 * kernels/, one row here (behind the macro its build defines), its compile
 * flags in setup.py (ISA_FLAGS) and its entry in tests/cattn_testing/paths.py;
 * the CPU test reads flags its architecture's CPU file sets (cpu_x86.c;
 * another architecture: its cpu_<arch>.c, cpuinfo.h). */
typedef struct {
    const char *name;
    int (*runs)(const cattn_cpu *cpu);
    const char *needs;
    const char *borrows;
    void (*fill)(cattn_dispatch_t *kt, const cattn_cpu *cpu);
} isa_row;

static int runs_portable(const cattn_cpu *cpu) { (void)cpu; return 1; }
static void fill_portable(cattn_dispatch_t *kt, const cattn_cpu *cpu)
{
    (void)cpu;
    cattn_kernels_ref(kt);
}
#ifdef CATTN_X86
static int runs_avx2(const cattn_cpu *cpu) { return cpu->avx2 && cpu->fma; }
/* the group kernels with F16C's float16 widening, unless CATTN_NO_F16C=1
 * (the tests' way to run the others on a CPU that has it) */
static void with_f16c(cattn_dispatch_t *kt, const cattn_cpu *cpu)
{
    if (cpu->f16c && !env_set("CATTN_NO_F16C")) {
        cattn_kernels_avx2_f16c(kt);
        cattn_attn_avx2_f16c(kt);
    }
}
static void fill_avx2(cattn_dispatch_t *kt, const cattn_cpu *cpu)
{
    cattn_kernels_avx2(kt);
    with_f16c(kt, cpu);
}
/* Skylake-SP, Zen 4 and later; not Knights Landing (no BW, VL, DQ) */
static int runs_avx512(const cattn_cpu *cpu)
{
    return runs_avx2(cpu) && cpu->avx512f && cpu->avx512bw && cpu->avx512vl && cpu->avx512dq;
}
static void fill_avx512(cattn_dispatch_t *kt, const cattn_cpu *cpu)
{
    cattn_kernels_avx512(kt, cpu->avx512_vnni);       /* fills avx2's entries first */
    cattn_kernels_avx512_bf16(kt, cpu->avx512_bf16);  /* vdpbf16ps: bfloat16dot */
    with_f16c(kt, cpu);                               /* those it keeps of AVX2's */
}
#endif

static const isa_row REGISTRY[] = {
#ifdef CATTN_X86
    {"avx512", runs_avx512, "AVX-512 F, BW, VL and DQ (or the OS does not save the ZMM "
     "registers)", "avx2", fill_avx512},
    {"avx2", runs_avx2, "AVX2 and FMA", "portable", fill_avx2},
#endif
    {"portable", runs_portable, "nothing", NULL, fill_portable},
};
#define NPATHS ((int)(sizeof REGISTRY / sizeof REGISTRY[0]))

static const isa_row *row_named(const char *name)
{
    for (int i = 0; i < NPATHS; i++)
        if (strcmp(REGISTRY[i].name, name) == 0) return &REGISTRY[i];
    return NULL;
}

static char isa_error[256];
static int initialized = 0;

/* The path: CATTN_ISA if set (a path this build has and this CPU runs,
 * else no path and cattn_isa_error() says why), CATTN_FORCE_PORTABLE=1,
 * or the best path this CPU runs. */
static const isa_row *choose_path(const cattn_cpu *cpu)
{
    const char *want = getenv("CATTN_ISA");
    const isa_row *portable = &REGISTRY[NPATHS - 1];
    if (want && want[0]) {
        const isa_row *r = row_named(want);
        if (r && r->runs(cpu)) return r;
        if (r)
            snprintf(isa_error, sizeof isa_error, "CATTN_ISA=%s: this CPU (%s) lacks %s",
                     want, cpu->brand[0] ? cpu->brand : cpu->vendor, r->needs);
        else
            snprintf(isa_error, sizeof isa_error, "CATTN_ISA=%.40s: not a kernel path of "
                     "this build of cattn (it has: %s; unset CATTN_ISA for the best one "
                     "this CPU runs)", want, cattn_built_paths());
        return portable;
    }
    if (env_set("CATTN_FORCE_PORTABLE")) return portable;
    for (int i = 0; i < NPATHS; i++)
        if (REGISTRY[i].runs(cpu)) return &REGISTRY[i];
    return portable;
}

void cattn_init(void)
{
    if (initialized) return;
    cattn_dispatch_t kt = {0};
    const cattn_cpu *cpu = cattn_cpu_this();
    cattn_kernels_ref(&kt);              /* every entry: the rows override some */
    cattn_gemm_blocks_for(cpu, CATTN_MR_F32, CATTN_NR_F32, sizeof(float), &kt.gemm_f32);
    cattn_gemm_blocks_for(cpu, CATTN_MR_F64, CATTN_NR_F64, sizeof(double), &kt.gemm_f64);
    choose_path(cpu)->fill(&kt, cpu);
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
        if (REGISTRY[i].runs(cpu)) {
            if (buf[0]) strcat(buf, ",");
            strcat(buf, REGISTRY[i].name);
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
        strcat(buf, REGISTRY[i].name);
    }
    return buf;
}

const char *cattn_kernel_path(void)
{
    cattn_init();
    return cattn_kt.name;
}

const char *cattn_bf16dot_kernel(void)
{
    cattn_init();
    return cattn_kt.bf16dot_kernel;
}

const char *cattn_int8_kernel(void)
{
    cattn_init();
    return cattn_kt.int8_kernel;
}

const char *cattn_int4_kernel(void)
{
    cattn_init();
    return cattn_kt.int4_kernel;
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
