"""A Qwen2.5-0.5B-shaped decoder LLM on cattn vs transformers (torch), same
process, same weights (float32), same threads. Two faces:

    pytest benchmarks/bench_llm.py --benchmark-json=llm.json
    python benchmarks/report.py llm.json

    python benchmarks/bench_llm.py [--threads 2] [--rounds 3]
    python benchmarks/bench_llm.py --case overhead [--rounds 15]
    python benchmarks/bench_llm.py --case formats [--rounds 5]

The model: random-initialised Qwen2ForCausalLM with Qwen2.5-0.5B's shape
(hidden 896, 24 layers, 14 query heads, 2 KV heads, intermediate 4864,
vocabulary 151936, tied embeddings; 494M parameters, 1.98 GB in float32),
created once with transformers and cached in ~/.cache/cattn-bench/
(CATTN_BENCH_CACHE overrides).

Measured (each library's calls timed as a block after an untimed warm-up;
as a script the blocks alternate cattn / transformers for --rounds rounds and
medians are reported):
* prefill: a 128-token prompt through the model, last position's logits
  (generate with max_new_tokens=1), tokens/s;
* decode: 128 greedy tokens after that prompt, KV cache on
  (transformers: use_cache=True), tokens/s = 127 / (t(128 new) - t(1 new));
* the decode limit: the bytes of weights one token reads (every parameter
  once; the tied embedding once, as the lm_head) / the read bandwidth of
  numpy.dot over a 256 MiB matrix-vector product measured in the same round;
* peak memory: the peak RSS of a fresh process that loads the model with
  cattn and generates 128 tokens, vs the float32 weights plus the KV cache.

--case overhead (issue 26's decode-overhead bar): a 24-layer Qwen2-shaped
model with hidden size 64 (4 query heads / 2 KV heads of 16, intermediate
128, vocabulary 256, random weights, cached beside the big one), one decode
step (one new token after an 8-token prompt, KV cache in place), 1 thread
unless --threads: cattn float32 and int8 vs transformers float32, the three
alternating in rounds; per round the median of --calls steps each; the
ratio cattn/transformers is the median of the per-round ratios (bar <= 0.15x).
The weights are so small that this measures the per-step cost outside the
arithmetic: Python, dispatch, allocation, thread wake-up.

--case formats (issue 26's byte-rate bar: int8 >= 0.95x float32): the
0.5B-shaped model loaded by cattn with weights="float32" and "int8", one
decode step each (one token after the 128-token prompt, contexts 129..1024,
the cache refilled past it), alternating in rounds (median of --calls steps
per round); bytes a step reads = every weight in its stored format (packed
panels and int8 scales; the tied float32 lm_head once) + the KV cache at
the mean context; byte rate = bytes / step time; the ratio int8/float32 is
the median of the per-round ratios.

Needs transformers and torch 2.13 (pip install transformers torch==2.13.0).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CACHE = os.environ.get("CATTN_BENCH_CACHE", os.path.expanduser("~/.cache/cattn-bench"))
MODEL_DIR = os.path.join(CACHE, "qwen2.5-0.5b-shaped-random")
SHAPE = dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
             num_key_value_heads=2, intermediate_size=4864, vocab_size=151936,
             tie_word_embeddings=True, max_position_embeddings=32768, rope_theta=1000000.0,
             rms_norm_eps=1e-6, bos_token_id=151643, eos_token_id=151643)
PROMPT_LEN, NEW_TOKENS, THREADS = 128, 128, 2
OVERHEAD_DIR = os.path.join(CACHE, "qwen2-24x64-random")
OVERHEAD_SHAPE = dict(SHAPE, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                      intermediate_size=128, vocab_size=256, bos_token_id=0, eos_token_id=0)
OVERHEAD_PROMPT = 8


def model_dir(folder=MODEL_DIR, shape=SHAPE):
    """The cached checkpoint folder, created on first use (float32 safetensors)."""
    if not os.path.isfile(os.path.join(folder, "config.json")):
        import shutil
        import torch
        import transformers
        torch.manual_seed(0)
        cfg = transformers.Qwen2Config(**shape)
        model = transformers.Qwen2ForCausalLM(cfg).eval()
        tmp = folder + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp, max_shard_size="100GB")
        os.replace(tmp, folder)
    return folder


def prompt():
    return np.random.default_rng(0).integers(1000, 100000, PROMPT_LEN).astype(np.int64)


def weight_bytes(lm):
    """Bytes of weights one decode token reads: every parameter once (the
    tied embedding once, as the lm_head; its one-row lookup is negligible)."""
    return sum(p.nbytes for p in lm.parameters())


def kv_cache_bytes(n_positions):
    D = SHAPE["hidden_size"] // SHAPE["num_attention_heads"]
    return 2 * SHAPE["num_hidden_layers"] * SHAPE["num_key_value_heads"] * D * 4 * n_positions


def read_bandwidth(threads=THREADS):
    """Bytes/s of numpy.dot over a 256 MiB float32 matrix times a vector."""
    from threadpoolctl import threadpool_limits
    a = np.ones((4096, 16384), np.float32)
    v = np.ones(16384, np.float32)
    with threadpool_limits(threads, user_api="blas"):
        a.dot(v)
        t = [0.0] * 7
        for i in range(7):
            t0 = time.perf_counter()
            a.dot(v)
            t[i] = time.perf_counter() - t0
    return a.nbytes / statistics.median(t)


# ---- the two libraries as functions of the same prompt ---------------------------------

def cattn_runner(path, threads=THREADS):
    import cattn
    from cattn.models import CausalLM
    cattn.set_num_threads(threads)
    lm = CausalLM.from_pretrained(path)
    ids = prompt()

    def run(n):
        return lm.generate(ids, max_new_tokens=n, eos_token_id=[])
    return lm, run


def hf_runner(path, threads=THREADS):
    import torch
    import transformers
    torch.set_num_threads(threads)
    model = transformers.Qwen2ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = torch.from_numpy(prompt())[None]
    mask = torch.ones_like(ids)

    def run(n):
        with torch.no_grad():
            out = model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                                 do_sample=False, use_cache=True, pad_token_id=0)
        return out[0, PROMPT_LEN:].numpy()
    return model, run


# ---- one decode step with the KV cache in place (both libraries) ----------------------
# Each call appends one token to a cache that was filled with the prompt once; when the
# cache is full it is refilled (one slow call in many, which a median ignores).

def cattn_decode_step(lm, ids, max_len=1024):
    """-> step(): one cattn decode step of lm after the 1-D prompt ids."""
    state = {}

    def refill():
        state["caches"] = lm.new_caches(1, max_len)
        lm.forward(ids[None], caches=state["caches"])
    refill()
    tok = np.ascontiguousarray(ids[-1:][None])

    def step():
        if state["caches"][0].length >= max_len:
            refill()
        return lm.forward(tok, caches=state["caches"])
    return step


def hf_decode_step(model, ids, max_len=1024):
    """-> step(): one transformers decode step (use_cache, DynamicCache) after ids."""
    import inspect
    import torch
    from transformers import DynamicCache
    ids_t = torch.from_numpy(np.asarray(ids, np.int64))[None]
    cache = DynamicCache()
    # transformers >= 5.2x names the argument `cache` (past_key_values deprecated)
    kw = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
    with torch.no_grad():
        model(input_ids=ids_t, use_cache=True, **{kw: cache})
    tok = ids_t[:, -1:]
    P = ids_t.shape[1]

    def step():
        if cache.get_seq_length() >= max_len:
            cache.crop(P)
        with torch.no_grad():
            return model(input_ids=tok, use_cache=True, **{kw: cache}).logits
    return step


def median_call(fn, calls):
    """Median seconds of `calls` calls of fn()."""
    ts = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def overhead_case(rounds, calls, threads):
    """Issue 26's decode-overhead table (see the module docstring)."""
    import torch
    import transformers
    import cattn
    from cattn.models import CausalLM
    from conftest import machine_summary
    path = model_dir(OVERHEAD_DIR, OVERHEAD_SHAPE)
    ids = np.random.default_rng(0).integers(1, 256, OVERHEAD_PROMPT).astype(np.int64)
    cattn.set_num_threads(threads)
    torch.set_num_threads(threads)
    hf = transformers.Qwen2ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    steps = {"cattn f32": cattn_decode_step(CausalLM.from_pretrained(path), ids),
             "cattn int8": cattn_decode_step(CausalLM.from_pretrained(path, weights="int8"), ids),
             "transformers": hf_decode_step(hf, ids)}
    ref = steps["transformers"]().numpy()[0, -1]
    got = steps["cattn f32"]()[0, -1]
    err = float(np.abs(got - ref).max() / np.abs(ref).max())
    for fn in steps.values():                                 # warm-up
        median_call(fn, 5)
    ms = {k: [] for k in steps}
    for r in range(rounds):
        for name, fn in steps.items():
            ms[name].append(1e3 * median_call(fn, calls))
        print(f"round {r}: " + "  ".join(f"{k} {v[-1]:.3f} ms" for k, v in ms.items()),
              flush=True)
    med = {k: statistics.median(v) for k, v in ms.items()}
    ratio = {k: statistics.median(c / h for c, h in zip(ms[k], ms["transformers"]))
             for k in ("cattn f32", "cattn int8")}
    info = machine_summary()
    print(f"\n{info['cpu_model']}, {threads} thread(s), {time.strftime('%Y-%m-%d')}; "
          f"24 layers x hidden 64, prompt {OVERHEAD_PROMPT}; medians of {rounds} rounds x "
          f"{calls} steps; float32 logits vs transformers: max rel. diff {err:.1e}; "
          f"load average at the end {info.get('load_average')}")
    print("| decode step ms | cattn f32 | cattn int8 | transformers |\n|---|---|---|---|")
    print(f"| one step | {med['cattn f32']:.3f} | {med['cattn int8']:.3f} | "
          f"{med['transformers']:.3f} |")
    print(f"| ratio cattn/transformers (bar <= 0.15x) | {ratio['cattn f32']:.2f}x | "
          f"{ratio['cattn int8']:.2f}x | 1 |")
    return dict(cpu=info["cpu_model"], threads=threads, rounds=rounds, calls=calls,
                median_ms=med, ratio=ratio, max_rel_diff=err)


