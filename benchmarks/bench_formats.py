"""all-MiniLM-L6-v2 in cattn's weight formats (float32, bfloat16, int8) vs ONNX
Runtime float32 and int8 (issue 12), same process, same model, same threads.
Two faces:

    pytest benchmarks/bench_formats.py --benchmark-json=formats.json
    python benchmarks/report.py formats.json      # + ratios within each group, cosines

    python benchmarks/bench_formats.py [--rounds 3] [--threads 2] [--json out.json]

The rows: cattn `SentenceEncoder.from_pretrained(weights=...)` for "float32"
(lib cattn), "bfloat16" and "int8" (variants), and ONNX Runtime on the same
model, float32 (lib onnxruntime) and int8 (variant).

The ONNX files: the installed model as sentence-transformers runs it (the BERT
body, mean pooling over real tokens, L2 normalize) exported once with
torch.onnx (TorchScript exporter, opset 17, dynamic batch and sequence axes;
transformers' "eager" attention, whose graph ONNX Runtime ran 10-14% faster
here than the default "sdpa" one's, same results) into one graph whose output
is the normalized 384-d embedding, so both sides return the same thing; int8 = onnxruntime.quantization.quantize_dynamic on
that file with its defaults. Both are made in a subprocess (torch stays out of
the timed process) and cached in ~/.cache/cattn-bench/ (CATTN_BENCH_CACHE
overrides) under names keyed by the model file's hash and the torch,
transformers, onnx and onnxruntime versions.

Timing is end to end on both sides: cattn times `encode`; the ONNX Runtime
encoder (OrtEncoder) tokenizes inside the timed call (the `tokenizers`
package, the model's tokenizer.json, truncation at max_seq_length from
sentence_bert_config.json, no padding), sorts by length into batches padded
to their longest (as cattn and sentence-transformers do), runs the session
(intra_op_num_threads = the threads, inter_op 1, ONNX Runtime's default graph
optimizations) and returns the rows in input order. Each library's calls are
timed as a block after an untimed warm-up (never interleaved single calls:
thread pools keep spinning after a call and slow whoever runs next).

Measured:
* throughput: sentences/s over the 1,000-sentence corpus (benchmarks/corpus.py)
  at batch 32;
* latency: one short sentence;
* accuracy (not timed): min / median cosine of each row's embeddings to cattn
  float32's over the corpus (pytest: extra_info min_cosine / median_cosine of
  the corpus rows, and test_accuracy, which prints the table and asserts
  issue 12's bar for cattn's formats; ONNX Runtime's are only reported).

The script alternates the libraries' blocks for --rounds rounds and prints
medians, the ratios against the peers with issue 12's bars, the CPU model and
the load average at the start and the end. Skips: the model package,
tokenizers and safetensors for everything; onnxruntime and onnx for the ONNX
Runtime rows, and torch and transformers for them too while the ONNX files
are not cached yet.
"""
import argparse
import functools
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import pytest

from cattn.cli.bench import thread_limit, warm_up   # (conftest's too)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from corpus import make_corpus  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")

CACHE = os.environ.get("CATTN_BENCH_CACHE", os.path.expanduser("~/.cache/cattn-bench"))
MODEL_NAME = "all-MiniLM-L6-v2"
SHORT = "The weather is lovely today."
N, BATCH, THREADS = 1000, 32, 2
OPSET = 17
ATTENTION = "eager"     # transformers' attn_implementation for the export (see above)
# (lib, variant): cattn's weight formats, then ONNX Runtime's two files
ROWS = [("cattn", None), ("cattn", "bfloat16"), ("cattn", "int8"),
        ("onnxruntime", None), ("onnxruntime", "int8")]
# issue 12's accuracy bar (cosine to cattn float32 over the corpus), cattn's formats
ACCURACY_BAR = {"bfloat16": {"min": 0.9999}, "int8": {"min": 0.99, "median": 0.998}}


