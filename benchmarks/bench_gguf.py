"""benchmarks/bench_gguf.py — the same GGUF files run by cattn and by
llama.cpp (through llama-cpp-python), issue 27's table.

    python benchmarks/bench_gguf.py --vocab PATH/ggml-vocab-qwen2.gguf \
        [--formats F32,Q8_0,Q4_0,Q4_K_M] [--rounds 3] [--threads 2]

What it does: writes a random Qwen2.5-0.5B-shaped model (hidden 896, 24
layers, 14/2 heads of 64, intermediate 4864, tied; weights N(0, 0.02),
norms 1; --shape qwen3-0.6b: hidden 1024, 28 layers, 16/8 heads of 128,
q/k norms, intermediate 3072, tied; the tokenizer metadata of the vocabulary file, which llama.cpp
needs to load a model) as an F32 GGUF file with the `gguf` package, then
quantizes it with llama.cpp's own quantizer (llama_cpp.llama_model_quantize)
to each format; cattn loads each file with CausalLM.from_pretrained (the
file's values in their narrowest exact formats: Q4_x in int4, Q5_x in
int5g, Q6_K in int6g, Q8_0 in int8g, BF16 in bfloat16, F32 in float32) and
llama.cpp with llama_cpp.Llama (float32 KV caches on both sides, or float16
with --kv-dtype float16; same threads). Per round,
alternating the two sides: a 128-token prompt (prefill tokens/s) and 128
greedy tokens (decode tokens/s, contexts 129-256), and a C read loop over
256 MiB (cattn._ext.read_probe): decode's weight-bandwidth limit is the
file's tensor bytes per token over that bandwidth. Medians of the rounds.
Accuracy, once per file: cattn's prompt logits against llama.cpp's
(cosine over all positions and the worst position; max |diff| / max |ref|),
the greedy tokens of both, and cattn teacher-forced on llama.cpp's greedy
tokens: where its argmax differs, llama.cpp's margin between the two
tokens against the largest logit difference there (a near-tie when the
margin is the smaller).

Needs: llama-cpp-python (`CMAKE_ARGS="-DGGML_NATIVE=ON" pip install
llama-cpp-python==0.3.36`, ~8 min to build on 2 cores) and gguf. The
vocabulary file: the llama-cpp-python sdist's
vendor/llama.cpp/models/ggml-vocab-qwen2.gguf (`pip download --no-deps
--no-binary :all: llama-cpp-python==0.3.36`). Files are cached in
$CATTN_BENCH_CACHE (default ~/.cache/cattn-bench; ~3.5 GB).
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

CACHE = os.environ.get("CATTN_BENCH_CACHE", os.path.expanduser("~/.cache/cattn-bench"))
SHAPES = {"qwen2.5-0.5b": dict(arch="qwen2", E=896, layers=24, H=14, Hk=2, D=64, F=4864),
          # sizes multiples of 256: Q4_K_M is really 4-bit K-quants here
          "qwen3-0.6b": dict(arch="qwen3", E=1024, layers=28, H=16, Hk=8, D=128, F=3072),
          # GPT-2 small's widths, 6 layers (the GELU / LayerNorm / learned-position
          # path against llama.cpp's; --vocab ggml-vocab-gpt-2.gguf)
          "gpt2-6l": dict(arch="gpt2", E=768, layers=6, H=12, Hk=12, D=64, F=3072)}
SHAPE = SHAPES["qwen2.5-0.5b"]
PROMPT_LEN, NEW_TOKENS = 128, 128
FTYPES = {"Q8_0": 7, "Q4_0": 2, "Q4_K_M": 15, "BF16": 32}         # llama_ftype


def write_f32(path, vocab, seed=0):
    """The random model as an F32 GGUF file with the vocabulary's tokenizer."""
    import gguf
    from cattn.models import GGUFFile
    voc = GGUFFile(vocab)
    V = len(voc.metadata["tokenizer.ggml.tokens"])
    E, L, H, Hk, D, F = (SHAPE[k] for k in ("E", "layers", "H", "Hk", "D", "F"))
    arch = SHAPE["arch"]
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path + ".tmp", arch)
    w.add_context_length(1024 if arch == "gpt2" else 32768)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    if arch == "gpt2":
        w.add_layer_norm_eps(1e-5)
    else:
        w.add_head_count_kv(Hk)
        w.add_key_length(D)
        w.add_value_length(D)
        w.add_layer_norm_rms_eps(1e-6)
        w.add_rope_freq_base(1000000.0)
    w.add_file_type(0)
    m = voc.metadata
    w.add_tokenizer_model(m["tokenizer.ggml.model"])
    w.add_tokenizer_pre(m["tokenizer.ggml.pre"])
    w.add_token_list(m["tokenizer.ggml.tokens"])
    w.add_token_types(m["tokenizer.ggml.token_type"])
    w.add_token_merges(m["tokenizer.ggml.merges"])
    for key, add in (("bos_token_id", w.add_bos_token_id), ("eos_token_id", w.add_eos_token_id),
                     ("padding_token_id", w.add_pad_token_id)):
        if "tokenizer.ggml." + key in m:
            add(m["tokenizer.ggml." + key])
    voc.close()

    def rand(*shape):
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02))

    w.add_tensor("token_embd.weight", rand(V, E))
    w.add_tensor("output_norm.weight", np.ones(E, np.float32))
    if arch == "gpt2":           # as llama.cpp's converter writes GPT-2: (out, in), biases
        w.add_tensor("output_norm.bias", rand(E))
        w.add_tensor("position_embd.weight", rand(1024, E))
        for i in range(L):
            b = f"blk.{i}."
            for n, rows, cols in (("attn_qkv", 3 * E, E), ("attn_output", E, E),
                                  ("ffn_up", F, E), ("ffn_down", E, F)):
                w.add_tensor(b + n + ".weight", rand(rows, cols))
                w.add_tensor(b + n + ".bias", rand(rows))
            for n in ("attn_norm", "ffn_norm"):
                w.add_tensor(b + n + ".weight", np.ones(E, np.float32))
                w.add_tensor(b + n + ".bias", rand(E))
        L = 0
    for i in range(L):
        b = f"blk.{i}."
        w.add_tensor(b + "attn_norm.weight", np.ones(E, np.float32))
        w.add_tensor(b + "ffn_norm.weight", np.ones(E, np.float32))
        for n, rows in (("q", H * D), ("k", Hk * D), ("v", Hk * D)):
            w.add_tensor(b + f"attn_{n}.weight", rand(rows, E))
            if arch == "qwen2":
                w.add_tensor(b + f"attn_{n}.bias", rand(rows))
        if arch == "qwen3":
            w.add_tensor(b + "attn_q_norm.weight", np.ones(D, np.float32))
            w.add_tensor(b + "attn_k_norm.weight", np.ones(D, np.float32))
        w.add_tensor(b + "attn_output.weight", rand(E, H * D))
        w.add_tensor(b + "ffn_gate.weight", rand(F, E))
        w.add_tensor(b + "ffn_up.weight", rand(F, E))
        w.add_tensor(b + "ffn_down.weight", rand(E, F))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(path + ".tmp", path)


