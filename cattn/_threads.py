"""Thread policy: how many OpenMP threads each cattn kernel may use.

Precedence: a `with num_threads(n):` block (per Python thread) >
`set_num_threads(n)` (process-wide) > OpenMP's own default, which follows
OMP_NUM_THREADS and threadpoolctl (`threadpool_limits(n, user_api="openmp")`).
Results never depend on the choice: work is split by fixed tiles.

Limits: a thread count is an int (not a bool, not a float) in
1 .. MAX_THREADS, checked where it is set (set_num_threads, num_threads):
TypeError for another type, ValueError naming the limit otherwise.
MAX_THREADS = max(1024, os.cpu_count()). Why a limit at all: the kernels
take a C int and start up to that many OpenMP threads on a large enough
problem; a count past what the system can create makes libgomp abort the
process ("Thread creation failed"). 1024 is above the logical CPU count of
any shared-memory machine cattn targets (and oversubscription only slows a
kernel down), yet small enough to be created anywhere a Python process runs;
machines with more CPUs get their CPU count. The OpenMP default
(OMP_NUM_THREADS) is clamped to the same limit.
"""
import contextlib
import os
import threading

from . import _ext
from ._validate import as_int

MAX_THREADS = max(1024, os.cpu_count() or 1)

_global = None
_local = threading.local()


def check_num_threads(n, op):
    return as_int(n, "number of threads", op, lo=1, hi=MAX_THREADS,
                  hi_why=" (cattn's limit, cattn._threads.MAX_THREADS)")


def get_num_threads():
    """Threads the next kernel call in this Python thread will use."""
    n = getattr(_local, "n", None)
    if n is not None:
        return n
    if _global is not None:
        return _global
    return min(MAX_THREADS, max(1, _ext.omp_max_threads()))


def set_num_threads(n):
    """Set the process-wide thread count for cattn's kernels: an int in
    1..MAX_THREADS (TypeError for another type, bool included; ValueError
    naming the limit otherwise)."""
    global _global
    _global = check_num_threads(n, "set_num_threads")


@contextlib.contextmanager
def num_threads(n):
    """Use n threads for cattn kernels called from this Python thread inside
    the block; n is checked as in set_num_threads."""
    n = check_num_threads(n, "num_threads")
    prev = getattr(_local, "n", None)
    _local.n = n
    try:
        yield n
    finally:
        _local.n = prev


def set_contention_detection(on):
    """Whether cattn's kernels treat a thread that started a parallel region
    late as a sign of a shared CPU (True, the default: short regions then
    run on one thread for a while, csrc/contention.c). Turn it off in a
    process whose own threads cause the late starts (`cattn serve` does: its
    event loop wakes for every token). Returns the previous setting; results
    are the same bits either way."""
    from ._validate import as_flag
    return _ext.set_contention_detection(as_flag(on, "on", "set_contention_detection"))
