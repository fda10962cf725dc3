"""Transformer layers: cattn.nn vs torch.nn vs a NumPy transcription, same run.

    pytest benchmarks/bench_nn.py --benchmark-json=nn.json
    python benchmarks/bench_nn.py nn.json          # medians and ratios

(Where OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are set, unset them for the
benchmark command only.) float32, 2 threads for every library. Each test
times one library's calls as a block after ~0.3 s of untimed warm-up
(OpenBLAS / OpenMP threads keep spinning after a burst of calls and slow the
next library down).

Cases
- encoder_layer: TransformerEncoderLayer(d_model=512, nhead=8,
  dim_feedforward=2048, relu), post-LN and pre-LN, at (B=8, L=128) and
  (B=1, L=512). torch: nn.TransformerEncoderLayer in eval() under
  inference_mode (its native "fast path"), same weights.
- decode_step: one new token through a 6-layer pre-LN decoder-only stack
  (d_model=512, nhead=8, ff=2048, tanh GELU) with 1024 cached positions:
  cattn.nn.DecoderOnly with cattn.KVCache per layer vs a small torch
  decoder-only with its own K/V cache tensors and F.scaled_dot_product_attention.
- numpy: a float32 NumPy transcription of cattn.reference's layer functions
  (numpy.matmul through OpenBLAS, np.exp softmax, batched over heads), for the
  encoder layers and the decode step (with NumPy K/V caches).
- reference (encoder layers only): cattn.reference.transformer_encoder_layer
  itself, the float64 per-head oracle from the paper's equations.

Ratios are other library's median / cattn's median (> 1: cattn is faster).
"""
import json
import math
import sys
import time

import numpy as np
import pytest

import cattn
from cattn import nn

torch = pytest.importorskip("torch") if __name__ != "__main__" else None

THREADS = 2
E, H, FF = 512, 8, 2048
D = E // H
EPS = 1e-5
WARMUP_S = 0.3
LIBS = ("cattn", "torch", "numpy")
ENC_LIBS = LIBS + ("reference",)


@pytest.fixture(scope="module", autouse=True)
def _threads():
    cattn.set_num_threads(THREADS)
    prev = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    yield
    torch.set_num_threads(prev)


def warm(fn, seconds=WARMUP_S):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()


# ---------------------------------------------------------------- NumPy float32 transcription


def np_layer_norm(x, w, b, eps=EPS):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def np_softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_act(name, x):
    if name == "relu":
        return np.maximum(x, 0)
    c = np.float32(math.sqrt(2 / math.pi))
    return 0.5 * x * (1 + np.tanh(c * (x + np.float32(0.044715) * x ** 3)))  # gelu_tanh


def np_self_attention(sd, p, x, causal_add=None):
    B, L, _ = x.shape
    qkv = x @ sd[p + "in_proj_weight"].T + sd[p + "in_proj_bias"]
    q, k, v = qkv.reshape(B, L, 3, H, D).transpose(2, 0, 3, 1, 4)
    s = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1 / math.sqrt(D))
    if causal_add is not None:
        s = s + causal_add
    ctx = (np_softmax(s) @ v).transpose(0, 2, 1, 3).reshape(B, L, E)
    return ctx @ sd[p + "out_proj.weight"].T + sd[p + "out_proj.bias"]


def np_ff(sd, p, x, act):
    h = np_act(act, x @ sd[p + "linear1.weight"].T + sd[p + "linear1.bias"])
    return h @ sd[p + "linear2.weight"].T + sd[p + "linear2.bias"]


def np_encoder_layer(sd, x, norm_first, act="relu", p=""):
    def ln(y, n):
        return np_layer_norm(y, sd[p + n + ".weight"], sd[p + n + ".bias"])
    if norm_first:
        x = x + np_self_attention(sd, p + "self_attn.", ln(x, "norm1"))
        return x + np_ff(sd, p, ln(x, "norm2"), act)
    x = ln(x + np_self_attention(sd, p + "self_attn.", x), "norm1")
    return ln(x + np_ff(sd, p, x, act), "norm2")


