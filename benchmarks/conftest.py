"""The benchmark suites' shared harness: one timing helper (the `bench`
fixture), one thread limit, one `extra_info` schema, and the machine's
identity (CPU model, cattn's kernel path) in every results file.

    pytest benchmarks/ --benchmark-json=bench.json
    python benchmarks/report.py bench.json [--markdown]

A plain `pytest` never collects this folder (pyproject: testpaths = ["tests"]).

Method (CONTRIBUTING.md, benchmarks). OpenBLAS and OpenMP threads keep
spinning for >0.1 s after a call and slow whichever library runs next, so a
test times ONE library's calls as a block: ~0.3 s of untimed warm-up, then
pytest-benchmark rounds (`--benchmark-max-time` seconds, default 1, and at
least `--benchmark-min-rounds`, default 5). The libraries of a group are
consecutive tests of one run, on the same inputs with the same threads; on a
shared machine read the ratios, not the absolute times. Anything a test does
after `bench(...)` returns (checking the result) is not timed.

extra_info schema (set by `bench(fn, group=..., lib=..., **info)`):
  lib       str    whose code runs: "cattn", "numpy", "scipy", "numpy+scipy",
                   "torch", "reference" (cattn.reference, the float64 oracle),
                   "sentence-transformers", "transformers", "onnxruntime"
  variant   str    only when one library runs a group a second way (cattn
                   "unfused", "packed", "bfloat16", "int8"; torch "int8";
                   numpy "read bandwidth"); report.py compares every peer
                   with the row whose lib is "cattn" and that has no variant
  format    str    the weight format a linear / model row reads: "float32",
                   "bfloat16", "int8" (report.py: within-group ratio table)
  threads   int    threads given to every library for the test (cattn,
                   OpenBLAS through threadpoolctl, torch)
  dtype     str    "float32" | "float64"
  shape     list   the case's dimensions (legend in the suite's docstring)
  flops     float  floating-point operations per call   -> GFLOP/s
  bytes     float  bytes read + written per call, where
                   bandwidth is the limit               -> GB/s
  items     float  sentences per call (models)          -> items/s
  read_bw   bool   this row measures the read bandwidth: report.py shows
                   the group's GB/s as a percentage of it
  min_cosine, median_cosine  float  accuracy of a model row's embeddings
                   against cattn float32 (bench_formats.py; not timed)
  peak_MiB  float  peak-memory rows: RSS growth beyond inputs and output
                   (their time is a whole subprocess: ignore it)
  pass_     int    repetition index under CATTN_BENCH_PASSES (bench_matmul.py)
  suites may add keys of their own (causal, ...). Rates are not stored:
  report.py derives them from the statistic it compares.

machine_info (pytest_benchmark_update_machine_info below) adds cpu_model
(name, family, model: Zen 3 is 25/1, Zen 4 is 25/17), cpu_flags, cattn
(version, kernel_path, compiler, block sizes: cattn.show_config()), blas
(threadpoolctl), torch, the environment variables that change the figures,
and the load average at the end of the run.
"""
import io
import math
import os
import statistics
import sys
import time

import numpy as np
import pytest

# the thread limit and warm-up are cattn's own (`cattn bench` uses them too)
from cattn.cli.bench import WARMUP_S, thread_limit, warm_up  # noqa: F401

try:
    from threadpoolctl import threadpool_info, threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_info = threadpool_limits = None

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:              # `from baselines import ...` in every suite
    sys.path.insert(0, HERE)

THREADS = 2            # threads per library unless a case says otherwise
MIN_ROUND_S = 1e-4     # calls shorter than this are grouped into rounds of several
COLD_MAX_ROUNDS = 40   # rounds with a cache sweep before each (cold_cache=True)
BLAS_LIBS = ("numpy", "scipy", "numpy+scipy", "reference")
ENV_KEYS = ("CATTN_ISA", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OPENBLAS_CORETYPE",
            "OPENBLAS_L2_SIZE", "OMP_WAIT_POLICY", "CATTN_BENCH_PASSES")


# ---- timing ------------------------------------------------------------------------

def time_block(fn, min_time=0.0, min_calls=1):
    """Outside pytest (bench_models.py's script): median seconds per call over
    a block of >= min_calls calls lasting >= min_time. Warm up first."""
    times = []
    start = time.perf_counter()
    while len(times) < min_calls or time.perf_counter() - start < min_time:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


