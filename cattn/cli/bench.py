"""`cattn bench`: the side-by-side table of cattn against NumPy (and torch),
plus the pieces benchmarks/ shares with it (the installed package cannot
import benchmarks/, so they live here and benchmarks/conftest.py and
benchmarks/baselines.py import them): `warm_up`, `thread_limit` and the
NumPy baselines `softmax_`, `layer_norm`, `causal_bias`, `attention`.

Every row runs cattn, NumPy and (when installed) torch on the same inputs.
Each library is timed as a block: ~0.3 s of untimed warm-up, then several
runs of a few calls; the median run is reported. Blocks, not interleaved
calls, because OpenBLAS threads keep spinning for >0.1 s after a call and
slow an OpenMP kernel that runs right after (CONTRIBUTING.md, benchmarks).

Shape legend: M/N/K for matmul; B batch, H heads, L queries, S keys, E is
the head dim (the value dim too here) for attention; rows (n, d).

Adding rows for another op: write a function that builds its inputs and calls
`register(name, flops, cattn_fn, numpy_fn, torch_fn)` (`tol=`: the relative
agreement with NumPy to expect, for reduced-precision rows), and decorate it
with `@suite`. It is called once per run with a `Sizes` telling it which shapes to
use (`tiny` is for the tests), the dtype and the torch module (or None).
"""
import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from typing import Callable, NamedTuple, Optional

import numpy as np

import cattn

try:
    from threadpoolctl import threadpool_limits
except ImportError:  # numpy keeps its own default
    threadpool_limits = None

WARMUP_S = 0.3     # untimed warm-up per block


# ---- the command ----

def add_command(sub):
    from . import add_threads_option
    p = sub.add_parser("bench", help="time cattn against NumPy (and torch) side by side")
    add_threads_option(p, what="threads for every library")
    p.add_argument("--quick", action="store_true",
                   help="shorter warm-up and fewer runs (a few seconds; noisier)")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--no-torch", action="store_true", help="skip torch even if installed")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # tests only
    p.set_defaults(func=command)


def command(args):
    threads = args.threads if args.threads is not None else cattn.get_num_threads()
    if args.quick:
        timing = dict(warmup=0.15, runs=3, min_run=0.01)
    else:
        timing = dict(warmup=WARMUP_S, runs=9, min_run=0.05)
    if args.tiny:
        timing = dict(warmup=0.0, runs=1, min_run=0.0)
    print(f"cattn {cattn.__version__} bench: {args.dtype}, {threads} thread(s), "
          f"kernel path {cattn._ext.kernel_path()}; GFLOP/s, median of {timing['runs']} "
          f"run(s) after {timing['warmup']} s warm-up per library; ratio > 1: cattn faster")
    note = openblas_env_note()
    if note:
        print(note)
    rows = run(threads, np.dtype(args.dtype), tiny=args.tiny,
               use_torch=not args.no_torch, **timing)
    format_table(rows)
    return 0 if all(r["agree"] for r in rows) else 1


# ---- threads and timing (also benchmarks/conftest.py's) ----

@contextlib.contextmanager
def thread_limit(n):
    """n threads inside the block for cattn (this Python thread), every BLAS
    threadpoolctl sees (NumPy's and SciPy's OpenBLAS) and torch (if imported)."""
    torch = sys.modules.get("torch")
    with contextlib.ExitStack() as stack:
        stack.enter_context(cattn.num_threads(n))
        if threadpool_limits is not None:
            stack.enter_context(threadpool_limits(n, user_api="blas"))
        if torch is not None:
            stack.callback(torch.set_num_threads, torch.get_num_threads())
            torch.set_num_threads(n)
        yield


def warm_up(fn, seconds=WARMUP_S):
    """Call fn for about `seconds` (at least once), untimed; seconds per call."""
    t0 = time.perf_counter()
    calls = 0
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return elapsed / calls


def time_block(fn, warmup=WARMUP_S, runs=7, min_run=0.02):
    """Median seconds per call: `warmup` s of untimed calls, then `runs` runs
    of enough calls to last about `min_run` s each."""
    per_call = warm_up(fn, warmup)
    number = max(1, int(min_run / per_call))
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return statistics.median(times)


