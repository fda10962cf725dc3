/* tools/emu/simde/immintrin.h — for tools/emu/simde.sh only: the AVX-512
 * intrinsics as SIMDe's portable code (on top of the CPU's AVX2), so the
 * AVX-512 kernels' logic runs on a CPU without AVX-512. SIMDe includes the
 * compiler's immintrin.h itself: that nested include gets the real one. */
#ifndef CATTN_SIMDE_SHIM
#define CATTN_SIMDE_SHIM
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
/* SIMDe 0.7.4 (Debian 12) declares this alias with four arguments */
#undef _mm512_madd_epi16
#define _mm512_madd_epi16(a, b) simde_mm512_madd_epi16(a, b)
#else
#include_next <immintrin.h>
#endif
