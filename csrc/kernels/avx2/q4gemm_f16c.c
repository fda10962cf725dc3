/* kernels/avx2/q4gemm_f16c.c — q4gemm.c's int4 / int8g / int6g / int5g
 * micro-kernels again, their float16 scales widened by F16C's vcvtph2ps
 * (exact, subnormals included) instead of integer shifts and adds; the
 * same bits. The AVX2 table takes these where the CPU has F16C (every AVX2
 * CPU made does; cpu_x86.c checks, and CATTN_NO_F16C=1 keeps the others).
 * Not here: anything else (q4gemm.c is the one source of the kernels). */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("f16c"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC target("f16c")
#endif
#define CATTN_Q4_F16C 1
#include "q4gemm.c"
#if defined(__clang__)
#pragma clang attribute pop
#endif
