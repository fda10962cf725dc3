"""cattn.nn — the Transformer of "Attention Is All You Need", in Python over
cattn's kernels.

What this file is: small layer classes with torch's constructor arguments,
parameter names and forward signatures, holding NumPy arrays; every product
goes through cattn.linear / cattn.matmul, attention through the fused
cattn.scaled_dot_product_attention, normalisation through cattn.layer_norm.
No forward path calls numpy.matmul, numpy.exp or a NumPy softmax on hot
data; NumPy does only views, residual adds and mask bookkeeping.

What it is not: a training library. There is no autograd; `dropout`
arguments are accepted for torch compatibility and ignored, i.e. every module
behaves as a torch module in eval() mode.

Reading order: Module (parameters, state_dict; skip_init) -> Linear,
LayerNorm, Embedding -> RealTokens (the real-tokens-only layout) ->
MultiheadAttention -> TransformerEncoderLayer, TransformerDecoderLayer ->
TransformerEncoder, TransformerDecoder -> PositionalEncoding,
RotaryEmbedding -> DecoderOnly (GPT-style stack with per-layer KV caches).
Models (cattn.models) are built from these classes, never beside them.

Shape legend (batch_first=True, the default here; torch defaults to False):
    B batch, L target (query) length, S source (key) length,
    E embed dim (d_model), H heads, D = E // H head dim, F feed-forward dim,
    (one legend with the ops: below the layers there is no model dim, so the
    ops and kernels call a head's dim E, the letter of their last axis; a
    layer's (B, H, L, D) head view is what cattn.ops sees as (B, H, L, E)),
    T real (non-padding) tokens of a padded batch (the token rows (T, E)).
Activations are (B, L, E); with batch_first=False they are (L, B, E), as in
torch. Unbatched (L, E) inputs are accepted by MultiheadAttention.

Real tokens only: with a key padding mask, the encoder layer and stack can
skip the padding (forward(..., skip_padding=True), or forward_tokens on the
(T, E) rows with a RealTokens): projections, norms and the feed-forward
network run on the T real tokens, attention on the padded layout with the
padding keys masked. Real positions get the full path's values; padding
positions are 0.

Documented departures from torch:
- batch_first=True and need_weights=False by default.
- is_causal=True works without an attn_mask (torch requires the mask as a
  "hint"); when a mask is also given, it is taken as the causal mask it
  claims to be and not read (torch's own fast path does the same).
- A query row whose keys are all masked out gives zeros (output and
  weights); torch gives NaN on some paths.
- activation must be one of "relu", "gelu", "gelu_tanh", "silu" (a string:
  it is fused into the GEMM epilogue), not an arbitrary callable.
- Inputs must have the module's dtype (float32 by default): a float64 array
  into a float32 module raises TypeError, as torch does.
- load_state_dict casts floating-point arrays of another precision to the
  module's dtype (torch's copy_ semantics), after checking that no finite
  value overflows; non-float arrays raise TypeError.
- Extensions, all keyword-only or extra methods: skip_padding= on the
  encoder layer and stack, forward_tokens, kv_cache= (DecoderOnly).
- Linear weights in a packed format, as torch's quantize_dynamic:
  quantize(module, "float32" | "bfloat16" | "int8") and pack_weights(module)
  (cattn/nn_quantize.py); a packed MultiheadAttention holds in_proj_weight
  as a PackedRows (query rows | key and value rows, or one block for the
  layers' self-attention).
"""
import contextvars
import copy
import math
from collections import OrderedDict, namedtuple

import numpy as np

from ._validate import (FLOAT_DTYPES as _FLOATS, INTP_MAX, as_flag, as_float_dtype, as_int,
                        as_real, check_size, native, physical_memory, readable, show)
from .ops.attention import KVCache, attention_weights, scaled_dot_product_attention
from .ops.rows import layer_norm
from .ops.gemm import ACTIVATIONS, linear, matmul
from .ops.packed import PackedWeight

__all__ = [
    "Module", "ModuleList", "Linear", "LayerNorm", "MultiheadAttention",
    "TransformerEncoderLayer", "TransformerDecoderLayer",
    "TransformerEncoder", "TransformerDecoder",
    "PositionalEncoding", "RotaryEmbedding", "DecoderOnly", "Embedding", "RealTokens",
    "generate_square_subsequent_mask", "skip_init",
    # linear weights in a packed format (cattn/nn_quantize.py)
    "quantize", "pack_weights", "PackedRows",
    # the decoder-only LLM layers (cattn/nn_decoder.py)
    "RMSNorm", "GatedMLP", "MLP", "CausalSelfAttention", "DecoderBlock", "causal_mask",
]


IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class StateDictKeyError(KeyError):
    """Missing or unexpected keys in load_state_dict (message printed as is)."""

    def __str__(self):
        return str(self.args[0])


# ----------------------------------------------------------------------------
# helpers


def _rng(seed):
    """np.random.Generator from None, an int, or a Generator (used as is)."""
    return np.random.default_rng(seed)


def _positive_int(n, name, owner):
    """n as an int >= 1: TypeError for a non-integer (bool and float
    included), ValueError naming `name` for n < 1."""
    return as_int(n, name, owner, lo=1)


def _check_dropout(p, owner):
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"{owner}: dropout must be a float in [0, 1) (torch's positional order "
                        f"is (..., dropout, bias, ...): pass bias= by keyword), got {show(p)}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"{owner}: dropout must be in [0, 1), got {show(p)}")
    return float(p)


# per-layer memory besides the parameters (Python objects, dicts), for the
# "does this stack fit in memory" check of the stacks' num_layers
_LAYER_OVERHEAD = 16384


def _check_stack(owner, n, layer):
    """MemoryError naming num_layers when n copies of `layer` cannot fit in
    physical memory (checked before building them: no minutes-long loop that
    ends in an out-of-memory kill)."""
    per = sum(p.nbytes for p in layer.parameters()) + _LAYER_OVERHEAD
    total, ram = n * per, physical_memory()
    if total > INTP_MAX or (ram is not None and total > ram):
        raise MemoryError(f"{owner}: num_layers={show(n)} layers of about {per} bytes each "
                          f"need {show(total)} bytes, more than this machine's memory "
                          f"({ram if ram is not None else INTP_MAX} bytes)")


# True while skip_init builds a module: parameters are allocated, not drawn
_SKIP_INIT = contextvars.ContextVar("cattn_nn_skip_init", default=False)
# counts attribute assignments on every Module (parameters, sub-modules,
# settings): nn_fastpath rebuilds its cached kernel calls when it moved
_MUTATIONS = [0]


def mutation_count():
    """How many Module attribute assignments this process has made: a
    description built from modules (nn_fastpath, nn_program) stays valid
    while this count is unchanged (in-place edits of a parameter's values
    need no rebuild: the descriptions point at the same arrays)."""
    return _MUTATIONS[0]


def skip_init(module_cls, *args, **kwargs):
    """module_cls(*args, **kwargs) with its random initial weights allocated
    but not drawn (contents undefined; norms and biases keep their constant
    initial values), as torch.nn.utils.skip_init: for modules whose weights
    are loaded next (load_state_dict), which then skips the random draws."""
    token = _SKIP_INIT.set(True)
    try:
        return module_cls(*args, **kwargs)
    finally:
        _SKIP_INIT.reset(token)


def _new_param(owner, what, shape, dtype, make):
    """make() -> the initial array of `shape` (built via float64 random
    numbers): a size NumPy cannot hold raises ValueError, one larger than
    the machine's memory or than what can be allocated MemoryError, both
    naming the module, the parameter and its shape. Under skip_init: an
    uninitialised array."""
    skip = _SKIP_INIT.get()
    check_size(shape, dtype, owner, what, eager=True,
               extra_bytes_per_item=0 if skip else 8)  # + float64 temp
    try:
        return np.empty(shape, dtype) if skip else make()
    except MemoryError as e:
        raise MemoryError(f"{owner}: cannot allocate {what} of shape {tuple(shape)}: {e}") from None


def check_activation(activation, owner):
    if isinstance(activation, str) and activation in ACTIVATIONS:
        return activation
    if callable(activation):
        raise TypeError(f"{owner}: activation must be a string, one of {ACTIVATIONS} (cattn fuses "
                        f"it into the GEMM epilogue); got the callable {activation!r}")
    raise ValueError(f"{owner}: unknown activation {activation!r}; expected one of {ACTIVATIONS}")


def _xavier_uniform(rng, shape, dtype, owner="", what="weight"):
    """torch.nn.init.xavier_uniform_ for a 2-D (fan_out, fan_in) weight."""
    def make():  # after the size check: a huge fan would overflow the float bound
        bound = math.sqrt(6.0 / (shape[0] + shape[1])) if shape[0] + shape[1] else 0.0
        return rng.uniform(-bound, bound, size=shape).astype(dtype)
    return _new_param(owner, what, shape, dtype, make)


