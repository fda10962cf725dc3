"""Continuous batching's model side: the ragged decode step
(CausalLM.decode_ragged, DecoderProgram.run_ragged, the C attention's
per-unit key counts) and cattn.models.slots.DecodeSlots.

The reference is each sequence alone: CausalLM.forward on its own batch-1
KV cache (the path generate() takes). Every row of a ragged step must give
those logits bit for bit, whatever else is in the step, for every weight
format, across the decode chunk (256 keys) boundary, and on the per-row
fallback (more than 8 query heads per kv head). Greedy tokens of staggered
requests through DecodeSlots must equal generate() of each prompt alone.
"""
import numpy as np
import pytest

from cattn import KVCache
from cattn.models import CausalLM
from cattn.models.sampling import TokenChooser
from cattn.models.slots import DecodeSlots
from cattn_testing.llm_files import tiny_gguf

pytest.importorskip("gguf", reason="the gguf package writes the model files")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("slots")
    return {"gqa": tiny_gguf(str(d / "gqa.gguf"), layers=2, E=64, heads=4, kv_heads=2,
                             context=1024, seed=1)[0],
            "wide": tiny_gguf(str(d / "wide.gguf"), layers=2, E=72, heads=18, kv_heads=2,
                              context=1024, seed=2)[0]}


def _alone(lm, prompt, tokens):
    """Logits of each step of prompt + tokens decoded alone (generate's path)."""
    caches = lm.new_caches(1, len(prompt) + len(tokens) + 1)
    out = [lm.forward(np.asarray(prompt)[None], caches=caches)[0, -1]]
    for t in tokens:
        out.append(lm.forward(np.asarray([[t]]), caches=caches)[0, -1])
    return out


@pytest.mark.parametrize("name,weights,kv", [
    ("gqa", None, "float32"), ("gqa", "int8", "float32"), ("gqa", "int4", "float32"),
    ("gqa", "bfloat16", "float32"), ("wide", None, "float32"),
    ("gqa", None, "float16"), ("wide", "int4", "float16")])      # float16 KV caches
def test_ragged_step_rows_equal_each_sequence_alone(files, name, weights, kv):
    lm = CausalLM.from_pretrained(files[name], weights=weights, kv_dtype=kv)
    V = lm.config.vocab_size
    rng = np.random.default_rng(0)
    lengths = [1, 5, 255, 256, 300, 40]            # 255 / 256: the chunk edge after a step
    prompts = [rng.integers(0, V, n) for n in lengths]
    steps = 3
    follow = [rng.integers(0, V, steps) for _ in prompts]
    slots = DecodeSlots(lm, len(prompts), 400)
    for i, p in enumerate(prompts):
        s = slots.acquire()
        assert s == i
        first = slots.prefill(s, p)
        ref = _alone(lm, p, follow[i])
        np.testing.assert_array_equal(first, ref[0])
    refs = [_alone(lm, p, f) for p, f in zip(prompts, follow)]
    for k in range(steps):
        got = slots.step(list(range(len(prompts))), [f[k] for f in follow])
        for i in range(len(prompts)):
            np.testing.assert_array_equal(got[i], refs[i][k + 1], err_msg=f"seq {i} step {k}")
    # a subset of the slots (a hole at slot 1) gives the same rows
    slots.release(1)
    sub = [0, 2, 3]
    got = slots.step(sub, [0, 0, 0])
    for row, i in zip(got, sub):
        ref = _alone(lm, prompts[i], list(follow[i]) + [0])
        np.testing.assert_array_equal(row, ref[-1])


