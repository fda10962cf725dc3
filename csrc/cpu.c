/* cpu.c — CPU feature detection, the kernel dispatch table, scratch memory.
 *
 * The table is filled once: AVX2+FMA micro-kernels when the CPU and OS
 * support them (compiled for that target alone in *_avx2.c), the portable C
 * kernels otherwise, or always when CATTN_FORCE_PORTABLE=1 is set.
 */
#include <stdlib.h>
#include <string.h>
#include "kernels.h"

/* designated initializers: entries added to cattn_dispatch_t by other
 * kernels slot in here without depending on the field order */
#define CATTN_KT_PORTABLE {                                                      \
    .name = "portable", .gemm_f32 = cattn_ukr_ref_f32, .gemm_f64 = cattn_ukr_ref_f64, \
    .dotn_f32 = cattn_dotn_ref_f32, .dotn_f64 = cattn_dotn_ref_f64,              \
    .softmax_row_f32 = cattn_softmax_row_ref_f32,                                \
    .softmax_row_f64 = cattn_softmax_row_ref_f64,                                \
    .softmax_cols_f32 = cattn_softmax_cols_ref_f32,                              \
    .softmax_cols_f64 = cattn_softmax_cols_ref_f64,                              \
    .layer_norm_row_f32 = cattn_layer_norm_row_ref_f32,                          \
    .layer_norm_row_f64 = cattn_layer_norm_row_ref_f64,                          \
    .rms_norm_row_f32 = cattn_rms_norm_row_ref_f32,                              \
    .rms_norm_row_f64 = cattn_rms_norm_row_ref_f64,                              \
    .act_f32 = cattn_act_ref_f32, .act_f64 = cattn_act_ref_f64,                  \
    .exp_f32 = cattn_exp_ref_f32, .exp_f64 = cattn_exp_ref_f64}

cattn_dispatch_t cattn_kt = CATTN_KT_PORTABLE;

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
    cattn_dispatch_t kt = CATTN_KT_PORTABLE;
#ifdef CATTN_X86
    if (!force_portable() && cattn_cpu_has_avx2_fma()) {
        kt.name = "avx2";
        kt.gemm_f32 = cattn_ukr_avx2_f32;
        kt.gemm_f64 = cattn_ukr_avx2_f64;
        kt.dotn_f32 = cattn_dotn_avx2_f32;
        kt.dotn_f64 = cattn_dotn_avx2_f64;
        kt.softmax_row_f32 = cattn_softmax_row_avx2_f32;
        kt.softmax_row_f64 = cattn_softmax_row_avx2_f64;
        kt.softmax_cols_f32 = cattn_softmax_cols_avx2_f32;
        kt.softmax_cols_f64 = cattn_softmax_cols_avx2_f64;
        kt.layer_norm_row_f32 = cattn_layer_norm_row_avx2_f32;
        kt.layer_norm_row_f64 = cattn_layer_norm_row_avx2_f64;
        kt.rms_norm_row_f32 = cattn_rms_norm_row_avx2_f32;
        kt.rms_norm_row_f64 = cattn_rms_norm_row_avx2_f64;
        kt.act_f32 = cattn_act_avx2_f32;
        kt.act_f64 = cattn_act_avx2_f64;
        kt.exp_f32 = cattn_exp_avx2_f32;
        kt.exp_f64 = cattn_exp_avx2_f64;
    }
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
