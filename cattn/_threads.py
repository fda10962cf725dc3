"""Thread policy: how many OpenMP threads each cattn kernel may use.

Precedence: a `with num_threads(n):` block (per Python thread) >
`set_num_threads(n)` (process-wide) > OpenMP's own default, which follows
OMP_NUM_THREADS and threadpoolctl (`threadpool_limits(n, user_api="openmp")`).
Results never depend on the choice: work is split by fixed tiles.
"""
import contextlib
import operator
import threading

from . import _ext

_global = None
_local = threading.local()


def _check_n(n):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"number of threads must be an int, got {type(n).__name__}") from None
    if n < 1:
        raise ValueError(f"number of threads must be >= 1, got {n}")
    return n


def get_num_threads():
    """Threads the next kernel call in this Python thread will use."""
    n = getattr(_local, "n", None)
    if n is not None:
        return n
    if _global is not None:
        return _global
    return max(1, _ext.omp_max_threads())


def set_num_threads(n):
    """Set the process-wide thread count for cattn's kernels."""
    global _global
    _global = _check_n(n)


@contextlib.contextmanager
def num_threads(n):
    """Use n threads for cattn kernels called from this Python thread inside the block."""
    n = _check_n(n)
    prev = getattr(_local, "n", None)
    _local.n = n
    try:
        yield n
    finally:
        _local.n = prev