def quantize(src, dst, fmt, threads):
    import llama_cpp
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[fmt]
    params.nthread = threads
    rc = llama_cpp.llama_model_quantize(src.encode(), (dst + ".tmp").encode(), params)
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize({fmt}) returned {rc}")
    os.replace(dst + ".tmp", dst)


def files(vocab, formats, threads, shape="qwen2.5-0.5b"):
    os.makedirs(CACHE, exist_ok=True)
    f32 = os.path.join(CACHE, f"{shape}-shaped-F32.gguf")
    if not os.path.isfile(f32):
        write_f32(f32, vocab)
    out = {}
    for fmt in formats:
        path = f32 if fmt == "F32" else os.path.join(CACHE, f"{shape}-shaped-{fmt}.gguf")
        if not os.path.isfile(path):
            quantize(f32, path, fmt, threads)
        out[fmt] = path
    return out


def tensor_bytes(path):
    """Bytes of the file's tensors a decode token reads: all of them (the
    tied embedding once, as the output projection)."""
    from cattn.models import GGUFFile
    with GGUFFile(path) as f:
        return sum(f.raw(n).nbytes for n in f.tensors), {
            t: sum(f.raw(n).nbytes for n, (tt, _) in f.tensors.items() if tt == t)
            for t in {tt for tt, _ in f.tensors.values()}}


KV_TYPE = {"float32": 0, "float16": 1}        # ggml type of llama.cpp's KV cache
KV = "float32"                                # --kv-dtype: both sides' KV caches