def label(lib, variant):
    return f"{lib} ({variant})" if variant else lib


def weight_format(variant):
    return variant or "float32"


def corpus_group(n=N, batch_size=BATCH):
    return f"MiniLM formats: corpus {n} sentences batch {batch_size}"


LATENCY_GROUP = "MiniLM formats: one short sentence"


def _load_avg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def default_model_path():
    from cattn.models.sentence import default_model_path as path
    return path()


# ---- the ONNX files --------------------------------------------------------------------

def _versions(*names):
    from importlib.metadata import PackageNotFoundError, version
    out = []
    for n in names:
        try:
            out.append(f"{n}{version(n)}")
        except PackageNotFoundError:
            out.append(f"{n}-none")
    return "-".join(out)


@functools.lru_cache(maxsize=None)
def _model_digest(model_path):
    h = hashlib.sha256()
    for name in ("config.json", "model.safetensors"):
        with open(os.path.join(model_path, name), "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()[:12]


def onnx_paths(model_path):
    """{"float32": path, "int8": path}: the cached files' names for this model
    and these package versions (they may not exist yet; see ensure_onnx)."""
    base = os.path.join(CACHE, f"{MODEL_NAME}-{_model_digest(model_path)}-"
                               f"{_versions('torch', 'transformers', 'onnx')}-opset{OPSET}-{ATTENTION}")
    return {"float32": base + ".onnx",
            "int8": base + f"-{_versions('onnxruntime')}-int8-dynamic.onnx"}


def export_onnx(model_path, out):
    """The model as sentence-transformers runs it (BERT, mean pooling, L2
    normalize) -> one ONNX graph: (input_ids, attention_mask, token_type_ids)
    int64 (B, L) -> embedding float32 (B, E). Needs torch and transformers."""
    import torch
    from transformers import AutoModel

    class SentenceEmbedding(torch.nn.Module):
        def __init__(self, body):
            super().__init__()
            self.body = body

        def forward(self, input_ids, attention_mask, token_type_ids):
            h = self.body(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state
            m = attention_mask.unsqueeze(-1).to(h.dtype)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    body = AutoModel.from_pretrained(model_path, attn_implementation=ATTENTION)
    model = SentenceEmbedding(body.eval()).eval()
    ids = torch.ones((2, 16), dtype=torch.int64)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {k: {0: "batch", 1: "sequence"} for k in names}
    axes["embedding"] = {0: "batch"}
    tmp = out + f".tmp{os.getpid()}"
    with torch.no_grad():
        torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), tmp,
                          input_names=names, output_names=["embedding"], dynamic_axes=axes,
                          opset_version=OPSET, dynamo=False)
    os.replace(tmp, out)


def quantize_onnx(src, out):
    """onnxruntime.quantization.quantize_dynamic(src -> out) with its defaults."""
    from onnxruntime.quantization import quantize_dynamic
    tmp = out + f".tmp{os.getpid()}.onnx"
    quantize_dynamic(src, tmp)
    os.replace(tmp, out)


def ensure_onnx(model_path):
    """The cached ONNX files, made first (in a subprocess) where missing.
    ImportError naming the package when torch / transformers / onnx are missing."""
    paths = onnx_paths(model_path)
    if not all(os.path.isfile(p) for p in paths.values()):
        import importlib.util
        need = ["onnx", "onnxruntime"] + ([] if os.path.isfile(paths["float32"])
                                          else ["torch", "transformers"])
        missing = [n for n in need if importlib.util.find_spec(n) is None]
        if missing:
            raise ImportError(f"making the ONNX files needs {' and '.join(missing)}: "
                              f"pip install {' '.join(missing)}")
        os.makedirs(CACHE, exist_ok=True)
        print(f"\nexporting {MODEL_NAME} to ONNX (once): {paths['float32']}", file=sys.stderr)
        subprocess.run([sys.executable, os.path.abspath(__file__), "--export-onnx", model_path,
                        paths["float32"], paths["int8"]], check=True)
    return paths