def _linear_uniform(rng, shape, fan_in, dtype, owner="", what="weight"):
    """torch nn.Linear's default: kaiming_uniform_(a=sqrt(5)) for the weight and
    uniform(+-1/sqrt(fan_in)) for the bias both reduce to this bound."""
    def make():
        bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        return rng.uniform(-bound, bound, size=shape).astype(dtype)
    return _new_param(owner, what, shape, dtype, make)


def as_input(x, name, dtype, owner):
    """x as an ndarray of the module's dtype (TypeError otherwise); no copy
    unless x is unaligned (then copied once here, not in every op)."""
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if x.dtype != dtype:
        x = native(x)
    if x.dtype != dtype:
        raise TypeError(
            f"{owner}: {name} has dtype {x.dtype} but the module's parameters are {dtype}; "
            f"cast the input (x.astype(np.{dtype.name})) or build the module with dtype=np.{x.dtype.name}"
            if x.dtype in _FLOATS else
            f"{owner}: {name} has dtype {x.dtype}; only float32 and float64 are supported")
    if not x.flags.aligned:
        x = readable(x, dtype)
    return x


def _split_heads(y, n, heads, batch_first):
    """Projected activations y (B, L, n*E) — or (L, B, n*E) if not batch_first —
    as n views (B, H, L, D), one per projection (q, k, v). No copy."""
    if not batch_first:
        y = y.swapaxes(0, 1)
    B, L, nE = y.shape
    D = nE // (n * heads)
    v = y.reshape(B, L, n, heads, D).transpose(2, 0, 3, 1, 4)
    return [v[i] for i in range(n)]


def generate_square_subsequent_mask(sz, dtype=np.float32):
    """torch's causal float mask (sz, sz): 0 on and below the diagonal, -inf above."""
    op = "generate_square_subsequent_mask"
    sz = as_int(sz, "sz", op)
    check_size((sz, sz), dtype, op, f"the mask (sz={show(sz)})", eager=True,
               extra_bytes_per_item=8)
    m = np.zeros((sz, sz), dtype=dtype)
    m[np.triu_indices(sz, 1)] = -np.inf
    return m


def _is_causal_mask(mask, L):
    """True when mask is torch's causal mask of size L (bool: True above the
    diagonal; float: -inf above, 0 elsewhere) — torch's _detect_is_causal_mask."""
    if mask is None:
        return False
    m = np.asarray(mask)
    if m.shape != (L, L):
        return False
    upper = np.triu(np.ones((L, L), dtype=bool), 1)
    if m.dtype == np.bool_:
        return bool(np.array_equal(m, upper))
    if m.dtype.kind == "f":
        return bool(np.all(np.where(upper, np.isneginf(m), m == 0)))
    return False


# ----------------------------------------------------------------------------
# Module: parameters, sub-modules, state_dict


class Module:
    """Base class: named NumPy parameters and sub-modules with torch's dotted
    names (`self_attn.out_proj.weight`). Modules are callable (forward)."""

    def __init__(self):
        self.__dict__["_parameters"] = OrderedDict()
        self.__dict__["_modules"] = OrderedDict()

    def register_parameter(self, name, value):
        """Add a parameter (an ndarray, or None for an absent bias)."""
        _MUTATIONS[0] += 1
        self._parameters[name] = value
        self.__dict__[name] = value  # mirrored for fast attribute lookup

    def __setattr__(self, name, value):
        _MUTATIONS[0] += 1
        params = self.__dict__.get("_parameters")
        if isinstance(value, Module):
            self._modules[name] = value
        elif params is not None and name in params:
            old = params[name]
            if isinstance(value, PACKED):
                if (old is None or value.shape != old.shape
                        or value.compute_dtype != compute_dtype(old)):
                    raise ValueError(f"parameter {name!r}: a packed {value.dtype} weight of shape "
                                     f"{value.shape} cannot replace {show(old)}")
            elif isinstance(old, PACKED) and value is not None:   # packed again, same format
                value = repack(old, _coerce_param(name, value, old.shape, old.compute_dtype))
            elif old is not None and value is not None:
                value = _coerce_param(name, value, old.shape, old.dtype)
            params[name] = value
        object.__setattr__(self, name, value)  # mirrored in __dict__ for fast lookup

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix=""):
        """(dotted name, array) for every parameter that is not None, in
        registration order, sub-modules depth first (torch's order). A
        packed weight (quantize, pack_weights) is given as a new array of
        the values the kernels use."""
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, p.unpack() if isinstance(p, PACKED) else p
        for name, m in self._modules.items():
            yield from m.named_parameters(prefix + name + ".")

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def state_dict(self):
        """OrderedDict of torch's names -> parameter arrays. The arrays are the
        module's own (as torch's tensors are): copy them for a snapshot
        (packed weights come as new arrays of their values)."""
        return OrderedDict(self.named_parameters())

    def load_state_dict(self, state_dict, strict=True):
        """Copy arrays into the parameters, by torch's names and shapes.

        Validates everything before writing anything: with strict=True a
        missing or unexpected key raises StateDictKeyError (a KeyError)
        listing them; a wrong shape raises ValueError; a non-float array
        raises TypeError; a float array of another precision is cast to the
        module's dtype (ValueError if a finite value overflows). Accepts
        anything np.asarray understands, e.g. CPU torch tensors.
        Returns (missing_keys, unexpected_keys)."""
        own = OrderedDict(self.named_parameters())
        given = dict(state_dict)
        missing = [k for k in own if k not in given]
        unexpected = [k for k in given if k not in own]
        if strict and (missing or unexpected):
            msg = [f"Error(s) in loading state_dict for {type(self).__name__}:"]
            if missing:
                msg.append("missing key(s): " + ", ".join(missing))
            if unexpected:
                msg.append("unexpected key(s): " + ", ".join(unexpected))
            raise StateDictKeyError("\n  ".join(msg))
        staged = [(k, own[k], _coerce_param(k, given[k], own[k].shape, own[k].dtype))
                  for k in own if k in given]
        for k, dst, src in staged:
            *path, attr = k.split(".")
            mod = self
            for p in path:
                mod = mod._modules[p]
            if isinstance(mod._parameters[attr], PACKED):
                setattr(mod, attr, src)                           # packed again
            else:
                dst[...] = src
        return IncompatibleKeys(missing, unexpected)

    def eval(self):
        """No-op (cattn modules are always in inference mode); returns self."""
        return self

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"  ({n}): " + repr(m).replace("\n", "\n  ") for n, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        return head + ("\n" + "\n".join(lines) + "\n)" if lines else ")")


def _coerce_param(name, value, shape, dtype):
    """value as an array of `shape` and `dtype`, or a clear error."""
    try:
        arr = np.asarray(value)
    except Exception as e:  # e.g. a bfloat16 torch tensor
        raise TypeError(f"parameter {name!r}: cannot convert {type(value).__name__} "
                        f"to a NumPy array ({e})") from None
    if arr.dtype.kind != "f":
        raise TypeError(f"parameter {name!r} has dtype {arr.dtype}; expected a floating-point "
                        f"array (the module is {dtype})")
    if arr.shape != tuple(shape):
        raise ValueError(f"parameter {name!r} has shape {arr.shape}, expected {tuple(shape)}")
    if arr.dtype == dtype and not arr.flags.aligned:
        arr = readable(arr, dtype)  # realigned once here, not copied by every forward
    if arr.dtype != dtype:
        with np.errstate(over="ignore"):
            cast = arr.astype(dtype)
        if np.any(np.isfinite(arr) & ~np.isfinite(cast)):
            raise ValueError(f"parameter {name!r}: values overflow when cast from {arr.dtype} "
                             f"to the module's dtype {dtype}")
        arr = cast
    return arr


class ModuleList(Module):
    """Sub-modules named "0", "1", ... (torch's `layers.0.`...)."""

    def __init__(self, modules=()):
        super().__init__()
        for i, m in enumerate(modules):
            self._modules[str(i)] = m

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


# ----------------------------------------------------------------------------
# Linear, LayerNorm