def llama_side(path, threads, logits_all=False):
    import llama_cpp
    return llama_cpp.Llama(path, n_ctx=512, n_batch=PROMPT_LEN, n_ubatch=PROMPT_LEN,
                           n_threads=threads, n_threads_batch=threads, logits_all=logits_all,
                           type_k=KV_TYPE[KV], type_v=KV_TYPE[KV], flash_attn=False,
                           verbose=False)


def llama_run(llm, ids):
    """run(n): the prompt, then n - 1 greedy tokens; returns the n tokens
    (the last position's logits read from the context: Llama.eval keeps
    scores only with logits_all)."""
    V = llm.n_vocab()

    def last():
        return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(V,))

    def run(n, scores=None):
        llm.reset()
        llm.eval(ids.tolist())
        out = [int(np.argmax(last()))]
        if scores is not None:
            scores.append(last().astype(np.float64))
        for _ in range(n - 1):
            llm.eval([out[-1]])
            out.append(int(np.argmax(last())))
            if scores is not None:
                scores.append(last().astype(np.float64))
        return out
    return run


def greedy_ties(lm, ids, llama_tokens, llama_scores):
    """cattn teacher-forced on llama.cpp's greedy tokens: at each of their
    positions, does cattn's argmax pick llama.cpp's token? For each that
    does not: (position, llama.cpp's margin between its token and cattn's
    pick, the largest |cattn - llama.cpp| logit difference there). A
    disagreement is a near-tie when the margin is below that difference:
    the two implementations' rounding alone can swap the two tokens."""
    seq = np.concatenate([ids, np.asarray(llama_tokens[:-1], np.int64)])
    got = np.asarray(lm(seq[None]))[0, len(ids) - 1:].astype(np.float64)    # (n, V)
    out = []
    for i, (tok, ref) in enumerate(zip(llama_tokens, llama_scores)):
        pick = int(np.argmax(got[i]))
        if pick != tok:
            out.append((i, float(ref[tok] - ref[pick]), float(np.abs(got[i] - ref).max())))
    return out


def cattn_run(lm, ids):
    def run(n):
        return [int(t) for t in lm.generate(ids.tolist(), max_new_tokens=n, eos_token_id=[])]
    return run


def lm_weights(lm):
    """The model's linear weights (the first layer's and the output's)."""
    out = [lm.lm_head_weight]
    for mod in (lm.layers[0].self_attn, lm.layers[0].mlp):
        for sub in vars(mod).get("_modules", {}).values():
            if hasattr(sub, "weight"):
                out.append(sub.weight)
    return out


def timed(run, n):
    t = time.perf_counter()
    run(n)
    return time.perf_counter() - t


def probe_bandwidth(threads, buf):
    import cattn
    cattn._ext.read_probe(buf, threads)
    ts = []
    for _ in range(5):
        t = time.perf_counter()
        cattn._ext.read_probe(buf, threads)
        ts.append(time.perf_counter() - t)
    return buf.nbytes / min(ts)


def accuracy(path, lm, ids, threads):
    """(cos over all positions, worst position's cos, max|d| / max|ref|)."""
    llm = llama_side(path, threads, logits_all=True)
    llm.reset()
    llm.eval(ids.tolist())
    ref = np.array(llm.scores[:len(ids)], np.float64)
    del llm
    got = np.asarray(lm(ids[None]))[0].astype(np.float64)
    cos = (got * ref).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(ref, axis=1)
    total = (got * ref).sum() / np.linalg.norm(got) / np.linalg.norm(ref)
    return total, cos.min(), np.abs(got - ref).max() / np.abs(ref).max()