class NumpyDecoder:
    """Decode step of the pre-LN stack with NumPy K/V caches (1 token)."""

    def __init__(self, sd, n_layers, max_len):
        self.sd, self.n = sd, n_layers
        self.k = np.zeros((n_layers, 1, H, max_len, D), np.float32)
        self.v = np.zeros_like(self.k)

    def step(self, x, pos):
        sd = self.sd
        for i in range(self.n):
            p = f"layers.{i}."
            h = np_layer_norm(x, sd[p + "norm1.weight"], sd[p + "norm1.bias"])
            qkv = h @ sd[p + "self_attn.in_proj_weight"].T + sd[p + "self_attn.in_proj_bias"]
            q, k, v = qkv.reshape(1, 1, 3, H, D).transpose(2, 0, 3, 1, 4)
            self.k[i, :, :, pos:pos + 1] = k
            self.v[i, :, :, pos:pos + 1] = v
            K, V = self.k[i, :, :, :pos + 1], self.v[i, :, :, :pos + 1]
            a = np_softmax((q @ K.transpose(0, 1, 3, 2)) * np.float32(1 / math.sqrt(D))) @ V
            x = x + (a.transpose(0, 2, 1, 3).reshape(1, 1, E) @ sd[p + "self_attn.out_proj.weight"].T
                     + sd[p + "self_attn.out_proj.bias"])
            h = np_layer_norm(x, sd[p + "norm2.weight"], sd[p + "norm2.bias"])
            x = x + np_ff(sd, p, h, "gelu_tanh")
        return np_layer_norm(x, sd["norm.weight"], sd["norm.bias"])


# ---------------------------------------------------------------- torch decoder-only


class TorchDecoder:
    """The same pre-LN decoder-only stack in torch, with its own K/V cache."""

    def __init__(self, sd, n_layers, max_len):
        self.P = {k: torch.from_numpy(v) for k, v in sd.items()}
        self.n = n_layers
        self.k = torch.zeros(n_layers, 1, H, max_len, D)
        self.v = torch.zeros_like(self.k)

    def forward(self, x, pos):
        """x (1, T, E) at positions pos..pos+T-1 (T > 1 only from pos 0)."""
        F, P = torch.nn.functional, self.P
        B, T, _ = x.shape
        for i in range(self.n):
            p = f"layers.{i}."
            h = F.layer_norm(x, (E,), P[p + "norm1.weight"], P[p + "norm1.bias"], EPS)
            qkv = F.linear(h, P[p + "self_attn.in_proj_weight"], P[p + "self_attn.in_proj_bias"])
            q, k, v = qkv.view(B, T, 3, H, D).permute(2, 0, 3, 1, 4)
            self.k[i, :, :, pos:pos + T] = k
            self.v[i, :, :, pos:pos + T] = v
            a = F.scaled_dot_product_attention(q, self.k[i, :, :, :pos + T],
                                               self.v[i, :, :, :pos + T], is_causal=T > 1)
            x = x + F.linear(a.transpose(1, 2).reshape(B, T, E),
                             P[p + "self_attn.out_proj.weight"], P[p + "self_attn.out_proj.bias"])
            h = F.layer_norm(x, (E,), P[p + "norm2.weight"], P[p + "norm2.bias"], EPS)
            x = x + F.linear(F.gelu(F.linear(h, P[p + "linear1.weight"], P[p + "linear1.bias"]),
                                    approximate="tanh"),
                             P[p + "linear2.weight"], P[p + "linear2.bias"])
        return F.layer_norm(x, (E,), P["norm.weight"], P["norm.bias"], EPS)


# ---------------------------------------------------------------- encoder layer

ENC_CASES = [(8, 128, False), (8, 128, True), (1, 512, False), (1, 512, True)]


def enc_flops(B, L):
    tokens = B * L
    gemm = 2 * tokens * E * (3 * E + E + 2 * FF)
    attn = 4 * B * H * L * L * D
    return gemm + attn


@pytest.fixture(scope="module")
def enc_setup():
    cache = {}

    def get(B, L, norm_first):
        key = (B, L, norm_first)
        if key not in cache:
            torch.manual_seed(0)
            tm = torch.nn.TransformerEncoderLayer(E, H, FF, dropout=0.0, batch_first=True,
                                                  norm_first=norm_first).eval()
            with torch.no_grad():  # non-trivial biases and norms
                for name, prm in tm.named_parameters():
                    if prm.dim() == 1:
                        prm.copy_((1 if "norm" in name and name.endswith("weight") else 0)
                                  + 0.1 * torch.randn(prm.shape))
            sd = {k: v.numpy() for k, v in tm.state_dict().items()}
            cm = nn.TransformerEncoderLayer(E, H, FF, norm_first=norm_first)
            cm.load_state_dict(sd)
            x = np.random.default_rng(1).standard_normal((B, L, E)).astype(np.float32)
            cache[key] = (tm, cm, sd, x)
        return cache[key]
    return get


@pytest.mark.parametrize("lib", ENC_LIBS)
@pytest.mark.parametrize("B,L,norm_first", ENC_CASES,
                         ids=[f"{'pre' if nf else 'post'}LN-B{B}-L{L}" for B, L, nf in ENC_CASES])
