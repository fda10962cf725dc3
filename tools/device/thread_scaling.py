"""Thread scaling of cattn vs torch on this CPU (issue 26 item 7): one table
per case, rows = thread counts, each cell the median of a few timed calls
after a warm-up, cattn and torch alternating call by call in rounds;
ratio = torch time / cattn time (> 1: cattn faster), the median of the
per-round ratios (decode: transformers time / cattn time).

    python tools/device/thread_scaling.py [--threads 1,2,4,8,16] [--quick] [--out DIR]

Cases: GEMM 2048^3 float32 (cattn.matmul vs torch.matmul); SDPA
(1, 8, 4096, 4096, 64) float32; a MiniLM-shaped encoder (6 layers, d_model
384, 12 heads, ffn 1536, gelu, post-norm, batch 32 x 128 tokens; the same
random weights in cattn.nn.TransformerEncoder and torch.nn.TransformerEncoder,
eval, no_grad); one decode step of the random Qwen2.5-0.5B-shaped model of
benchmarks/bench_llm.py (created there on first use, ~2 GB) with the KV cache
in place after an 8-token prompt, cattn.models.CausalLM float32 and int8 vs
transformers' Qwen2ForCausalLM float32. --quick: small shapes and the
24-layer hidden-64 model of bench_llm's overhead case, for checking the script.

What it is not: a correctness test (it prints one max difference per case
as a sanity check only) or a substitute for the benchmarks' pytest face.
Thread counts above os.cpu_count() are skipped.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def set_threads(n):
    import cattn
    import torch
    cattn.set_num_threads(n)
    torch.set_num_threads(n)


def rounds_of(fns, rounds, calls):
    """{name: [per-round median seconds]}; fns called in turn, round after round."""
    for fn in fns.values():                                  # untimed warm-up
        fn()
    out = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            ts = []
            for _ in range(calls):
                t = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t)
            out[name].append(statistics.median(ts))
    return out


def ratio(num, den):
    return statistics.median(n / d for n, d in zip(num, den))


# ---- the cases: each returns ({name: fn}, note) ------------------------------------------

def gemm(q):
    import cattn
    import torch
    n = 512 if q else 2048
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    d = np.abs(cattn.matmul(a, b) - torch.matmul(ta, tb).numpy()).max()
    return ({"cattn": lambda: cattn.matmul(a, b), "torch": lambda: torch.matmul(ta, tb)},
            f"GEMM {n}x{n}x{n} float32; max |diff| {d:.1e}")


def sdpa(q):
    import cattn
    import torch
    shape = (1, 8, 512 if q else 4096, 512 if q else 4096, 64)
    B, H, L, S, E = shape
    rng = np.random.default_rng(0)
    qq = rng.standard_normal((B, H, L, E)).astype(np.float32)
    k, v = (rng.standard_normal((B, H, S, E)).astype(np.float32) for _ in range(2))
    tq, tk, tv = (torch.from_numpy(x) for x in (qq, k, v))
    F = torch.nn.functional.scaled_dot_product_attention
    d = np.abs(cattn.scaled_dot_product_attention(qq, k, v) - F(tq, tk, tv).numpy()).max()
    return ({"cattn": lambda: cattn.scaled_dot_product_attention(qq, k, v),
             "torch": lambda: F(tq, tk, tv)}, f"SDPA {shape} float32; max |diff| {d:.1e}")


def encoder(q):
    import cattn.nn as cnn
    import torch
    E, H, Fd, n_layers = 384, 12, 1536, (2 if q else 6)
    B, L = (4 if q else 32), 128
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(E, H, Fd, 0.0, "gelu", 1e-12, batch_first=True)
    ten = torch.nn.TransformerEncoder(tl, n_layers, enable_nested_tensor=False).eval()
    cl = cnn.TransformerEncoderLayer(E, H, Fd, 0.0, "gelu", 1e-12, batch_first=True)
    cen = cnn.TransformerEncoder(cl, n_layers)
    cen.load_state_dict({k: v.detach().numpy().copy() for k, v in ten.state_dict().items()})
    if hasattr(cen, "eval"):
        cen.eval()
    x = np.random.default_rng(0).standard_normal((B, L, E)).astype(np.float32)
    tx = torch.from_numpy(x)

    def t_run():
        with torch.no_grad():
            return ten(tx)
    d = np.abs(cen(x) - t_run().numpy()).max()
    return ({"cattn": lambda: cen(x), "torch": t_run},
            f"encoder {n_layers} layers d_model {E}, {H} heads, ffn {Fd}, batch {B} x {L} "
            f"float32; max |diff| {d:.1e}")


def decode_models(q):
    """The decode case's three steps, built once (loading dominates)."""
    import bench_llm as bl
    import torch
    import transformers
    from cattn.models import CausalLM
    path = bl.model_dir(bl.OVERHEAD_DIR, bl.OVERHEAD_SHAPE) if q else bl.model_dir()
    ids = np.random.default_rng(0).integers(1, 256, 8).astype(np.int64)
    hf = transformers.Qwen2ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    fns = {"cattn f32": bl.cattn_decode_step(CausalLM.from_pretrained(path), ids),
           "cattn int8": bl.cattn_decode_step(CausalLM.from_pretrained(path, weights="int8"),
                                              ids),
           "transformers": bl.hf_decode_step(hf, ids)}
    ref = fns["transformers"]().numpy()[0, -1]
    d = np.abs(fns["cattn f32"]()[0, -1] - ref).max() / np.abs(ref).max()
    return fns, (f"one decode step, {'24 x hidden 64' if q else 'Qwen2.5-0.5B'}-shaped random "
                 f"model, prompt 8; f32 logits max rel. diff {d:.1e}")


