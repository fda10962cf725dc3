"""cattn._bench — the side-by-side table behind `cattn bench`.

Every row runs cattn, NumPy and (when installed) torch on the same inputs.
Each library is timed as a block: ~0.3 s of untimed warm-up, then several
runs of a few calls; the median run is reported. Blocks, not interleaved
calls, because OpenBLAS threads keep spinning for >0.1 s after a call and
slow an OpenMP kernel that runs right after (see RESEARCH.md).

Adding rows for another op: write a function that builds its inputs and calls
`register(name, flops, cattn_fn, numpy_fn, torch_fn)`, and decorate it with
`@suite`. It is called once per run with a `Sizes` telling it which shapes to
use (`tiny` is for the tests), the dtype and the torch module (or None).
"""
import contextlib
import os
import statistics
import time
from typing import Callable, NamedTuple, Optional

import numpy as np

import cattn


class Case(NamedTuple):
    name: str
    flops: float
    cattn_fn: Callable
    numpy_fn: Callable
    torch_fn: Optional[Callable]


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


def register(name, flops, cattn_fn, numpy_fn, torch_fn=None):
    """One table row: three zero-argument callables doing the same work."""
    _cases.append(Case(name, float(flops), cattn_fn, numpy_fn, torch_fn))


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


# ---- timing ----

# ---- rows: attention ----

ATTN_SHAPES = [  # (B, H, L, S, E, causal)
    (8, 12, 128, 128, 64, False),
    (1, 8, 1024, 1024, 64, False),
    (1, 8, 1024, 1024, 64, True),
    (1, 32, 1, 4096, 128, False),   # one decode step over a 4096-token cache
]
ATTN_TINY = [(1, 2, 5, 7, 8, False), (1, 2, 5, 7, 8, True)]


def numpy_attention(q, k, v, causal):
    """softmax(Q K^T / sqrt(E) (+ causal -inf)) V with numpy.matmul and np.exp."""
    s = np.matmul(q, np.swapaxes(k, -1, -2)) * (1.0 / np.sqrt(q.shape[-1]))
    if causal:
        L, S = s.shape[-2:]
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.matmul(s / s.sum(axis=-1, keepdims=True), v)


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
                 lambda q=q, k=k, v=v, c=causal: numpy_attention(q, k, v, c), tfn)


# ---- rows: softmax, layer norm ----

ROW_SHAPES = [(4096, 1024), (8192, 768)]
ROW_TINY = [(3, 5)]


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def numpy_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    d = x - mu
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + eps) * w + b


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
                 lambda x=x: numpy_softmax(x), tsm)
        register(f"layer_norm {n}x{d}", 8.0 * n * d, lambda x=x, w=w, b=b: cattn.layer_norm(x, w, b),
                 lambda x=x, w=w, b=b: numpy_layer_norm(x, w, b), tln)


def time_block(fn, warmup=0.3, runs=7, min_run=0.02):
    """Median seconds per call: `warmup` s of untimed calls, then `runs` runs
    of enough calls to last about `min_run` s each."""
    t0 = time.perf_counter()
    calls = 0
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - t0
        if elapsed >= warmup:
            break
    number = max(1, int(min_run / (elapsed / calls)))
    per_call = []
    for _ in range(runs):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        per_call.append((time.perf_counter() - t) / number)
    return statistics.median(per_call)


@contextlib.contextmanager
def _limits(lib, n, torch):
    """Run `lib` with n threads inside the block."""
    if lib == "cattn":
        with cattn.num_threads(n):
            yield
    elif lib == "numpy":
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:       # numpy keeps its own default
            yield
            return
        with threadpool_limits(n, user_api="blas"):
            yield
    else:
        prev = torch.get_num_threads()
        torch.set_num_threads(n)
        try:
            yield
        finally:
            torch.set_num_threads(prev)


def _agree(x, y):
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    scale = max(1.0, float(np.abs(y).max(initial=0.0)))
    return x.shape == y.shape and np.allclose(x, y, rtol=1e-3, atol=1e-3 * scale)


def run(threads, dtype=np.float32, tiny=False, warmup=0.3, runs=7, min_run=0.02,
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
            with _limits(lib, threads, torch):
                row[lib] = time_block(fn, warmup, runs, min_run)
        got, want = case.cattn_fn(), case.numpy_fn()
        row["agree"] = _agree(got, want)
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
