/* cpu.c — CPU feature detection, the dispatch table (dispatch.h) filled
 * once at load, scratch memory, build information.
 *
 * The table starts as the portable path (kernels/ref/table.c); each ISA the
 * CPU and OS support then overrides its entries, unless
 * CATTN_FORCE_PORTABLE=1 is set. Adding an ISA: its folder under kernels/
 * and one block in cattn_init below.
 */
#include <stdlib.h>
#include <string.h>
#include "dispatch.h"
#include "threads.h"

cattn_dispatch_t cattn_kt;

int cattn_cpu_has_avx2_fma(void)
{
#if defined(CATTN_X86) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

static int force_portable(void)
{
    const char *s = getenv("CATTN_FORCE_PORTABLE");
    return s && s[0] && strcmp(s, "0") != 0;
}

static int initialized = 0;

void cattn_init(void)
{
    if (initialized) return;
    cattn_dispatch_t kt;
    cattn_kernels_ref(&kt);
#ifdef CATTN_X86
    if (!force_portable() && cattn_cpu_has_avx2_fma()) cattn_kernels_avx2(&kt);
#else
    (void)force_portable;
#endif
    cattn_kt = kt;   /* same values on every call: a benign race at worst */
    initialized = 1;
}

const char *cattn_kernel_path(void)
{
    cattn_init();
    return cattn_kt.name;
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

void *cattn_aligned_alloc(size_t bytes)
{
    void *p = NULL;
    if (bytes == 0) bytes = CATTN_ALIGN;
    if (posix_memalign(&p, CATTN_ALIGN, bytes) != 0) return NULL;
    return p;
}

void cattn_aligned_free(void *p) { free(p); }

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
