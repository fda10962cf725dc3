"""cattn.server.generation — continuous batching of text generation: up to
`slots` sequences decode together (cattn.models.slots.DecodeSlots: one
ragged decode step for every active sequence per token, each with its own
length and KV-cache slot); a waiting request joins after its prefill, at
the next step, and a finished or cancelled one leaves (its slot freed) at
once. The engine thread (cattn.server.engine) runs the model; each request
reads its events (text pieces, then the end) from its own queue on the
event loop, which gets a turn's events in one wake-up (a step's tokens, or
one admitted request's first token).

Every request gets the tokens `CausalLM.generate` gives its prompt alone
(greedy: bit for bit; sampled: from its own seeded generator). Text
arrives through a StreamDecoder (no split UTF-8 characters) and is held
back while it could be the start of a stop string.

What it is not: HTTP or SSE framing (cattn.server.app), request parsing
(cattn.server.requests).
"""
import asyncio
import collections
import threading
import time

from ..models.sampling import TokenChooser
from ..models.slots import DecodeSlots
from ..models.tokenizer import StreamDecoder
from .errors import APIError

__all__ = ["GenerationService", "Generation"]


def _put(items):
    """(on the event loop) a turn's (generation, event) pairs into their queues"""
    for g, item in items:
        g.events.put_nowait(item)


class Generation:
    """One request's generation: prompt ids, limits, its token rule and its
    event queue (("text", str) items, then ("done", finish_reason) or
    ("error", exception)). cancel() (thread-safe) stops it within a step."""

    def __init__(self, loop, prompt_ids, max_tokens, chooser, stop, eos, tokenizer):
        self.loop = loop
        self.events = asyncio.Queue()
        self.prompt_ids = prompt_ids
        self.max_tokens = max_tokens
        self.choose = chooser
        self.stop = stop
        self.eos = eos
        self.decoder = StreamDecoder(tokenizer)
        self.text = ""                      # generated so far (decoded)
        self.sent = 0                       # characters of text emitted
        self.completion_tokens = 0
        self.cancelled = False
        self.slot = None
        self.last = None
        self.t0 = time.perf_counter()
        self.t_first = None
        self.finish_reason = None

    @property
    def prompt_tokens(self):
        return len(self.prompt_ids)

    def cancel(self):
        self.cancelled = True


