"""benchmarks/bench_server.py — `cattn serve` under load from a second
process on 127.0.0.1 (issue 28's table).

    python benchmarks/bench_server.py --part embed [--rounds 3]
    python benchmarks/bench_server.py --part gen --vocab PATH/ggml-vocab-qwen2.gguf \
        [--formats Q8_0,Q4_0] [--llama]
    python benchmarks/bench_server.py --part hold --vocab ... [--seconds 60]

Parts (the server is `python -m cattn serve` in its own process with
--threads; this process is the load generator; on a 2-core host both share
the cores, so --pin puts the server on cores 0..T-1 with taskset and this
process on the last core only when the host has more):
- embed: the 1,000-sentence corpus (benchmarks/corpus.py) sent as
  one-sentence requests (raw HTTP, keep-alive connections, one per client
  thread; encoding_format base64, the openai client's default) at concurrency 1, 4, 16 and 64, against the same corpus encoded
  by one offline SentenceEncoder.encode call in this process (the server
  idle meanwhile). Per round, alternating: offline, then each concurrency.
  Throughput ratio (offline seconds / served seconds) and p50 / p99
  request latency, medians of the rounds; and the one-sentence encode time
  (median over the corpus, one encode call per sentence, every round before
  the served runs) beside the concurrency-1 p50 over the same sentences,
  with the median of the per-round differences.
- gen: the 0.5B-shaped GGUF files of bench_gguf.py (random weights, the
  qwen2 vocabulary), served with --slots 8; N = 1, 2, 4, 8 concurrent
  streamed /v1/completions (a text prompt of 128 tokens, 64 tokens,
  ignore_eos for cattn, greedy) through the official `openai` client. Aggregate decode tokens/s:
  the tokens all streams received while all N were decoding (from the last
  stream's first token to the first stream's last token) over that time,
  and against one stream as the median of the per-round ratios (each round
  runs 1, 2, 4 and 8 streams in turn); also end-to-end tokens/s (all completion tokens over the wall time) and
  the median time to first token. --llama: the same load against
  llama-cpp-python's server (python -m llama_cpp.server, same file and
  threads, n_ctx 2048; it runs one request at a time: it has no parallel
  sequences), alternating with cattn's per round; compared end to end.
- hold: embeddings and streamed completions at concurrency 32 for
  --seconds (a tenth of the clients drop their connection mid-request):
  every completed response is checked (embeddings against offline encode
  bits, greedy completions against the same request served alone), and at
  the end no 5xx, every slot free, and the server's resident memory
  against where it was after a warm-up (the same load for a sixth of
  --seconds, at most 10 s: the working set of the load, not of an idle
  server; the resident memory right after loading is reported too).
"""
import argparse
import base64
import concurrent.futures
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_name():
    """/proc/cpuinfo's model name, family and model (a KVM guest may say only "AMD EPYC")."""
    info = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    name = info.get("model name", "unknown CPU")
    return f"{name} (family {info.get('cpu family', '?')} model {info.get('model', '?')})"


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read()


class Proc:
    """A server process; ready when `health` answers 200."""

    def __init__(self, argv, port, health="/health", pin=None, log="server"):
        self.port = port
        if pin:
            argv = ["taskset", "-c", pin] + argv
        self.log = open(f"/tmp/bench-{log}-{port}.log", "w")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     cwd="/tmp")
        t0 = time.time()
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"{argv[0]} exited; see {self.log.name}")
            try:
                if get(port, health)[0] == 200:
                    return
            except OSError:
                pass
            if time.time() - t0 > 600:
                raise SystemExit(f"{argv} not ready after 600 s")
            time.sleep(0.3)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def cattn_server(args, *extra):
    port = free_port()
    pin = f"0-{args.threads - 1}" if args.pin else None
    return Proc([sys.executable, "-m", "cattn", "serve", "--port", str(port), "--threads",
                 str(args.threads), "--max-queue", "4096", *extra], port, pin=pin)


def pct(xs, q):
    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


# -- (a) embeddings

class Poster:
    """One keep-alive connection per thread."""

    def __init__(self, port):
        self.port = port
        self.local = threading.local()

    def post(self, path, obj):
        c = getattr(self.local, "c", None)
        if c is None:
            c = self.local.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=600)
        body = json.dumps(obj).encode()
        c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, r.read()