_sweep = []


def _cold_cache():
    """Evict the caches: sweep a 64 MiB buffer (twice a 32 MiB L3)."""
    if not _sweep:
        _sweep.append(np.ones(16 << 20, np.float32))
    _sweep[0] += 1.0


def run_block(benchmark, fn, *, group, lib, threads=THREADS, cold_cache=False, rounds=None,
              max_time=1.0, min_rounds=5, **info):
    """Time fn as one block and return its result; record extra_info (schema above).

    Inside thread_limit(threads): WARMUP_S of untimed calls, then
    benchmark.pedantic with rounds sized as pytest-benchmark sizes them
    (max_time s in all, at least min_rounds; calls under MIN_ROUND_S grouped
    several to a round). cold_cache: a 64 MiB sweep before each round (not
    timed, at most COLD_MAX_ROUNDS rounds). rounds=N: exactly N rounds and no
    warm-up (a call that runs a subprocess)."""
    benchmark.group = group
    benchmark.extra_info.update({k: v.item() if isinstance(v, np.generic) else v
                                 for k, v in dict(lib=lib, threads=threads, **info).items()
                                 if v is not None})
    if lib in BLAS_LIBS and threadpool_limits is None:
        pytest.skip("threadpoolctl is needed to set the BLAS threads")
    setup = _cold_cache if cold_cache else None
    with thread_limit(threads):
        iterations = 1
        if benchmark.disabled:            # --benchmark-disable: pedantic makes one call
            rounds = 1
        elif rounds is None:
            per_call = warm_up(fn)
            if not cold_cache:
                iterations = max(1, math.ceil(MIN_ROUND_S / per_call))
            rounds = max(min_rounds, math.ceil(max_time / (per_call * iterations)))
            if cold_cache:
                rounds = min(rounds, max(min_rounds, COLD_MAX_ROUNDS))
        return benchmark.pedantic(fn, setup=setup, rounds=rounds, iterations=iterations)


@pytest.fixture
def bench(benchmark, request):
    """bench(fn, group=..., lib=..., **extra_info) -> fn's result: run_block
    with this test's benchmark fixture and the --benchmark-max-time /
    --benchmark-min-rounds options."""
    opt = request.config.getoption

    def run(fn, **kw):
        kw.setdefault("max_time", float(opt("benchmark_max_time")))   # a str in the options
        kw.setdefault("min_rounds", int(opt("benchmark_min_rounds")))
        return run_block(benchmark, fn, **kw)
    return run


@pytest.fixture(scope="session", autouse=True)
def _openblas_cold_start():
    """OpenBLAS can stay slow if a process's first GEMM is small: one large one first."""
    a = np.ones((2048, 2048), np.float32)
    np.matmul(a, a)


# ---- which machine and which build ---------------------------------------------------

def _cpu():
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break                  # the first processor is enough
                k, _, v = line.partition(":")
                fields[k.strip()] = v.strip()
    except OSError:
        import platform
        return platform.processor() or platform.machine(), []
    model = f"{fields.get('model name', '?')} (family {fields.get('cpu family', '?')} " \
            f"model {fields.get('model', '?')})"
    wanted = ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni",
              "amx_tile", "neon", "asimd")
    return model, [f for f in fields.get("flags", fields.get("Features", "")).split()
                   if f in wanted]


def _cattn_config():
    """cattn.show_config() as a dict (its public face; values are strings)."""
    try:
        import cattn
        buf = io.StringIO()
        cattn.show_config(file=buf)
    except Exception as e:  # a broken build still gets its results labelled
        return {"error": repr(e)}
    out = {}
    for line in buf.getvalue().splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def machine_summary():
    """What produced the figures: CPU, cattn's build and kernel path, BLAS, torch."""
    model, flags = _cpu()
    info = {"cpu_model": model, "cpu_flags": flags, "cattn": _cattn_config(),
            "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ}}
    if threadpool_info is not None:
        info["blas"] = [{k: d.get(k) for k in ("internal_api", "version", "architecture",
                                                "num_threads")}
                        for d in threadpool_info() if d.get("user_api") == "blas"]
    if "torch" in sys.modules:
        info["torch"] = sys.modules["torch"].__version__
    if hasattr(os, "getloadavg"):
        info["load_average"] = [round(x, 2) for x in os.getloadavg()]
    return info


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info.update(machine_summary())