MEMORY_CHILD = r"""
import sys, time
import numpy as np
def status():
    d = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            d[k] = int(v.split()[0]) * 1024
    return d
import cattn
from cattn.models import CausalLM
cattn.set_num_threads(int(sys.argv[3]))
base = status()["VmRSS"]
t = time.perf_counter()
lm = CausalLM.from_pretrained(sys.argv[1], kv_dtype=sys.argv[4],
                              tokenizer_first=sys.argv[2] == "text-first")
load_s = time.perf_counter() - t
after_load = status()["VmRSS"]
ids = np.arange(PROMPT_LEN) * 7919 % 99000 + 1000     # (numpy.random would add its ~5 MiB)
if sys.argv[2] != "ids":                     # the file's tokenizer too: text in and out
    lm.generate("Once upon a time " * (PROMPT_LEN // 5), max_new_tokens=NEW_TOKENS)
else:
    lm.generate(ids.tolist(), max_new_tokens=NEW_TOKENS)
c = lm.config
kv = (c.num_layers * 2 * c.num_kv_heads * c.head_dim * (PROMPT_LEN + NEW_TOKENS)
      * (2 if sys.argv[4] == "float16" else 4))
print(dict(base=base, after_load=after_load, peak=status()["VmHWM"], kv=kv, load_s=load_s))
"""