def test_encoder_layer(benchmark, enc_setup, B, L, norm_first, lib):
    tm, cm, sd, x = enc_setup(B, L, norm_first)
    benchmark.group = f"encoder_layer {'pre' if norm_first else 'post'}-LN B={B} L={L}"
    benchmark.extra_info.update(lib=lib, flops=enc_flops(B, L))
    if lib == "cattn":
        fn = lambda: cm(x)  # noqa: E731
    elif lib == "torch":
        xt = torch.from_numpy(x)

        def fn():
            with torch.inference_mode():
                return tm(xt)
    elif lib == "numpy":
        fn = lambda: np_encoder_layer(sd, x, norm_first)  # noqa: E731
    else:
        from cattn import reference
        fn = lambda: reference.transformer_encoder_layer(sd, x, H, norm_first=norm_first)  # noqa: E731
    warm(fn)
    out = benchmark(fn)
    out = out.numpy() if lib == "torch" else out
    with torch.inference_mode():
        expect = tm(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(out, expect, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- decode step

N_LAYERS, CACHED = 6, 1024


@pytest.fixture(scope="module")
def dec_setup():
    model = nn.DecoderOnly(E, H, N_LAYERS, FF, activation="gelu_tanh", seed=0)
    rng = np.random.default_rng(2)
    for name, prm in model.named_parameters():
        if prm.ndim == 1:
            prm[...] = (1 if "norm" in name and name.endswith("weight") else 0) \
                + 0.1 * rng.standard_normal(prm.shape)
    prompt = rng.standard_normal((1, CACHED, E)).astype(np.float32)
    token = rng.standard_normal((1, 1, E)).astype(np.float32)
    full = model(np.concatenate([prompt, token], axis=1))[:, -1:]  # the step's expected output
    return model, model.state_dict(), prompt, token, full


def decode_flops():
    per_layer = 2 * E * (3 * E + E + 2 * FF) + 4 * H * (CACHED + 1) * D
    return N_LAYERS * per_layer


@pytest.mark.parametrize("lib", LIBS)
def test_decode_step(benchmark, dec_setup, lib):
    model, sd, prompt, token, full = dec_setup
    benchmark.group = f"decode_step {N_LAYERS}x{E} cached={CACHED}"
    benchmark.extra_info.update(lib=lib, flops=decode_flops())
    if lib == "cattn":
        cache = model.new_cache(1, CACHED + 1)
        model(prompt, cache=cache)

        def fn():
            for c in cache:
                c.length = CACHED  # re-run the same step: overwrite position CACHED
            return model(token, cache=cache)
    elif lib == "torch":
        tdec = TorchDecoder(sd, N_LAYERS, CACHED + 1)
        tt = torch.from_numpy(token)
        with torch.inference_mode():
            tdec.forward(torch.from_numpy(prompt), 0)

        def fn():
            with torch.inference_mode():
                return tdec.forward(tt, CACHED)
    else:
        ndec = NumpyDecoder(sd, N_LAYERS, CACHED + 1)
        tdec = TorchDecoder(sd, N_LAYERS, CACHED + 1)
        with torch.inference_mode():
            tdec.forward(torch.from_numpy(prompt), 0)
        ndec.k[...] = tdec.k.numpy()
        ndec.v[...] = tdec.v.numpy()
        fn = lambda: ndec.step(token, CACHED)  # noqa: E731
    warm(fn)
    out = benchmark(fn)
    out = out.numpy() if lib == "torch" else out
    np.testing.assert_allclose(out, full, rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- report


def report(path):
    with open(path) as f:
        data = json.load(f)
    groups = {}
    for b in data["benchmarks"]:
        info = b.get("extra_info", {})
        g = groups.setdefault(b["group"], {"flops": info.get("flops")})
        g[info["lib"]] = (b["stats"]["median"], b["stats"]["iqr"])
    head = ["case", "cattn ms", "torch ms", "numpy ms", "reference ms", "cattn GF/s",
            "torch GF/s", "vs torch", "vs numpy", "vs reference"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, g in groups.items():
        c = g.get("cattn", (None,))[0]
        def ms(lib):
            return f"{g[lib][0] * 1e3:.2f} ±{g[lib][1] * 1e3 / 2:.2f}" if lib in g else "-"
        def gf(lib):
            return f"{g['flops'] / g[lib][0] / 1e9:.0f}" if lib in g and g["flops"] else "-"
        def ratio(lib):
            return f"{g[lib][0] / c:.2f}x" if lib in g and c else "-"
        print("| " + " | ".join([name, ms("cattn"), ms("torch"), ms("numpy"), ms("reference"),
                                 gf("cattn"), gf("torch"), ratio("torch"), ratio("numpy"),
                                 ratio("reference")]) + " |")


if __name__ == "__main__":
    report(sys.argv[1])
