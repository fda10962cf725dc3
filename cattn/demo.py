"""cattn.demo — the textbook worked example of self-attention, step by step,
computed by cattn's own kernels (`cattn demo` on the command line).

Three tokens 猫 抓 老鼠 ("cat catches mouse") with 4-dim embeddings X and
projection matrices W^Q, W^K, W^V (d_model = d_k = d_v = 4):

    Q = X W^Q,  K = X W^K,  V = X W^V
    scores = Q K^T,  scaled = scores / sqrt(d_k)
    A = softmax(scaled) (row-wise),  Z = A V

then the same numbers from the fused kernel
(cattn.scaled_dot_product_attention / cattn.attention_weights) and from a
one-head cattn.nn.MultiheadAttention loaded with these weights. torch's
layout is y = x W^T, so in_proj_weight holds [W^Q^T; W^K^T; W^V^T], with zero
biases and an identity out_proj.
"""
import math
import sys
import unicodedata

import numpy as np

from .nn import MultiheadAttention
from .ops import attention_weights, matmul, scaled_dot_product_attention, softmax

TOKENS = ("猫", "抓", "老鼠")
GLOSS = ("cat", "catches", "mouse")
PINYIN = ("mao", "zhua", "laoshu")

X = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1]]
W_Q = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 0, 0, 1], [0, 1, 1, 0]]
W_K = [[0, 1, 0, 1], [1, 0, 1, 0], [0, 1, 1, 0], [1, 0, 0, 1]]
W_V = [[1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 1], [1, 1, 0, 0]]


def _width(s):
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)


def _can_encode(file, text):
    enc = getattr(file, "encoding", None) or "utf-8"
    try:
        text.encode(enc)
        return True
    except (UnicodeEncodeError, LookupError):
        return False


def run(file=None):
    """Print the worked example to `file` (default: the current sys.stdout);
    return the arrays computed
    (X, W_Q, W_K, W_V, Q, K, V, scores, scaled, A, Z, A_fused, Z_fused,
    A_mha, Z_mha), all float32."""
    file = sys.stdout if file is None else file
    f32 = np.float32
    labels = TOKENS if _can_encode(file, "".join(TOKENS)) else PINYIN
    pad = max(_width(t) for t in labels)

    def say(line=""):
        print(line, file=file)

    def show(name, M, rows=labels, fmt="{:8.4f}"):
        say(name)
        for lab, row in zip(rows, np.atleast_2d(M)):
            say("  " + lab + " " * (pad - _width(lab)) + "  [" + " ".join(fmt.format(v) for v in row) + " ]")
        say()

    x = np.array(X, f32)
    wq, wk, wv = (np.array(w, f32) for w in (W_Q, W_K, W_V))
    d_k = wk.shape[1]

    say("Self-attention, the worked example: 3 tokens, d_model = d_k = d_v = 4")
    say("Tokens: " + "  ".join(f"{t} ({g})" for t, g in zip(labels, GLOSS)))
    say()
    show("X, one embedding per token:", x, fmt="{:3.0f}")
    for name, w in (("W^Q", wq), ("W^K", wk), ("W^V", wv)):
        show(f"{name}:", w, rows=[f"r{i}" for i in range(4)], fmt="{:3.0f}")

    q, k, v = matmul(x, wq), matmul(x, wk), matmul(x, wv)
    show("Step 1. Q = X W^Q  (cattn.matmul)", q)
    show("        K = X W^K", k)
    show("        V = X W^V", v)
    scores = matmul(q, k.T)
    show("Step 2. raw scores Q K^T  (row: query token, column: key token)", scores)
    scaled = scores * f32(1.0 / math.sqrt(d_k))
    show(f"Step 3. scaled by 1/sqrt(d_k) = 1/{math.sqrt(d_k):g}", scaled)
    A = softmax(scaled, axis=-1)
    show("Step 4. A = softmax(Q K^T / sqrt(d_k)), row-wise  (cattn.softmax; rows sum to 1)", A)
    Z = matmul(A, v)
    show("Step 5. Z = A V  (cattn.matmul)", Z)

    for i, lab in enumerate(labels):
        j = int(np.argmax(A[i]))
        say(f"  {lab} attends most to {labels[j]} (weight {A[i, j]:.4f})")
    say()

    A_fused = attention_weights(q, k)
    Z_fused = scaled_dot_product_attention(q, k, v)
    say("Fused kernel: cattn.scaled_dot_product_attention(Q, K, V) and cattn.attention_weights(Q, K)")
    say(f"  max |Z_fused - Z| = {np.abs(Z_fused - Z).max():.2e},"
        f"  max |A_fused - A| = {np.abs(A_fused - A).max():.2e}")
    say()

    mha = MultiheadAttention(4, 1, dtype=f32)
    mha.load_state_dict({
        "in_proj_weight": np.concatenate([wq.T, wk.T, wv.T]),  # torch's y = x W^T
        "in_proj_bias": np.zeros(12, f32),
        "out_proj.weight": np.eye(4, dtype=f32),
        "out_proj.bias": np.zeros(4, f32),
    })
    Z_mha, A_mha = mha(x, need_weights=True)
    say("cattn.nn.MultiheadAttention(4, 1) with in_proj_weight = [W^Q^T; W^K^T; W^V^T],")
    say("zero biases and out_proj = identity (one head: Concat(head_1) W^O = Z):")
    show("  Z_mha", Z_mha)
    say(f"  max |Z_mha - Z| = {np.abs(Z_mha - Z).max():.2e},"
        f"  max |A_mha - A| = {np.abs(A_mha - A).max():.2e}")
    return dict(X=x, W_Q=wq, W_K=wk, W_V=wv, Q=q, K=k, V=v, scores=scores, scaled=scaled,
                A=A, Z=Z, A_fused=A_fused, Z_fused=Z_fused, A_mha=A_mha, Z_mha=Z_mha)


if __name__ == "__main__":
    run()
