#!/bin/sh
# tools/emu/build.sh OUT: the kernel-path check (avx512_check.c) linked
# with cattn's C sources, each ISA folder with setup.py's flags; statically
# (to be a VM's init) unless STATIC=0.
set -e
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
OUT=${1:-$HERE/avx512_check}
CC=${CC:-gcc}
BASE="-O3 -fno-strict-aliasing -Wno-unused-function -ffp-contract=off -fopenmp -I$ROOT/csrc"
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
for f in "$ROOT"/csrc/kernels/avx512/*.c; do
  i=$((i+1)); $CC $BASE -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx2 -mfma $TUNE -c "$f" -o "$TMP/z$i.o" &
done
wait
$CC $BASE -c "$HERE/avx512_check.c" -o "$TMP/main.o"
$CC $([ "${STATIC:-1}" = 0 ] || echo -static) -fopenmp -o "$OUT" "$TMP"/*.o -lm
echo "$OUT"