def test_staggered_greedy_requests_equal_generate_alone(files):
    lm = CausalLM.from_pretrained(files["gqa"])
    V = lm.config.vocab_size
    rng = np.random.default_rng(3)
    prompts = [rng.integers(0, V, n) for n in (7, 30, 3, 12, 9)]
    n_new = 10
    want = [[int(t) for t in lm.generate(p, max_new_tokens=n_new, eos_token_id=[])]
            for p in prompts]
    slots = DecodeSlots(lm, 2, 64)                 # fewer slots than requests: they wait
    waiting, active, got = list(range(len(prompts))), {}, {i: [] for i in range(len(prompts))}
    while waiting or active:
        while waiting and slots.free:
            i = waiting.pop(0)
            s = slots.acquire()
            t = int(np.argmax(slots.prefill(s, prompts[i])))
            got[i].append(t)
            active[s] = i
        for s in [s for s, i in active.items() if len(got[i]) == n_new]:
            slots.release(s)
            del active[s]
        if not active:
            continue
        order = sorted(active)
        logits = slots.step(order, [got[active[s]][-1] for s in order])
        for s, row in zip(order, logits):
            got[active[s]].append(int(np.argmax(row)))
    assert [got[i] for i in range(len(prompts))] == want


def test_errors(files):
    lm = CausalLM.from_pretrained(files["gqa"])
    slots = DecodeSlots(lm, 2, 16)
    with pytest.raises(ValueError, match="prompt of 16 tokens"):
        slots.prefill(0, np.zeros(16, np.int64))
    with pytest.raises(ValueError, match="slot 1 holds 0"):
        slots.step([1], [0])
    with pytest.raises(ValueError, match="not in use"):
        slots.release(0)
    with pytest.raises(ValueError, match="lengths"):
        caches = lm.new_caches(1, 8)
        lm.decode_ragged([0], [c.k for c in caches], [c.v for c in caches], [8])
    with pytest.raises(ValueError, match="token id|outside"):
        caches = lm.new_caches(1, 8)
        lm.decode_ragged([10 ** 6], [c.k for c in caches], [c.v for c in caches], [1])
    with pytest.raises(ValueError, match="empty ones"):
        caches = lm.new_caches(1, 8)
        lm.prefill([1, 2], caches)
        lm.prefill([1, 2], caches)
    with pytest.raises(TypeError, match="C-contiguous"):
        KVCache.of(np.zeros((2, 1, 4, 8), np.float32)[:, :, ::2], np.zeros((2, 1, 2, 8)))
    with pytest.raises(ValueError, match="does not match"):
        KVCache.of(np.zeros((1, 1, 4, 8), np.float32), np.zeros((1, 1, 5, 8), np.float32))
    with pytest.raises(ValueError, match="exceeds max_len"):
        KVCache.of(np.zeros((1, 1, 4, 8), np.float32), np.zeros((1, 1, 4, 8), np.float32), 5)


def test_token_chooser():
    logits = np.array([0.0, 3.0, 1.0, 3.0], np.float32)
    assert TokenChooser(0.0)(logits) == 1                  # greedy: the first of ties
    a = [TokenChooser(1.0, seed=5)(logits) for _ in range(3)]
    assert a == [TokenChooser(1.0, seed=5)(logits) for _ in range(3)]
    c = TokenChooser(1.0, top_p=0.5, seed=1)
    assert {c(logits) for _ in range(50)} <= {1, 3}        # top_p keeps the two 3.0s
    draws = [TokenChooser(0.7, seed=s)(logits) for s in range(400)]
    p = np.exp(logits / 0.7)
    p /= p.sum()
    freq = np.bincount(draws, minlength=4) / 400
    assert np.abs(freq - p).max() < 0.1                    # 400 draws: ~0.025 std


def test_a_request_draws_as_generate_alone():
    """The server's per-request rule and generate's batched one are one rule:
    a sequence alone gets the same draws for the same seed."""
    from cattn.models.sampling import token_chooser
    rng = np.random.default_rng(0)
    for temperature, top_p in ((1.0, None), (0.7, 0.9), (1.3, 0.5)):
        batched = token_chooser(True, temperature, None, top_p, 11, 50)
        one = TokenChooser(temperature, top_p, 11)
        for _ in range(30):
            logits = rng.standard_normal(50).astype(np.float32) * 3
            assert batched(logits[None])[0] == one(logits)