# ---- the ONNX Runtime encoder -----------------------------------------------------------

class OrtEncoder:
    """SentenceEncoder.encode's work on ONNX Runtime: tokenize, batch by length,
    run the exported graph (which pools and normalizes), rows in input order."""

    def __init__(self, onnx_path, model_path, threads=THREADS):
        import onnxruntime as ort
        from tokenizers import Tokenizer
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        self.session = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        self.dim = self.session.get_outputs()[0].shape[-1]
        self.tokenizer = Tokenizer.from_file(os.path.join(model_path, "tokenizer.json"))
        cfg_path = os.path.join(model_path, "sentence_bert_config.json")
        max_len = 512
        if os.path.isfile(cfg_path):
            with open(cfg_path) as f:
                max_len = json.load(f).get("max_seq_length") or max_len
        self.tokenizer.enable_truncation(max_len)   # tokenizer.json's own: 128
        self.tokenizer.no_padding()

    def encode(self, sentences, batch_size=BATCH):
        single = isinstance(sentences, str)
        encs = self.tokenizer.encode_batch([sentences] if single else list(sentences))
        n = len(encs)
        lens = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=n)
        order = np.argsort(-lens, kind="stable")                 # longest first
        out = np.empty((n, self.dim), np.float32)
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            ids = np.zeros((len(idx), lens[idx[0]]), np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(idx):
                ids[r, :lens[i]] = encs[i].ids
                mask[r, :lens[i]] = 1
            out[idx] = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                               "token_type_ids": np.zeros_like(ids)})[0]
        return out[0] if single else out


def make_encoder(lib, variant, model_path, threads=THREADS):
    """encode(texts) for one row of ROWS."""
    if lib == "cattn":
        from cattn.models import SentenceEncoder
        enc = SentenceEncoder.from_pretrained(model_path, weights=weight_format(variant))
        return lambda x: enc.encode(x, batch_size=BATCH)
    enc = OrtEncoder(ensure_onnx(model_path)[weight_format(variant)], model_path, threads)
    return enc.encode


def cosines(emb, ref):
    """Per-row cosine of emb and ref (N, E), in float64."""
    emb, ref = np.asarray(emb, np.float64), np.asarray(ref, np.float64)
    return np.sum(emb * ref, axis=1) / (np.linalg.norm(emb, axis=1) * np.linalg.norm(ref, axis=1))


def check_accuracy(cos_by_label):
    """Issue 12's accuracy bar for cattn's formats: [(what, value, bar, ok)]."""
    out = []
    for fmt, bars in ACCURACY_BAR.items():
        cos = cos_by_label.get(label("cattn", fmt))
        if cos is None:
            continue
        for stat, bar in bars.items():
            v = float(np.min(cos) if stat == "min" else np.median(cos))
            out.append((f"cattn {fmt} {stat} cosine", v, bar, v >= bar))
    return out


# ---- pytest face -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def model_path():
    pytest.importorskip("tokenizers", reason="needs tokenizers: pip install 'cattn[models]'")
    pytest.importorskip("safetensors", reason="needs safetensors: pip install 'cattn[models]'")
    from cattn.models import ModelNotFoundError
    try:
        return default_model_path()
    except ModelNotFoundError as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def encoders(model_path):
    """(lib, variant) -> encode(texts), made on first use; the ONNX Runtime rows
    skip naming the missing package."""
    made = {}

    def get(lib, variant):
        if (lib, variant) not in made:
            if lib == "onnxruntime":
                pytest.importorskip("onnxruntime", reason="the ONNX Runtime rows need "
                                    "onnxruntime: pip install onnxruntime onnx")
                pytest.importorskip("onnx", reason="the ONNX Runtime rows need onnx: "
                                    "pip install onnxruntime onnx")
                try:
                    ensure_onnx(model_path)
                except ImportError as e:
                    pytest.skip(str(e))
            made[lib, variant] = make_encoder(lib, variant, model_path)
        return made[lib, variant]
    return get


