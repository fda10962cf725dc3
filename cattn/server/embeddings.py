"""cattn.server.embeddings — dynamic batching of embedding requests: each
request's sentences become token ids (truncated at the model's limit, or
refused when the request says truncate: false), wait in one bounded queue,
and one worker thread embeds what is waiting in batches of at most a token
budget (SentenceEncoder.encode_ids: longest first, rows independent), so N
concurrent one-sentence requests cost about one N-sentence encode, and
every vector is the bits SentenceEncoder.encode gives its text alone.

What it is not: HTTP (cattn.server.app) or request parsing
(cattn.server.requests).
"""
import collections
import concurrent.futures
import threading
import time

from .errors import APIError, bad_request

__all__ = ["EmbeddingService"]

BATCH_TOKENS = 8192          # tokens per worker batch (encode_ids cuts it by its own budget)


class _Job:
    __slots__ = ("seqs", "tokens", "future", "cancelled", "t0")

    def __init__(self, seqs):
        self.seqs = seqs
        self.tokens = sum(len(s) for s in seqs)
        self.future = concurrent.futures.Future()
        self.cancelled = False
        self.t0 = time.perf_counter()


class EmbeddingService:
    """encoder: a SentenceEncoder; lock: held around every model call (one
    model call at a time on the machine's cores); max_queue: requests that
    may wait (429 beyond)."""

    def __init__(self, encoder, model_id, metrics, lock, max_queue=256):
        self.encoder = encoder
        self.model_id = model_id
        self.metrics = metrics
        self.lock = lock
        self.max_queue = max_queue
        self.dim = encoder.embedding_dim
        self.vocab = encoder.model.config.vocab_size
        self.max_tokens = encoder.max_seq_length
        self._pre, self._post = encoder.special_ids()
        self._q = collections.deque()
        self._cv = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="cattn-embed", daemon=True)
        self._thread.start()

    def token_ids(self, req):
        """An EmbeddingRequest -> the complete token-id lists (special tokens
        in, truncated at the model's limit unless truncate is false: then
        400 for a longer input)."""
        limit = self.max_tokens
        if req.texts is not None:
            encs = self.encoder.tokenizer.encode_batch(req.texts)
            if not req.truncate:
                for i, e in enumerate(encs):
                    if e.overflowing:
                        n = len(e.ids) + sum(len(o.ids) - len(self._pre) - len(self._post)
                                             for o in e.overflowing)
                        raise bad_request(f"input {i} has about {n} tokens, more than the "
                                          f"model's {limit} (truncate: false)", param="input",
                                          code="context_length_exceeded")
            return [e.ids for e in encs]
        keep = limit - len(self._pre) - len(self._post)
        out = []
        for i, s in enumerate(req.ids):
            if len(s) > keep and not req.truncate:
                raise bad_request(f"input {i} has {len(s)} tokens, more than the model's "
                                  f"{keep} (plus its special tokens; truncate: false)",
                                  param="input", code="context_length_exceeded")
            out.append(self._pre + s[:keep] + self._post)
        return out

    def submit(self, seqs):
        """Queue complete token-id lists -> a concurrent Future of the (N, E)
        float32 embeddings; 429 when the queue is full."""
        job = _Job(seqs)
        with self._cv:
            if len(self._q) >= self.max_queue:
                raise APIError(429, f"the embeddings queue is full ({self.max_queue} requests "
                               "waiting); retry shortly", headers={"Retry-After": "1"},
                               code="queue_full")
            self._q.append(job)
            self.metrics.set("queue_depth", len(self._q), queue="embeddings")
            self._cv.notify()
        return job

    def cancel(self, job):
        job.cancelled = True

    def close(self):
        with self._cv:
            self._stop = True
            self._cv.notify()
        self._thread.join(timeout=5)

    def _take(self):
        """Jobs from the front of the queue up to BATCH_TOKENS (at least one)."""
        with self._cv:
            while not self._q and not self._stop:
                self._cv.wait()
            if self._stop:
                return None
            jobs, total = [], 0
            while self._q and (not jobs or total + self._q[0].tokens <= BATCH_TOKENS):
                j = self._q.popleft()
                if j.cancelled:
                    self.metrics.inc("cancelled_total", where="embeddings_queue")
                    j.future.cancel()
                    continue
                jobs.append(j)
                total += j.tokens
            self.metrics.set("queue_depth", len(self._q), queue="embeddings")
            return jobs

    def _run(self):
        while True:
            jobs = self._take()
            if jobs is None:
                return
            if not jobs:
                continue
            seqs = [s for j in jobs for s in j.seqs]
            t0 = time.perf_counter()
            for j in jobs:
                self.metrics.observe("phase_seconds", t0 - j.t0, phase="queue",
                                     route="embeddings")
            try:
                with self.lock:
                    out = self.encoder.encode_ids(seqs, add_special=False, batch_size=len(seqs))
            except Exception as e:               # a failing batch fails its own requests only
                for j in jobs:
                    j.future.set_exception(e)
                continue
            dt = time.perf_counter() - t0
            self.metrics.observe("phase_seconds", dt, phase="embed_batch", route="embeddings")
            self.metrics.observe("batch_size", len(seqs), kind="embeddings")
            self.metrics.inc("tokens_total", sum(j.tokens for j in jobs), kind="embedded")
            i = 0
            for j in jobs:
                n = len(j.seqs)
                j.future.set_result(out[i:i + n])
                i += n