# ---- NumPy baselines (also benchmarks/baselines.py's): what a user without
# cattn writes, numpy.matmul through OpenBLAS and NumPy's elementwise functions

def softmax_(s):
    """Stable softmax over the last axis, in place on s; returns s."""
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return s


def layer_norm(x, w, b, eps=1e-5):
    """Two-pass layer norm over the last axis, biased variance, then * w + b."""
    mu = x.mean(-1, keepdims=True)
    d = x - mu
    var = np.mean(d * d, axis=-1, keepdims=True)
    return d / np.sqrt(var + eps) * w + b


def causal_bias(L, S, dtype=np.float32):
    """(L, S) additive mask, 0 where key j <= query i, -inf above (top-left aligned)."""
    return np.where(np.tri(L, S, dtype=bool), 0.0, -np.inf).astype(dtype)


def attention(q, k, v, scale=None, bias=None):
    """softmax(Q K^T * scale + bias) V with numpy.matmul, in place on the one
    (B, H, L, S) score array. q (..., L, E), k (..., S, E), v (..., S, Ev)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = np.matmul(q, np.swapaxes(k, -1, -2))
    s *= s.dtype.type(scale)
    if bias is not None:
        s += bias
    return np.matmul(softmax_(s), v)


class Case(NamedTuple):
    name: str
    flops: float
    cattn_fn: Callable
    numpy_fn: Callable
    torch_fn: Optional[Callable]
    tol: float = 1e-3      # cattn agrees with NumPy within tol (relative, and tol * max|y|)


class Sizes(NamedTuple):
    tiny: bool
    dtype: np.dtype
    torch: object      # the torch module, or None


SUITES = []
_cases = []


def suite(fn):
    """Register a function (sizes: Sizes) -> None that calls register()."""
    SUITES.append(fn)
    return fn


def register(name, flops, cattn_fn, numpy_fn, torch_fn=None, *, tol=1e-3):
    """One table row: three zero-argument callables doing the same work (tol:
    how closely cattn's result must agree with NumPy's, relative)."""
    _cases.append(Case(name, float(flops), cattn_fn, numpy_fn, torch_fn, float(tol)))


# ---- rows: matmul ----

MATMUL_SHAPES = [  # (batch, M, K, N)
    (1, 512, 512, 512),
    (1, 1024, 1024, 1024),
    (1, 1024, 384, 1536),      # MiniLM FFN up-projection, 1024 tokens
    (96, 128, 64, 128),        # attention scores: B*H x (L x E @ E x S)
]
MATMUL_TINY = [(1, 8, 8, 8), (3, 5, 7, 9)]


@suite
def matmul_suite(sizes):
    rng = np.random.default_rng(0)
    for nb, M, K, N in MATMUL_TINY if sizes.tiny else MATMUL_SHAPES:
        lead = (nb,) if nb > 1 else ()
        a = rng.standard_normal(lead + (M, K)).astype(sizes.dtype)
        b = rng.standard_normal(lead + (K, N)).astype(sizes.dtype)
        name = (f"{nb}x " if nb > 1 else "") + f"{M}x{K} @ {K}x{N}"
        tfn = None
        if sizes.torch is not None:
            ta, tb = sizes.torch.from_numpy(a), sizes.torch.from_numpy(b)
            tfn = lambda ta=ta, tb=tb: sizes.torch.matmul(ta, tb)  # noqa: E731
        register(f"matmul {name}", 2.0 * nb * M * N * K,
                 lambda a=a, b=b: cattn.matmul(a, b),
                 lambda a=a, b=b: np.matmul(a, b), tfn)


# ---- rows: linear on packed weights (float32, bfloat16, int8) ----
# cattn.linear(x, cattn.pack_weight(w, dtype=fmt), b) vs NumPy's float32
# x @ w.T + b; torch: float32 F.linear, and for int8 torch's dynamic int8
# Linear (quantize_dynamic's defaults: per-tensor weights, 7-bit activations).
# float32 runs only (every format takes and returns float32).

LINEAR_SHAPES = [(8, 384, 1536), (1024, 384, 1536)]  # (M, K, N): a short sentence, a batch
LINEAR_TINY = [(3, 8, 5)]
LINEAR_FORMATS = {"float32": 1e-3, "bfloat16": 1e-2, "int8": 5e-2}   # format -> tol vs NumPy


def torch_int8_linear(torch, w, b):
    """torch's dynamic int8 Linear holding w (N, K) and b (quantize_dynamic on nn.Linear)."""
    import warnings
    N, K = w.shape
    lin = torch.nn.Linear(K, N)
    with torch.no_grad():
        lin.weight.copy_(torch.from_numpy(w))
        lin.bias.copy_(torch.from_numpy(b))
    with warnings.catch_warnings():          # torch.ao.quantization's deprecation notices
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(
            torch.nn.Sequential(lin), {torch.nn.Linear}, dtype=torch.qint8)[0]