def served_embeddings(port, sentences, conc):
    """-> (seconds, latencies, vectors) for one-sentence requests at conc."""
    p = Poster(port)
    lat = [0.0] * len(sentences)
    out = [None] * len(sentences)

    def one(i):
        t = time.perf_counter()
        status, raw = p.post("/v1/embeddings", {"input": sentences[i],
                                                "encoding_format": "base64"})
        lat[i] = time.perf_counter() - t
        assert status == 200, raw[:200]
        out[i] = np.frombuffer(base64.b64decode(json.loads(raw)["data"][0]["embedding"]), "<f4")
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(conc) as ex:
        list(ex.map(one, range(len(sentences))))
    return time.perf_counter() - t0, lat, np.asarray(out, np.float32)


def part_embed(args):
    import cattn
    from cattn.models import SentenceEncoder
    from corpus import make_corpus
    cattn.set_num_threads(args.threads)
    corpus = make_corpus(1000)
    enc = SentenceEncoder.from_pretrained()
    srv = cattn_server(args)
    try:
        want = enc.encode(corpus)
        served_embeddings(srv.port, corpus[:64], 4)                        # warm-up
        concs = [int(c) for c in args.conc.split(",")]
        rows = {c: dict(ratio=[], p50=[], p99=[]) for c in concs}
        one_p50s, extra = [], []
        for r in range(args.rounds):
            t = time.perf_counter()
            enc.encode(corpus)
            t_off = time.perf_counter() - t
            one = []
            for s in corpus:                      # one-sentence encodes, this round
                t = time.perf_counter()
                enc.encode(s)
                one.append(time.perf_counter() - t)
            one_p50s.append(statistics.median(one))
            for c in concs:
                dt, lat, vecs = served_embeddings(srv.port, corpus, c)
                assert np.array_equal(vecs, want), "served vectors differ from encode's"
                rows[c]["ratio"].append(t_off / dt)
                rows[c]["p50"].append(pct(lat, 50))
                rows[c]["p99"].append(pct(lat, 99))
                if c == 1:
                    extra.append(pct(lat, 50) - one_p50s[-1])
                print(f"round {r} conc {c}: offline {t_off:.2f} s served {dt:.2f} s "
                      f"ratio {t_off / dt:.3f} p50 {pct(lat, 50) * 1e3:.2f} ms "
                      f"(one-sentence encode p50 {one_p50s[-1] * 1e3:.2f} ms)", flush=True)
        one_p50 = statistics.median(one_p50s)
        lines = [f"### Embeddings (all-MiniLM-L6-v2 float32, {cpu_name()}, {args.threads} "
                 f"threads, {args.rounds} rounds, 1,000-sentence corpus)", "",
                 "| concurrency | served / offline throughput | p50 latency | p99 latency |",
                 "|---|---|---|---|"]
        for c in concs:
            m = {k: statistics.median(v) for k, v in rows[c].items()}
            lines.append(f"| {c} | {m['ratio']:.3f}x | {m['p50'] * 1e3:.2f} ms | "
                         f"{m['p99'] * 1e3:.2f} ms |")
        lines += ["", f"One-sentence encode (offline, median over the corpus, one call each, "
                  f"every round): {one_p50 * 1e3:.2f} ms; concurrency-1 p50 over the whole "
                  f"corpus: {statistics.median(rows[1]['p50']) * 1e3:.2f} ms"
                  + (f"; served p50 minus encode p50, median of per-round differences: "
                     f"{statistics.median(extra) * 1e3:.2f} ms" if extra else "")
                  + ". Served vectors equal encode's bit for bit in every round."]
        return "\n".join(lines)
    finally:
        srv.stop()


# -- (b), (c) generation

def streams(port, model, prompt, n, new_tokens, key="x", ignore_eos=True):
    """n concurrent streamed completions -> dict of timings."""
    import openai
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key, max_retries=0,
                           timeout=600)
    stamps = [[] for _ in range(n)]
    tag = random.randrange(10 ** 6)
    t0 = time.perf_counter()

    def one(i):
        extra = {"ignore_eos": True} if ignore_eos else {}
        # a prompt of its own (no server reuses another request's prefix)
        s = client.completions.create(model=model, prompt=f"{tag}.{i}: {prompt}",
                                      max_tokens=new_tokens,
                                      temperature=0, stream=True, extra_body=extra)
        for ch in s:
            if ch.choices and ch.choices[0].text:
                stamps[i].append(time.perf_counter())
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        list(ex.map(one, range(n)))
    t_end = max(s[-1] for s in stamps)
    first = [s[0] for s in stamps]
    w0, w1 = max(first), min(s[-1] for s in stamps)
    inside = sum(sum(1 for t in s if w0 < t <= w1) for s in stamps)
    total = sum(len(s) for s in stamps)
    return dict(decode=inside / (w1 - w0) if w1 > w0 else float("nan"),
                e2e=total / (t_end - t0), ttft=statistics.median(f - t0 for f in first),
                tokens=total)


