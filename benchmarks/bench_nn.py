"""Transformer layers: cattn.nn vs torch.nn vs a NumPy transcription, same run.

    pytest benchmarks/bench_nn.py --benchmark-json=nn.json
    python benchmarks/report.py nn.json          # medians and ratios

float32, 2 threads for every library, each library timed as a block by
conftest's `bench` (extra_info: lib, flops per call, shape = [B, L, E, H, FF]
for the encoder layer, [layers, E, H, FF, cached] for the decode step).

Cases (E model width, H heads, D = E / H head dim, FF feed-forward width)
- encoder_layer: TransformerEncoderLayer(d_model=512, nhead=8,
  dim_feedforward=2048, relu), post-LN and pre-LN, at (B=8, L=128) and
  (B=1, L=512). torch: nn.TransformerEncoderLayer in eval() under
  inference_mode (its native "fast path"), same weights.
- decode_step: one new token through a 6-layer pre-LN decoder-only stack
  (d_model=512, nhead=8, ff=2048, tanh GELU) with 1024 cached positions:
  cattn.nn.DecoderOnly with cattn.KVCache per layer vs a small torch
  decoder-only with its own K/V cache tensors and F.scaled_dot_product_attention.
- numpy: baselines.encoder_layer / baselines.Decoder, a float32 NumPy
  transcription (numpy.matmul through OpenBLAS, np.exp softmax, batched over
  heads), for the encoder layers and the decode step (with NumPy K/V caches).
- reference (encoder layers only): cattn.reference.transformer_encoder_layer
  itself, the float64 per-head oracle from the paper's equations.
"""
import numpy as np
import pytest

import baselines
import cattn
from cattn import nn

torch = pytest.importorskip("torch")

E, H, FF = 512, 8, 2048
D = E // H
EPS = 1e-5
LIBS = ("cattn", "torch", "numpy")
ENC_LIBS = LIBS + ("reference",)


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
def test_encoder_layer(bench, enc_setup, B, L, norm_first, lib):
    tm, cm, sd, x = enc_setup(B, L, norm_first)
    if lib == "cattn":
        fn = lambda: cm(x)  # noqa: E731
    elif lib == "torch":
        xt = torch.from_numpy(x)

        def fn():
            with torch.inference_mode():
                return tm(xt)
    elif lib == "numpy":
        fn = lambda: baselines.encoder_layer(sd, x, H, norm_first, eps=EPS)  # noqa: E731
    else:
        from cattn import reference
        fn = lambda: reference.transformer_encoder_layer(sd, x, H, norm_first=norm_first)  # noqa: E731
    out = bench(fn, group=f"encoder_layer {'pre' if norm_first else 'post'}-LN B={B} L={L}",
                lib=lib, dtype="float32", shape=[B, L, E, H, FF], flops=enc_flops(B, L))
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
def test_decode_step(bench, dec_setup, lib):
    model, sd, prompt, token, full = dec_setup
    if lib == "cattn":
        cache = model.new_cache(1, CACHED + 1)
        model(prompt, cache=cache)

        def fn():      # re-run the same step: views of the caches at CACHED positions
            return model(token, cache=[cattn.KVCache.of(c.k, c.v, CACHED) for c in cache])
    elif lib == "torch":
        tdec = TorchDecoder(sd, N_LAYERS, CACHED + 1)
        tt = torch.from_numpy(token)
        with torch.inference_mode():
            tdec.forward(torch.from_numpy(prompt), 0)

        def fn():
            with torch.inference_mode():
                return tdec.forward(tt, CACHED)
    else:
        ndec = baselines.Decoder(sd, N_LAYERS, H, CACHED + 1, activation="gelu_tanh", eps=EPS)
        tdec = TorchDecoder(sd, N_LAYERS, CACHED + 1)
        with torch.inference_mode():
            tdec.forward(torch.from_numpy(prompt), 0)
        ndec.k[...] = tdec.k.numpy()
        ndec.v[...] = tdec.v.numpy()
        fn = lambda: ndec.step(token, CACHED)  # noqa: E731
    out = bench(fn, group=f"decode_step {N_LAYERS}x{E} cached={CACHED}", lib=lib,
                dtype="float32", shape=[N_LAYERS, E, H, FF, CACHED], flops=decode_flops())
    out = out.numpy() if lib == "torch" else out
    np.testing.assert_allclose(out, full, rtol=1e-3, atol=1e-3)