class Linear(Module):
    """y = x W^T + b, W (out_features, in_features) as in torch, initialised as
    torch's nn.Linear (uniform +-1/sqrt(in_features)). forward(x, activation)
    fuses bias and activation into the GEMM epilogue."""

    def __init__(self, in_features, out_features, bias=True, *, dtype=np.float32, seed=None):
        super().__init__()
        dtype = as_float_dtype(dtype, "Linear")
        in_features = as_int(in_features, "in_features", "Linear")
        out_features = as_int(out_features, "out_features", "Linear")
        rng = _rng(seed)
        self.in_features, self.out_features = in_features, out_features
        self.register_parameter(
            "weight", _linear_uniform(rng, (out_features, in_features), in_features, dtype,
                                      "Linear", f"weight (out_features={show(out_features)}, "
                                                f"in_features={show(in_features)})"))
        self.register_parameter(
            "bias", _linear_uniform(rng, (out_features,), in_features, dtype, "Linear",
                                    f"bias (out_features={show(out_features)})") if bias else None)

    def forward(self, x, activation=None, *, out=None):
        return linear(x, self.weight, self.bias, activation=activation, out=out)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class LayerNorm(Module):
    """Layer normalisation over the last axis (cattn.layer_norm); weight ones,
    bias zeros, as torch's nn.LayerNorm(normalized_shape, eps, bias=...)."""

    def __init__(self, normalized_shape, eps=1e-5, bias=True, *, dtype=np.float32):
        super().__init__()
        dtype = as_float_dtype(dtype, "LayerNorm")
        n = normalized_shape
        if isinstance(n, (tuple, list)):
            if len(n) != 1:
                raise ValueError(f"LayerNorm: only a last-axis normalized_shape is supported, got {n}")
            n = n[0]
        self.normalized_shape = (_positive_int(n, "normalized_shape", "LayerNorm"),)
        self.eps = as_real(eps, "eps", "LayerNorm", finite=True, lo=0.0)
        check_size(self.normalized_shape, dtype, "LayerNorm",
                   f"the weight (normalized_shape={show(n)})", eager=True)
        self.register_parameter("weight", np.ones(self.normalized_shape, dtype))
        self.register_parameter("bias", np.zeros(self.normalized_shape, dtype) if bias else None)

    def forward(self, x, *, out=None):
        """x (..., n) -> normalised (..., n); out may be x itself (in place)."""
        return layer_norm(x, self.weight, self.bias, self.eps, out=out)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Embedding(Module):
    """A lookup table: token ids (...) -> rows of weight (num_embeddings,
    embedding_dim), as torch's nn.Embedding (weight initialised N(0, 1), the
    padding_idx row zero). forward returns a new array (a gather, no GEMM)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, *, dtype=np.float32,
                 seed=None):
        super().__init__()
        owner = "Embedding"
        dtype = as_float_dtype(dtype, owner)
        n = _positive_int(num_embeddings, "num_embeddings", owner)
        d = _positive_int(embedding_dim, "embedding_dim", owner)
        if padding_idx is not None:
            padding_idx = as_int(padding_idx, "padding_idx", owner, lo=-n, hi=n - 1) % n
        self.num_embeddings, self.embedding_dim, self.padding_idx = n, d, padding_idx
        rng = _rng(seed)
        self.register_parameter("weight", _new_param(
            owner, "weight", (n, d), dtype,
            lambda: rng.standard_normal((n, d)).astype(dtype)))
        if padding_idx is not None:
            self.weight[padding_idx] = 0

    def forward(self, input):
        """input: integer ids (...) in [0, num_embeddings) -> (..., embedding_dim)."""
        ids = np.asarray(input)
        if ids.dtype.kind not in "iu":
            raise TypeError(f"Embedding: input must hold integer ids, got dtype {ids.dtype}")
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_embeddings):
            raise ValueError(f"Embedding: ids must lie in [0, {self.num_embeddings}), got "
                             f"[{ids.min()}, {ids.max()}]")
        return self.weight[ids]

    def extra_repr(self):
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


# ----------------------------------------------------------------------------
# Real tokens of a padded batch


class RealTokens:
    """Where the real (non-padding) tokens of a padded batch (B, L) sit: the
    layout of the real-tokens-only path (`forward_tokens` of
    MultiheadAttention, TransformerEncoderLayer and TransformerEncoder, and
    their forward(..., skip_padding=True)).

    On that path the token-wise work — the Q/K/V and output projections,
    the norms, the feed-forward network — runs on the T real tokens stacked
    as rows (T, E), sequence 0's tokens first, each in position order; only
    attention sees the padded (B, L) layout (its query/key/value rows spread
    there, padding rows zero, padding keys masked). Padding costs nothing
    outside attention, and the real rows get the values of the full path.

    key_padding_mask: (B, L), torch's convention — bool True = padding, or
    float with -inf = padding (added to the scores as given) — or None.
    Attributes: B, L, T; key_padding_mask (None when nothing is padded);
    real (B, L) bool, True = a real token; rows (T,) the flat positions
    b * L + l of the real tokens, ascending, or None when nothing is padded
    (T = B * L: the token rows are every position and packing a reshape).
    A sequence that is all padding has no token rows.
    """

    def __init__(self, B, L, key_padding_mask=None):
        owner = "RealTokens"
        self.B, self.L = as_int(B, "B", owner), as_int(L, "L", owner)
        self.key_padding_mask = self.rows = None
        self.real = np.ones((self.B, self.L), bool)
        if key_padding_mask is not None:
            m = np.asarray(key_padding_mask)
            if m.shape != (self.B, self.L):
                raise ValueError(f"{owner}: key_padding_mask has shape {m.shape}, expected "
                                 f"(B, L) = {(self.B, self.L)}")
            if m.dtype == np.bool_:
                pad = m
            elif m.dtype.kind == "f":
                pad = np.isneginf(m)
            else:
                raise TypeError(f"{owner}: key_padding_mask has dtype {m.dtype}; expected bool "
                                "(True = padding) or float (-inf = padding)")
            if pad.any():
                self.real = ~pad
                self.rows = np.flatnonzero(self.real)
            if pad.any() or m.dtype != np.bool_:
                self.key_padding_mask = m
        self.T = self.B * self.L if self.rows is None else self.rows.size
        self._buf = None

    def pack(self, x):
        """x (B, L, ...) -> the real tokens' rows (T, ...) (a new array, or a
        view when nothing is padded and x is contiguous)."""
        x = np.asarray(x)
        flat = x.reshape((self.B * self.L,) + x.shape[2:])
        return flat if self.rows is None else flat[self.rows]

    def unpack(self, y):
        """Token rows y (T, ...) -> (B, L, ...), zeros at padding positions
        (a reshaped view of y when nothing is padded)."""
        if self.rows is None:
            return y.reshape((self.B, self.L) + y.shape[1:])
        out = np.zeros((self.B * self.L,) + y.shape[1:], y.dtype)
        out[self.rows] = y
        return out.reshape((self.B, self.L) + y.shape[1:])

    def spread(self, y):
        """Token rows y (T, n) -> (B * L, n) with zero padding rows (y itself
        when nothing is padded). The buffer is kept and reused by the next
        call of the same width and dtype (each layer of a stack): only its
        real rows are ever written, so its padding rows stay zero."""
        if self.rows is None:
            return y
        b = self._buf
        if b is None or b.shape[1:] != y.shape[1:] or b.dtype != y.dtype:
            b = self._buf = np.zeros((self.B * self.L,) + y.shape[1:], y.dtype)
        b[self.rows] = y
        return b

    def gather(self, y):
        """Padded rows y (B * L, n) -> the real tokens' rows (T, n)."""
        return y if self.rows is None else y.take(self.rows, axis=0)

    def real_lengths(self):
        """(B,) int64: each sequence's number of real tokens (its rows are
        consecutive among the T token rows); None when the key padding mask
        is a float mask that also adds finite values (not pure padding)."""
        m = self.key_padding_mask
        if m is not None and m.dtype != np.bool_ and not np.all(np.isneginf(m) | (m == 0)):
            return None
        return self.real.sum(axis=1)

    def right_padded(self):
        """True when each sequence's real tokens are a prefix of its row
        (their positions 0..n-1 are the same as in the padded layout)."""
        n = self.real.sum(axis=1)
        return bool(np.array_equal(self.real, np.arange(self.L)[None, :] < n[:, None]))


def _on_real_tokens(run, src, tokens_kpm, batch_first, dtype, owner):
    """run(x (T, E), tokens) -> (T, E) applied to the real tokens of src
    (B, L, E) — (L, B, E) if not batch_first, (L, E) unbatched with a (L,)
    mask — under key padding mask tokens_kpm (True = padding). Returns the
    input's layout, zeros at padding positions."""
    x = as_input(src, "src", dtype, owner)
    if x.ndim not in (2, 3):
        raise ValueError(f"{owner}: src has shape {x.shape}; expected (B, L, E), "
                         "(L, B, E) or unbatched (L, E)")
    batched = x.ndim == 3
    if not batched:
        x, tokens_kpm = x[None], np.asarray(tokens_kpm)[None]
    elif not batch_first:
        x = x.swapaxes(0, 1)
    tokens = RealTokens(x.shape[0], x.shape[1], tokens_kpm)
    y = tokens.unpack(run(tokens.pack(x), tokens))
    if not batched:
        return y[0]
    return y if batch_first else np.ascontiguousarray(y.swapaxes(0, 1))