@pytest.fixture(scope="module")
def embeddings(encoders):
    """(lib, variant) -> the corpus' embeddings (computed once; the timed
    corpus runs store theirs here)."""
    done = {}

    def get(lib, variant, emb=None):
        if emb is not None:
            done[lib, variant] = emb
        elif (lib, variant) not in done:
            with thread_limit(THREADS):
                done[lib, variant] = encoders(lib, variant)(make_corpus(N))
        return done[lib, variant]
    return get


def _check(emb, n):
    assert emb.shape == (n, 384)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-4)


ROW_IDS = [f"{lib}-{weight_format(v)}" for lib, v in ROWS]


@pytest.mark.parametrize("lib,variant", ROWS, ids=ROW_IDS)
def test_corpus(bench, benchmark, encoders, embeddings, lib, variant):
    encode, corpus = encoders(lib, variant), make_corpus(N)
    emb = bench(lambda: encode(corpus), group=corpus_group(), lib=lib, variant=variant,
                threads=THREADS, dtype="float32", format=weight_format(variant),
                shape=[N, BATCH], items=N)
    _check(emb, N)
    embeddings(lib, variant, emb)
    cos = cosines(emb, embeddings("cattn", None))             # not timed
    benchmark.extra_info.update(min_cosine=float(cos.min()), median_cosine=float(np.median(cos)))


@pytest.mark.parametrize("lib,variant", ROWS, ids=ROW_IDS)
def test_latency_short(bench, encoders, lib, variant):
    encode = encoders(lib, variant)
    emb = bench(lambda: encode(SHORT), group=LATENCY_GROUP, lib=lib, variant=variant,
                threads=THREADS, dtype="float32", format=weight_format(variant), shape=[1],
                items=1)
    _check(np.atleast_2d(emb), 1)


def test_accuracy(embeddings):
    """Not timed: min / median cosine of every row to cattn float32 over the
    corpus (printed; run with -s), and issue 12's bar for cattn's formats."""
    ref = embeddings("cattn", None)
    cos = {}
    for lib, variant in ROWS[1:]:
        try:
            cos[label(lib, variant)] = cosines(embeddings(lib, variant), ref)
        except pytest.skip.Exception as e:
            print(f"{label(lib, variant)}: skipped ({e})")
    print(f"\ncosine to cattn float32 over {N} sentences")
    for name, c in cos.items():
        print(f"  {name:22s} min {c.min():.6f}  median {np.median(c):.6f}")
    failed = [f"{what} {v:.6f} < {bar}" for what, v, bar, ok in check_accuracy(cos) if not ok]
    assert not failed, "; ".join(failed)


# ---- the script ------------------------------------------------------------------------

