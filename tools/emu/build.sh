#!/bin/sh
# tools/emu/build.sh OUT: the kernel-path check (avx512_check.c) linked
# with cattn's C sources, each ISA folder with setup.py's flags; statically
# (to be a VM's init) unless STATIC=0. SIMDE=1: the AVX-512 int8 kernels
# (and the avx512 table) on SIMDe's portable intrinsics, the check running
# its int8 cases only (tools/emu/simde.sh); ASAN=1: AddressSanitizer.
set -e
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
OUT=${1:-$HERE/avx512_check}
CC=${CC:-gcc}
SAN=""
[ "${ASAN:-0}" = 1 ] && SAN="-fsanitize=address -fno-omit-frame-pointer -g"
BASE="-O3 -fno-strict-aliasing -Wno-unused-function -ffp-contract=off -fopenmp -I$ROOT/csrc $SAN"
SIMDE_FLAGS="-I$HERE/simde -DCATTN_SIMDE -mavx2 -mfma"
Z512="-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma"
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
# SIMDE=1: qgemm.c on SIMDe, table.c without AVX-512 code generation (its
# plain C runs); the other AVX-512 files as usual, never called (SIMDe 0.7
# lacks intrinsics they use)
for f in "$ROOT"/csrc/kernels/avx512/*.c; do
  i=$((i+1)); FL=$Z512
  case "${SIMDE:-0}:$f" in 1:*/qgemm.c|1:*/table.c) FL=$SIMDE_FLAGS ;; esac
  $CC $BASE $FL $TUNE -c "$f" -o "$TMP/z$i.o" &
done
wait
$CC $BASE $([ "${SIMDE:-0}" = 1 ] && echo -DCATTN_SIMDE) -c "$HERE/avx512_check.c" -o "$TMP/main.o"
$CC $SAN $([ "${STATIC:-1}" = 0 ] || echo -static) -fopenmp -o "$OUT" "$TMP"/*.o -lm
echo "$OUT"