# ----------------------------------------------------------------------------
# Multi-head attention


class MultiheadAttention(Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_H) W^O,
    head_i = softmax(Q W_i^Q (K W_i^K)^T / sqrt(D)) V W_i^V   (paper, section 3.2).

    Parameters (torch's names and shapes): in_proj_weight (3E, E) — rows
    [W^Q; W^K; W^V], torch's y = x W^T convention — and in_proj_bias (3E,);
    when kdim or vdim differ from E, q_proj_weight (E, E), k_proj_weight
    (E, kdim), v_proj_weight (E, vdim) instead; out_proj.weight (E, E),
    out_proj.bias (E,). Initialised as torch: xavier-uniform projections,
    zero biases, out_proj.weight like nn.Linear; reproducible from `seed`.
    nn.quantize / nn.pack_weights pack in_proj_weight as a PackedRows (same
    bits as the array): with split_in_proj=True (the default) two row
    blocks, the query rows and the key/value rows, so cross-attention
    projects each input by its own rows; the encoder and decoder layers set
    their self_attn's split_in_proj=False (one block: self-attention's q, k
    and v in one GEMM). A projection that cuts a block computes the whole
    block (a key that is not the value: twice the work of those two; cross-
    attention on one block: 3x for the query, 1.5x for the memory).

    Constructor order is torch's (embed_dim, num_heads, dropout, bias); the
    rest is keyword-only. dropout is ignored (inference). batch_first=True by
    default (torch: False).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, *, kdim=None, vdim=None,
                 batch_first=True, dtype=np.float32, seed=None):
        super().__init__()
        owner = "MultiheadAttention"
        E = _positive_int(embed_dim, "embed_dim", owner)
        H = _positive_int(num_heads, "num_heads", owner)
        if E % H:
            raise ValueError(f"{owner}: embed_dim={E} is not divisible by num_heads={H}")
        self.dtype = dtype = as_float_dtype(dtype, owner)
        self.embed_dim, self.num_heads, self.head_dim = E, H, E // H
        self.kdim = E if kdim is None else _positive_int(kdim, "kdim", owner)
        self.vdim = E if vdim is None else _positive_int(vdim, "vdim", owner)
        self._qkv_same_embed_dim = self.kdim == E and self.vdim == E
        self.dropout = _check_dropout(dropout, owner)
        self.batch_first = bool(batch_first)
        self.rotary = None  # optional RotaryEmbedding applied to q and k (DecoderOnly)
        self.split_in_proj = True  # how nn.quantize packs in_proj_weight (see above)
        rng = _rng(seed)
        if self._qkv_same_embed_dim:
            self.register_parameter("in_proj_weight", _xavier_uniform(
                rng, (3 * E, E), dtype, owner, f"in_proj_weight (embed_dim={show(E)})"))
        else:
            self.register_parameter("q_proj_weight", _xavier_uniform(
                rng, (E, E), dtype, owner, f"q_proj_weight (embed_dim={show(E)})"))
            self.register_parameter("k_proj_weight", _xavier_uniform(
                rng, (E, self.kdim), dtype, owner, f"k_proj_weight (kdim={show(self.kdim)})"))
            self.register_parameter("v_proj_weight", _xavier_uniform(
                rng, (E, self.vdim), dtype, owner, f"v_proj_weight (vdim={show(self.vdim)})"))
        self.register_parameter("in_proj_bias", np.zeros(3 * E, dtype) if bias else None)
        self.out_proj = Linear(E, E, bias, dtype=dtype, seed=rng)
        if bias:
            self.out_proj.bias[...] = 0

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"batch_first={self.batch_first}")

    def __setattr__(self, name, value):
        if name == "in_proj_weight" and isinstance(value, PackedWeight):
            raise ValueError("MultiheadAttention: in_proj_weight is used by rows (query | key, "
                             "value), a single PackedWeight cannot be; assign an array (packed "
                             "again in the layer's format) or use nn.quantize(layer, dtype)")
        super().__setattr__(name, value)

    # -- projections: Q, K, V as (B, H, L|S, D) views of the GEMM outputs
    def _in_proj(self, x, lo, hi):
        """x (..., E) @ in_proj_weight[lo:hi].T + in_proj_bias[lo:hi]: one
        GEMM, or per packed row block (nn.quantize: PackedRows)."""
        W, b = self.in_proj_weight, self.in_proj_bias
        if isinstance(W, PackedRows):
            return W.linear(x, b, (lo, hi))
        return linear(x, W[lo:hi], None if b is None else b[lo:hi])

    def _qkv(self, x):
        """Self-attention's projections of x (..., E): (q (..., E), kv
        (..., 2E)), views of one GEMM's (..., 3E) result, or one GEMM per
        packed row block (PackedRows cut at E: query | key, value), no copy."""
        E, W = self.embed_dim, self.in_proj_weight
        if isinstance(W, PackedRows) and W.cuts:
            return self._in_proj(x, 0, E), self._in_proj(x, E, 3 * E)
        y = self._in_proj(x, 0, 3 * E)
        return y[..., :E], y[..., E:]

    def _project(self, q_in, k_in, v_in, shared_qkv, shared_kv, bf):
        E, H = self.embed_dim, self.num_heads
        if not self._qkv_same_embed_dim:
            b = self.in_proj_bias
            ws = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
            bs = (None,) * 3 if b is None else (b[:E], b[E:2 * E], b[2 * E:])
            return [_split_heads(linear(x, w, c), 1, H, bf)[0]
                    for x, w, c in zip((q_in, k_in, v_in), ws, bs)]
        if shared_qkv:  # self-attention: the whole (3E, E) weight on one input
            q, kv = self._qkv(q_in)
            return (_split_heads(q, 1, H, bf)[0], *_split_heads(kv, 2, H, bf))
        q = _split_heads(self._in_proj(q_in, 0, E), 1, H, bf)[0]
        if shared_kv:   # cross-attention: K, V together
            k, v = _split_heads(self._in_proj(k_in, E, 3 * E), 2, H, bf)
        else:
            k = _split_heads(self._in_proj(k_in, E, 2 * E), 1, H, bf)[0]
            v = _split_heads(self._in_proj(v_in, 2 * E, 3 * E), 1, H, bf)[0]
        return q, k, v

    # -- torch MHA masks (True = masked out, float = added) -> cattn SDPA masks
    def _sdpa_mask(self, attn_mask, key_padding_mask, is_causal, B, L, S, batched):
        """Returns (mask, causal): mask for cattn's SDPA (bool True = attend,
        or float added), broadcastable to (B, H, L, S) without expanding what
        need not be; causal=True means "use the kernel's causal masking"."""
        owner, H, dtype = "MultiheadAttention", self.num_heads, self.dtype
        kpm = am = None
        if key_padding_mask is not None:
            kpm = _mask_array(key_padding_mask, "key_padding_mask", dtype, owner)
            want = (B, S) if batched else (S,)
            if kpm.shape != want:
                raise ValueError(f"{owner}: key_padding_mask has shape {kpm.shape}, expected "
                                 f"{'(B, S) = ' if batched else '(S,) = '}{want}")
            kpm = kpm.reshape(B, 1, 1, S)
        if attn_mask is not None:
            am = _mask_array(attn_mask, "attn_mask", dtype, owner)
            if am.shape == (L, S):
                pass
            elif am.shape == (B * H, L, S):
                am = am.reshape(B, H, L, S)
            else:
                raise ValueError(f"{owner}: attn_mask has shape {am.shape}, expected (L, S) = "
                                 f"{(L, S)} or (B*num_heads, L, S) = {(B * H, L, S)}")
        if is_causal:
            if kpm is None:
                return None, True
            causal = np.tri(L, S, dtype=bool)  # row i sees keys 0..i (torch, upper-left)
            if kpm.dtype == np.bool_:
                return causal & ~kpm, False
            return np.where(causal, kpm, dtype.type(-np.inf)).astype(dtype, copy=False), False
        if am is None and kpm is None:
            return None, False
        if am is None or kpm is None:
            m = kpm if am is None else am
            return (~m if m.dtype == np.bool_ else m), False
        if am.dtype == np.bool_ and kpm.dtype == np.bool_:
            return ~(am | kpm), False
        return _to_float_mask(am, dtype) + _to_float_mask(kpm, dtype), False

    def forward(self, query, key=None, value=None, *, key_padding_mask=None, attn_mask=None,
                need_weights=False, average_attn_weights=True, is_causal=False, kv_cache=None):
        """query (B, L, E), key (B, S, kdim), value (B, S, vdim) — (L, B, E) ...
        if batch_first=False; (L, E) unbatched. key=None means key=query,
        value=None means value=key. Returns (out (B, L, E), weights or None).

        key_padding_mask (B, S): True / -inf = ignore that key (torch).
        attn_mask (L, S) or (B*H, L, S): bool True = not allowed, float added.
        is_causal: query i sees keys 0..i (a mask, if given, is not read).
        need_weights: also return the attention probabilities, averaged over
        heads (B, L, S) if average_attn_weights else (B, H, L, S).
        kv_cache (cattn extension, self-attention only): a cattn.KVCache
        (B, H, max_len, D); the new positions' K, V are appended and the
        queries attend to the whole cache, causally (lower-right aligned).
        """
        owner = "MultiheadAttention"
        if kv_cache is not None and not isinstance(kv_cache, KVCache):
            raise TypeError(f"{owner}: kv_cache must be a cattn.KVCache, got {show(kv_cache)}")
        need_weights = as_flag(need_weights, "need_weights", owner)
        average_attn_weights = as_flag(average_attn_weights, "average_attn_weights", owner)
        is_causal = False if is_causal is None else as_flag(is_causal, "is_causal", owner)
        shared_qkv = (key is None or key is query) and (value is None or value is key)
        shared_kv = value is None or value is key
        dtype, E = self.dtype, self.embed_dim
        q_in = as_input(query, "query", dtype, owner)
        k_in = q_in if key is None or key is query else as_input(key, "key", dtype, owner)
        if value is None or value is key:
            v_in = k_in
        else:
            v_in = as_input(value, "value", dtype, owner)
        batched = q_in.ndim == 3
        for name, x, d in (("query", q_in, E), ("key", k_in, self.kdim), ("value", v_in, self.vdim)):
            if x.ndim != q_in.ndim or x.ndim not in (2, 3) or x.shape[-1] != d:
                lay = "(B, L, " if self.batch_first else "(L, B, "
                raise ValueError(
                    f"{owner}: {name} has shape {x.shape}; expected {lay}{d}) or unbatched (L, {d}) "
                    f"(query {q_in.shape}, key {k_in.shape}, value {v_in.shape})")
        if not batched:  # unbatched: a batch of one, batch-first
            q_in, k_in, v_in = q_in[None], k_in[None], v_in[None]
            if shared_qkv:
                k_in = v_in = q_in
            elif shared_kv:
                v_in = k_in
        bf = self.batch_first or not batched
        ax_b, ax_l = (0, 1) if bf else (1, 0)
        B, L, S = q_in.shape[ax_b], q_in.shape[ax_l], k_in.shape[ax_l]
        if k_in.shape[ax_b] != B or v_in.shape[ax_b] != B or v_in.shape[ax_l] != S:
            raise ValueError(f"{owner}: batch or sequence dims disagree: query {q_in.shape}, "
                             f"key {k_in.shape}, value {v_in.shape}")

        q, k, v = self._project(q_in, k_in, v_in, shared_qkv, shared_kv, bf)

        ctx = np.empty(q_in.shape[:-1] + (E,), dtype)       # heads concatenated, input layout
        ctx_h = _split_heads(ctx, 1, self.num_heads, bf)[0]  # (B, H, L, D) view of ctx
        if kv_cache is not None:
            if not shared_qkv or not batched:
                raise ValueError(f"{owner}: kv_cache needs batched self-attention (key=value=query)")
            if attn_mask is not None or key_padding_mask is not None or need_weights:
                raise ValueError(f"{owner}: kv_cache supports causal attention only: no "
                                 "attn_mask, key_padding_mask or need_weights")
            if self.rotary is not None:
                q = self.rotary.apply(q, kv_cache.length)
                k = self.rotary.apply(k, kv_cache.length)
            kv_cache.append(k, v)
            kv_cache.attend(q, out=ctx_h)  # L new queries against all cached keys: O(L * S)
            weights = None
        else:
            if self.rotary is not None:
                q, k = self.rotary(q, k)
            mask, causal = self._sdpa_mask(attn_mask, key_padding_mask, is_causal, B, L, S, batched)
            if need_weights:
                weights = attention_weights(q, k, mask, is_causal=causal)  # (B, H, L, S)
                matmul(weights, v, out=ctx_h)
                if average_attn_weights:
                    weights = weights.mean(axis=1)
                if not batched:
                    weights = weights[0]
            else:
                scaled_dot_product_attention(q, k, v, mask, is_causal=causal, out=ctx_h)
                weights = None
        out = linear(ctx, self.out_proj.weight, self.out_proj.bias)
        return (out if batched else out[0]), weights

    def forward_tokens(self, x, tokens, attn_mask=None, is_causal=False, *, need_weights=False):
        """Self-attention on the real tokens of a padded batch (the
        real-tokens-only path, see RealTokens): x (T, E) their rows, tokens
        a RealTokens (B, L). Returns (out (T, E), weights or None).

        Q, K and V are projected for the T rows only (in_proj_weight).
        Without attn_mask, each sequence then attends over its own real
        tokens alone (one fused attention call per sequence; no
        padding enters it, so a sequence's rows have the same bits whatever
        else is in the batch: batch invariance). With an attn_mask (L, L) or
        (B*H, L, L), the rows are spread into the padded layout (padding
        rows zero) where the fused attention runs with
        tokens.key_padding_mask masking the padding keys. The output
        projection runs on the T rows again. Real rows equal
        forward(..., key_padding_mask=tokens.key_padding_mask)'s (to rounding).
        need_weights: also the per-head probabilities (B, H, L, L), computed
        beside the fused attention (the output does not depend on it)."""
        owner = "MultiheadAttention"
        if not isinstance(tokens, RealTokens):
            raise TypeError(f"{owner}: tokens must be a cattn.nn.RealTokens, got {show(tokens)}")
        if not self._qkv_same_embed_dim:
            raise ValueError(f"{owner}: forward_tokens is self-attention: it needs kdim = vdim "
                             f"= embed_dim, got kdim={self.kdim}, vdim={self.vdim}")
        x = as_input(x, "x", self.dtype, owner)
        is_causal = False if is_causal is None else as_flag(is_causal, "is_causal", owner)
        need_weights = as_flag(need_weights, "need_weights", owner)
        B, L, E, H = tokens.B, tokens.L, self.embed_dim, self.num_heads
        if x.shape != (tokens.T, E):
            raise ValueError(f"{owner}: x has shape {x.shape}; expected the (T, E) = "
                             f"{(tokens.T, E)} rows of the real tokens")
        q_rows, kv_rows = self._qkv(x)                                       # (T, E), (T, 2E)
        lengths = tokens.real_lengths() if attn_mask is None else None
        each = lengths is not None and (self.rotary is None or tokens.right_padded())
        if each:
            ctx = self._attend_each(q_rows, kv_rows, lengths, is_causal)        # (T, E)
        weights = None
        if need_weights or not each:
            qkv = tokens.spread(np.concatenate((q_rows, kv_rows), axis=1))    # (B*L, 3E)
            q, k, v = _split_heads(qkv.reshape(B, L, 3 * E), 3, H, True)      # (B, H, L, D)
            if self.rotary is not None:
                q, k = self.rotary(q, k)
            mask, causal = self._sdpa_mask(attn_mask, tokens.key_padding_mask, is_causal,
                                           B, L, L, True)
            if need_weights:
                weights = attention_weights(q, k, mask, is_causal=causal)
            if not each:
                ctx = np.empty((B, L, E), self.dtype)
                scaled_dot_product_attention(q, k, v, mask, is_causal=causal,
                                             out=_split_heads(ctx, 1, H, True)[0])
                ctx = tokens.gather(ctx.reshape(B * L, E))                     # (T, E)
        return linear(ctx, self.out_proj.weight, self.out_proj.bias), weights

    def _attend_each(self, q_rows, kv_rows, lengths, is_causal):
        """Attention of each sequence over its own real tokens only: q_rows
        (T, E) and kv_rows (T, 2E) the projected real tokens (sequence-major,
        in position order), lengths (B,) their counts -> ctx (T, E). No padding enters
        the kernel, so a sequence's result has the same bits whatever else
        is in the batch and however long the batch is padded (batch
        invariance); masked-out padding keys contribute nothing either way."""
        E, H = self.embed_dim, self.num_heads
        ctx = np.empty((q_rows.shape[0], E), self.dtype)
        # consecutive sequences of one length are consecutive row blocks:
        # one call for each such run (units are independent in the kernel,
        # so a run gives each sequence the bits it gets alone)
        if lengths.size == 0:
            return ctx
        if lengths.size == 1 or (lengths == lengths[0]).all():
            runs = (lengths,)                       # one run (e.g. one sentence)
        else:
            runs = np.split(lengths, np.flatnonzero(np.diff(lengths)) + 1)
        start = 0
        for run in runs:
            b, n = run.size, int(run[0])
            if n:
                rows = slice(start, start + b * n)
                q = _split_heads(q_rows[rows].reshape(b, n, E), 1, H, True)[0]
                k, v = _split_heads(kv_rows[rows].reshape(b, n, 2 * E), 2, H, True)
                if self.rotary is not None:
                    q, k = self.rotary(q, k)
                scaled_dot_product_attention(
                    q, k, v, None, is_causal=is_causal,
                    out=_split_heads(ctx[rows].reshape(b, n, E), 1, H, True)[0])
            start += b * n
        return ctx