def step_bytes(lm, context):
    """Bytes one decode step reads at `context` positions: each linear weight
    as stored (PackedWeight.nbytes), the norms, the output projection as
    stored (a tied one: the float32 embedding, or its packed copy in the
    model's format) and the KV cache."""
    from cattn import nn
    total = lm.lm_head_weight.nbytes
    for m in lm.layers:
        for sub in (m.norm1, m.norm2, m.self_attn.qkv_proj, m.self_attn.o_proj,
                    m.mlp.gate_up_proj, m.mlp.down_proj):
            for p in (sub.weight, getattr(sub, "bias", None)):
                total += 0 if p is None else p.nbytes
    assert all(isinstance(layer, nn.DecoderBlock) for layer in lm.layers)
    return total + kv_cache_bytes(context)


def formats_case(rounds, calls, threads):
    """Issue 26's int8-vs-float32 decode byte rate (see the module docstring)."""
    import cattn
    from cattn.models import CausalLM
    from conftest import machine_summary
    path = model_dir()
    ids = prompt()
    cattn.set_num_threads(threads)
    lms = {w: CausalLM.from_pretrained(path, weights=w) for w in ("float32", "int8")}
    steps = {w: cattn_decode_step(lm, ids) for w, lm in lms.items()}
    ctx = (PROMPT_LEN + 1024) // 2
    nbytes = {w: step_bytes(lm, ctx) for w, lm in lms.items()}
    for fn in steps.values():
        median_call(fn, 3)
    ms = {w: [] for w in steps}
    for r in range(rounds):
        for w, fn in steps.items():
            ms[w].append(median_call(fn, calls))
        print(f"round {r}: " + "  ".join(f"{w} {1e3 * v[-1]:.1f} ms ({nbytes[w] / v[-1] / 1e9:.2f}"
                                        f" GB/s)" for w, v in ms.items()), flush=True)
    rate = {w: [nbytes[w] / t for t in v] for w, v in ms.items()}
    ratio = statistics.median(a / b for a, b in zip(rate["int8"], rate["float32"]))
    info = machine_summary()
    print(f"\n{info['cpu_model']}, {threads} thread(s), {time.strftime('%Y-%m-%d')}; "
          f"Qwen2.5-0.5B shape, one decode step at contexts {PROMPT_LEN + 1}..1024; medians of "
          f"{rounds} rounds x {calls} steps; load average {info.get('load_average')}")
    print("| weights | bytes / step | ms / step | GB/s |\n|---|---|---|---|")
    for w in steps:
        t = statistics.median(ms[w])
        print(f"| {w} | {nbytes[w] / 2**20:.0f} MiB | {1e3 * t:.1f} | "
              f"{nbytes[w] / t / 1e9:.2f} |")
    print(f"| int8 / float32 byte rate (bar >= 0.95x) | | | {ratio:.2f}x |")
    return dict(cpu=info["cpu_model"], threads=threads, rounds=rounds, calls=calls,
                bytes=nbytes, median_s={w: statistics.median(v) for w, v in ms.items()},
                ratio=ratio)


