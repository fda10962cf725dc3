"""cattn.models.generation — CausalLM.generate's loop: prompts (text or
token ids, a batch left-padded), one prefill on per-layer KV caches, then one
decode step per new token for every sequence, each token chosen by
sampling.token_chooser, a sequence stopping at its EOS; whole results or a
stream (token ids, or text pieces through the tokenizer's StreamDecoder).

What this file is: the loop over a model's public steps (check_ids,
new_caches, step_logits, text_tokenizer). What it is not: the model
(causal_lm.py), the token rule (sampling.py), or continuous batching
(slots.py and cattn.server, which decode requests that come and go).

Legend: B sequences, P prompt length (padded), V vocabulary.

Positions count real tokens only (position_ids = cumsum(mask) - 1, as
transformers' generate): left padding gives each sequence the logits it
gets alone.
"""
import time

import numpy as np

from .. import nn
from .._validate import as_int, show
from .llm_config import id_list
from .sampling import token_chooser
from .tokenizer import StreamDecoder

__all__ = ["generate", "positions"]

OWNER = "CausalLM.generate"


def generate(lm, inputs, max_new_tokens, do_sample, temperature, top_k, top_p, seed,
             eos_token_id, stream, attention_mask):
    """CausalLM.generate (its docstring is the reference)."""
    prompts, text, single = _prompts(lm, inputs, attention_mask)
    n = as_int(max_new_tokens, "max_new_tokens", OWNER, lo=1)
    choose = token_chooser(do_sample, temperature, top_k, top_p, seed, lm.config.vocab_size)
    eos = _eos(lm, eos_token_id)
    steps = _steps(lm, prompts, n, choose, eos)
    if stream:
        return _stream(lm, steps, len(prompts), text, single)
    out = [[] for _ in prompts]
    for tokens in steps:
        for seq, t in zip(out, tokens):
            if t is not None:
                seq.append(t)
    if text:
        tok = lm.text_tokenizer()
        out = [tok.decode(seq) for seq in out]
    else:
        out = [np.asarray(seq, dtype=np.int64) for seq in out]
    return out[0] if single else out


def positions(real):
    """Each token's position: real tokens counted from 0 in each row, 0 at
    padding (transformers' position_ids = cumsum(mask) - 1 under generate)."""
    return np.maximum(np.cumsum(real, axis=1) - 1, 0)


def _stream(lm, steps, B, text, single):
    decoders = [StreamDecoder(lm.text_tokenizer()) for _ in range(B)] if text else None
    for tokens in steps:
        if text:
            tokens = [None if t is None else d.push(t) for d, t in zip(decoders, tokens)]
        yield tokens[0] if single else tokens
    if text:                        # an incomplete character held back at the end
        rest = [d.flush() for d in decoders]
        if any(rest):
            yield rest[0] if single else rest


def _eos(lm, eos_token_id):
    if eos_token_id is None:
        eos_token_id = lm.generation_config.get("eos_token_id", lm.config.eos_token_id)
    ids = id_list(eos_token_id)
    V = lm.config.vocab_size
    if any(not 0 <= i < V for i in ids):
        raise ValueError(f"{OWNER}: eos_token_id {ids} outside [0, {V})")
    return np.asarray(ids, dtype=np.int64)


def _prompts(lm, inputs, attention_mask):
    """-> (list of 1-D int64 prompts, text?, single?)."""
    if isinstance(inputs, str) or (isinstance(inputs, (list, tuple)) and inputs
                                   and all(isinstance(s, str) for s in inputs)):
        single = isinstance(inputs, str)
        tok = lm.text_tokenizer()
        texts = [inputs] if single else inputs
        prompts = [np.asarray(tok.encode(s), np.int64) for s in texts]
        if any(p.size == 0 for p in prompts):
            raise ValueError(f"{OWNER}: a prompt encodes to no tokens")
        return prompts, True, single
    if isinstance(inputs, np.ndarray):
        arr = inputs
        if arr.ndim == 2 and attention_mask is not None:
            ids, real = lm.check_ids(arr, attention_mask)
            return [row[r] for row, r in zip(ids, real)], False, False
        seqs = [arr] if arr.ndim == 1 else list(arr) if arr.ndim == 2 else None
        single = arr.ndim == 1
    elif isinstance(inputs, (list, tuple)) and inputs:
        single = not isinstance(inputs[0], (list, tuple, np.ndarray))
        seqs = [inputs] if single else list(inputs)
    else:
        seqs = None
    if not seqs:
        raise TypeError(f"{OWNER}: inputs must be text, token ids or a batch of them, got "
                        f"{show(inputs)}")
    prompts = []
    for s in seqs:
        a = np.asarray(s)
        if a.ndim != 1 or a.size == 0 or a.dtype.kind not in "iu":
            raise ValueError(f"{OWNER}: each prompt must be a non-empty 1-D sequence of "
                             f"integer token ids, got {show(s)}")
        prompts.append(a.astype(np.int64))
    lm.check_ids(np.concatenate(prompts)[None], None)              # ids in [0, V)
    return prompts, False, single


def _steps(lm, prompts, max_new, choose, eos):
    """Generator of the new tokens, one list (B,) per step (None for a
    sequence that has stopped). Prefill once, then one decode step per
    token on the per-layer KV caches."""
    B, P = len(prompts), max(p.size for p in prompts)
    ids = np.zeros((B, P), np.int64)
    real = np.zeros((B, P + max_new), bool)                         # keys that are tokens
    for b, p in enumerate(prompts):                                 # left padding
        ids[b, P - p.size:] = p
        real[b, P - p.size:] = True
    real[:, P:] = True
    padded = not real.all()
    pos = positions(real[:, :P])                                    # (B, P)
    limit = lm.config.max_positions                                 # learned positions (GPT-2)
    if limit is not None and P + max_new > limit:
        raise ValueError(f"{OWNER}: {P} prompt + {max_new} new tokens exceed the "
                         f"model's {limit} positions")
    caches = lm.new_caches(B, P + max_new)
    done = np.zeros(B, bool)
    t0 = time.perf_counter()
    logits = lm.step_logits(ids, pos if padded else None, caches,
                            nn.causal_mask(real[:, :P], P), padded=padded)       # (B, V)
    t1 = time.perf_counter()
    lm.stats = dict(prefill_tokens=int(real[:, :P].sum()), prefill_s=t1 - t0,
                    decode_tokens=0, decode_s=0.0)
    last = pos[:, -1:]                                              # (B, 1)
    for step in range(max_new):
        tok = choose(logits)                                        # (B,) int64
        out = [None if d else int(t) for d, t in zip(done, tok)]
        done |= np.isin(tok, eos)
        yield out
        if done.all() or step == max_new - 1:
            break
        t = time.perf_counter()
        last = last + 1
        S = P + step + 1
        mask = real[:, None, None, :S] if padded else None          # (B, 1, 1, S)
        logits = lm.step_logits(tok[:, None], last, caches, mask, padded=padded)
        lm.stats["decode_s"] += time.perf_counter() - t
        lm.stats["decode_tokens"] += B