def _mask_array(m, name, dtype, owner):
    m = np.asarray(m)
    if m.dtype == np.bool_:
        return m
    if m.dtype.kind == "f":
        return m.astype(dtype, copy=False)
    raise TypeError(f"{owner}: {name} has dtype {m.dtype}; expected bool (True = masked out) "
                    "or float (added to the scores)")


def _to_float_mask(m, dtype):
    if m.dtype == np.bool_:
        return np.where(m, dtype.type(-np.inf), dtype.type(0))
    return m


# ----------------------------------------------------------------------------
# Encoder and decoder layers


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward network, each in a residual block:

        post-LN (norm_first=False, the paper): x = norm1(x + SA(x)); x = norm2(x + FF(x))
        pre-LN  (norm_first=True):             x = x + SA(norm1(x)); x = x + FF(norm2(x))

    with FF(x) = linear2(act(linear1(x))), bias and activation fused in the
    GEMM epilogue. torch's constructor (dropout ignored) and parameter names:
    self_attn.*, linear1.*, linear2.*, norm1.*, norm2.*.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True, *,
                 dtype=np.float32, seed=None):
        super().__init__()
        owner = type(self).__name__
        self.dtype = as_float_dtype(dtype, owner)
        self.activation = check_activation(activation, owner)
        self.dropout = _check_dropout(dropout, owner)
        self.norm_first, self.batch_first = bool(norm_first), bool(batch_first)
        rng = _rng(seed)
        kw = dict(dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, bias=bias, batch_first=batch_first,
                                            seed=rng, **kw)
        self.self_attn.split_in_proj = False   # self-attention only: packed as one block
        self.linear1 = Linear(d_model, dim_feedforward, bias, seed=rng, **kw)
        self.linear2 = Linear(dim_feedforward, d_model, bias, seed=rng, **kw)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias, **kw)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias, **kw)

    def _ff(self, x):
        return self.linear2(self.linear1(x, self.activation))

    def _blocks(self, x, attend):
        """The two residual blocks around attend(x) -> SA(x) (a new array)."""
        if self.norm_first:
            a = attend(self.norm1(x))
            x = np.add(a, x, out=a)                 # x + SA(norm1(x)), into SA's buffer
            f = self._ff(self.norm2(x))
            return np.add(f, x, out=f)
        a = attend(x)
        x = self.norm1(np.add(a, x, out=a), out=a)  # norm1(x + SA(x)), all in SA's buffer
        f = self._ff(x)
        return self.norm2(np.add(f, x, out=f), out=f)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False, *,
                kv_cache=None, skip_padding=False):
        """src (B, L, E) -> (B, L, E). src_mask / src_key_padding_mask /
        is_causal as MultiheadAttention's attn_mask / key_padding_mask /
        is_causal. kv_cache: see MultiheadAttention.forward (DecoderOnly).

        skip_padding (cattn extension, keyword-only; default False = torch's
        full computation): with a src_key_padding_mask, run the real-tokens-
        only path (forward_tokens): the projections, norms and feed-forward
        network skip the padding positions. Real positions get the values of
        the full path (same ops on the same rows); padding positions are 0
        (as torch's nested-tensor fast path returns), and a sequence that is
        all padding is all 0. Without a key padding mask it changes nothing."""
        owner = type(self).__name__
        if skip_padding and src_key_padding_mask is not None and kv_cache is None:
            return _on_real_tokens(
                lambda x, tokens: self.forward_tokens(x, tokens, src_mask, is_causal)[0],
                src, src_key_padding_mask, self.batch_first, self.dtype, owner)
        x = as_input(src, "src", self.dtype, owner)
        kw = dict(attn_mask=src_mask, key_padding_mask=src_key_padding_mask,
                  is_causal=is_causal, kv_cache=kv_cache)
        return self._blocks(x, lambda y: self.self_attn(y, **kw)[0])

    def forward_tokens(self, x, tokens, src_mask=None, is_causal=False, *, need_weights=False):
        """The layer on the real tokens of a padded batch (see RealTokens):
        x (T, E) -> (out (T, E), attention weights (B, H, L, L) or None).
        Attention runs on the padded layout (MultiheadAttention.
        forward_tokens), everything else on the T rows only."""
        weights = []

        def attend(y):
            a, w = self.self_attn.forward_tokens(y, tokens, src_mask, is_causal,
                                                 need_weights=need_weights)
            weights.append(w)
            return a
        return self._blocks(x, attend), weights[0]


