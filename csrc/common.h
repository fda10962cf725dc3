/* common.h — what every C file of cattn shares: the public API and block
 * sizes, integer helpers, the x86 test, scratch allocation.
 * Not here: threads (threads.h), the kernel table (dispatch.h).
 */
#ifndef CATTN_COMMON_H
#define CATTN_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include "cattn.h"
#include "config.h"

#if defined(__GNUC__) || defined(__clang__)
#define CATTN_RESTRICT __restrict__
#else
#define CATTN_RESTRICT
#endif

/* x86-64 kernels exist unless the build disables them (CATTN_PORTABLE_ONLY:
 * what a non-x86 build compiles, testable on x86) */
#if (defined(__x86_64__) || defined(_M_X64)) && !defined(CATTN_PORTABLE_ONLY)
#define CATTN_X86 1
#endif

/* template helpers for the *_tmpl.h files (each included once per type with
 * SFX = f32 / f64 defined): FN(name) = name_SFX */
#define CATTN_CAT2_(a, b) a##_##b
#define CATTN_CAT2(a, b) CATTN_CAT2_(a, b)
#define CATTN_CAT3_(a, b, c) a##_##b##_##c
#define CATTN_CAT3(a, b, c) CATTN_CAT3_(a, b, c)
#define FN(name) CATTN_CAT2(name, SFX)

static inline int64_t cattn_min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t cattn_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t cattn_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t cattn_round_up(int64_t a, int64_t b) { return cattn_cdiv(a, b) * b; }

/* scratch of the drivers: CATTN_ALIGN-aligned, NULL when out of memory;
 * freed blocks are kept per thread for the next call (scratch.c) */
void *cattn_aligned_alloc(size_t bytes);
void cattn_aligned_free(void *p);

#endif
