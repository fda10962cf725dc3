"""benchmarks/bench_tokenizer.py — building and running a GGUF file's
tokenizer, against an earlier revision of cattn's own (or llama.cpp's).

What this file is: a script (not a pytest suite). For each vocabulary of
llama.cpp's test files (tools/fetch_ggml_vocab.sh), alternating rounds,
each side in a fresh process:
- build: seconds for GGUFFile(path).tokenizer() (the median of 5 builds);
- peak: the process's peak resident memory growth over the first build (MiB);
- encode: MB/s of UTF-8 text encoded (the multilingual lines and the
  vocabulary's own test cases, 20 passes).
The baseline is `--baseline REV`'s cattn/models/gguf_tokenizer.py (git
show), loaded beside today's package; `--llama-cpp` adds llama.cpp's
tokenize (llama-cpp-python) to the encode column. Ratios are per round,
then the median. What it is not: a test (nothing is asserted).

    python benchmarks/bench_tokenizer.py --baseline 6aa4e6d --rounds 5 qwen2 llama-bpe
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r"""
import importlib.util, json, os, resource, sys, time
sys.path.insert(0, os.path.join(sys.argv[4], "tests", "models"))
from gguf_vocab_cases import inp_cases, multilingual, vocab_path
name, side, baseline = sys.argv[1], sys.argv[2], sys.argv[3]
texts = multilingual() + [t for t, _ in inp_cases(name)]
nbytes = 20 * sum(len(t.encode()) for t in texts)
from cattn.models import GGUFFile
f = GGUFFile(vocab_path(name))
meta, path = f.metadata, f.path
def rss():
    with open("/proc/self/statm") as s:
        return int(s.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
if side == "llama.cpp":
    import llama_cpp
    llm = llama_cpp.Llama(path, vocab_only=True, verbose=False)
    t0 = time.perf_counter()
    for _ in range(20):
        for t in texts:
            llm.tokenize(t.encode(), add_bos=False, special=False)
    print(json.dumps({"encode": nbytes / (time.perf_counter() - t0) / 1e6}))
    sys.exit()
if side == "baseline":
    spec = importlib.util.spec_from_file_location("cattn.models._bench_baseline_tokenizer",
                                                  baseline)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    make = mod.GGUFTokenizer
else:
    from cattn.models import GGUFTokenizer as make
import tokenizers  # noqa: F401  (imported before the measurement on both sides)
before = rss()
peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
tok = make(meta, path)
builds = [time.perf_counter() - t0]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
for _ in range(4):                  # the median of 5 builds
    del tok
    t0 = time.perf_counter()
    tok = make(meta, path)
    builds.append(time.perf_counter() - t0)
build = sorted(builds)[2]
t0 = time.perf_counter()
for _ in range(20):
    for t in texts:
        tok.encode(t, add_special=False)
enc = nbytes / (time.perf_counter() - t0) / 1e6
print(json.dumps({"build": build, "peak": max(peak, peak0) - before, "encode": enc}))
"""


def run(name, side, baseline):
    r = subprocess.run([sys.executable, "-c", CHILD, name, side, baseline, ROOT],
                       capture_output=True, text=True, cwd=HERE)
    if r.returncode:
        raise SystemExit(f"{name} {side}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def cpu():
    try:
        with open("/proc/cpuinfo") as f:
            info = {k.strip(): v for k, v in (line.split(":", 1) for line in f if ":" in line)}
        return (f"{info['model name'].strip()} (family {info['cpu family'].strip()} "
                f"model {info['model'].strip()})")
    except (OSError, KeyError):
        return platform.processor() or platform.machine()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", default=["qwen2"])
    ap.add_argument("--baseline", required=True, help="a git revision of cattn")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--llama-cpp", action="store_true")
    a = ap.parse_args()
    src = subprocess.run(["git", "show", f"{a.baseline}:cattn/models/gguf_tokenizer.py"],
                         capture_output=True, text=True, cwd=ROOT, check=True).stdout
    base = os.path.join(HERE, ".bench_baseline_tokenizer.py")
    with open(base, "w") as f:
        f.write(src)
    print(f"CPU: {cpu()}; baseline {a.baseline}; {a.rounds} alternating rounds, medians\n")
    print("| vocabulary | build s (now / base) | ratio | peak MiB (now / base) | ratio "
          "| encode MB/s (now / base) | ratio |" + (" llama.cpp MB/s | now / llama.cpp |"
                                                    if a.llama_cpp else ""))
    print("|---" * (7 + 2 * a.llama_cpp) + "|")
    try:
        for name in a.names:
            rows = []
            for i in range(a.rounds):
                order = ("now", "baseline") if i % 2 == 0 else ("baseline", "now")
                got = {side: run(name, side, base) for side in order}
                if a.llama_cpp:
                    got["llama.cpp"] = run(name, "llama.cpp", base)
                rows.append(got)

            def med(side, key):
                return statistics.median(r[side][key] for r in rows)

            def ratio(key):
                return statistics.median(r["now"][key] / r["baseline"][key] for r in rows)
            line = (f"| {name} | {med('now', 'build'):.3f} / {med('baseline', 'build'):.3f} | "
                    f"{ratio('build'):.3f} | {med('now', 'peak'):.1f} / "
                    f"{med('baseline', 'peak'):.1f} | {ratio('peak'):.3f} | "
                    f"{med('now', 'encode'):.2f} / {med('baseline', 'encode'):.2f} | "
                    f"{ratio('encode'):.3f} |")
            if a.llama_cpp:
                lc = statistics.median(r["now"]["encode"] / r["llama.cpp"]["encode"] for r in rows)
                line += f" {med('llama.cpp', 'encode'):.2f} | {lc:.3f} |"
            print(line, flush=True)
    finally:
        os.remove(base)


if __name__ == "__main__":
    main()