class TransformerDecoderLayer(Module):
    """Masked self-attention, cross-attention over the encoder's `memory`, and
    a feed-forward network, each in a residual block (post-LN or pre-LN as in
    TransformerEncoderLayer). Parameter names: self_attn.*, multihead_attn.*,
    linear1.*, linear2.*, norm1.*, norm2.*, norm3.*.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=True, norm_first=False, bias=True, *,
                 dtype=np.float32, seed=None):
        super().__init__()
        owner = type(self).__name__
        self.dtype = as_float_dtype(dtype, owner)
        self.activation = check_activation(activation, owner)
        self.dropout = _check_dropout(dropout, owner)
        self.norm_first, self.batch_first = bool(norm_first), bool(batch_first)
        rng = _rng(seed)
        kw = dict(dtype=dtype)
        self.self_attn = MultiheadAttention(d_model, nhead, bias=bias, batch_first=batch_first,
                                            seed=rng, **kw)
        self.self_attn.split_in_proj = False   # self-attention only: packed as one block
        self.multihead_attn = MultiheadAttention(d_model, nhead, bias=bias,
                                                 batch_first=batch_first, seed=rng, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias, seed=rng, **kw)
        self.linear2 = Linear(dim_feedforward, d_model, bias, seed=rng, **kw)
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias, **kw)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias, **kw)
        self.norm3 = LayerNorm(d_model, layer_norm_eps, bias, **kw)

    def _ff(self, x):
        return self.linear2(self.linear1(x, self.activation))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=False, memory_is_causal=False):
        """tgt (B, L, E), memory (B, S, E) -> (B, L, E). tgt_* masks go to the
        self-attention ((L, L) masks), memory_* masks to the cross-attention
        ((L, S) masks, (B, S) padding)."""
        owner = type(self).__name__
        x = as_input(tgt, "tgt", self.dtype, owner)
        mem = as_input(memory, "memory", self.dtype, owner)
        sa = dict(attn_mask=tgt_mask, key_padding_mask=tgt_key_padding_mask,
                  is_causal=tgt_is_causal)
        ca = dict(attn_mask=memory_mask, key_padding_mask=memory_key_padding_mask,
                  is_causal=memory_is_causal)
        if self.norm_first:
            a = self.self_attn(self.norm1(x), **sa)[0]
            x = np.add(a, x, out=a)
            c = self.multihead_attn(self.norm2(x), mem, mem, **ca)[0]
            x = np.add(c, x, out=c)
            f = self._ff(self.norm3(x))
            return np.add(f, x, out=f)
        a = self.self_attn(x, **sa)[0]
        x = self.norm1(np.add(a, x, out=a), out=a)
        c = self.multihead_attn(x, mem, mem, **ca)[0]
        x = self.norm2(np.add(c, x, out=c), out=c)
        f = self._ff(x)
        return self.norm3(np.add(f, x, out=f), out=f)


# ----------------------------------------------------------------------------
# Stacks


def _final_norm(norm, x):
    """norm(x) for a stack's optional final norm; in place for a LayerNorm
    (x is the last layer's own output buffer)."""
    if norm is None:
        return x
    return norm(x, out=x) if isinstance(norm, LayerNorm) else norm(x)


class TransformerEncoder(Module):
    """num_layers deep copies of encoder_layer (identical initial weights, as
    in torch), then an optional final norm. Names: layers.0.self_attn...,
    norm.weight. enable_nested_tensor and mask_check are accepted for torch
    compatibility and ignored."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        if not isinstance(encoder_layer, TransformerEncoderLayer):
            raise TypeError(f"TransformerEncoder: encoder_layer must be a cattn.nn."
                            f"TransformerEncoderLayer, got {type(encoder_layer).__name__}")
        n = _positive_int(num_layers, "num_layers", "TransformerEncoder")
        _check_stack("TransformerEncoder", n, encoder_layer)
        self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(n)])
        self.num_layers = n
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None, *,
                skip_padding=False):
        """src (B, L, E) -> (B, L, E). is_causal=None: detected from `mask`
        (torch's causal mask, bool or float), as torch does.
        skip_padding (keyword-only, default False): with a
        src_key_padding_mask, the real-tokens-only path through the whole
        stack (forward_tokens: packed once, unpacked once); real positions as
        the full path, padding positions 0 (see TransformerEncoderLayer)."""
        first = self.layers[0]
        if is_causal is None:
            x0 = np.asarray(src)
            ax = 1 if (first.batch_first and x0.ndim == 3) else 0
            is_causal = _is_causal_mask(mask, x0.shape[ax]) if x0.ndim >= 2 else False
        if skip_padding and src_key_padding_mask is not None:
            return _on_real_tokens(
                lambda x, tokens: self.forward_tokens(x, tokens, mask, is_causal)[0],
                src, src_key_padding_mask, first.batch_first, first.dtype, type(self).__name__)
        x = src
        for layer in self.layers:
            x = layer(x, mask, src_key_padding_mask, is_causal)
        return _final_norm(self.norm, x)

    def forward_tokens(self, x, tokens, mask=None, is_causal=False, *, need_weights=False):
        """The stack on the real tokens of a padded batch (see RealTokens):
        x (T, E) -> (out (T, E), a list of each layer's attention weights
        (B, H, L, L) if need_weights else None)."""
        owner = "MultiheadAttention"              # the flags as the layers check them
        need_weights = as_flag(need_weights, "need_weights", owner)
        is_causal = False if is_causal is None else as_flag(is_causal, "is_causal", owner)
        if not need_weights and mask is None:
            lengths = tokens.real_lengths() if isinstance(tokens, RealTokens) else None
            y = None if lengths is None else encoder_tokens(self.layers, x, lengths, is_causal)
            if y is not None:                 # the same kernel calls, without the Python
                return _final_norm(self.norm, y), None
        weights = [] if need_weights else None
        for layer in self.layers:
            x, w = layer.forward_tokens(x, tokens, mask, is_causal, need_weights=need_weights)
            if need_weights:
                weights.append(w)
        return _final_norm(self.norm, x), weights


class TransformerDecoder(Module):
    """num_layers deep copies of decoder_layer, then an optional final norm."""

    def __init__(self, decoder_layer, num_layers, norm=None):
        super().__init__()
        if not isinstance(decoder_layer, TransformerDecoderLayer):
            raise TypeError(f"TransformerDecoder: decoder_layer must be a cattn.nn."
                            f"TransformerDecoderLayer, got {type(decoder_layer).__name__}")
        n = _positive_int(num_layers, "num_layers", "TransformerDecoder")
        _check_stack("TransformerDecoder", n, decoder_layer)
        self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(n)])
        self.num_layers = n
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal=False):
        """tgt (B, L, E), memory (B, S, E) -> (B, L, E); tgt_is_causal=None:
        detected from tgt_mask."""
        if tgt_is_causal is None:
            t0 = np.asarray(tgt)
            ax = 1 if (self.layers[0].batch_first and t0.ndim == 3) else 0
            tgt_is_causal = _is_causal_mask(tgt_mask, t0.shape[ax]) if t0.ndim >= 2 else False
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask,
                      memory_key_padding_mask, tgt_is_causal, memory_is_causal)
        return _final_norm(self.norm, x)


# ----------------------------------------------------------------------------
# Positional encodings


class PositionalEncoding(Module):
    """The paper's sinusoids (section 3.5), added to the input:
        PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)).
    `pe` (max_len, d_model) is a constant table (not in state_dict).
    forward(x, offset=0): x (B, L, E) (or (L, B, E) if not batch_first)
    plus PE[offset : offset + L]; returns a new array."""

    def __init__(self, d_model, max_len=5000, *, batch_first=True, dtype=np.float32):
        super().__init__()
        d = _positive_int(d_model, "d_model", "PositionalEncoding")
        n = _positive_int(max_len, "max_len", "PositionalEncoding")
        self.dtype = as_float_dtype(dtype, "PositionalEncoding")
        check_size((n, d), self.dtype, "PositionalEncoding", f"the table (max_len={show(n)}, "
                   f"d_model={show(d)})", eager=True, extra_bytes_per_item=8)  # + float64 temp
        self.batch_first = bool(batch_first)
        pos = np.arange(n, dtype=np.float64)[:, None]
        div = 10000.0 ** (np.arange(0, d, 2, dtype=np.float64) / d)  # 10000^(2i/d)
        pe = np.empty((n, d))
        pe[:, 0::2] = np.sin(pos / div)
        pe[:, 1::2] = np.cos(pos / div[: d // 2])
        self.pe = pe.astype(self.dtype)

    def forward(self, x, offset=0):
        x = as_input(x, "x", self.dtype, "PositionalEncoding")
        offset = as_int(offset, "offset", "PositionalEncoding")
        ax = 1 if (self.batch_first and x.ndim == 3) else 0
        L = x.shape[ax] if x.ndim >= 2 else 0
        if x.ndim not in (2, 3) or x.shape[-1] != self.pe.shape[1]:
            raise ValueError(f"PositionalEncoding: x has shape {x.shape}; expected (..., L, "
                             f"{self.pe.shape[1]})")
        if offset < 0 or offset + L > self.pe.shape[0]:
            raise ValueError(f"PositionalEncoding: positions {offset}..{offset + L - 1} exceed "
                             f"max_len={self.pe.shape[0]}")
        pe = self.pe[offset:offset + L]
        return x + (pe if ax == 1 or x.ndim == 2 else pe[:, None, :])

    def extra_repr(self):
        return f"d_model={self.pe.shape[1]}, max_len={self.pe.shape[0]}"


def _rotate_half(x, cos, sin):
    """RoPE's rotation of x (..., T, D) by angles with cos, sin (..., T, D/2)
    (broadcast): pairs (x_i, x_{i+D/2}) -> a new array."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    out = np.empty(x.shape, x.dtype)
    o1, o2 = out[..., :h], out[..., h:]
    np.multiply(x1, cos, out=o1)
    o1 -= x2 * sin
    np.multiply(x2, cos, out=o2)
    o2 += x1 * sin
    return out