def memory(paths, threads, mode):
    """Peak resident memory loading a file and generating (a fresh process per
    file: VmHWM), against the file's tensor bytes + the KV cache (--kv-dtype) of
    the prompt + generated tokens; the interpreter with NumPy and cattn
    imported (its RSS before loading) shown apart. mode: "ids", "text" (the
    file's tokenizer built when the text comes, after the weights) or
    "text-first" (built before them: tokenizer_first=True, as cattn
    generate / chat / serve load)."""
    import ast
    import subprocess
    code = f"PROMPT_LEN, NEW_TOKENS = {PROMPT_LEN}, {NEW_TOKENS}\n" + MEMORY_CHILD
    rows = {}
    for fmt, path in paths.items():
        out = subprocess.run([sys.executable, "-c", code, path, mode,
                              str(threads), KV], check=True, capture_output=True,
                             text=True).stdout
        r = ast.literal_eval(out.strip().splitlines()[-1])
        r["tensors"] = tensor_bytes(path)[0]
        rows[fmt] = r
        print(f"{fmt}: {r}", flush=True)
    mib = 2 ** 20
    what = {"ids": "token ids", "text": "text (the file's tokenizer built after loading)",
            "text-first": "text (the file's tokenizer built first: tokenizer_first=True)"}[mode]
    print(f"\npeak memory, {what}: "
          f"load, {PROMPT_LEN}-token prompt, {NEW_TOKENS} tokens")
    print("| file | tensors | KV cache | interpreter | peak RSS | peak / (tensors + KV) "
          "| (peak - interpreter) / (tensors + KV) | load s |")
    print("|---|---|---|---|---|---|---|---|")
    for fmt, r in rows.items():
        need = r["tensors"] + r["kv"]
        print(f"| {fmt} | {r['tensors'] / mib:.0f} MiB | {r['kv'] / mib:.0f} MiB | "
              f"{r['base'] / mib:.0f} MiB | {r['peak'] / mib:.0f} MiB | {r['peak'] / need:.2f}x | "
              f"{(r['peak'] - r['base']) / need:.2f}x | {r['load_s']:.1f} |")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", required=True, help="ggml-vocab-qwen2.gguf (see the docstring)")
    ap.add_argument("--formats", default="F32,Q8_0,Q4_0,Q4_K_M")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="qwen2.5-0.5b")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--kv-dtype", choices=sorted(KV_TYPE), default="float32",
                    help="both sides' KV caches (llama.cpp: type_k / type_v F32 or F16)")
    ap.add_argument("--memory", choices=("ids", "text", "text-first"),
                    help="only the peak-memory table (a fresh process per file), with token "
                         "ids or with text (the file's tokenizer built too: when the text "
                         "comes, or first, before the weights)")
    args = ap.parse_args(argv)
    import cattn
    from cattn.models import CausalLM
    from conftest import machine_summary
    cattn.set_num_threads(args.threads)
    global SHAPE, KV
    SHAPE = SHAPES[args.shape]
    KV = args.kv_dtype
    formats = args.formats.split(",")
    paths = files(args.vocab, formats, args.threads, args.shape)
    if args.memory:
        return memory(paths, args.threads, args.memory)
    from cattn.models import GGUFFile
    with GGUFFile(args.vocab) as voc:
        V = len(voc.metadata["tokenizer.ggml.tokens"])
    ids = np.random.default_rng(0).integers(1000, min(100000, V), PROMPT_LEN).astype(np.int64)
    buf = np.ones(64 << 20, np.float32)
    results = {}
    for fmt, path in paths.items():
        nbytes, by_type = tensor_bytes(path)
        lm = CausalLM.from_pretrained(path, kv_dtype=KV)
        acc = accuracy(path, lm, ids, args.threads)
        print(f"{fmt}: logits vs llama.cpp cos all {acc[0]:.5f}, worst position {acc[1]:.5f}, "
              f"max |diff| / max |ref| {acc[2]:.2e}", flush=True)
        llm = llama_side(path, args.threads)
        sides = {"cattn": cattn_run(lm, ids), "llama.cpp": llama_run(llm, ids)}
        lscores = []
        toks = {"cattn": sides["cattn"](16), "llama.cpp": sides["llama.cpp"](16, lscores)}
        ties = greedy_ties(lm, ids, toks["llama.cpp"], lscores)
        near = sum(m <= e for _, m, e in ties)
        print(f"{fmt}: teacher-forced greedy: {16 - len(ties)} of 16 equal; the others "
              + (", ".join(f"position {i}: llama.cpp margin {m:.4f}, |diff| max {e:.4f}"
                           f" ({'near-tie' if m <= e else 'NOT a near-tie'})" for i, m, e in ties)
                 or "none"), flush=True)
        rows = {k: {"prefill": [], "decode": []} for k in sides}
        bws = []
        for r in range(args.rounds):
            bws.append(probe_bandwidth(args.threads, buf))
            for k, run in sides.items():
                t1 = timed(run, 1)
                tn = timed(run, NEW_TOKENS)
                rows[k]["prefill"].append(PROMPT_LEN / t1)
                rows[k]["decode"].append((NEW_TOKENS - 1) / (tn - t1))
            print(f"{fmt} round {r}: " + "  ".join(
                f"{k} {v['prefill'][-1]:.1f} / {v['decode'][-1]:.2f} tok/s" for k, v in rows.items())
                + f"  read {bws[-1] / 1e9:.1f} GB/s", flush=True)
        ratio = {m: statistics.median(a / b for a, b in zip(rows["cattn"][m], rows["llama.cpp"][m]))
                 for m in ("prefill", "decode")}
        med = {k: {m: statistics.median(v) for m, v in d.items()} for k, d in rows.items()}
        bw = statistics.median(bws)
        limit = bw / nbytes
        same = sum(a == b for a, b in zip(toks["cattn"], toks["llama.cpp"]))
        results[fmt] = dict(file_bytes=nbytes, by_type=by_type, medians=med, ratio=ratio,
                            read_bw=bw, limit_tok_s=limit, cos_all=acc[0], cos_min=acc[1],
                            rel_max=acc[2], greedy_equal_of_16=same,
                            forced_equal_of_16=16 - len(ties), forced_near_ties=near,
                            forced_disagreements=ties,
                            cattn_formats=sorted({str(getattr(p, "format", "float32"))
                                                  for p in lm_weights(lm)}))
        del lm, llm, sides
    info = machine_summary()
    print(f"\n{info['cpu_model']}, {args.threads} threads, {time.strftime('%Y-%m-%d')}, "
          f"{args.shape} shape (random), prompt {PROMPT_LEN}, {NEW_TOKENS} greedy tokens, "
          f"medians of {args.rounds} alternating rounds, {KV} KV caches")
    print("| file | MiB | cattn prefill / decode | llama.cpp prefill / decode | prefill ratio "
          "| decode ratio | cattn decode / bw limit | cos all / worst | greedy =, of 16 "
          "| forced =, of 16 (near-ties) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for fmt, r in results.items():
        c, lc = r["medians"]["cattn"], r["medians"]["llama.cpp"]
        print(f"| {fmt} | {r['file_bytes'] / 2**20:.0f} | {c['prefill']:.1f} / {c['decode']:.2f} | "
              f"{lc['prefill']:.1f} / {lc['decode']:.2f} | {r['ratio']['prefill']:.2f}x | "
              f"{r['ratio']['decode']:.2f}x | {c['decode'] / r['limit_tok_s']:.0%} | "
              f"{r['cos_all']:.5f} / {r['cos_min']:.5f} | {r['greedy_equal_of_16']} | "
              f"{r['forced_equal_of_16']} ({r['forced_near_ties']} of "
              f"{16 - r['forced_equal_of_16']}) |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(cpu=info["cpu_model"], threads=args.threads, results=results), f,
                      indent=1, default=float)
    return results


if __name__ == "__main__":
    main()
