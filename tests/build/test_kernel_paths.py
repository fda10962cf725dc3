"""Every op and program test on every kernel path.

This session runs on one kernel path (the best the CPU has, or the one an
environment variable forces); test_op_modules_on_path re-runs RERUN in one
fresh interpreter per other path (the kernel table is chosen once per
process), with that path forced. The paths are cattn_testing.paths.PATHS;
RERUN is the one list of what is re-run: the folders tests/ops/ (every
op) and tests/programs/ (the encoder and decoder programs) whole, the
error checks, and the property modules that drive the ops.

A session forced onto a path (CI's sanitizer stage: CATTN_FORCE_PORTABLE=1)
covers that one path and re-runs nothing. Torch parity tests are deselected
in the re-run (they repeat the reference comparisons), and with
HYPOTHESIS_PROFILE=long so are the property modules: long runs are started
once per path (`CATTN_FORCE_PORTABLE=1 HYPOTHESIS_PROFILE=long pytest
tests/properties/`).
"""
import os

import pytest

import cattn
from cattn_testing.paths import PATHS, forced_by, kernel_path, run_pytest, run_python

PROPERTY_MODULES = [
    "properties/test_properties_gemm.py",
    "properties/test_properties_rows.py", "properties/test_properties_attention.py",
    "properties/test_properties_api.py",
]
RERUN = ["ops", "programs", "properties/test_errors.py"] + PROPERTY_MODULES

PRINT_PATH = "import cattn; print(cattn._ext.kernel_path())"


def _modules():
    if os.environ.get("HYPOTHESIS_PROFILE") == "long":
        return [m for m in RERUN if m not in PROPERTY_MODULES]
    return RERUN


# The paths to re-run on: every other path this CPU has and a variable can
# force (none when this session is itself forced); paths the CPU lacks are
# listed too and skip, saying so. The session's own path is not a case here
# (the whole session already ran on it), so no skip stands for it.
CURRENT = kernel_path()
OTHER = [] if forced_by() else [
    p for p in PATHS if p != CURRENT and (not PATHS[p].available() or PATHS[p].force_env)]
FORCIBLE = [p for p in PATHS if not PATHS[p].available() or PATHS[p].force_env]


def _needs(path):
    if not PATHS[path].available():
        pytest.skip(f"this CPU (or this build) has no {path} kernels")


if OTHER:
    @pytest.mark.parametrize("path", OTHER)
    def test_op_modules_on_path(path):
        _needs(path)
        out = run_pytest(path, _modules())
        assert " passed" in out


@pytest.mark.parametrize("path", FORCIBLE)
def test_forcing_selects_the_path(path):
    _needs(path)
    assert run_python(PRINT_PATH, **PATHS[path].force_env).strip() == path


def test_default_kernel_path_is_the_best_the_cpu_has():
    expect = cattn._ext.available_paths()[0]
    cpu = cattn._ext.cpu_info()
    built = cattn._ext.built_paths()
    has512 = all(cpu["isa"][f] for f in ("avx512f", "avx512bw", "avx512vl", "avx512dq"))
    assert expect == ("avx512" if has512 and "avx512" in built else
                      "avx2" if cattn._ext.cpu_has_avx2_fma() and "avx2" in built else "portable")
    assert run_python(PRINT_PATH, CATTN_FORCE_PORTABLE="0", CATTN_ISA="").strip() == expect
    assert run_python(PRINT_PATH, CATTN_FORCE_PORTABLE="", CATTN_ISA="").strip() == expect


def test_force_portable_still_selects_portable():
    assert run_python(PRINT_PATH, CATTN_FORCE_PORTABLE="1", CATTN_ISA="").strip() == "portable"


@pytest.mark.parametrize("value", ["avx512f", "AVX2", "sse2", "native"])
def test_forcing_a_path_this_build_lacks_is_a_clear_import_error(value):
    """CATTN_ISA names a path this build lacks (misspelled, in another case,
    or an ISA name that is no path): refused at import with the paths there
    are, never silently replaced by another path."""
    code = ("try:\n    import cattn\nexcept ImportError as e:\n    print('ImportError:', e)\n"
            "else:\n    print('imported', cattn._ext.kernel_path())")
    out = run_python(code, CATTN_ISA=value)
    assert out.startswith("ImportError:"), out
    assert f"CATTN_ISA={value}" in out and "portable" in out


def test_forcing_a_path_this_cpu_lacks_is_a_clear_import_error():
    """CATTN_ISA=avx512 on a CPU without AVX-512 F/BW/VL/DQ (or avx2 without
    AVX2+FMA) is refused at import, naming the CPU and what it lacks: a path
    the CPU cannot run is never selected. (A CPU that runs every path has
    none to refuse: there each forced path must be the one selected;
    test_cpu.py checks the choice on recorded CPUs that lack paths.)"""
    code = ("try:\n    import cattn\nexcept ImportError as e:\n    print('ImportError:', e)\n"
            "else:\n    print('imported', cattn._ext.kernel_path())")
    built = cattn._ext.built_paths()
    for path in PATHS:
        out = run_python(code, CATTN_ISA=path)
        if path not in built:                 # a portable-only build
            assert out.startswith("ImportError:"), out
            assert f"CATTN_ISA={path}: not a kernel path of this build" in out, out
        elif PATHS[path].available():
            assert out.strip() == f"imported {path}", out
        else:
            assert out.startswith("ImportError:"), out
            assert f"CATTN_ISA={path}: this CPU" in out and "lacks" in out, out


def test_group_kernels_without_f16c():
    """The AVX2 group kernels that widen float16 scales by integer shifts
    and adds (a CPU without F16C runs them; CATTN_NO_F16C=1 selects them
    where it has it): the int4 / int8g / int6g / int5g tests on them, the float16
    KV cache's (its keys and values widened the same way), and the kernel
    name says which ran."""
    if CURRENT not in ("avx2", "avx512") or forced_by():
        pytest.skip("no AVX2 group kernels on this path")
    code = "import cattn; print(cattn._ext.int4_kernel())"
    assert "F16C" not in run_python(code, CATTN_NO_F16C="1")
    assert " passed" in run_pytest(CURRENT, ["ops/test_int4.py", "ops/test_kv_float16.py"],
                                   CATTN_NO_F16C="1")