def _time(fn, n, calls):
    fn(min(n, 8))                                            # untimed warm-up
    ts = []
    for _ in range(calls):
        t = time.perf_counter()
        fn(n)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def peak_rss_generating(path, threads=THREADS):
    """Peak RSS (bytes, Linux) of a fresh process that imports cattn alone, loads the
    model and generates NEW_TOKENS tokens after the prompt (the prompt() of
    this file)."""
    # VmHWM, not ru_maxrss: the latter keeps the peak of the forked parent
    # (both models) across exec
    code = ("import numpy as np, cattn; from cattn.models import CausalLM; "
            f"cattn.set_num_threads({threads}); lm = CausalLM.from_pretrained({path!r}); "
            f"ids = np.random.default_rng(0).integers(1000, 100000, {PROMPT_LEN}); "
            f"lm.generate(ids, max_new_tokens={NEW_TOKENS}, eos_token_id=[]); "
            "print(next(int(ln.split()[1]) * 1024 for ln in open('/proc/self/status') "
            "if ln.startswith('VmHWM')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout.strip().splitlines()[-1])


# ---- pytest face -----------------------------------------------------------------------

transformers = pytest.importorskip("transformers", reason="transformers is needed for the "
                                   "benchmark model") if __name__ != "__main__" else None


@pytest.fixture(scope="module")
def runners():
    pytest.importorskip("torch", reason="torch is needed for the transformers rows")
    path = model_dir()
    return {"cattn": cattn_runner(path)[1], "transformers": hf_runner(path)[1]}


@pytest.mark.parametrize("lib", ["cattn", "transformers"])
def test_prefill(bench, runners, lib):
    bench(lambda: runners[lib](1), group=f"LLM prefill {PROMPT_LEN} tokens", lib=lib,
          rounds=3, threads=THREADS, dtype="float32", shape=[1, PROMPT_LEN], items=PROMPT_LEN)


@pytest.mark.parametrize("lib", ["cattn", "transformers"])
def test_decode(bench, runners, lib):
    out = bench(lambda: runners[lib](NEW_TOKENS), group=f"LLM prompt {PROMPT_LEN} + "
                f"{NEW_TOKENS} greedy tokens", lib=lib, rounds=3, threads=THREADS,
                dtype="float32", shape=[1, PROMPT_LEN, NEW_TOKENS], items=NEW_TOKENS)
    assert len(out) == NEW_TOKENS


# ---- script face -----------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", choices=["full", "overhead", "formats"], default="full",
                    help="full: the 0.5B-shaped model (default); overhead: one decode step "
                    "of a 24-layer hidden-64 model")
    ap.add_argument("--threads", type=int, default=None,
                    help=f"default {THREADS} (full), 1 (overhead)")
    ap.add_argument("--rounds", type=int, default=None, help="default 3 (full), 15 (overhead)")
    ap.add_argument("--calls", type=int, default=50, help="overhead: steps timed per round")
    ap.add_argument("--json", metavar="PATH", help="also write the medians here")
    args = ap.parse_args(argv)
    sys.path.insert(0, HERE)
    if args.case in ("overhead", "formats"):
        res = (overhead_case(args.rounds or 15, args.calls, args.threads or 1)
               if args.case == "overhead" else
               formats_case(args.rounds or 5, min(args.calls, 10), args.threads or THREADS))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
        return
    args.threads = args.threads or THREADS
    args.rounds = args.rounds or 3
    from conftest import machine_summary
    path = model_dir()
    lm, c_run = cattn_runner(path, args.threads)
    _, h_run = hf_runner(path, args.threads)
    libs = {"cattn": c_run, "transformers": h_run}
    rows = {k: {"prefill": [], "decode": []} for k in libs}
    bw = []
    for r in range(args.rounds):
        bw.append(read_bandwidth(args.threads))
        for name, run in libs.items():
            t1 = _time(run, 1, 3)
            tn = _time(run, NEW_TOKENS, 1)
            rows[name]["prefill"].append(PROMPT_LEN / t1)
            rows[name]["decode"].append((NEW_TOKENS - 1) / (tn - t1))
            print(f"round {r}: {name:12s} prefill {PROMPT_LEN / t1:8.1f} tok/s  decode "
                  f"{(NEW_TOKENS - 1) / (tn - t1):6.2f} tok/s", flush=True)
    assert np.array_equal(c_run(32), h_run(32)), "cattn and transformers disagree (greedy)"
    med = {k: {m: statistics.median(v) for m, v in d.items()} for k, d in rows.items()}
    wbytes = weight_bytes(lm)
    limit = statistics.median(bw) / wbytes
    kv = kv_cache_bytes(PROMPT_LEN + NEW_TOKENS)
    del lm, libs, c_run, h_run
    rss = peak_rss_generating(path, args.threads)
    c, h = med["cattn"], med["transformers"]
    info = machine_summary()
    res = dict(cpu=info["cpu_model"], threads=args.threads, rounds=args.rounds,
               date=time.strftime("%Y-%m-%d"), medians=med, bandwidth_GBps=statistics.median(bw)
               / 1e9, weight_bytes=wbytes, decode_limit_tok_s=limit, kv_cache_bytes=kv,
               peak_rss_bytes=rss)
    res["load_average"] = info.get("load_average")
    print(f"\n{res['cpu']}, {args.threads} threads, {res['date']}, medians of {args.rounds} "
          f"rounds; load average at the end {res['load_average']}")
    print("| | cattn | transformers | ratio | bar |\n|---|---|---|---|---|")
    print(f"| prefill 128 tokens (tok/s) | {c['prefill']:.1f} | {h['prefill']:.1f} | "
          f"{c['prefill'] / h['prefill']:.2f}x | >= 1.2x |")
    print(f"| decode 128 tokens (tok/s) | {c['decode']:.2f} | {h['decode']:.2f} | "
          f"{c['decode'] / h['decode']:.2f}x | >= 1.5x |")
    print(f"| decode vs weight-bandwidth limit | {c['decode'] / limit:.0%} | "
          f"{h['decode'] / limit:.0%} | | >= 80% |")
    print(f"\nlimit: {wbytes / 1e9:.3f} GB of weights per token / "
          f"{res['bandwidth_GBps']:.1f} GB/s (numpy.dot) = {limit:.2f} tok/s")
    print(f"peak RSS generating: {rss / 2**30:.2f} GiB = "
          f"{rss / (wbytes + kv):.2f}x (float32 weights {wbytes / 2**30:.2f} GiB + KV cache "
          f"{kv / 2**20:.1f} MiB); bar <= 1.2x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
