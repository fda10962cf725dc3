#!/usr/bin/env bash
# CPU check of cattn on a device machine (issue 26 item 7), run from the repo root:
# build + install cattn, lscpu, `cattn info`, the kernel-path tests, bench_paths
# (short), and thread_scaling.py's tables. Never aborts on a failed part; each
# part has a time cap (whole run < 8 min on 16 cores). Tables go to $OUT.
# Not a venv setup and no network use: numpy, Cython, setuptools, pytest, torch,
# transformers must be preinstalled.
set -u
ROOT=$(pwd)
OUT=${OUT:-$ROOT/device-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
WORK=$(mktemp -d)            # run from here so the unbuilt source tree does not shadow the install
summary=()
part() { local name=$1 cap=$2; shift 2; echo "=== $name (cap ${cap}s)"; local t=$SECONDS
  (cd "$WORK" && timeout "$cap" "$@"); local rc=$?
  summary+=("$name: rc $rc, $((SECONDS - t)) s"); return 0; }

echo "=== build"
$PY -m pip install --no-build-isolation --no-deps "$ROOT" 2>&1 | tail -5
if ! (cd "$WORK" && $PY -c "import cattn._ext" 2>/dev/null); then
  $PY -m pip install --no-build-isolation --no-deps --break-system-packages "$ROOT" 2>&1 | tail -5
fi
lscpu | tee "$OUT/lscpu.txt"
part "cattn info" 30 $PY -m cattn info
part "kernel-path tests" 120 bash -c "$PY -m pytest -p no:cacheprovider -q \
  --continue-on-collection-errors '$ROOT/tests/build/test_kernel_paths.py' '$ROOT/tests/build/test_cpu.py' 2>&1 | tail -30"
part "bench_paths" 75 bash -c "$PY '$ROOT/benchmarks/bench_paths.py' --quick --rounds 2 \
  --min-time 0.2 --threads $(nproc) 2>&1 | tee '$OUT/bench_paths.md'"
part "thread scaling" 240 $PY "$ROOT/tools/device/thread_scaling.py" --out "$OUT"
echo "=== summary"; printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
