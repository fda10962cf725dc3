#!/bin/sh
# tools/emu/simde.sh: the kernel-path check (avx512_check.c) with the
# AVX-512 int8 kernels compiled against SIMDe (Debian: libsimde-dev), whose
# portable AVX-512 intrinsics run on any AVX2 CPU: the AVX-512 path's int8
# logic (packing, indexing, tails, the VNNI kernel's quads) checked
# natively, in seconds, where no emulator boots a VNNI model
# (tools/emu/run.sh). It proves the kernels' arithmetic as written, not the
# compiler's AVX-512 code generation (run.sh, or a real CPU, does that).
# Only the int8 checks run (exact integer sums: they must pass, bit for bit
# against the AVX2 kernel and against int64 sums). ASAN=1: with
# AddressSanitizer (out-of-bounds reads of the kernels).
# CATTN_SIMDE_OUT: where the binary goes (default /tmp/cattn_simde_check).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${CATTN_SIMDE_OUT:-/tmp/cattn_simde_check}
SIMDE=1 STATIC=0 "$HERE/build.sh" "$OUT" > /dev/null
"$OUT"