class RotaryEmbedding(Module):
    """Rotary position embedding (RoPE, Su et al. 2021) for q and k.

    Pairing convention: the half-split ("rotate_half") layout of GPT-NeoX and
    LLaMA (Hugging Face): feature i is paired with feature i + D/2, not with
    its neighbour (GPT-J / the paper's interleaved layout). For position p and
    frequency theta_i = base^(-2i/D), i < D/2, the pair (x_i, x_{i+D/2}) read
    as the complex number x_i + 1j * x_{i+D/2} is multiplied by
    exp(1j * p * theta_i):
        out_i       = x_i * cos(p theta_i) - x_{i+D/2} * sin(p theta_i)
        out_{i+D/2} = x_{i+D/2} * cos(p theta_i) + x_i * sin(p theta_i)
    so q_m . k_n depends on positions only through m - n.
    """

    def __init__(self, head_dim, base=10000.0, *, inv_freq=None):
        """inv_freq (keyword-only): the (D/2,) frequencies theta_i to use instead
        of base^(-2i/D) (a scaled RoPE, e.g. Llama 3's; see cattn.nn_decoder)."""
        super().__init__()
        D = _positive_int(head_dim, "head_dim", "RotaryEmbedding")
        if D % 2:
            raise ValueError(f"RotaryEmbedding: head_dim must be even, got {D}")
        self.head_dim = D
        self.base = as_real(base, "base", "RotaryEmbedding", finite=True, lo=0.0, lo_open=True)
        self.inv_freq = self.base ** (-np.arange(0, D, 2, dtype=np.float64) / D)  # (D/2,)
        if inv_freq is not None:
            f = np.asarray(inv_freq, dtype=np.float64)
            if f.shape != self.inv_freq.shape or not np.all(np.isfinite(f)):
                raise ValueError(f"RotaryEmbedding: inv_freq must hold {D // 2} finite "
                                 f"frequencies, got shape {f.shape}")
            self.inv_freq = f
        self._tables = {}

    # positions past this many are computed per call instead of growing the cached table
    _TABLE_MAX = TABLE_MAX = 1 << 20
    # positions must stay exact in the float64 angle p * theta
    _POS_MAX = 1 << 53

    def _cos_sin(self, start, n, dtype):
        """cos, sin (n, D/2) for positions start..start+n-1 (cached, grown by
        doubling up to _TABLE_MAX positions; a window past that is computed
        directly, with the same values)."""
        if start + n > self._TABLE_MAX:
            check_size((n, self.head_dim), np.float64, "RotaryEmbedding",
                       f"the cos/sin table of {n} positions", eager=True)
            ang = (np.arange(start, start + n, dtype=np.float64)[:, None]
                   * self.inv_freq[None, :])
            return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
        c = self._tables.get(np.dtype(dtype))
        if c is None or c[0].shape[0] < start + n:
            m = max(64, start + n, 2 * (c[0].shape[0] if c is not None else 0))
            ang = np.arange(m, dtype=np.float64)[:, None] * self.inv_freq[None, :]
            c = (np.cos(ang).astype(dtype), np.sin(ang).astype(dtype))
            self._tables[np.dtype(dtype)] = c
        return c[0][start:start + n], c[1][start:start + n]

    def table(self, n, dtype=np.float32):
        """(cos, sin), each (n, D/2) in dtype: the angles p * theta_i of
        positions p = 0..n-1, the values apply() and apply_positions() use
        (read-only views of the cached table; n <= 2**20)."""
        n = as_int(n, "n", "RotaryEmbedding.table", lo=0, hi=self._TABLE_MAX)
        return self._cos_sin(0, n, np.dtype(dtype))

    def apply(self, x, offset=0):
        """x (..., T, D) at positions offset..offset+T-1 -> rotated copy."""
        x = np.asarray(x)
        if x.ndim < 2 or x.shape[-1] != self.head_dim:
            raise ValueError(f"RotaryEmbedding: x has shape {x.shape}; expected (..., T, {self.head_dim})")
        if x.dtype not in _FLOATS:
            raise TypeError(f"RotaryEmbedding: x has dtype {x.dtype}; expected float32 or float64")
        offset = as_int(offset, "offset", "RotaryEmbedding", lo=0,
                        hi=self._POS_MAX - x.shape[-2],
                        hi_why=" (positions must be exact in float64: offset + T <= 2**53)")
        cos, sin = self._cos_sin(offset, x.shape[-2], x.dtype)
        return _rotate_half(x, cos, sin)

    def apply_positions(self, x, positions):
        """x (B, H, T, D) with token t of sequence b at position positions[b, t]
        (an integer array (B, T), e.g. counted from each sequence's first real
        token under left padding) -> rotated copy."""
        x = np.asarray(x)
        pos = np.asarray(positions)
        if x.ndim != 4 or x.shape[-1] != self.head_dim or pos.shape != (x.shape[0], x.shape[2]):
            raise ValueError(f"RotaryEmbedding: x has shape {x.shape} and positions "
                             f"{pos.shape}; expected (B, H, T, {self.head_dim}) and (B, T)")
        if pos.dtype.kind not in "iu" or (pos.size and (pos.min() < 0
                                                         or pos.max() >= self._TABLE_MAX)):
            raise ValueError(f"RotaryEmbedding: positions must be integers in "
                             f"[0, {self._TABLE_MAX})")
        cos, sin = self._cos_sin(0, int(pos.max()) + 1 if pos.size else 1, x.dtype)
        cos, sin = cos[pos][:, None], sin[pos][:, None]          # (B, 1, T, D/2)
        return _rotate_half(x, cos, sin)

    def forward(self, q, k, offset=0):
        """(q, k) rotated: q (..., L, D), k (..., S, D), both from position offset."""
        return self.apply(q, offset), self.apply(k, offset)

    def extra_repr(self):
        return f"head_dim={self.head_dim}, base={self.base}"


