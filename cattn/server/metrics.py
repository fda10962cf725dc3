"""cattn.server.metrics — the server's Prometheus metrics: counters,
gauges and histograms with labels, rendered in the text exposition format
(version 0.0.4) for GET /metrics. Thread-safe (the workers and the event
loop both write). What it is not: a client library (no push, no registry
of collectors); the metric names are listed in `Metrics.__init__`.
"""
import threading

__all__ = ["Metrics"]

# latency buckets (seconds): 1 ms .. 60 s
_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            30.0, 60.0)
_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def _labels(pairs):
    if not pairs:
        return ""
    body = ",".join(f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
                    for k, v in pairs)
    return "{" + body + "}"


class _Family:
    def __init__(self, name, kind, help_, buckets=None):
        self.name, self.kind, self.help, self.buckets = name, kind, help_, buckets
        self.values = {}                # label tuple -> value, or [counts, sum, n] for histograms


class Metrics:
    """The server's metrics (all names prefixed cattn_)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._f = {}
        for name, kind, help_, b in (
                ("requests_total", "counter", "Requests by route and outcome (HTTP status).", None),
                ("queue_depth", "gauge", "Requests waiting, by queue.", None),
                ("slots_busy", "gauge", "Generation slots holding a sequence.", None),
                ("slots_total", "gauge", "Generation slots.", None),
                ("batch_size", "histogram", "Rows per model call, by kind "
                 "(embeddings: sentences; decode: sequences).", _SIZES),
                ("phase_seconds", "histogram", "Per-phase latency: queue, prefill, decode_step, "
                 "embed_batch, first_token, request.", _SECONDS),
                ("tokens_total", "counter", "Tokens processed, by kind (embedded, prompt, "
                 "generated).", None),
                ("tokens_per_second", "gauge", "Generated tokens per second over the last "
                 "decode step (all sequences).", None),
                ("cancelled_total", "counter", "Requests whose client went away, by where "
                 "(queue, generation).", None)):
            self._f[name] = _Family("cattn_" + name, kind, help_, b)

    def inc(self, name, value=1, **labels):
        key = tuple(sorted(labels.items()))
        with self._lock:
            v = self._f[name].values
            v[key] = v.get(key, 0) + value

    def set(self, name, value, **labels):
        with self._lock:
            self._f[name].values[tuple(sorted(labels.items()))] = value

    def observe(self, name, value, **labels):
        key = tuple(sorted(labels.items()))
        with self._lock:
            f = self._f[name]
            h = f.values.get(key)
            if h is None:
                h = f.values[key] = [[0] * len(f.buckets), 0.0, 0]
            for i, b in enumerate(f.buckets):
                if value <= b:
                    h[0][i] += 1
            h[1] += value
            h[2] += 1

    def value(self, name, **labels):
        """The value of a counter or gauge (0 when never set): for tests."""
        with self._lock:
            return self._f[name].values.get(tuple(sorted(labels.items())), 0)

    def render(self):
        """The Prometheus text format of every metric."""
        out = []
        with self._lock:
            for f in self._f.values():
                out.append(f"# HELP {f.name} {f.help}")
                out.append(f"# TYPE {f.name} {f.kind}")
                for key, v in sorted(f.values.items()):
                    if f.kind != "histogram":
                        out.append(f"{f.name}{_labels(key)} {_num(v)}")
                        continue
                    counts, total, n = v
                    for b, c in zip(f.buckets, counts):
                        out.append(f"{f.name}_bucket{_labels(key + (('le', _num(b)),))} {c}")
                    out.append(f"{f.name}_bucket{_labels(key + (('le', '+Inf'),))} {n}")
                    out.append(f"{f.name}_sum{_labels(key)} {_num(total)}")
                    out.append(f"{f.name}_count{_labels(key)} {n}")
        return "\n".join(out) + "\n"


def _num(v):
    return repr(float(v)) if isinstance(v, float) else str(v)