@suite
def linear_formats_suite(sizes):
    if sizes.dtype != np.float32:
        return
    rng = np.random.default_rng(3)
    for M, K, N in LINEAR_TINY if sizes.tiny else LINEAR_SHAPES:
        x = rng.standard_normal((M, K), dtype=np.float32)
        w = rng.standard_normal((N, K), dtype=np.float32)
        b = rng.standard_normal(N, dtype=np.float32)
        for fmt, tol in LINEAR_FORMATS.items():
            p = cattn.pack_weight(w, dtype=fmt)
            tfn, peer = None, ""
            if sizes.torch is not None:
                tx = sizes.torch.from_numpy(x)
                if fmt == "int8":
                    q, peer = torch_int8_linear(sizes.torch, w, b), " (torch int8)"
                    tfn = lambda q=q, tx=tx: q(tx)                             # noqa: E731
                else:
                    tw, tb = sizes.torch.from_numpy(w), sizes.torch.from_numpy(b)
                    F = sizes.torch.nn.functional
                    tfn = lambda tx=tx, tw=tw, tb=tb: F.linear(tx, tw, tb)    # noqa: E731
            register(f"linear {fmt} {M}x{K}->{N}{peer}", 2.0 * M * N * K,
                     lambda x=x, p=p, b=b: cattn.linear(x, p, b),
                     lambda x=x, w=w, b=b: x @ w.T + b, tfn, tol=tol)


# ---- rows: attention ----

ATTN_SHAPES = [  # (B, H, L, S, E, causal)
    (8, 12, 128, 128, 64, False),
    (1, 8, 1024, 1024, 64, False),
    (1, 8, 1024, 1024, 64, True),
    (1, 32, 1, 4096, 128, False),   # one decode step over a 4096-token cache
]
ATTN_TINY = [(1, 2, 5, 7, 8, False), (1, 2, 5, 7, 8, True)]


@suite
def attention_suite(sizes):
    rng = np.random.default_rng(1)
    for B, H, L, S, E, causal in ATTN_TINY if sizes.tiny else ATTN_SHAPES:
        q = rng.standard_normal((B, H, L, E)).astype(sizes.dtype)
        k = rng.standard_normal((B, H, S, E)).astype(sizes.dtype)
        v = rng.standard_normal((B, H, S, E)).astype(sizes.dtype)
        tfn = None
        if sizes.torch is not None:
            F = sizes.torch.nn.functional
            tq, tk, tv = (sizes.torch.from_numpy(x) for x in (q, k, v))
            tfn = lambda tq=tq, tk=tk, tv=tv, c=causal: F.scaled_dot_product_attention(  # noqa: E731
                tq, tk, tv, is_causal=c)
        name = f"sdpa {B}x{H}x{L}x{S}x{E}" + (" causal" if causal else "")
        register(name, 4.0 * B * H * L * S * E * (0.5 if causal else 1.0),
                 lambda q=q, k=k, v=v, c=causal: cattn.scaled_dot_product_attention(
                     q, k, v, is_causal=c),
                 lambda q=q, k=k, v=v, m=causal_bias(L, S, sizes.dtype) if causal else None:
                 attention(q, k, v, bias=m), tfn)


