"""Attention benchmarks: cattn vs torch vs a plain NumPy softmax(Q K^T) V
(baselines.attention), float32, 2 threads, side by side in one run (ratios
are what to read on a shared machine; absolute times drift).

    pytest benchmarks/bench_attention.py --benchmark-json=attn.json
    python benchmarks/report.py attn.json

Shapes: B batch, Hq query heads, H kv heads, L query length, S key length,
E head dim. Each library is timed as a block by conftest's `bench`.

extra_info: flops = 4 B H L S E per call (halved for causal); decode: also
bytes = the K and V read (2 B H S E * 4), to set beside the machine's read
bandwidth measured in the same run (test_read_bandwidth). Decode rounds
start from a cold cache (conftest sweeps a 64 MiB buffer before each round,
not timed), as in a real model where all layers' K/V do not fit in L3 (32 MiB).
Peak memory: test_peak_memory runs (1, 8, 8192, 8192, 64) in a fresh
process and records peak_MiB, the growth of VmHWM beyond inputs and output.
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import baselines
import cattn

PREFILL = [(1, 12, 128, 128, 64), (8, 12, 128, 128, 64), (1, 8, 512, 512, 64),
           (1, 8, 2048, 2048, 64), (1, 8, 4096, 4096, 64)]
DECODE = {"decode": (1, 32, 32, 1, 4096, 128),          # B, Hq, H, L, S, E
          "gqa-decode": (1, 32, 8, 1, 4096, 128)}
LIBS = ["cattn", "torch", "numpy"]


def _torch():
    return pytest.importorskip("torch")


def _inputs(B, Hq, H, L, S, E, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, Hq, L, E), dtype=np.float32),
            rng.standard_normal((B, H, S, E), dtype=np.float32),
            rng.standard_normal((B, H, S, E), dtype=np.float32))


def _sdpa(bench, lib, q, k, v, numpy_fn, info, **kw):
    """Time lib's scaled_dot_product_attention(q, k, v, **kw) (numpy: numpy_fn)."""
    if lib == "cattn":
        return bench(lambda: cattn.scaled_dot_product_attention(q, k, v, **kw), **info)
    if lib == "torch":
        torch = _torch()
        tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
        sdpa = torch.nn.functional.scaled_dot_product_attention
        with torch.inference_mode():
            return bench(lambda: sdpa(tq, tk, tv, **kw), **info).numpy()
    return bench(numpy_fn, **info)


# ---- prefill ------------------------------------------------------------------------------

def _prefill_cases():
    for shape in PREFILL:
        for causal in (False, True):
            for lib in LIBS:
                yield pytest.param(shape, causal, lib,
                                   id=f"{'x'.join(map(str, shape))}-{'causal' if causal else 'full'}-{lib}")


@pytest.mark.parametrize("shape,causal,lib", list(_prefill_cases()))
def test_prefill(bench, shape, causal, lib):
    B, H, L, S, E = shape
    q, k, v = _inputs(B, H, H, L, S, E)
    info = dict(group=f"prefill {B}x{H}x{L}x{S}x{E}" + (" causal" if causal else ""), lib=lib,
                dtype="float32", shape=list(shape), causal=causal,
                flops=4.0 * B * H * L * S * E / (2 if causal else 1))
    bias = baselines.causal_bias(L, S) if causal and lib == "numpy" else None
    out = _sdpa(bench, lib, q, k, v, lambda: baselines.attention(q, k, v, bias=bias), info,
                is_causal=causal)
    assert out.shape == (B, H, L, E) and np.isfinite(out).all()


# ---- decode -------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,lib", [(kind, lib) for kind in DECODE for lib in LIBS],
                         ids=lambda x: x)
def test_decode(bench, kind, lib):
    B, Hq, H, L, S, E = DECODE[kind]
    q, k, v = _inputs(B, Hq, H, L, S, E, seed=1)
    info = dict(group=f"{kind} {B}x{Hq}q{H}kv x{L}x{S}x{E}", lib=lib, dtype="float32",
                shape=[B, Hq, H, L, S, E], cold_cache=True,
                flops=4.0 * B * Hq * L * S * E, bytes=k.nbytes + v.nbytes)
    out = _sdpa(bench, lib, q, k, v, lambda: baselines.gqa_decode(q, k, v), info,
                enable_gqa=Hq != H)
    assert out.shape == (B, Hq, L, E) and np.isfinite(out).all()


def test_read_bandwidth(bench):
    """The machine's read bandwidth: numpy.dot of two 256 MiB float32 vectors."""
    a = np.ones(64 << 20, np.float32)
    b = np.ones(64 << 20, np.float32)
    bench(lambda: np.dot(a, b), group="read bandwidth", lib="numpy",
          dtype="float32", shape=[a.size], bytes=a.nbytes + b.nbytes)


# ---- peak memory --------------------------------------------------------------------------

PEAK_SCRIPT = r"""
import sys, numpy as np
lib = sys.argv[1]
B, H, L, S, E = 1, 8, 8192, 8192, 64

def hwm():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1]) * 1024

rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((B, H, n, E), dtype=np.float32) for n in (L, S, S))
if lib == "cattn":
    import cattn
    cattn.set_num_threads(2)
    f = lambda a, b, c: cattn.scaled_dot_product_attention(a, b, c)
else:
    import torch
    torch.set_num_threads(2)
    torch.inference_mode().__enter__()
    f = lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(
        *(torch.from_numpy(x) for x in (a, b, c))).numpy()
f(q[:, :, :256], k[:, :, :256], v[:, :, :256])     # threads, scratch, lazy imports
with open("/proc/self/clear_refs", "w") as fh:      # reset VmHWM to the current RSS
    fh.write("5")
base = hwm()
out = f(q, k, v)
growth = hwm() - base - out.nbytes                  # beyond inputs (already resident) and output
print(growth)
"""


@pytest.mark.parametrize("lib", ["cattn", "torch"])
def test_peak_memory(bench, benchmark, lib):
    """RSS growth of one (1, 8, 8192, 8192, 64) call beyond inputs and output,
    in a fresh process (the time is the whole subprocess: ignore it)."""
    if lib == "torch":
        _torch()
    env = dict(os.environ)
    # the cattn under test, also from a checkout's root (where `python -c` would find ./cattn)
    root = os.path.dirname(os.path.dirname(os.path.abspath(cattn.__file__)))
    env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])

    def run():
        r = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, lib], env=env, cwd=root,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        return int(r.stdout.split()[-1])

    growth = bench(run, group="peak memory 1x8x8192x8192x64", lib=lib, dtype="float32",
                   shape=[1, 8, 8192, 8192, 64], rounds=1)
    benchmark.extra_info["peak_MiB"] = growth / 2**20
    # a (B, H, L, S) float32 score tensor would be 2 GiB
    assert growth < 256 * 2**20
