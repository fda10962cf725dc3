"""The NumPy / SciPy baselines the suites time cattn against: what a user
without cattn would write, float32 in, float32 out, numpy.matmul through
OpenBLAS and NumPy's elementwise functions (no hand tuning beyond working in
place on the one score array). The float64 oracle of every op is
cattn.reference; the tests check cattn against it, these are only peers.
softmax_, layer_norm, causal_bias and attention are `cattn bench`'s own
(cattn/cli/bench.py), imported here so both time the same NumPy code.

Shape legend as in the suites: B batch, H (kv) heads, Hq query heads,
L query length, S key length, E head dim (per head), D = E in bench_nn.py.
"""
import math

import numpy as np

from cattn.cli.bench import attention, causal_bias, layer_norm, softmax_  # noqa: F401

try:
    import scipy.special as _sp
except ImportError:  # pragma: no cover
    _sp = None


# ---- rows ----------------------------------------------------------------------------

def scipy_softmax(x):
    """scipy.special.softmax over the last axis."""
    return _sp.softmax(x, axis=-1)


def gelu_erf(x):
    """GELU with erf from scipy.special (torch's default, "none")."""
    return 0.5 * x * (1.0 + _sp.erf(x * x.dtype.type(1 / math.sqrt(2))))


def gelu_tanh(x):
    """GELU's tanh approximation (GPT-2's gelu_new, torch's approximate="tanh")."""
    c = x.dtype.type(math.sqrt(2 / math.pi))
    return 0.5 * x * (1 + np.tanh(c * (x + x.dtype.type(0.044715) * x ** 3)))


def relu(x):
    return np.maximum(x, 0)


ACTIVATIONS = {"relu": relu, "gelu": gelu_erf, "gelu_tanh": gelu_tanh}


# ---- attention -----------------------------------------------------------------------

def gqa_decode(q, k, v, scale=None):
    """Decode with a GQA group's query rows stacked, so K and V are read once:
    q (B, Hq, L, E), k and v (B, H, S, E), Hq a multiple of H."""
    B, Hq, L, E = q.shape
    H = k.shape[1]
    qg = q.reshape(B, H, (Hq // H) * L, E)
    return attention(qg, k, v, scale).reshape(B, Hq, L, v.shape[-1])


# ---- transformer layers (bench_nn.py): torch's parameter names, batch first ------------

def self_attention(sd, p, x, n_heads, bias=None):
    """Multi-head self-attention of x (B, L, E) with torch's MultiheadAttention
    weights sd[p + "in_proj_weight"], ... (prefix p)."""
    B, L, E = x.shape
    D = E // n_heads
    qkv = x @ sd[p + "in_proj_weight"].T + sd[p + "in_proj_bias"]
    q, k, v = qkv.reshape(B, L, 3, n_heads, D).transpose(2, 0, 3, 1, 4)
    ctx = attention(q, k, v, bias=bias).transpose(0, 2, 1, 3).reshape(B, L, E)
    return ctx @ sd[p + "out_proj.weight"].T + sd[p + "out_proj.bias"]


def feed_forward(sd, p, x, activation):
    h = ACTIVATIONS[activation](x @ sd[p + "linear1.weight"].T + sd[p + "linear1.bias"])
    return h @ sd[p + "linear2.weight"].T + sd[p + "linear2.bias"]


def encoder_layer(sd, x, n_heads, norm_first, activation="relu", eps=1e-5, p=""):
    """torch.nn.TransformerEncoderLayer's forward (post-LN, or pre-LN with norm_first)."""
    def ln(y, n):
        return layer_norm(y, sd[p + n + ".weight"], sd[p + n + ".bias"], eps)
    if norm_first:
        x = x + self_attention(sd, p + "self_attn.", ln(x, "norm1"), n_heads)
        return x + feed_forward(sd, p, ln(x, "norm2"), activation)
    x = ln(x + self_attention(sd, p + "self_attn.", x, n_heads), "norm1")
    return ln(x + feed_forward(sd, p, x, activation), "norm2")


class Decoder:
    """One-token decode step of a pre-LN decoder-only stack (cattn.nn.DecoderOnly's
    parameter names) with NumPy K/V caches k, v (n_layers, 1, H, max_len, D)."""

    def __init__(self, sd, n_layers, n_heads, max_len, activation="gelu_tanh", eps=1e-5):
        self.sd, self.n, self.h, self.act, self.eps = sd, n_layers, n_heads, activation, eps
        E = sd["norm.weight"].shape[0]
        self.k = np.zeros((n_layers, 1, n_heads, max_len, E // n_heads), np.float32)
        self.v = np.zeros_like(self.k)

    def step(self, x, pos):
        """x (1, 1, E), the token at position pos (positions < pos are cached)."""
        sd, H = self.sd, self.h
        E = x.shape[-1]
        for i in range(self.n):
            p = f"layers.{i}."
            h = layer_norm(x, sd[p + "norm1.weight"], sd[p + "norm1.bias"], self.eps)
            qkv = h @ sd[p + "self_attn.in_proj_weight"].T + sd[p + "self_attn.in_proj_bias"]
            q, k, v = qkv.reshape(1, 1, 3, H, E // H).transpose(2, 0, 3, 1, 4)
            self.k[i, :, :, pos:pos + 1] = k
            self.v[i, :, :, pos:pos + 1] = v
            a = attention(q, self.k[i, :, :, :pos + 1], self.v[i, :, :, :pos + 1])
            x = x + (a.transpose(0, 2, 1, 3).reshape(1, 1, E) @ sd[p + "self_attn.out_proj.weight"].T
                     + sd[p + "self_attn.out_proj.bias"])
            h = layer_norm(x, sd[p + "norm2.weight"], sd[p + "norm2.bias"], self.eps)
            x = x + feed_forward(sd, p, h, self.act)
        return layer_norm(x, sd["norm.weight"], sd["norm.bias"], self.eps)
