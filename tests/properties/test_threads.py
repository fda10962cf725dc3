"""Thread policy (set/get, context manager, per-thread isolation, OpenMP and
threadpoolctl defaults), bitwise-identical results for any thread count, and
concurrent calls from several Python threads."""
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import cattn
from cattn_testing.gemm import check_linear, check_matmul
from cattn_testing.numerics import randn
from cattn_testing.paths import run_python


# ---- the API ----

def test_set_get():
    cattn.set_num_threads(3)
    assert cattn.get_num_threads() == 3
    cattn.set_num_threads(np.int64(1))     # any integer type
    assert cattn.get_num_threads() == 1


def test_context_manager_restores_and_nests():
    cattn.set_num_threads(2)
    with cattn.num_threads(1) as n:
        assert n == 1 and cattn.get_num_threads() == 1
        with cattn.num_threads(3):
            assert cattn.get_num_threads() == 3
        assert cattn.get_num_threads() == 1
    assert cattn.get_num_threads() == 2


def test_context_manager_restores_on_error():
    cattn.set_num_threads(2)
    with pytest.raises(RuntimeError):
        with cattn.num_threads(1):
            raise RuntimeError("boom")
    assert cattn.get_num_threads() == 2


def test_context_is_per_python_thread():
    cattn.set_num_threads(2)
    seen = {}
    inside, release = threading.Event(), threading.Event()

    def worker():
        seen["worker_start"] = cattn.get_num_threads()
        with cattn.num_threads(3):
            seen["worker_inside"] = cattn.get_num_threads()
            inside.set()
            release.wait(10)

    with cattn.num_threads(1):
        t = threading.Thread(target=worker)
        t.start()
        assert inside.wait(10)
        assert cattn.get_num_threads() == 1     # the worker's block does not leak here
        release.set()
        t.join()
    assert seen == {"worker_start": 2, "worker_inside": 3}


@pytest.mark.parametrize("bad,exc,msg", [
    (0, ValueError, ">= 1, got 0"), (-1, ValueError, ">= 1, got -1"),
    (1.5, TypeError, "must be an int, got float"), ("2", TypeError, "must be an int, got str"),
    (None, TypeError, "got NoneType"),
])
def test_bad_values(bad, exc, msg):
    with pytest.raises(exc, match=msg):
        cattn.set_num_threads(bad)
    with pytest.raises(exc, match=msg):
        with cattn.num_threads(bad):
            pass


def test_omp_num_threads_sets_the_default():
    assert run_python("import cattn; print(cattn.get_num_threads())",
                      OMP_NUM_THREADS="1").strip() == "1"
    assert run_python("import cattn; print(cattn.get_num_threads())",
                      OMP_NUM_THREADS="3").strip() == "3"


def test_threadpoolctl_limits_are_respected():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with threadpoolctl.threadpool_limits(1, user_api="openmp"):
        assert cattn.get_num_threads() == 1
    with threadpoolctl.threadpool_limits(3, user_api="openmp"):
        assert cattn.get_num_threads() == 3
    with cattn.num_threads(2), threadpoolctl.threadpool_limits(1, user_api="openmp"):
        assert cattn.get_num_threads() == 2     # an explicit cattn block wins


# ---- results do not depend on the thread count ----
# Shapes are large enough (> 2 * 2^18 flops) that 2 and 3 threads are really used.

MATMUL_CASES = {
    "square": ((300, 300), (300, 257)),
    "small-M-splits-N": ((5, 300), (300, 1000)),
    "N>NC": ((145, 257), (257, 4097)),
    "batch-folded": ((4, 63, 300), (300, 65)),
    "batch-cooperative": ((2, 2, 145, 300), (2, 1, 300, 70)),
    "transposed-B": ((200, 300), "T"),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", list(MATMUL_CASES))
def test_matmul_bitwise_equal_across_thread_counts(rng, dtype, case):
    sa, sb = MATMUL_CASES[case]
    a = randn(rng, sa, dtype)
    b = randn(rng, (211, 300), dtype).T if sb == "T" else randn(rng, sb, dtype)
    results = []
    for n in (1, 2, 3):
        with cattn.num_threads(n):
            results.append(cattn.matmul(a, b))
    check_matmul(results[0], a, b)
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


# Many small batch items, one per thread at a time (gemm_batched's
# "independent" mode). Run in a fresh process: with the bug below it
# segfaults, which would abort the whole pytest session.
BATCH_INDEPENDENT = """
import numpy as np, cattn
from cattn_testing.gemm import check_matmul
rng = np.random.default_rng(0)
for dt in (np.float32, np.float64):
    for K in (64, 65, 66):
        a = rng.standard_normal((40, 17, K)).astype(dt)
        b = rng.standard_normal((40, K, 9)).astype(dt)
        rs = []
        for n in (1, 2, 3):
            with cattn.num_threads(n):
                rs.append(cattn.matmul(a, b))
        check_matmul(rs[0], a, b)
        assert all(np.array_equal(r, rs[0]) for r in rs[1:]), (dt, K)
print("ok")
"""


def test_batch_independent_bitwise_equal_across_thread_counts():
    assert run_python(BATCH_INDEPENDENT).strip() == "ok"


@pytest.mark.parametrize("activation", [None, "gelu", "silu"])
def test_linear_bitwise_equal_across_thread_counts(rng, activation):
    x, w, bias = randn(rng, (2, 65, 300)), randn(rng, (129, 300)), randn(rng, (129,))
    results = []
    for n in (1, 2):
        with cattn.num_threads(n):
            results.append(cattn.linear(x, w, bias, activation=activation))
    check_linear(results[0], x, w, bias, activation)
    np.testing.assert_array_equal(results[1], results[0])


# ---- several Python threads at once ----

def test_concurrent_calls_from_python_threads(rng):
    shapes = [((63, 257), (257, 65)), ((3, 17, 65), (65, 33)), ((300, 100), (100, 300)),
              ((5, 1000), (1000, 7))]
    jobs = []
    for i in range(16):
        sa, sb = shapes[i % len(shapes)]
        dt = np.float32 if i % 3 else np.float64
        jobs.append((randn(rng, sa, dt), randn(rng, sb, dt), 1 + i % 2))

    def run(job):
        a, b, n = job
        with cattn.num_threads(n):
            return [cattn.matmul(a, b) for _ in range(3)]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, jobs))
    for (a, b, _), outs in zip(jobs, results):
        for got in outs:
            check_matmul(got, a, b)