def part_gen(args):
    import bench_gguf
    formats = args.formats.split(",")
    paths = bench_gguf.files(args.vocab, formats, args.threads)
    from corpus import make_corpus
    from cattn.models import GGUFFile
    tok = GGUFFile(paths[formats[0]]).tokenizer()
    words = " ".join(make_corpus(40)).split()          # a text prompt of ~128 tokens (both
    n = 1                                               # servers take text; llama-cpp-python
    while len(tok.encode(" ".join(words[:n + 1]))) <= 128:   # no token ids)
        n += 1
    prompt = " ".join(words[:n])
    concs = [1, 2, 4, 8]
    lines = []
    for fmt in formats:
        path = paths[fmt]
        model = os.path.basename(path)[:-5]
        srv = cattn_server(args, "--llm", path, "--no-embed", "--slots", "8", "--context",
                           "2048")
        lla = None
        if args.llama:
            port = free_port()
            lla = Proc([sys.executable, "-m", "llama_cpp.server", "--model", path,
                        "--n_threads", str(args.threads), "--n_threads_batch",
                        str(args.threads), "--n_ctx", "2048", "--port", str(port),
                        "--interrupt_requests", "False",         # queue, do not cut, a request
                        "--model_alias", model], port, health="/v1/models",
                       pin=f"0-{args.threads - 1}" if args.pin else None, log="llama")
        try:
            streams(srv.port, model, prompt, 2, 8)                       # warm-up
            if lla:
                streams(lla.port, model, prompt, 1, 8, ignore_eos=False)
            res = {c: [] for c in concs}
            lres = {c: [] for c in (1, 4)}
            for r in range(args.rounds):
                for c in concs:
                    res[c].append(streams(srv.port, model, prompt, c, args.new_tokens))
                    if lla and c in lres:
                        lres[c].append(streams(lla.port, model, prompt, c, args.new_tokens,
                                               ignore_eos=False))
                    print(fmt, r, c, res[c][-1], lres.get(c, [None])[-1] if lla else "",
                          flush=True)
            med = {c: {k: statistics.median(x[k] for x in res[c]) for k in res[c][0]}
                   for c in concs}
            lines += [f"### Generation, {fmt} (Qwen2.5-0.5B-shaped, {cpu_name()}, "
                      f"{args.threads} threads, --slots 8, 128-token prompt, "
                      f"{args.new_tokens} tokens, {args.rounds} rounds)", "",
                      "| streams | aggregate decode tok/s | vs 1 stream (median of per-round "
                      "ratios; each round) | end-to-end tok/s | "
                      "median TTFT |", "|---|---|---|---|---|"]
            for c in concs:
                m = med[c]
                per = [a["decode"] / b["decode"] for a, b in zip(res[c], res[1])]
                lines.append(f"| {c} | {m['decode']:.1f} | {statistics.median(per):.2f}x "
                             f"({', '.join(f'{x:.2f}' for x in per)})"
                             f" | {m['e2e']:.1f} | {m['ttft'] * 1e3:.0f} ms |")
            if lla:
                lines += ["", "| streams | measure | cattn tok/s | llama-cpp-python server "
                          "tok/s | cattn / llama.cpp (median of per-round ratios) |",
                          "|---|---|---|---|---|"]
                for c, key in ((1, "decode"), (1, "e2e"), (4, "e2e")):
                    ratios = [a[key] / b[key] for a, b in zip(res[c], lres[c])]
                    lm = statistics.median(x[key] for x in lres[c])
                    lines.append(f"| {c} | {key} | {med[c][key]:.1f} | {lm:.1f} | "
                                 f"{statistics.median(ratios):.2f}x |")
                lines.append("")
                lines.append("llama-cpp-python's server runs one request at a time (no "
                             "parallel sequences; --interrupt_requests False queues the "
                             "others): its 4-stream rate is end to end.")
            lines.append("")
        finally:
            srv.stop()
            if lla:
                lla.stop()
    return "\n".join(lines)


# -- holding

