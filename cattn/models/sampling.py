"""cattn.models.sampling — the next-token rules on logits: greedy (argmax,
the first of ties) or a draw from softmax(logits / temperature) restricted
to the top_k tokens and to the smallest set of tokens whose probability
reaches top_p, from a seeded generator (reproducible).

One rule, two callers: CausalLM.generate draws for a batch at each step
(token_chooser: one uniform number per sequence, rows in order) and
`cattn serve`'s continuous batching for one request at a time (TokenChooser,
each request with its own generator). A request alone gets the same draws
either way for the same seed. What this file is not: the decode loop
(generation.py) or the model (causal_lm.py).

Legend: B sequences, V vocabulary.
"""
import numpy as np

from .._validate import as_flag, as_int, as_real

__all__ = ["draw", "token_chooser", "TokenChooser"]


def draw(logits, temperature, top_k, top_p, rng):
    """logits (B, V) -> token ids (B,) int64: one draw per row from the
    tempered softmax, top_k (None: all) and top_p (None or 1: all)
    filtered, u ~ rng.random(B) in row order (the inverse of the CDF)."""
    V = logits.shape[-1]
    z = logits.astype(np.float64) / temperature                        # (B, V)
    if top_k is not None and top_k < V:
        kth = np.partition(z, V - top_k, axis=-1)[:, V - top_k:V - top_k + 1]   # k-th largest
        z = np.where(z >= kth, z, -np.inf)
    z -= z.max(axis=-1, keepdims=True)
    prob = np.exp(z)
    prob /= prob.sum(axis=-1, keepdims=True)
    if top_p is not None and top_p < 1:
        order = np.argsort(-prob, axis=-1, kind="stable")
        sorted_p = np.take_along_axis(prob, order, -1)
        keep = np.cumsum(sorted_p, axis=-1) - sorted_p < top_p          # the first reaching p
        drop = np.zeros_like(keep)
        np.put_along_axis(drop, order, ~keep, -1)
        prob[drop] = 0.0
        prob /= prob.sum(axis=-1, keepdims=True)
    u = rng.random(prob.shape[0])[:, None]
    cdf = np.cumsum(prob, axis=-1)
    return np.minimum((cdf < u * cdf[:, -1:]).sum(axis=-1), V - 1).astype(np.int64)


def token_chooser(do_sample, temperature, top_k, top_p, seed, V):
    """choose(logits (B, V)) -> token ids (B,): greedy (argmax, the first of
    ties) or draw() from a generator seeded with `seed`; the arguments are
    checked here (generate's names in the errors)."""
    owner = "CausalLM.generate"
    do_sample = as_flag(do_sample, "do_sample", owner)
    if not do_sample:
        return lambda logits: np.argmax(logits, axis=-1)
    temperature = as_real(temperature, "temperature", owner, lo=0.0, lo_open=True)
    k = None if top_k is None else as_int(top_k, "top_k", owner, lo=1)
    p = None if top_p is None else as_real(top_p, "top_p", owner, lo=0.0, lo_open=True)
    if p is not None and p > 1:
        raise ValueError(f"{owner}: top_p must be in (0, 1], got {p}")
    rng = np.random.default_rng(seed)
    return lambda logits: draw(logits, temperature, k, p, rng)


class TokenChooser:
    """One request's next-token rule on its logits (V,): greedy when
    temperature is 0 (or None), else draw() with top_p from its own
    generator (seeded: reproducible). The server checks the values."""

    def __init__(self, temperature=0.0, top_p=None, seed=None):
        self.temperature = 0.0 if temperature is None else float(temperature)
        self.top_p = None if top_p is None or top_p >= 1 else float(top_p)
        self.rng = np.random.default_rng(seed) if self.temperature > 0 else None   # greedy: none

    def __call__(self, logits):
        if self.temperature <= 0:
            return int(np.argmax(logits))
        return int(draw(np.asarray(logits)[None], self.temperature, None, self.top_p,
                        self.rng)[0])