# ---- rows: softmax, layer norm ----

ROW_SHAPES = [(4096, 1024), (8192, 768)]
ROW_TINY = [(3, 5)]


@suite
def rows_suite(sizes):
    rng = np.random.default_rng(2)
    for n, d in ROW_TINY if sizes.tiny else ROW_SHAPES:
        x = rng.standard_normal((n, d)).astype(sizes.dtype)
        w = rng.standard_normal(d).astype(sizes.dtype)
        b = rng.standard_normal(d).astype(sizes.dtype)
        tsm = tln = None
        if sizes.torch is not None:
            tx, tw, tb = (sizes.torch.from_numpy(a) for a in (x, w, b))
            F = sizes.torch.nn.functional
            tsm = lambda tx=tx: sizes.torch.softmax(tx, dim=-1)  # noqa: E731
            tln = lambda tx=tx, tw=tw, tb=tb, d=d: F.layer_norm(tx, (d,), tw, tb)  # noqa: E731
        # "flops": ~5 per element for softmax, ~8 for layer norm (a rate, for the table)
        register(f"softmax {n}x{d}", 5.0 * n * d, lambda x=x: cattn.softmax(x),
                 lambda x=x: softmax_(x.copy()), tsm)
        register(f"layer_norm {n}x{d}", 8.0 * n * d, lambda x=x, w=w, b=b: cattn.layer_norm(x, w, b),
                 lambda x=x, w=w, b=b: layer_norm(x, w, b), tln)


def _agree(x, y, tol=1e-3):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    scale = max(1.0, float(np.abs(y).max(initial=0.0)))
    return x.shape == y.shape and np.allclose(x, y, rtol=tol, atol=tol * scale)


def run(threads, dtype=np.float32, tiny=False, warmup=WARMUP_S, runs=7, min_run=0.02,
        use_torch=True):
    """Build every suite's rows and time them; returns a list of dicts with
    name, flops and per-library seconds (None where not run)."""
    torch = None
    if use_torch:
        try:
            import torch
        except ImportError:
            torch = None
    del _cases[:]
    for s in SUITES:
        s(Sizes(tiny, np.dtype(dtype), torch))
    rows = []
    for case in _cases:
        fns = {"cattn": case.cattn_fn, "numpy": case.numpy_fn, "torch": case.torch_fn}
        row = {"name": case.name, "flops": case.flops, "agree": True}
        for lib, fn in fns.items():
            if fn is None:
                row[lib] = None
                continue
            with thread_limit(threads):
                row[lib] = time_block(fn, warmup, runs, min_run)
        got, want = case.cattn_fn(), case.numpy_fn()
        row["agree"] = _agree(got, want, case.tol)
        rows.append(row)
    del _cases[:]
    return rows


def format_table(rows, file=None):
    def gf(row, lib):
        return None if row[lib] is None else row["flops"] / row[lib] / 1e9

    def cell(v, fmt):
        return format(v, fmt) if v is not None else "-"

    width = max([len("case")] + [len(r["name"]) for r in rows])
    head = (f"{'case':<{width}}  {'cattn':>7}  {'numpy':>7}  {'torch':>7}  "
            f"{'cattn/numpy':>11}  {'cattn/torch':>11}")
    lines = [head, "-" * len(head)]
    for r in rows:
        c, n, t = gf(r, "cattn"), gf(r, "numpy"), gf(r, "torch")
        lines.append(
            f"{r['name']:<{width}}  {cell(c, '7.1f')}  {cell(n, '7.1f')}  {cell(t, '7.1f')}  "
            f"{cell(c / n if n else None, '11.2f')}  {cell(c / t if t else None, '11.2f')}"
            + ("" if r["agree"] else "  MISMATCH vs numpy"))
    print("\n".join(lines), file=file)


def openblas_env_note():
    keys = [k for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ]
    if keys:
        return (f"note: {' and '.join(keys)} set in the environment; they can slow NumPy "
                f"(unset them for benchmark runs)")
    return None