def part_hold(args):
    import bench_gguf
    from cattn.models import SentenceEncoder
    from corpus import make_corpus
    path = bench_gguf.files(args.vocab, ["Q4_0"], args.threads)["Q4_0"]
    corpus = make_corpus(200)
    enc = SentenceEncoder.from_pretrained()
    want = enc.encode(corpus)
    srv = cattn_server(args, "--llm", path, "--slots", "4", "--context", "512",
                       "--embed", _minilm())
    poster = Poster(srv.port)
    prompts = [f"Request {i}: tell me about" for i in range(8)]
    ref = {}
    for p in prompts:                                # each prompt served alone
        s, raw = poster.post("/v1/completions", {"prompt": p, "max_tokens": 16,
                                                 "temperature": 0})
        ref[p] = json.loads(raw)["choices"][0]["text"]
    rss_loaded = rss_mib(srv.proc.pid)
    stats = dict(ok=0, wrong=0, five=0, dropped=0, other=0)
    lock = threading.Lock()
    rnd = random.Random(0)
    stop_at = 0.0

    def client(k):
        while time.time() < stop_at:
            drop = rnd.random() < 0.1
            if k % 2:
                i = rnd.randrange(len(corpus))
                body = json.dumps({"input": corpus[i], "encoding_format": "float"}).encode()
                path_ = "/v1/embeddings"
            else:
                pr = prompts[rnd.randrange(len(prompts))]
                body = json.dumps({"prompt": pr, "max_tokens": 16, "temperature": 0,
                                   "stream": True}).encode()
                path_ = "/v1/completions"
            c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=600)
            c.request("POST", path_, body=body, headers={"Content-Type": "application/json"})
            r = c.getresponse()
            if drop:
                r.read(1) if r.status == 200 else None
                c.close()                                           # gone mid-request
                with lock:
                    stats["dropped"] += 1
                continue
            raw = r.read()
            c.close()
            with lock:
                if r.status >= 500:
                    stats["five"] += 1
                elif r.status != 200:
                    stats["other"] += 1
                elif k % 2:
                    v = np.asarray(json.loads(raw)["data"][0]["embedding"], np.float32)
                    stats["ok" if np.array_equal(v, want[i]) else "wrong"] += 1
                else:
                    text = "".join(json.loads(line[6:])["choices"][0]["text"]
                                   for line in raw.decode().split("\n\n")
                                   if line.startswith("data: {"))
                    stats["ok" if text == ref[pr] else "wrong"] += 1
    # warm-up: the same load for a sixth of the time (at most 10 s), so the
    # start is the working set of this load (its batches' buffers, the
    # allocator's arenas), not of an idle server; its responses are checked
    # and counted too
    warm = min(10.0, args.seconds / 6)
    for seconds in (warm, args.seconds):
        stop_at = time.time() + seconds
        with concurrent.futures.ThreadPoolExecutor(32) as ex:
            list(ex.map(client, range(32)))
        time.sleep(1.0)
        if seconds == warm:
            rss0 = rss_mib(srv.proc.pid)
    _, m = get(srv.port, "/metrics")
    busy = [line for line in m.decode().splitlines() if line.startswith("cattn_slots_busy ")]
    rss1 = rss_mib(srv.proc.pid)
    srv.stop()
    return (f"### Holding ({args.seconds} s, concurrency 32, half embeddings / half streamed "
            f"completions, 10% dropped mid-request; {cpu_name()}, {args.threads} threads)\n\n"
            f"completed correct {stats['ok']}, wrong {stats['wrong']}, 5xx {stats['five']}, "
            f"other 4xx {stats['other']}, dropped {stats['dropped']}; at the end "
            f"{busy[0] if busy else '?'}; resident memory {rss_loaded:.0f} MiB loaded, "
            f"{rss0:.0f} MiB after a {warm:.0f} s warm-up of the same load, "
            f"{rss1:.0f} MiB at the end ({(rss1 / rss0 - 1) * 100:+.1f}%).")


def _minilm():
    from cattn.models.sentence import default_model_path
    return default_model_path()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--part", choices=["embed", "gen", "hold"], required=True)
    ap.add_argument("--vocab", help="ggml-vocab-qwen2.gguf (gen, hold; see bench_gguf.py)")
    ap.add_argument("--formats", default="Q8_0,Q4_0")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--conc", default="1,4,16,64", help="embed: the concurrencies")
    ap.add_argument("--llama", action="store_true", help="also llama-cpp-python's server")
    ap.add_argument("--pin", action="store_true", help="taskset the server to cores 0..T-1")
    args = ap.parse_args(argv)
    if args.part in ("gen", "hold") and not args.vocab:
        ap.error("--vocab is needed for the LLM files")
    out = {"embed": part_embed, "gen": part_gen, "hold": part_hold}[args.part](args)
    print("\n" + out)


if __name__ == "__main__":
    main()