class GenerationService:
    """lm: a CausalLM; slots sequences of at most `context` positions each
    (prompt + new tokens); max_queue requests may wait for a slot (429
    beyond); engine: the Engine whose thread runs the model (work())."""

    # off: a step's late starts are this process's own event loop and clients
    # (with it on, a single stream decoded 10-14% slower: docs/api.md)
    contention_detection = False

    def __init__(self, lm, model_id, metrics, engine, slots=4, context=2048, max_queue=64):
        self.lm = lm
        self.model_id = model_id
        self.metrics = metrics
        self.engine = engine
        self.tokenizer = lm.text_tokenizer()
        self.vocab = lm.config.vocab_size
        limit = lm.config.max_positions             # GPT-2's learned table; None for RoPE
        self.context = int(min(context, limit) if limit else context)
        self.slots = DecodeSlots(lm, slots, self.context)
        self.max_queue = max_queue
        self._waiting = collections.deque()
        self._active = []
        self._outbox = []                   # (generation, event) for the loop, sent per turn
        self._lock = threading.Lock()
        metrics.set("slots_total", slots)
        metrics.set("slots_busy", 0)

    # -- the event loop's side

    def new(self, loop, prompt_ids, max_tokens, temperature, top_p, seed, stop, eos):
        """A Generation of prompt_ids; 400 when the prompt and max_tokens do
        not fit the context (max_tokens None: the room left)."""
        n = len(prompt_ids)
        if n >= self.context:
            raise APIError(400, f"the prompt has {n} tokens; this server's context is "
                           f"{self.context} tokens (prompt and completion)", param="messages",
                           code="context_length_exceeded")
        room = self.context - n
        if max_tokens is None:
            max_tokens = room
        elif max_tokens > room:
            raise APIError(400, f"the prompt ({n} tokens) and max_tokens ({max_tokens}) exceed "
                           f"this server's context of {self.context} tokens",
                           param="max_tokens", code="context_length_exceeded")
        chooser = TokenChooser(temperature, top_p, seed)
        return Generation(loop, list(prompt_ids), max_tokens, chooser, stop, set(eos),
                          self.tokenizer)

    def submit(self, g):
        with self._lock:
            if len(self._waiting) >= self.max_queue:
                raise APIError(429, f"all {self.slots.n} generation slots are busy and "
                               f"{self.max_queue} requests are waiting; retry shortly",
                               headers={"Retry-After": "1"}, code="queue_full")
            self._waiting.append(g)
            self.metrics.set("queue_depth", len(self._waiting), queue="generation")
        self.engine.notify()

    def close(self):
        pass

    # -- the engine thread's side

    def work(self):
        """Admit what waits into free slots, then one decode step for every
        active sequence; False when there was nothing to do."""
        if not self._waiting and not self._active:
            return False
        try:
            self._admit()
            self._step()
        except Exception as e:                      # never take the engine down
            for g in list(self._active):
                self._end(g, None, e)
        finally:
            self._deliver()
        return True

    def _emit(self, g, item):
        self._outbox.append((g, item))

    def _deliver(self):
        """The turn's events onto their event loops: one wake-up a loop per
        turn, not one per token (the loop shares the cores with the model)."""
        if not self._outbox:
            return
        loops = {}
        for g, item in self._outbox:
            loops.setdefault(g.loop, []).append((g, item))
        self._outbox = []
        for loop, items in loops.items():
            try:
                loop.call_soon_threadsafe(_put, items)
            except RuntimeError:            # the loop has closed (server shutting down)
                for g, _ in items:
                    g.cancelled = True

    def _admit(self):
        """Prefill waiting requests into free slots (each alone: its bits)."""
        while self.slots.free:
            with self._lock:
                if not self._waiting:
                    return
                g = self._waiting.popleft()
                self.metrics.set("queue_depth", len(self._waiting), queue="generation")
            if g.cancelled:
                self.metrics.inc("cancelled_total", where="generation_queue")
                self._emit(g, ("done", "cancelled"))
                continue
            g.slot = self.slots.acquire()
            self._active.append(g)
            self.metrics.set("slots_busy", len(self._active))
            t0 = time.perf_counter()
            self.metrics.observe("phase_seconds", t0 - g.t0, phase="queue", route="generation")
            try:
                logits = self.slots.prefill(g.slot, g.prompt_ids)
            except Exception as e:
                self._end(g, None, e)
                continue
            self.metrics.observe("phase_seconds", time.perf_counter() - t0, phase="prefill",
                                 route="generation")
            self.metrics.inc("tokens_total", len(g.prompt_ids), kind="prompt")
            self._token(g, g.choose(logits))
            self._deliver()                         # its first token before the next prefill

    def _step(self):
        """One decode step for every active sequence."""
        for g in [g for g in self._active if g.cancelled]:
            self.metrics.inc("cancelled_total", where="generation")
            self._end(g, "cancelled")
        if not self._active:
            return
        run = list(self._active)
        t0 = time.perf_counter()
        logits = self.slots.step([g.slot for g in run], [g.last for g in run])
        dt = time.perf_counter() - t0
        self.metrics.observe("phase_seconds", dt, phase="decode_step", route="generation")
        self.metrics.observe("batch_size", len(run), kind="decode")
        self.metrics.set("tokens_per_second", len(run) / dt if dt > 0 else 0.0)
        for g, row in zip(run, logits):
            self._token(g, g.choose(row))

    def _token(self, g, tok):
        """A new token of g: its text, the stop rules, the end."""
        g.last = tok
        if g.t_first is None:
            g.t_first = time.perf_counter()
            self.metrics.observe("phase_seconds", g.t_first - g.t0, phase="first_token",
                                 route="generation")
        self.metrics.inc("tokens_total", kind="generated")
        if tok in g.eos:
            self._flush(g, final=True)
            return self._end(g, "stop")
        g.completion_tokens += 1
        g.text += g.decoder.push(tok)
        if self._flush(g, final=False):
            return self._end(g, "stop")
        if g.completion_tokens >= g.max_tokens or self.slots.room(g.slot) < 1:
            self._flush(g, final=True)
            return self._end(g, "length")

    def _flush(self, g, final):
        """Emit the text that can no longer start a stop string; True when
        a stop string was found (the text before it emitted)."""
        if final:
            g.text += g.decoder.flush()
        cut = None
        if g.stop:
            start = max(0, g.sent - max(len(s) for s in g.stop) + 1)
            hits = [i for i in (g.text.find(s, start) for s in g.stop) if i >= 0]
            if hits:
                cut = min(hits)
        if cut is not None:
            end = cut
        elif final or not g.stop:
            end = len(g.text)
        else:                   # hold back the longest tail that begins a stop string
            end = len(g.text)
            for s in g.stop:
                for k in range(min(len(s) - 1, len(g.text)), 0, -1):
                    if s.startswith(g.text[-k:]):
                        end = min(end, len(g.text) - k)
                        break
        if end > g.sent:
            self._emit(g, ("text", g.text[g.sent:end]))
            g.sent = end
        return cut is not None

    def _end(self, g, reason, error=None):
        if g in self._active:
            self._active.remove(g)
            self.slots.release(g.slot)
            self.metrics.set("slots_busy", len(self._active))
        g.finish_reason = reason
        self.metrics.observe("phase_seconds", time.perf_counter() - g.t0, phase="request",
                             route="generation")
        self._emit(g, ("error", error) if error is not None else ("done", reason))
