"""tools/emu/avx512_check.c: the AVX-512 kernels against the AVX2 ones, bit
for bit, through the C API (GEMM, prepacked and int8 linears, attention) and
the row kernels' table entries (softmax rows, activations, exp).

On a CPU with AVX-512 the check compares the real kernels. On an AVX2-only
CPU it can only check itself: with CATTN_CHECK_SELFTEST=1 the AVX2 table
stands in for the AVX-512 one (every check must pass), with =2 the portable
one does (the float checks must fail: they can). The AVX-512 kernels
themselves are run on such machines under an emulator: tools/emu/run.sh.
"""
import os
import shutil
import subprocess

import pytest

import cattn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # repo root
BUILD = os.path.join(ROOT, "tools", "emu", "build.sh")

pytestmark = pytest.mark.skipif(
    not (os.path.exists(BUILD) and os.path.isdir(os.path.join(ROOT, "csrc")) and shutil.which("gcc")
         and "avx2" in cattn._ext.built_paths() and "asan" not in os.environ.get("LD_PRELOAD", "")),
    reason="needs the source tree (csrc/, tools/emu/), gcc and an x86-64 build (not the "
           "sanitizer run)")


@pytest.fixture(scope="module")
def check(tmp_path_factory):
    exe = str(tmp_path_factory.mktemp("check") / "avx512_check")
    r = subprocess.run(["sh", BUILD, exe], env=dict(os.environ, STATIC="0"),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


def _run(exe, **env):
    r = subprocess.run([exe], env=dict(os.environ, **env), capture_output=True, text=True,
                       timeout=600)
    return r.returncode, r.stdout


def test_avx512_kernels_equal_avx2_bits(check):
    if "avx512" not in cattn._ext.available_paths():
        pytest.skip("this CPU has no AVX-512 (tools/emu/run.sh runs the check emulated)")
    rc, out = _run(check)
    assert rc == 0 and "ALL DONE failures=0" in out, out[-4000:]


@pytest.mark.skipif(not cattn._ext.cpu_has_avx2_fma(), reason="needs AVX2 + FMA")
def test_the_check_passes_equal_kernels_and_fails_different_ones(check):
    rc, out = _run(check, CATTN_CHECK_SELFTEST="1")
    assert rc == 0 and "ALL DONE failures=0" in out, out[-4000:]
    rc, out = _run(check, CATTN_CHECK_SELFTEST="2")
    assert rc == 1, out[-4000:]
    fails = [line for line in out.splitlines() if line.startswith("FAIL")]
    # float GEMMs and attention differ from the portable path's bits; the
    # int8 results (exact sums, same epilogue) must not
    assert any("gemm" in f for f in fails) and any("attention" in f for f in fails), out
    assert any("rows softmax" in f for f in fails) and any("rows exp" in f for f in fails), out
    assert not any("int8" in f for f in fails), out


SIMDE = os.path.join(ROOT, "tools", "emu", "simde.sh")


@pytest.mark.skipif(not (cattn._ext.cpu_has_avx2_fma()
                         and os.path.exists("/usr/include/simde/x86/avx512.h")),
                    reason="needs AVX2 + FMA and SIMDe's headers (Debian: libsimde-dev)")
def test_avx512_int8_kernels_on_simde_equal_avx2_bits(tmp_path):
    """The AVX-512BW and VNNI int8 kernels (A in pairs / in quads) compiled
    against SIMDe's portable AVX-512 intrinsics: the VNNI kernel must pass
    its load check and every int8 linear must give the AVX2 path's bits and
    the exact int64 sums, on any AVX2 CPU."""
    r = subprocess.run(["sh", SIMDE], env=dict(os.environ, CATTN_SIMDE_OUT=str(tmp_path / "c")),
                       capture_output=True, text=True, timeout=600)
    out = r.stdout
    assert r.returncode == 0 and "ALL DONE failures=0" in out, (out + r.stderr)[-4000:]
    assert "ok   int8: the VNNI kernel passed its load check" in out, out
    assert out.count("avx512 vnni (vpdpbusd); exact sums") >= 10, out
