"""cattn.server.engine — the one thread that runs every model call of the
server: loading, embedding batches, prefills and decode steps, in turn.

Why one thread: cattn's kernels run OpenMP regions, and libgomp keeps a
thread team per calling thread; with more teams than cores it throttles
its workers' spin-wait, and every short region then pays a futex wake-up
(a one-sentence MiniLM encode: 2.1 ms on its only calling thread, 3.3-4.2
ms on a second one; 2-core Zen 4). One caller also means no two model
calls share the cores. What it is not: a scheduler of requests (each
service decides what its turn does: embeddings one batch, generation its
admissions and one decode step).
"""
import threading

from .._threads import set_contention_detection

__all__ = ["Engine"]


class Engine:
    """services: objects with work() -> bool (True: did something; called
    in turn while any has work), their own pending state behind notify(),
    and contention_detection (cattn.set_contention_detection during their
    work: generation turns it off, since the late starts of its steps come
    from this process's event loop and clients waking for every token). run_soon(fn): fn() on the engine thread
    before the next turn (e.g. loading the models)."""

    def __init__(self):
        self.services = []
        self._calls = []
        self._cv = threading.Condition()
        self._pending = False
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="cattn-engine", daemon=True)
        self._thread.start()

    def notify(self):
        """Something to do: wake the engine (thread-safe)."""
        with self._cv:
            self._pending = True
            self._cv.notify()

    def run_soon(self, fn):
        with self._cv:
            self._calls.append(fn)
            self._pending = True
            self._cv.notify()

    def close(self):
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._thread.join(timeout=10)

    def _run(self):
        while True:
            with self._cv:
                while not self._pending and not self._stop:
                    self._cv.wait()
                if self._stop:
                    return
                self._pending = False
                calls, self._calls = self._calls, []
            for fn in calls:
                fn()
            busy = True
            while busy and not self._stop:
                busy = False
                for s in list(self.services):
                    set_contention_detection(s.contention_detection)
                    busy |= bool(s.work())
