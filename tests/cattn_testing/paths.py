"""Kernel paths and fresh interpreters.

cattn fills its kernel table once per process, when `cattn._ext` is
imported, so a test run on another kernel path needs a fresh interpreter
with that path forced in its environment. PATHS is the one list of kernel
paths the tests know: its name (`cattn._ext.kernel_path()`), whether this
CPU has it, and the environment that forces it (None: no variable forces
it yet; it runs only as the default where it is the best the CPU has). Every path
is forced by CATTN_ISA=<name>; a new path is one more entry here.

tests/test_kernel_paths.py re-runs the op test modules on every path but
the one this session runs on, through run_pytest.
"""
import os
import subprocess
import sys
from typing import Callable, NamedTuple, Optional

import cattn

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# variables that force a kernel path before import (a value of "" or "0" forces nothing)
FORCING_VARIABLES = ("CATTN_FORCE_PORTABLE", "CATTN_ISA")
# set by run_pytest: tests/conftest.py stops the run if cattn chose another path
EXPECT_PATH_VARIABLE = "CATTN_TESTING_EXPECT_PATH"


class KernelPath(NamedTuple):
    name: str                           # as cattn._ext.kernel_path() reports it
    force_env: Optional[dict]           # environment that forces it; None: default only
    available: Callable[[], bool]       # does this CPU have it


def _runs(name):
    """Does this build have the path, and does this CPU run it?"""
    return name in cattn._ext.available_paths()


PATHS = {p.name: p for p in (
    KernelPath("portable", {"CATTN_ISA": "portable"}, lambda: True),
    KernelPath("avx2", {"CATTN_ISA": "avx2"}, lambda: _runs("avx2")),
    KernelPath("avx512", {"CATTN_ISA": "avx512"}, lambda: _runs("avx512")),
)}


def kernel_path():
    """The kernel path this process runs on."""
    return cattn._ext.kernel_path()


def forced_by():
    """`NAME=value` of the variable that forces this session's kernel path,
    or None when the session runs on the default (best available) path."""
    for name in FORCING_VARIABLES:
        value = os.environ.get(name, "")
        if value not in ("", "0"):
            return f"{name}={value}"
    return None


def child_env(**env):
    """os.environ for a child that imports this same cattn (installed, or a
    source tree built in place) and the test support package, plus `env`."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(cattn.__file__)))
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([root, TESTS] + [p for p in [e.get("PYTHONPATH")] if p])
    e.update(env)
    return e


def _run(argv, env, timeout):
    # cwd = tests/: a child started in the repo root would import the
    # uncompiled source tree instead of the installed package
    return subprocess.run([sys.executable] + argv, env=env, cwd=TESTS, capture_output=True,
                          text=True, timeout=timeout)


def run_python(code, **env):
    """Run `code` in a fresh interpreter that imports this same cattn;
    return its stdout (fails the test on a non-zero exit)."""
    r = _run(["-c", code], child_env(**env), 120)
    assert r.returncode == 0, f"subprocess failed ({r.returncode}):\n{r.stderr}"
    return r.stdout


def run_pytest(path, test_files, **extra):
    """Run `test_files` (paths relative to tests/: files or folders) in a fresh interpreter on kernel
    path `path` (torch parity tests deselected there: they only repeat the
    comparisons against the reference), with the environment variables
    `extra` set too; return pytest's output."""
    env = child_env()
    for name in FORCING_VARIABLES:
        env.pop(name, None)
    env.update(PATHS[path].force_env)
    env.update(extra)
    env[EXPECT_PATH_VARIABLE] = path
    r = _run(["-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", "not torch"]
             + [os.path.join(TESTS, f) for f in test_files], env, 900)
    assert r.returncode == 0, f"{path}-path run failed:\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}"
    assert "passed" in r.stdout and "failed" not in r.stdout
    return r.stdout