# ---- driver ------------------------------------------------------------------------------

def table(title, note, rows, decode):
    if decode:
        head = ("| threads | cattn f32 ms | cattn int8 ms | transformers ms | "
                "ratio f32 | ratio int8 |\n|---|---|---|---|---|---|")
    else:
        head = "| threads | cattn ms | torch ms | ratio torch/cattn |\n|---|---|---|---|"
    lines = [f"### {title}", "", note, "", head]
    for n, m in rows:
        med = {k: 1e3 * statistics.median(v) for k, v in m.items()}
        if decode:
            t = m["transformers"]
            lines.append(f"| {n} | {med['cattn f32']:.2f} | {med['cattn int8']:.2f} | "
                         f"{med['transformers']:.2f} | {ratio(t, m['cattn f32']):.2f}x | "
                         f"{ratio(t, m['cattn int8']):.2f}x |")
        else:
            lines.append(f"| {n} | {med['cattn']:.2f} | {med['torch']:.2f} | "
                         f"{ratio(m['torch'], m['cattn']):.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=None, help="default 5 (--quick 3)")
    ap.add_argument("--cases", default="gemm,sdpa,encoder,decode")
    ap.add_argument("--out", default=os.environ.get("OUT") or "device-out")
    args = ap.parse_args(argv)
    import cattn
    import torch
    cores = os.cpu_count() or 1
    threads = [n for n in map(int, args.threads.split(",")) if n <= cores]
    skipped = [n for n in map(int, args.threads.split(",")) if n > cores]
    rounds = args.rounds or (3 if args.quick else 5)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "thread_scaling.md")
    with open(path, "w") as f:
        f.write(f"# thread scaling, cattn {getattr(cattn, '__version__', '?')} vs torch "
                f"{torch.__version__}, {cores} cores, {time.strftime('%Y-%m-%d %H:%M')}"
                f"{', skipped threads ' + str(skipped) + ' (> cores)' if skipped else ''}; "
                f"medians of {rounds} rounds\n\n")
    builders = {"gemm": (gemm, "GEMM", 1), "sdpa": (sdpa, "SDPA", 1),
                "encoder": (encoder, "MiniLM-shaped encoder", 1),
                "decode": (decode_models, "decode step", 3)}
    for case in args.cases.split(","):
        build, title, calls = builders[case]
        t0 = time.perf_counter()
        set_threads(max(threads))
        fns, note = build(args.quick)
        rows = []
        for n in threads:
            set_threads(n)
            rows.append((n, rounds_of(fns, rounds, calls)))
        del fns
        text = table(title, note + f"; {time.perf_counter() - t0:.0f} s", rows,
                     case == "decode")
        print(text, flush=True)
        with open(path, "a") as f:
            f.write(text + "\n")
    print(f"written: {path}")


if __name__ == "__main__":
    main()