# ----------------------------------------------------------------------------
# Decoder-only (GPT-style) stack with KV-cache decoding


class DecoderOnly(Module):
    """A GPT-style decoder-only stack: num_layers pre-LN causal self-attention
    blocks (TransformerEncoderLayer with norm_first=True, is_causal=True) and
    a final LayerNorm, on embeddings (B, L, E) -> (B, L, E) (token embedding
    and output head are the caller's). Names are those of torch's
    TransformerEncoder(TransformerEncoderLayer(..., norm_first=True), N,
    norm=LayerNorm(E)): layers.0.self_attn.in_proj_weight, ..., norm.weight,
    so such a torch stack run with a causal mask is the reference.

    Incremental decoding: `cache = model.new_cache(B, max_len)` (one
    cattn.KVCache per layer), then `model(x_new, cache=cache)` for each chunk
    of new positions (a prompt, then one token at a time): only the new
    positions are projected, their K and V appended to each layer's cache,
    and their queries attend to the cached keys — O(S) per new token.
    rotary=True applies RotaryEmbedding(head_dim) to q and k in every layer
    (positions continue from the cache length).
    Layers get distinct random initial weights (from `seed`).
    """

    def __init__(self, d_model, nhead, num_layers, dim_feedforward=None, activation="gelu_tanh",
                 layer_norm_eps=1e-5, bias=True, *, rotary=False, dtype=np.float32, seed=None):
        super().__init__()
        self.dtype = as_float_dtype(dtype, "DecoderOnly")
        n = _positive_int(num_layers, "num_layers", "DecoderOnly")
        ff = 4 * d_model if dim_feedforward is None else dim_feedforward
        rng = _rng(seed)

        def layer():
            return TransformerEncoderLayer(d_model, nhead, ff, 0.0, activation, layer_norm_eps,
                                           batch_first=True, norm_first=True, bias=bias,
                                           dtype=dtype, seed=rng)
        first = layer()
        _check_stack("DecoderOnly", n, first)
        self.layers = ModuleList([first] + [layer() for _ in range(n - 1)])
        self.norm = LayerNorm(d_model, layer_norm_eps, bias, dtype=dtype)
        self.d_model, self.nhead, self.num_layers = d_model, nhead, n
        if rotary:
            rope = RotaryEmbedding(d_model // nhead)
            for layer in self.layers:
                layer.self_attn.rotary = rope

    def new_cache(self, batch, max_len):
        """One empty cattn.KVCache (batch, nhead, max_len, head_dim) per layer."""
        D = self.d_model // self.nhead
        return [KVCache(batch, self.nhead, max_len, D, self.dtype) for _ in self.layers]

    def _check_cache(self, cache, x):
        """Every layer's cache fits x before any is extended: a bad cache
        raises TypeError / ValueError and leaves all caches unchanged."""
        owner = "DecoderOnly"
        if not isinstance(cache, (list, tuple)) or not all(isinstance(c, KVCache) for c in cache):
            raise TypeError(f"{owner}: cache must be the list of cattn.KVCache from new_cache(), "
                            f"got {show(cache)}")
        if len(cache) != len(self.layers):
            raise ValueError(f"{owner}: cache has {len(cache)} entries for "
                             f"{len(self.layers)} layers; use new_cache()")
        B, T = x.shape[0], x.shape[1]
        want = (B, self.nhead, self.d_model // self.nhead)
        for i, c in enumerate(cache):
            b, h, _, d = c.k.shape
            if (b, h, d) != want or c.v.shape[-1] != want[2] or c.k.dtype != self.dtype:
                raise ValueError(f"{owner}: cache[{i}] holds {c.k.dtype} keys of shape "
                                 f"{c.k.shape}; this input needs (batch, heads, max_len, "
                                 f"head_dim) = ({B}, {want[1]}, max_len, {want[2]}) "
                                 f"in {self.dtype}: use new_cache({B}, max_len)")
            if c.length + T > c.max_len:
                raise ValueError(f"{owner}: cache[{i}] holds {c.length} of {c.max_len} "
                                 f"positions; {T} more exceed max_len")

    def forward(self, x, cache=None):
        """x (B, T, E) -> (B, T, E). Without cache: the full causal forward over
        the T positions. With cache (from new_cache): x holds the T positions
        that follow the cached ones; returns their outputs and extends the
        caches (identical to the full forward's last T rows)."""
        x = as_input(x, "x", self.dtype, "DecoderOnly")
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"DecoderOnly: x has shape {x.shape}; expected (B, T, {self.d_model})")
        if cache is None:
            for layer in self.layers:
                x = layer(x, is_causal=True)
        else:
            self._check_cache(cache, x)
            for layer, kv in zip(self.layers, cache):
                x = layer(x, kv_cache=kv)
        return self.norm(x, out=x)


# The decoder-only LLM layers live in their own file (one concern per file);
# imported last: they build on the classes above.
from .nn_decoder import (CausalSelfAttention, DecoderBlock, GatedMLP, MLP,  # noqa: E402
                         RMSNorm, causal_mask)
# Packed formats of the linear weights, also imported last (they know Linear
# and MultiheadAttention); Module's parameter methods use PACKED and repack.
from .nn_quantize import PACKED, PackedRows, compute_dtype, pack_weights, quantize, repack  # noqa: E402
from .nn_fastpath import encoder_tokens  # noqa: E402