BARS = [  # (what, kind, row, peer, bar, goal): kind "tput" (sentences/s) or "short" (latency)
    ("short sentence: cattn float32 vs onnxruntime float32", "short", "cattn", "onnxruntime",
     1.0, 1.25),
    ("short sentence: cattn bfloat16 vs onnxruntime float32", "short", "cattn (bfloat16)",
     "onnxruntime", 1.25, None),
    ("short sentence: cattn int8 vs onnxruntime int8", "short", "cattn (int8)",
     "onnxruntime (int8)", 1.0, None),
    ("batch 32: cattn int8 vs onnxruntime int8", "tput", "cattn (int8)", "onnxruntime (int8)",
     1.0, 1.3),
    ("batch 32: cattn bfloat16 vs cattn float32", "tput", "cattn (bfloat16)", "cattn", 0.95,
     None),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=THREADS)
    ap.add_argument("--rounds", type=int, default=3, help="alternating blocks per measurement")
    ap.add_argument("--n", type=int, default=N, help="corpus size")
    ap.add_argument("--latency-time", type=float, default=2.0,
                    help="seconds per latency block")
    ap.add_argument("--json", metavar="PATH", help="also write the results here (report.py "
                    "reads the file)")
    ap.add_argument("--formats", default="float32,bfloat16,int8",
                    help="cattn's weight formats to run (comma-separated; default: all three)")
    ap.add_argument("--no-onnxruntime", action="store_true", help="cattn's formats only")
    ap.add_argument("--export-onnx", nargs=3, metavar=("MODEL", "FLOAT32", "INT8"),
                    help=argparse.SUPPRESS)   # ensure_onnx's subprocess
    args = ap.parse_args(argv)
    if args.export_onnx:
        model, f32, int8 = args.export_onnx
        if not os.path.isfile(f32):
            export_onnx(model, f32)
        if not os.path.isfile(int8):
            quantize_onnx(f32, int8)
        return 0

    from conftest import machine_summary
    model_path = default_model_path()
    corpus = make_corpus(args.n)
    load_start = _load_avg()
    machine = machine_summary()
    cpu = machine["cpu_model"]
    print(f"{cpu}; {args.threads} threads; corpus {len(corpus)} sentences, batch {BATCH}; "
          f"load average at the start {load_start}", flush=True)
    formats = args.formats.split(",")
    rows = [(lib, v) for lib, v in ROWS if (weight_format(v) in formats if lib == "cattn"
                                            else not args.no_onnxruntime)]
    fns = {}
    for lib, variant in rows:
        try:
            fns[label(lib, variant)] = make_encoder(lib, variant, model_path, args.threads)
        except ImportError as e:
            print(f"{label(lib, variant)}: not run ({e})")
    if "onnxruntime" in fns:
        import onnxruntime
        print(f"onnxruntime {onnxruntime.__version__}: {onnx_paths(model_path)['float32']}")

    with thread_limit(args.threads):
        res = measure(args, corpus, fns)
    res.update(cpu=cpu, threads=args.threads, rounds=args.rounds, n=len(corpus),
               batch_size=BATCH, date=time.strftime("%Y-%m-%d %H:%M"),
               load_average_start=load_start, load_average_end=_load_avg())
    print_results(res)
    if args.json:
        res["machine_info"] = machine
        res["benchmarks"] = as_benchmarks(res)
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
        print(f"wrote {args.json}")
    return 0


def measure(args, corpus, fns):
    """Accuracy (also a warm-up), then --rounds rounds of alternating blocks:
    corpus throughput, then short-sentence latency."""
    from conftest import time_block
    emb = {name: f(corpus) for name, f in fns.items()}
    ref = emb.get("cattn")
    cos = {name: cosines(e, ref) for name, e in emb.items()} if ref is not None else {}
    tput = {name: [] for name in fns}
    short = {name: [] for name in fns}
    for r in range(args.rounds):
        order = list(fns) if r % 2 == 0 else list(fns)[::-1]
        for name in order:
            f = fns[name]
            warm_up(lambda: f(SHORT))
            dt = time_block(lambda: f(corpus))
            tput[name].append(len(corpus) / dt)
            print(f"  round {r + 1}: {name:20s} {len(corpus) / dt:7.1f} sentences/s", flush=True)
        for name in order:
            f = fns[name]
            warm_up(lambda: f(SHORT))
            short[name].append(time_block(lambda: f(SHORT), args.latency_time, 5) * 1e3)
        print(f"  round {r + 1}: short sentence ms " + ", ".join(
            f"{name} {short[name][-1]:.2f}" for name in order), flush=True)
    return {"libs": {name: dict(sentences_per_s=statistics.median(tput[name]),
                                sentences_per_s_runs=tput[name],
                                short_ms=statistics.median(short[name]), short_ms_runs=short[name],
                                min_cosine=float(cos[name].min()) if name in cos else None,
                                median_cosine=float(np.median(cos[name])) if name in cos
                                else None)
                     for name in fns}}


