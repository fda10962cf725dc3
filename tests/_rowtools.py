"""Helpers for the row-kernel tests (test_vexp, test_softmax, test_norm,
test_activations): ulp measurement, the portable-path re-run, strided views.

Both kernel paths are tested: test_rows_portable.py re-runs the row-kernel
test modules in a subprocess with CATTN_FORCE_PORTABLE=1 (the dispatch table
is filled once per process, so the switch needs a fresh interpreter).
"""
import os
import subprocess
import sys

import numpy as np

import cattn

HERE = os.path.dirname(os.path.abspath(__file__))
FLOATS = (np.float32, np.float64)


def eps(dtype):
    return float(np.finfo(dtype).eps)


def ulp_error(got, ref, dtype):
    """|got - ref| in units of the spacing of `dtype` at ref (ref exact-ish,
    float64 or longdouble); where both are equal (incl. inf, nan) 0."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    wide = np.longdouble if np.dtype(dtype) == np.float64 else np.float64
    g, r = got.astype(wide), ref.astype(wide)
    same = (g == r) | (np.isnan(g) & np.isnan(r))
    with np.errstate(invalid="ignore", over="ignore"):
        spacing = np.spacing(np.abs(r.astype(dtype))).astype(wide)
        err = np.abs(g - r) / spacing
    return np.where(same, 0.0, err).astype(np.float64)


def path():
    return cattn._ext.kernel_path()


def run_portable(test_files):
    """Run `test_files` in a fresh interpreter on the portable kernels (torch
    parity tests skipped there: they only repeat the comparisons)."""
    env = dict(os.environ, CATTN_FORCE_PORTABLE="1")
    # the cattn this process imported (installed, or a source tree built in
    # place), and cwd = tests/ so the repo root's uncompiled sources never win
    root = os.path.dirname(os.path.dirname(os.path.abspath(cattn.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        [root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
         "-k", "not torch"] + [os.path.join(HERE, os.path.basename(f)) for f in test_files],
        env=env, cwd=HERE, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"portable-path run failed:\n{r.stdout[-6000:]}\n{r.stderr[-3000:]}"
    assert "passed" in r.stdout and "failed" not in r.stdout
    return r.stdout


def strided_variants(x):
    """Views of x with the same values laid out differently: a negative-
    stride copy, a transposed (Fortran) copy, a sliced view of a bigger array
    and a read-only view. Each is (name, array) with array == x."""
    out = []
    big = np.zeros(tuple(2 * n for n in x.shape), dtype=x.dtype)
    sl = tuple(slice(None, None, 2) for _ in x.shape)
    big[sl] = x
    out.append(("every-other", big[sl]))
    out.append(("fortran", np.asfortranarray(x)))
    rev = tuple(slice(None, None, -1) for _ in x.shape)
    out.append(("reversed", np.ascontiguousarray(x[rev])[rev]))
    ro = x.copy()
    ro.flags.writeable = False
    out.append(("read-only", ro))
    if x.ndim >= 3:   # non-collapsible leading dims: a permuted copy, permuted back
        perm = tuple(range(x.ndim))[::-1]
        out.append(("permuted", np.ascontiguousarray(x.transpose(perm)).transpose(perm)))
    return out


def threads_bitwise(fn, *args, **kw):
    """fn(*args) with 1 and with 2 threads: results must be bitwise equal."""
    with cattn.num_threads(1):
        a = np.array(fn(*args, **kw), copy=True)     # copies: `out=` may be reused
    with cattn.num_threads(2):
        b = np.array(fn(*args, **kw), copy=True)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert a.tobytes() == b.tobytes(), "result depends on the thread count"
    return a
