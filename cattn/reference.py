"""cattn.reference — a float64 NumPy oracle for every cattn op, written
straight from the formulas. Slow on purpose: tests and docs compare against
it; no forward path of cattn calls it.

Shape legend (cattn's ops): B batch, Hq query heads, H kv heads, L queries,
S keys, E is the head dim (of queries and keys), Ev the value dim; M/N/K
for matrix products. The layer and model references below (mha, bert)
follow cattn.nn's legend instead: E the embedding dim (torch's embed_dim),
D = E / H the head dim.
"""
import math

import numpy as np
from scipy import special as _sp


def _f64(x):
    return np.asarray(x, dtype=np.float64)


def matmul(a, b):
    return np.matmul(_f64(a), _f64(b))


def linear(x, weight, bias=None, activation=None):
    y = _f64(x) @ _f64(weight).T
    if bias is not None:
        y = y + _f64(bias)
    return ACTIVATIONS[activation](y)


def softmax(x, axis=-1):
    """exp(x - max) / sum; a row of all -inf gives 0 (not NaN)."""
    x = _f64(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(s == 0, 0.0, e / np.where(s == 0, 1.0, s))


def log_softmax(x, axis=-1):
    """x - max - log(sum exp(x - max)); a row of all -inf gives -inf."""
    x = _f64(x)
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    s = np.sum(np.exp(x - m), axis=axis, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s == 0, -np.inf, x - m - np.log(s))


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis."""
    x = _f64(x)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    if weight is not None:
        y = y * _f64(weight)
    if bias is not None:
        y = y + _f64(bias)
    return y


def rms_norm(x, weight=None, eps=1e-6):
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    x = _f64(x)
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)
    return y * _f64(weight) if weight is not None else y


def relu(x):
    x = _f64(x)
    return np.where(x < 0, 0.0, x)


def gelu(x):
    x = _f64(x)
    return 0.5 * x * (1.0 + _sp.erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    x = _f64(x)
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def silu(x):
    x = _f64(x)
    return x * _sp.expit(x)


ACTIVATIONS = {None: lambda x: x, "none": lambda x: x, "relu": relu, "gelu": gelu,
               "gelu_tanh": gelu_tanh, "silu": silu}


def causal_mask(L, S, alignment="upper_left"):
    """(L, S) bool, True = may attend. upper_left: row i sees keys 0..i;
    lower_right: row i sees keys 0..i+S-L."""
    i = np.arange(L)[:, None]
    j = np.arange(S)[None, :]
    shift = 0 if alignment == "upper_left" else S - L
    return j <= i + shift


def attention_weights(query, key, attn_mask=None, is_causal=False, scale=None,
                      enable_gqa=False, causal_alignment="upper_left"):
    """A = softmax(Q K^T * scale + mask): (..., Hq, L, S) in float64.

    Masked entries get exactly 0 weight even if the score is NaN; a row with
    no key to attend to is all zeros."""
    q, k = _f64(query), _f64(key)
    E = q.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else scale
    if enable_gqa and q.ndim >= 3 and q.shape[-3] != k.shape[-3]:
        k = np.repeat(k, q.shape[-3] // k.shape[-3], axis=-3)
    L, S = q.shape[-2], k.shape[-2]
    with np.errstate(invalid="ignore", over="ignore"):
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    allowed = np.ones(s.shape, dtype=bool)
    if is_causal:
        allowed = allowed & causal_mask(L, S, causal_alignment)
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        if m.dtype == np.bool_:
            allowed = allowed & m
        else:
            s = s + _f64(m)
            allowed = allowed & ~np.isneginf(np.broadcast_to(_f64(m), s.shape))
    allowed = np.broadcast_to(allowed, s.shape)
    s = np.where(allowed, s, -np.inf)
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), 0.0, m)
    with np.errstate(invalid="ignore"):
        e = np.where(allowed, np.exp(s - m), 0.0)
    tot = e.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        # masked entries stay exactly 0 even when the row's sum is NaN
        return np.where(allowed & (tot != 0), e / np.where(tot == 0, 1.0, tot), 0.0)


def scaled_dot_product_attention(query, key, value, attn_mask=None, is_causal=False,
                                 scale=None, enable_gqa=False,
                                 causal_alignment="upper_left"):
    """Z = A V with A from attention_weights: (..., Hq, L, Ev) in float64.
    Values at keys with zero weight do not contribute (NaN there is ignored)."""
    A = attention_weights(query, key, attn_mask, is_causal, scale, enable_gqa,
                          causal_alignment)
    v = _f64(value)
    if enable_gqa and v.ndim >= 3 and A.shape[-3] != v.shape[-3]:
        v = np.repeat(v, A.shape[-3] // v.shape[-3], axis=-3)
    # Only keys with nonzero weight contribute: a NaN / inf value at a key a
    # row does not attend to must not reach that row (NaN * 0 must not leak,
    # neither through a column another row uses). Finite values go through
    # one matmul; each non-finite value is added only to the rows that give
    # its key a nonzero weight.
    v_b = np.broadcast_to(v, A.shape[:-2] + v.shape[-2:])
    finite = np.isfinite(v_b)
    out = np.matmul(A, np.where(finite, v_b, 0.0))
    for idx in zip(*np.nonzero(~finite)):
        b, s, j = idx[:-2], idx[-2], idx[-1]
        a = A[b + (slice(None), s)]
        with np.errstate(invalid="ignore"):
            out[b + (slice(None), j)] += np.where(a != 0, a * v_b[idx], 0.0)
    return out


# ----------------------------------------------------------------------------
# Transformer layers: the oracle of cattn.nn, from "Attention Is All You Need"
# (section 3), one head at a time, in float64. Parameters come from a state
# dict with torch's names and layout (y = x W^T + b); `prefix` selects a
# sub-module ("layers.0.self_attn."). Activations are batch-first:
# query (B, L, E), key (B, S, kdim), value (B, S, vdim). Masks follow
# torch.nn.MultiheadAttention: key_padding_mask (B, S) and attn_mask (L, S)
# or (B*H, L, S), bool True = not allowed, float added to the scores;
# is_causal: query i sees keys 0..i. A query with no allowed key gets zeros.


def _param(sd, name):
    v = sd.get(name)
    return None if v is None else _f64(v)


def _additive_mask(m):
    m = np.asarray(m)
    return np.where(m, -np.inf, 0.0) if m.dtype == np.bool_ else _f64(m)


def multihead_attention(sd, query, key, value, num_heads, key_padding_mask=None,
                        attn_mask=None, is_causal=False, prefix=""):
    """MultiHead(Q, K, V) = Concat(head_1..head_H) W^O,
    head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(d_k) + mask) V W_i^V.
    Returns (out (B, L, E), weights (B, H, L, S))."""
    q, k, v = _f64(query), _f64(key), _f64(value)
    B, L, E = q.shape
    S = k.shape[1]
    H = num_heads
    D = E // H
    W = _param(sd, prefix + "in_proj_weight")
    if W is not None:
        Wq, Wk, Wv = W[:E], W[E:2 * E], W[2 * E:]
    else:
        Wq, Wk, Wv = (_param(sd, prefix + n + "_proj_weight") for n in "qkv")
    b = _param(sd, prefix + "in_proj_bias")
    b = np.zeros(3 * E) if b is None else b
    add = np.zeros((B, H, L, S))
    if is_causal:
        add = add + np.where(causal_mask(L, S), 0.0, -np.inf)
    elif attn_mask is not None:
        m = _additive_mask(attn_mask)
        add = add + (m.reshape(B, H, L, S) if m.ndim == 3 else m)
    if key_padding_mask is not None:
        add = add + _additive_mask(key_padding_mask)[:, None, None, :]
    A = np.zeros((B, H, L, S))
    heads = []
    for i in range(H):
        rows = slice(i * D, (i + 1) * D)
        Qi = q @ Wq[rows].T + b[rows]                       # Q W_i^Q   (B, L, D)
        Ki = k @ Wk[rows].T + b[E:][rows]                   # K W_i^K   (B, S, D)
        Vi = v @ Wv[rows].T + b[2 * E:][rows]               # V W_i^V   (B, S, D)
        A[:, i] = softmax(Qi @ Ki.transpose(0, 2, 1) / math.sqrt(D) + add[:, i])
        heads.append(A[:, i] @ Vi)
    out = linear(np.concatenate(heads, axis=-1), sd[prefix + "out_proj.weight"],
                 sd.get(prefix + "out_proj.bias"))
    return out, A


def _norm(sd, prefix, name, x, eps):
    return layer_norm(x, _param(sd, prefix + name + ".weight"),
                      _param(sd, prefix + name + ".bias"), eps)


def _feed_forward(sd, prefix, x, activation):
    """FFN(x) = act(x W_1 + b_1) W_2 + b_2."""
    h = linear(x, sd[prefix + "linear1.weight"], sd.get(prefix + "linear1.bias"), activation)
    return linear(h, sd[prefix + "linear2.weight"], sd.get(prefix + "linear2.bias"))


def transformer_encoder_layer(sd, src, nhead, activation="relu", layer_norm_eps=1e-5,
                              norm_first=False, src_mask=None, src_key_padding_mask=None,
                              is_causal=False, prefix=""):
    """Post-LN (the paper): x = LN(x + SA(x)); x = LN(x + FFN(x)).
    Pre-LN (norm_first):   x = x + SA(LN(x)); x = x + FFN(LN(x))."""
    x = _f64(src)

    def sa(h):
        return multihead_attention(sd, h, h, h, nhead, src_key_padding_mask, src_mask,
                                   is_causal, prefix + "self_attn.")[0]

    if norm_first:
        x = x + sa(_norm(sd, prefix, "norm1", x, layer_norm_eps))
        return x + _feed_forward(sd, prefix, _norm(sd, prefix, "norm2", x, layer_norm_eps),
                                 activation)
    x = _norm(sd, prefix, "norm1", x + sa(x), layer_norm_eps)
    return _norm(sd, prefix, "norm2", x + _feed_forward(sd, prefix, x, activation),
                 layer_norm_eps)


def transformer_decoder_layer(sd, tgt, memory, nhead, activation="relu", layer_norm_eps=1e-5,
                              norm_first=False, tgt_mask=None, memory_mask=None,
                              tgt_key_padding_mask=None, memory_key_padding_mask=None,
                              tgt_is_causal=False, memory_is_causal=False, prefix=""):
    """Masked self-attention, attention over the encoder output `memory`, FFN;
    each a residual block, post-LN or pre-LN."""
    x, mem = _f64(tgt), _f64(memory)

    def sa(h):
        return multihead_attention(sd, h, h, h, nhead, tgt_key_padding_mask, tgt_mask,
                                   tgt_is_causal, prefix + "self_attn.")[0]

    def ca(h):
        return multihead_attention(sd, h, mem, mem, nhead, memory_key_padding_mask,
                                   memory_mask, memory_is_causal, prefix + "multihead_attn.")[0]

    eps = layer_norm_eps
    if norm_first:
        x = x + sa(_norm(sd, prefix, "norm1", x, eps))
        x = x + ca(_norm(sd, prefix, "norm2", x, eps))
        return x + _feed_forward(sd, prefix, _norm(sd, prefix, "norm3", x, eps), activation)
    x = _norm(sd, prefix, "norm1", x + sa(x), eps)
    x = _norm(sd, prefix, "norm2", x + ca(x), eps)
    return _norm(sd, prefix, "norm3", x + _feed_forward(sd, prefix, x, activation), eps)


def transformer_encoder(sd, src, nhead, num_layers, layer_norm_eps=1e-5, **layer_kw):
    """num_layers encoder layers ("layers.{i}."), then "norm." if sd has it."""
    x = _f64(src)
    for i in range(num_layers):
        x = transformer_encoder_layer(sd, x, nhead, layer_norm_eps=layer_norm_eps,
                                      prefix=f"layers.{i}.", **layer_kw)
    return _norm(sd, "", "norm", x, layer_norm_eps) if "norm.weight" in sd else x


def transformer_decoder(sd, tgt, memory, nhead, num_layers, layer_norm_eps=1e-5, **layer_kw):
    """num_layers decoder layers ("layers.{i}."), then "norm." if sd has it."""
    x = _f64(tgt)
    for i in range(num_layers):
        x = transformer_decoder_layer(sd, x, memory, nhead, layer_norm_eps=layer_norm_eps,
                                      prefix=f"layers.{i}.", **layer_kw)
    return _norm(sd, "", "norm", x, layer_norm_eps) if "norm.weight" in sd else x


# ---- BERT sentence encoder (cattn.models), float64 -------------------------------
# Written from the Hugging Face BertModel formulas with separate query / key /
# value projections (cattn.models stacks them), plain NumPy softmax and erf GELU.
# weights: {name: array} with Hugging Face names (as in model.safetensors);
# config: dict of config.json. Legend: B batch, L tokens, E hidden, H heads, D = E / H.

def bert_forward(weights, config, input_ids, attention_mask=None, token_type_ids=None,
                 output_attentions=False):
    """Last hidden state (B, L, E) float64 (and per-layer (B, H, L, L)
    attention probabilities with output_attentions)."""
    anchor = "embeddings.word_embeddings.weight"
    prefix = next(k[:-len(anchor)] for k in weights if k.endswith(anchor))  # "" or "bert."
    w = {k[len(prefix):]: _f64(v) for k, v in weights.items() if k.startswith(prefix)}
    ids = np.asarray(input_ids)
    B, L = ids.shape
    E, H = config["hidden_size"], config["num_attention_heads"]
    D, eps = E // H, config["layer_norm_eps"]
    am = np.ones((B, L), bool) if attention_mask is None else np.asarray(attention_mask, bool)
    tt = np.zeros((B, L), np.int64) if token_type_ids is None else np.asarray(token_type_ids)
    x = (w["embeddings.word_embeddings.weight"][ids]
         + w["embeddings.token_type_embeddings.weight"][tt]
         + w["embeddings.position_embeddings.weight"][np.arange(L)][None])
    x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
    atts = []
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."

        def lin(name, h):
            return h @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        def heads(h):  # (B, L, E) -> (B, H, L, D)
            return h.reshape(B, L, H, D).transpose(0, 2, 1, 3)

        q = heads(lin("attention.self.query", x))
        k = heads(lin("attention.self.key", x))
        v = heads(lin("attention.self.value", x))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D)
        s = np.where(am[:, None, None, :], s, -np.inf)
        a = softmax(s, axis=-1)                                  # (B, H, L, L)
        atts.append(a)
        ctx = (a @ v).transpose(0, 2, 1, 3).reshape(B, L, E)
        x = layer_norm(x + lin("attention.output.dense", ctx),
                       w[p + "attention.output.LayerNorm.weight"],
                       w[p + "attention.output.LayerNorm.bias"], eps)
        f = lin("output.dense", gelu(lin("intermediate.dense", x)))
        x = layer_norm(x + f, w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], eps)
    return (x, atts) if output_attentions else x


def sentence_embedding(weights, config, input_ids, attention_mask=None, normalize=True):
    """Mean of bert_forward's hidden states over real tokens, L2-normalized: (B, E)."""
    ids = np.asarray(input_ids)
    am = np.ones(ids.shape, bool) if attention_mask is None else np.asarray(attention_mask, bool)
    h = bert_forward(weights, config, ids, am)
    m = am[..., None].astype(np.float64)
    e = (h * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
    if normalize:
        e = e / np.maximum(np.linalg.norm(e, axis=-1, keepdims=True), 1e-12)
    return e