def print_results(res):
    libs = res["libs"]
    print(f"\n{res['cpu']}, {res['threads']} threads, {res['date']}, medians of {res['rounds']} "
          f"rounds; load average start {res['load_average_start']}, end "
          f"{res['load_average_end']}")
    print(f"\n| all-MiniLM-L6-v2 | sentences/s (batch {res['batch_size']}, {res['n']} sentences) "
          f"| one short sentence (ms) | min / median cosine to cattn float32 |")
    print("|---|---|---|---|")
    for name, d in libs.items():
        c = "-" if d["min_cosine"] is None else f"{d['min_cosine']:.6f} / {d['median_cosine']:.6f}"
        print(f"| {name} | {d['sentences_per_s']:.1f} | {d['short_ms']:.2f} | {c} |")
    peers = [p for p in ("onnxruntime", "onnxruntime (int8)", "cattn") if p in libs]
    print("\nratios (> 1: the row is faster than the column)")
    print("| | " + " | ".join(f"batch 32 vs {p}" for p in peers) + " | "
          + " | ".join(f"short vs {p}" for p in peers) + " |")
    print("|---" * (1 + 2 * len(peers)) + "|")
    for name, d in libs.items():
        if not name.startswith("cattn"):
            continue
        cells = [f"{d['sentences_per_s'] / libs[p]['sentences_per_s']:.2f}x" if p != name else "-"
                 for p in peers]
        cells += [f"{libs[p]['short_ms'] / d['short_ms']:.2f}x" if p != name else "-"
                  for p in peers]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print("\nissue 12's bars (same run):")
    for what, kind, row, peer, bar, goal in BARS:
        if row not in libs or peer not in libs:
            continue
        a, b = libs[row], libs[peer]
        ratio = (a["sentences_per_s"] / b["sentences_per_s"] if kind == "tput"
                 else b["short_ms"] / a["short_ms"])
        print(f"  {'ok  ' if ratio >= bar else 'MISS'} {what}: {ratio:.2f}x (bar {bar}x"
              + (f", goal {goal}x)" if goal else ")"))
    cos = {name: np.array([d["min_cosine"], d["median_cosine"]]) for name, d in libs.items()
           if d["min_cosine"] is not None}
    for fmt, bars in ACCURACY_BAR.items():
        name = label("cattn", fmt)
        if name in cos:
            for stat, bar in bars.items():
                v = cos[name][0 if stat == "min" else 1]
                print(f"  {'ok  ' if v >= bar else 'MISS'} {name} {stat} cosine {v:.6f} "
                      f"(bar {bar})")


SCRIPT_SUITE = "bench_formats.py (script)"


def as_benchmarks(res):
    """The script's timings as pytest-benchmark entries for report.py."""
    from bench_models import _stats
    out = []
    for name, d in res["libs"].items():
        lib, _, variant = name.partition(" (")
        variant = variant.rstrip(")") or None
        info = dict(lib=lib, variant=variant, threads=res["threads"], dtype="float32",
                    format=weight_format(variant))
        out.append(dict(group=corpus_group(res["n"], res["batch_size"]), suite=SCRIPT_SUITE,
                        name=f"corpus-{lib}-{weight_format(variant)}",
                        extra_info=dict(info, shape=[res["n"], res["batch_size"]], items=res["n"],
                                        min_cosine=d["min_cosine"],
                                        median_cosine=d["median_cosine"]),
                        stats=_stats([res["n"] / x for x in d["sentences_per_s_runs"]])))
        out.append(dict(group=LATENCY_GROUP, suite=SCRIPT_SUITE,
                        name=f"short-{lib}-{weight_format(variant)}",
                        extra_info=dict(info, shape=[1], items=1),
                        stats=_stats([x / 1e3 for x in d["short_ms_runs"]])))
    return out


if __name__ == "__main__":
    sys.exit(main())
