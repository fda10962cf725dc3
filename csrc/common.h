/* common.h — what every C file of cattn shares: the public API and block
 * sizes, integer helpers, the x86 test, scratch allocation.
 * Not here: threads (threads.h), the kernel table (dispatch.h).
 */
#ifndef CATTN_COMMON_H
#define CATTN_COMMON_H

#include <stddef.h>
#include <string.h>
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

/* IEEE float16 (binary16) bits <-> float32. cattn_h2f: exact, every value
 * (subnormals, infinities, NaN). cattn_f2h: rounded to nearest, ties to
 * even (as NumPy's astype(float16)); |x| >= 65520 gives an infinity, NaN
 * a quiet NaN. Portable C (the drivers' loops; kernels have SIMD ones). */
static inline float cattn_h2f(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
    uint32_t u;
    if (e == 0x1F) {
        u = sign | 0x7F800000u | m << 13;                       /* inf, NaN (payload kept) */
    } else if (e == 0) {                                        /* zero, subnormal: m 2^-24 */
        float f = (float)m * 0x1p-24f;                          /* exact (m < 2^10) */
        memcpy(&u, &f, 4);
        u |= sign;
    } else {
        u = sign | (e + 112u) << 23 | m << 13;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t cattn_f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7FFFFFFFu;
    if (ax > 0x7F800000u) return (uint16_t)(sign | 0x7E00u | ((ax >> 13) & 0x1FFu));   /* NaN */
    if (ax >= 0x477FF000u) return (uint16_t)(sign | 0x7C00u);   /* >= 65520 (and inf): inf */
    if (ax < 0x38800000u) {                                     /* below 2^-14: subnormal */
        float a;
        memcpy(&a, &ax, 4);
        volatile float t = a * 0x1p24f + 0x1p23f;               /* rounded to an integer */
        return (uint16_t)(sign | (uint16_t)(t - 0x1p23f));
    }
    const uint32_t r = ax - (112u << 23);                       /* rebiased, 23 -> 10 bits */
    return (uint16_t)(sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13));
}
static inline int64_t cattn_max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t cattn_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t cattn_round_up(int64_t a, int64_t b) { return cattn_cdiv(a, b) * b; }

/* scratch of the drivers: CATTN_ALIGN-aligned, NULL when out of memory;
 * freed blocks are kept per thread for the next call (scratch.c) */
void *cattn_aligned_alloc(size_t bytes);
void cattn_aligned_free(void *p);

#endif
