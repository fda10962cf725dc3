"""A Qwen2.5-0.5B-shaped decoder LLM on cattn vs transformers (torch), same
process, same weights (float32), same threads. Two faces:

    pytest benchmarks/bench_llm.py --benchmark-json=llm.json
    python benchmarks/report.py llm.json

    python benchmarks/bench_llm.py [--threads 2] [--rounds 3]

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


def model_dir():
    """The cached checkpoint folder, created on first use (float32 safetensors)."""
    if not os.path.isfile(os.path.join(MODEL_DIR, "config.json")):
        import torch
        import transformers
        torch.manual_seed(0)
        cfg = transformers.Qwen2Config(**SHAPE)
        model = transformers.Qwen2ForCausalLM(cfg).eval()
        tmp = MODEL_DIR + ".tmp"
        model.save_pretrained(tmp, max_shard_size="100GB")
        os.replace(tmp, MODEL_DIR)
    return MODEL_DIR


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
    ap.add_argument("--threads", type=int, default=THREADS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", metavar="PATH", help="also write the medians here")
    args = ap.parse_args(argv)
    sys.path.insert(0, HERE)
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