def test_big_matmuls_in_two_threads_complete(rng):
    """The GIL is released while kernels run: two large products in two
    Python threads both finish (and are right). No timing is asserted."""
    pairs = [(randn(rng, (600, 600)), randn(rng, (600, 600))) for _ in range(2)]
    with ThreadPoolExecutor(2) as pool:
        outs = list(pool.map(lambda p: cattn.matmul(*p), pairs))
    for (a, b), got in zip(pairs, outs):
        check_matmul(got, a, b)


# ---- shared CPUs: short regions on one thread while contended (csrc/contention.c)

def test_contended_flag_hook():
    from cattn import _ext
    _ext.set_contended(0)
    assert _ext.contended() is False
    _ext.set_contended(5.0)
    try:
        assert _ext.contended() is True
    finally:
        _ext.set_contended(0)
    assert _ext.contended() is False


def test_contention_detection_switch():
    """set_contention_detection returns the previous setting and takes bools;
    with it off, the same bits (only thread counts could change)."""
    from cattn import _ext
    x = np.random.default_rng(0).standard_normal((3, 384)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((512, 384)).astype(np.float32)
    want = cattn.linear(x, w)
    assert cattn.set_contention_detection(False) is True
    try:
        assert cattn.set_contention_detection(False) is False
        np.testing.assert_array_equal(cattn.linear(x, w), want)
        _ext.set_contended(0)
        assert _ext.contended() is False
    finally:
        assert cattn.set_contention_detection(True) is False
    with pytest.raises(TypeError, match="bool"):
        cattn.set_contention_detection("yes")


def test_contended_window_backs_off():
    """An isolated late start marks the CPU contended for CATTN_CONTENDED_MIN_S
    (0.01 s); late starts that keep coming double the window up to
    CATTN_CONTENDED_S (0.1 s); CATTN_CONTENDED_QUIET_S (0.5 s) without one
    resets it."""
    import time
    from cattn import _ext
    _ext.set_contended(5.0)
    if not _ext.contended():
        pytest.skip("a build without OpenMP has no contended state")
    _ext.set_contended(0)
    try:
        w = [_ext.note_late_start() for _ in range(6)]          # back to back
        assert w == pytest.approx([0.01, 0.02, 0.04, 0.08, 0.1, 0.1])
        assert _ext.contended()
        time.sleep(0.1 + 0.1)                  # the window ends, then 0.1 s quiet
        assert not _ext.contended()
        assert _ext.note_late_start() == pytest.approx(0.1)     # not quiet long enough
        time.sleep(0.1 + 0.6)                  # the window ends, then 0.6 s quiet
        assert _ext.note_late_start() == pytest.approx(0.01)
    finally:
        _ext.set_contended(0)


@pytest.mark.parametrize("fmt", ["plain", "float32", "bfloat16", "int8", "bfloat16dot"])
def test_contended_regions_give_the_same_bits(rng, fmt):
    """While the CPU is marked contended, short regions (few-row linears,
    small attention) run on one thread: the results must be the same bits
    as with two threads on a quiet CPU, and long regions keep theirs."""
    from cattn import _ext
    w = randn(rng, (1536, 384))
    b = randn(rng, (1536,))
    W = w if fmt == "plain" else cattn.pack_weight(w, fmt)
    xs = [randn(rng, (m, 384)) for m in (1, 3, 9, 300)]
    q, k, v = (randn(rng, (1, 12, 9, 32)) for _ in range(3))

    def run():
        return ([cattn.linear(x, W, b, activation="gelu") for x in xs]
                + [cattn.scaled_dot_product_attention(q, k, v)])

    _ext.set_contended(0)
    with cattn.num_threads(2):
        quiet = run()
        _ext.set_contended(60.0)
        try:
            contended = run()
            assert _ext.contended()
        finally:
            _ext.set_contended(0)
    for a, c in zip(quiet, contended):
        np.testing.assert_array_equal(a, c)
