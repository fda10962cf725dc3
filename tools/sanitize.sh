#!/usr/bin/env bash
# tools/sanitize.sh [VENV [PYTEST_ARGS...]]
#
# Builds cattn with AddressSanitizer + UndefinedBehaviorSanitizer
# (CATTN_SANITIZE=1, see setup.py) into the virtualenv VENV with the `test`
# extra, then runs the whole test suite (tests/) under the sanitizer runtime,
# once per kernel path this CPU has: the default one (AVX2/FMA where the CPU
# has it) and the portable C path (CATTN_FORCE_PORTABLE=1).
#
#   VENV          default: ${CATTN_SANITIZE_VENV:-${TMPDIR:-/tmp}/cattn-sanitize-venv};
#                 created (python3 -m venv, no system site packages) if missing
#   PYTEST_ARGS   passed to pytest (e.g. -k attention -x); default: the whole suite
#   PYTHON        the interpreter that creates the venv (default python3)
#
# How it runs: Python itself is not instrumented, so the ASan runtime the
# extension was linked against is LD_PRELOADed (it must come first); libubsan
# comes in as a dependency of the extension. libstdc++ is preloaded too: ASan
# intercepts __cxa_throw, and when libstdc++ is not loaded at start-up it finds
# no real one, so the first C++ exception in any C++ extension (matplotlib's
# ft2font, torch) aborts with "CHECK failed: ... real___cxa_throw". Options:
#   ASAN_OPTIONS   detect_leaks=0 (CPython's own allocations are not freed at
#                  exit), allocator_may_return_null=1 (tests ask for huge sizes
#                  and expect MemoryError, not an ASan abort), halt_on_error=1
#   UBSAN_OPTIONS  halt_on_error=1, print_stacktrace=1 (and the build has
#                  -fno-sanitize-recover=undefined: the first UB report aborts)
# ASan writes its reports to files in a log folder (log_path), so a report
# from a subprocess that a test started (the tests pass the environment, and
# with it LD_PRELOAD and the options, to their child interpreters) is not lost
# in captured output. UBSan (a separate runtime with gcc) ignores log_path and
# writes to stderr: pytest runs with --capture=sys, so what C code writes to
# file descriptor 2 is not swallowed by pytest's capture when the process
# aborts, and the output is scanned for reports. The script prints every
# report and exits non-zero if there is one, or if pytest fails (any exit
# code but 0, including 5 = no tests ran) on any kernel path.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CATTN_SANITIZE_VENV:-${TMPDIR:-/tmp}/cattn-sanitize-venv}"
if [ $# -gt 0 ]; then VENV="$1"; shift; fi
PYTHON="${PYTHON:-python3}"
T0=$SECONDS

say() { printf '\n=== sanitize: %s\n' "$*"; }

# ---- build ------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtualenv $VENV"
    "$PYTHON" -m venv "$VENV"
fi
VPY="$VENV/bin/python"
RUNDIR="$(mktemp -d "${TMPDIR:-/tmp}/cattn-sanitize.XXXXXX")"
trap 'rm -rf "$RUNDIR"' EXIT
LOGDIR="$RUNDIR/logs"
mkdir -p "$LOGDIR"

say "building cattn with CATTN_SANITIZE=1 into $VENV"
# The wheel is built apart (setup.py rebuilds the in-tree build/ when the
# flags differ from the last build's), installed with the test extra's
# dependencies, then once more by force: a venv that already has a cattn of
# the same version would otherwise keep it. LD_PRELOAD must not reach pip or
# the compiler.
(cd "$ROOT" && env -u LD_PRELOAD CATTN_SANITIZE=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$VPY" -m pip wheel -q --no-deps --no-cache-dir -w "$RUNDIR/wheel" .)
WHEEL="$(ls "$RUNDIR"/wheel/cattn-*.whl)"
env -u LD_PRELOAD PIP_DISABLE_PIP_VERSION_CHECK=1 "$VPY" -m pip install -q "$WHEEL[test]"
env -u LD_PRELOAD PIP_DISABLE_PIP_VERSION_CHECK=1 "$VPY" -m pip install -q --no-deps \
    --force-reinstall "$WHEEL"
BUILD_S=$((SECONDS - T0))
cd "$RUNDIR"      # never the source root: the installed, sanitized cattn is tested

# where the extension is, without importing it (that needs the preload)
SO="$("$VPY" -c 'import glob, importlib.machinery as m, importlib.util as u, os
d = u.find_spec("cattn").submodule_search_locations[0]
print(*[p for s in m.EXTENSION_SUFFIXES for p in glob.glob(os.path.join(d, "_ext" + s))][:1])')"
case "$SO" in "$ROOT"/*) echo "sanitize: cattn._ext resolves to the source tree ($SO), not the venv" >&2; exit 1;; esac
LIBASAN="$(ldd "$SO" | awk '/libasan\.so/ {print $3; exit}')"
if [ -z "$LIBASAN" ]; then
    echo "sanitize: $SO is not linked against libasan: the CATTN_SANITIZE=1 build did not take effect" >&2
    exit 1
fi
LIBASAN="$(readlink -f "$LIBASAN")"
# for reference: the same file as $(gcc -print-file-name=libasan.so) for gcc builds
echo "extension:   $SO"
echo "ASan runtime: $LIBASAN"
ldd "$SO" | awk '/libubsan|libgomp/ {print "linked:      " $1 " => " $3}'

LIBSTDCXX="$(readlink -f "$(${CC:-gcc} -print-file-name=libstdc++.so.6)" 2>/dev/null || true)"
[ -f "$LIBSTDCXX" ] || LIBSTDCXX="libstdc++.so.6"
echo "preloaded:    $LIBASAN $LIBSTDCXX"
export LD_PRELOAD="$LIBASAN:$LIBSTDCXX${LD_PRELOAD:+:$LD_PRELOAD}"
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:halt_on_error=1:abort_on_error=0:log_path=$LOGDIR/asan${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$LOGDIR/ubsan${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
unset CATTN_FORCE_PORTABLE

# the sanitizer build must keep OpenMP (the probe links with the same flags)
"$VPY" -c 'import cattn, sys
omp = cattn._ext.openmp_version()
print("OpenMP:      ", omp or "MISSING", "| default kernel path:", cattn._ext.kernel_path(),
      "| threads:", cattn.get_num_threads())
sys.exit(0 if omp else 1)' || { echo "sanitize: the sanitizer build has no OpenMP" >&2; exit 1; }
DEFAULT_PATH="$("$VPY" -c 'import cattn; print(cattn._ext.kernel_path())')"

# ---- test, once per kernel path ----------------------------------------------
# CATTN_FORCE_PORTABLE is read once, at import: each path is its own pytest run.
# (A new ISA folder under csrc/kernels/ adds its switch here.)
PATHS=("$DEFAULT_PATH")
[ "$DEFAULT_PATH" != portable ] && PATHS+=(portable)

FAILED=()
TIMES=()
REPORT_RE='runtime error: |==[0-9]+==ERROR: |Sanitizer: CHECK failed|Sanitizer:DEADLYSIGNAL|SUMMARY: [A-Za-z]*Sanitizer'

for kp in "${PATHS[@]}"; do
    if [ "$kp" = portable ] && [ "$DEFAULT_PATH" != portable ]; then force=1; else force=; fi
    say "pytest on the '$kp' kernel path${force:+ (CATTN_FORCE_PORTABLE=1)}"
    t=$SECONDS
    rc=0
    got="$(CATTN_FORCE_PORTABLE="$force" "$VPY" -c 'import cattn; print(cattn._ext.kernel_path())')" || rc=$?
    if [ $rc -ne 0 ] || [ "$got" != "$kp" ]; then
        echo "sanitize: expected kernel path '$kp', the extension says '$got'" >&2
        FAILED+=("$kp (kernel path check)")
        continue
    fi
    OUT="$RUNDIR/pytest-$kp.log"
    set +e
    # -v: a report printed while a test runs lands on that test's line; the
    # full log is kept, the console shows all but the passed/skipped lines
    # Left out: tests/build/test_kernel_paths.py's re-run of the op modules on the
    # other paths (this loop runs every path itself, whole suite), and the
    # `slow` S = 2^25 long-context cases (minutes under ASan; the same code
    # runs at S = 2^18 here, and the normal CI stages run them).
    CATTN_FORCE_PORTABLE="$force" "$VPY" -m pytest "$ROOT/tests" -v -ra -p no:cacheprovider \
        --capture=sys -k "not test_op_modules_on_path" -m "not slow" "$@" 2>&1 | tee "$OUT" \
        | grep -Ev '^[^ ]+::[^ ]+ (PASSED|SKIPPED|XFAIL|XPASS) +\[ *[0-9]+%\]$'
    rc=${PIPESTATUS[0]}
    set -e
    if [ $rc -ne 0 ] && ! tail -n 3 "$OUT" | grep -Eq '^=+ .*( passed| failed| error| skipped| no tests ran).* in [0-9.]+s'; then
        echo "sanitize: pytest died (exit $rc) during: $(grep -E '^[^ ]+::' "$OUT" | tail -n 1 | cut -c1-300)" >&2
    fi
    TIMES+=("$kp: $((SECONDS - t)) s")
    if [ $rc -ne 0 ]; then
        FAILED+=("$kp (pytest exit $rc)")
    fi
    if grep -Eq "$REPORT_RE" "$OUT"; then
        FAILED+=("$kp (sanitizer report in the output)")
        say "sanitizer reports in the '$kp' run's output"
        grep -En -A12 "$REPORT_RE" "$OUT" | head -200
    fi
done

# ---- sanitizer reports ----------------------------------------------------------
REPORTS=0
for f in "$LOGDIR"/*; do
    [ -e "$f" ] || continue
    # allocator_may_return_null=1 may note a refused huge allocation: not a finding
    if grep -qv 'WARNING: AddressSanitizer failed to allocate' "$f"; then
        REPORTS=$((REPORTS + 1))
        say "SANITIZER REPORT $(basename "$f")"
        cat "$f"
    fi
done

say "build ${BUILD_S} s; ${TIMES[*]:-no runs}; total $((SECONDS - T0)) s"
if [ $REPORTS -gt 0 ] || [ ${#FAILED[@]} -gt 0 ]; then
    echo "sanitize: FAILED: ${REPORTS} sanitizer report file(s); failing runs: ${FAILED[*]:-none}" >&2
    exit 1
fi
echo "sanitize: clean on kernel paths: ${PATHS[*]}"
