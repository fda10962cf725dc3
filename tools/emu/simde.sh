#!/bin/sh
# tools/emu/simde.sh: the kernel-path check (avx512_check.c) with the
# AVX-512 int8 kernels compiled against SIMDe (Debian: libsimde-dev), whose
# portable AVX-512 intrinsics run on any AVX2 CPU: the AVX-512 path's
# int8 logic (packing, indexing, tails, the VNNI kernel's quads) checked
# natively, in seconds, where no emulator boots a VNNI model
# (tools/emu/run.sh). It proves the kernels' arithmetic as written, not the
# compiler's AVX-512 code generation (run.sh, or a real CPU, does that).
# Only the int8 checks run (exact integer sums: they must pass, bit for bit
# against the AVX2 kernel and against int64 sums). ASAN=1: with
# AddressSanitizer (out-of-bounds reads of the kernels).
set -e
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
OUT=${CATTN_SIMDE_OUT:-/tmp/cattn_simde_check}
CC=${CC:-gcc}
SAN=""
[ "${ASAN:-0}" = 1 ] && SAN="-fsanitize=address -fno-omit-frame-pointer"
BASE="-O2 -g -fno-strict-aliasing -Wno-unused-function -ffp-contract=off -fopenmp -I$ROOT/csrc $SAN"
TUNE="-mno-avx256-split-unaligned-load -mno-avx256-split-unaligned-store -ffp-contract=fast"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
i=0
for f in "$ROOT"/csrc/*.c "$ROOT"/csrc/kernels/ref/*.c; do
  i=$((i+1)); $CC $BASE -c "$f" -o "$TMP/b$i.o" &
done
wait
for f in "$ROOT"/csrc/kernels/avx2/*.c; do
  i=$((i+1)); $CC $BASE -mavx2 -mfma $TUNE -c "$f" -o "$TMP/a$i.o" &
done
wait
# the int8 kernels on SIMDe and the table without AVX-512 code generation
# (SIMDe 0.7 lacks intrinsics the other
# AVX-512 kernels use: those are compiled for AVX-512 as usual and never
# called, the check running only its int8 cases in this build)
for f in "$ROOT"/csrc/kernels/avx512/*.c; do
  i=$((i+1))
  case "$f" in
    */qgemm.c|*/table.c) $CC $BASE -I"$HERE/simde" -DCATTN_SIMDE -mavx2 -mfma $TUNE -c "$f" -o "$TMP/z$i.o" & ;;
    *) $CC $BASE -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma $TUNE -c "$f" -o "$TMP/z$i.o" & ;;
  esac
done
wait
$CC $BASE -DCATTN_SIMDE -c "$HERE/avx512_check.c" -o "$TMP/main.o"
$CC $SAN -fopenmp -o "$OUT" "$TMP"/*.o -lm
"$OUT"
