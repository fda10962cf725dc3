"""A minimal progress bar on stderr (no tqdm dependency)."""
import sys
import time


def isatty(f):
    """True when the stream f is a terminal (False for a closed or fake stream)."""
    try:
        return f.isatty()
    except (AttributeError, ValueError):
        return False


class ProgressBar:
    """`bar.update(n)` advances; `bar.close()` ends the line. Disabled bars do nothing.
    Redraws at most ~10 times a second."""

    def __init__(self, total, desc="", enabled=True, file=None, width=30):
        self.total, self.desc, self.enabled = int(total), desc, bool(enabled)
        self.file = file if file is not None else sys.stderr
        self.width, self.n = width, 0
        self.start = self._last = time.perf_counter()
        if self.enabled:
            self._draw()

    def update(self, n=1):
        self.n += n
        now = time.perf_counter()
        if self.enabled and (now - self._last > 0.1 or self.n >= self.total):
            self._last = now
            self._draw()

    def _draw(self):
        frac = self.n / self.total if self.total else 1.0
        full = int(self.width * frac)
        dt = time.perf_counter() - self.start
        rate = f"{self.n / dt:.1f}/s" if dt > 0 and self.n else "?/s"
        self.file.write(f"\r{self.desc}: {100 * frac:3.0f}% |{'#' * full}{'.' * (self.width - full)}| "
                        f"{self.n}/{self.total} [{dt:.1f}s, {rate}]")
        self.file.flush()

    def close(self):
        if self.enabled:
            self._draw()
            self.file.write("\n")
            self.file.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
