"""cattn.models.slots — continuous batching's state: N sequences of a
CausalLM decoding together, each in its own slot of one set of KV caches,
with its own length; a sequence joins after its prefill and leaves when it
is done, and one decode step serves every active slot.

What this file is: the slot bookkeeping (which slots are free, each one's
length) around CausalLM.prefill and CausalLM.decode_ragged. What it is
not: a scheduler (cattn.server.generation decides who joins and when), the
token choice (sampling.TokenChooser) or a model.

Every sequence gets the bits `generate` gives it alone: its prefill runs
alone (batch 1, on its slot's rows of the caches), and the ragged decode
step gives each row the bits of its own step.

Legend: N slots, V vocabulary, C context (positions a slot holds).
"""
import numpy as np

from .._validate import as_int
from ..ops.attention import KVCache

__all__ = ["DecodeSlots"]


class DecodeSlots:
    """N KV-cache slots of `lm` (a CausalLM), each holding up to `context`
    positions (prompt + generated). Memory: N x context x layers x 2 x Hk x
    D values of lm.kv_dtype (4 bytes, or 2 for float16)."""

    def __init__(self, lm, slots, context):
        self.lm = lm
        self.n = as_int(slots, "slots", "DecodeSlots", lo=1)
        self.context = as_int(context, "context", "DecodeSlots", lo=2)
        caches = lm.new_caches(self.n, self.context)
        self._k = [c.k for c in caches]
        self._v = [c.v for c in caches]
        self.lengths = np.zeros(self.n, np.int64)
        self._free = list(range(self.n))

    @property
    def free(self):
        """How many slots are free."""
        return len(self._free)

    def acquire(self):
        """The lowest free slot (taken), or None when all are busy (lowest
        first keeps the active rows at the front of the caches)."""
        if not self._free:
            return None
        self._free.sort()
        return self._free.pop(0)

    def release(self, slot):
        if slot in self._free or not 0 <= slot < self.n:
            raise ValueError(f"DecodeSlots.release: slot {slot} is not in use")
        self.lengths[slot] = 0
        self._free.append(slot)

    def prefill(self, slot, ids):
        """The prompt ids (<= context - 1 tokens: room for one new token)
        into `slot` -> its last position's logits (V,)."""
        ids = np.asarray(ids, np.int64)
        if not 0 < ids.size < self.context:
            raise ValueError(f"DecodeSlots.prefill: a prompt of {ids.size} tokens; a slot "
                             f"holds 1 to {self.context - 1}")
        caches = [KVCache.of(k[slot:slot + 1], v[slot:slot + 1]) for k, v in zip(self._k, self._v)]
        logits = self.lm.prefill(ids, caches)
        self.lengths[slot] = ids.size
        return logits

    def room(self, slot):
        """Positions left in `slot`."""
        return self.context - int(self.lengths[slot])

    def step(self, slots, tokens):
        """One decode step: tokens[i] (its last chosen token) appended to
        slots[i] -> logits (len(slots), V). The step runs rows 0..max(slots);
        a row not in `slots` runs a dummy token at position 0 of its free
        slot (cheap; its slot is rewritten by the next prefill)."""
        slots = [int(s) for s in slots]
        top = max(slots) + 1
        tok = np.zeros(top, np.int64)
        lens = np.zeros(top, np.int64)
        for s, t in zip(slots, tokens):
            if self.lengths[s] < 1 or self.lengths[s] >= self.context:
                raise ValueError(f"DecodeSlots.step: slot {s} holds {self.lengths[s]} of "
                                 f"{self.context} positions")
            tok[s], lens[s] = t, self.lengths[s]
        busy = set(slots)
        idle = [s for s in range(top) if s not in busy]
        lens_run = lens.copy()
        lens_run[idle] = 1                # a dummy row: position 1 of its free slot
        k = [a[:top] for a in self._k]
        v = [a[:top] for a in self._v]
        logits = self.lm.decode_ragged(tok, k, v, lens_run)
        self.lengths[slots] += 1
        if slots == list(range(top)):      # every row, in order: no copy of (B, V)
            return logits
        return logits[slots]
