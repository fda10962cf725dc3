"""cattn.server.embeddings — dynamic batching of embedding requests: each
request's sentences become token ids (truncated at the model's limit, or
refused when the request says truncate: false), wait in one bounded queue,
and the engine thread (cattn.server.engine) embeds what is waiting in batches of at most a token
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
    __slots__ = ("seqs", "tokens", "future", "cancelled", "t0", "t_start", "t_end")

    def __init__(self, seqs):
        self.seqs = seqs
        self.tokens = sum(len(s) for s in seqs)
        self.future = concurrent.futures.Future()
        self.cancelled = False
        self.t0 = time.perf_counter()       # queued
        self.t_start = self.t_end = None    # its batch's model call


class EmbeddingService:
    """encoder: a SentenceEncoder; engine: the Engine whose thread runs the
    batches (work()); max_queue: requests that may wait (429 beyond)."""

    contention_detection = True     # batches: cattn's default policy

    def __init__(self, encoder, model_id, metrics, engine, max_queue=256):
        self.encoder = encoder
        self.model_id = model_id
        self.metrics = metrics
        self.engine = engine
        self.max_queue = max_queue
        self.dim = encoder.embedding_dim
        self.vocab = encoder.model.config.vocab_size
        self.max_tokens = encoder.max_seq_length
        self._pre, self._post = encoder.special_ids()
        self._q = collections.deque()
        self._lock = threading.Lock()

    def token_ids(self, req):
        """An EmbeddingRequest -> the complete token-id lists (special tokens
        in, truncated at the model's limit unless truncate is false: then
        400 for a longer input)."""
        limit = self.max_tokens
        if req.texts is not None:
            tok = self.encoder.tokenizer
            # one text without encode_batch's thread pool (waking it beside
            # the kernels' threads took ~0.2 ms on 2 cores; the same Encoding)
            encs = [tok.encode(req.texts[0])] if len(req.texts) == 1 else tok.encode_batch(req.texts)
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
        """Queue complete token-id lists -> a job whose .future gives the
        (N, E) float32 embeddings; 429 when the queue is full."""
        job = _Job(seqs)
        with self._lock:
            if len(self._q) >= self.max_queue:
                raise APIError(429, f"the embeddings queue is full ({self.max_queue} requests "
                               "waiting); retry shortly", headers={"Retry-After": "1"},
                               code="queue_full")
            self._q.append(job)
            self.metrics.set("queue_depth", len(self._q), queue="embeddings")
        self.engine.notify()
        return job

    def cancel(self, job):
        job.cancelled = True

    def close(self):
        pass

    def _take(self):
        """Jobs from the front of the queue up to BATCH_TOKENS (at least one)."""
        with self._lock:
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

    def work(self):
        """One batch of what waits (on the engine thread); False when none."""
        jobs = self._take()
        if not jobs:
            return False
        seqs = [s for j in jobs for s in j.seqs]
        t0 = time.perf_counter()
        for j in jobs:
            self.metrics.observe("phase_seconds", t0 - j.t0, phase="queue", route="embeddings")
        try:
            out = self.encoder.encode_ids(seqs, add_special=False, batch_size=len(seqs))
        except Exception as e:               # a failing batch fails its own requests only
            for j in jobs:
                j.future.set_exception(e)
            return True
        t1 = time.perf_counter()
        self.metrics.observe("phase_seconds", t1 - t0, phase="embed_batch", route="embeddings")
        self.metrics.observe("batch_size", len(seqs), kind="embeddings")
        self.metrics.inc("tokens_total", sum(j.tokens for j in jobs), kind="embedded")
        i = 0
        for j in jobs:
            n = len(j.seqs)
            j.t_start, j.t_end = t0, t1
            j.future.set_result(out[i:i + n])
            i += n
        return True
