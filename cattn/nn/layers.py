"""cattn.nn.layers — the basic layers: Linear, LayerNorm, Embedding (torch's
arguments, parameter names and forward signatures; every product through
cattn.linear).
"""


import numpy as np

from .._validate import as_float_dtype, as_int, as_real, check_size, show
from ..ops.gemm import linear
from ..ops.rows import layer_norm
from .module import Module, linear_uniform, make_rng, new_param, positive_int
from .packed_params import PACKED


class Linear(Module):
    """y = x W^T + b, W (out_features, in_features) as in torch, initialised as
    torch's nn.Linear (uniform +-1/sqrt(in_features)). forward(x, activation)
    fuses bias and activation into the GEMM epilogue."""

    def __init__(self, in_features, out_features, bias=True, *, dtype=np.float32, seed=None):
        super().__init__()
        dtype = as_float_dtype(dtype, "Linear")
        in_features = as_int(in_features, "in_features", "Linear")
        out_features = as_int(out_features, "out_features", "Linear")
        rng = make_rng(seed)
        self.in_features, self.out_features = in_features, out_features
        self.register_parameter(
            "weight", linear_uniform(rng, (out_features, in_features), in_features, dtype,
                                      "Linear", f"weight (out_features={show(out_features)}, "
                                                f"in_features={show(in_features)})"))
        self.register_parameter(
            "bias", linear_uniform(rng, (out_features,), in_features, dtype, "Linear",
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
        self.normalized_shape = (positive_int(n, "normalized_shape", "LayerNorm"),)
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
    padding_idx row zero). forward returns a new array (a gather, no GEMM).
    The weight may be a PackedWeight (a GGUF file's table, shared with a
    tied output projection): the rows are unpacked per lookup."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, *, dtype=np.float32,
                 seed=None):
        super().__init__()
        owner = "Embedding"
        dtype = as_float_dtype(dtype, owner)
        n = positive_int(num_embeddings, "num_embeddings", owner)
        d = positive_int(embedding_dim, "embedding_dim", owner)
        if padding_idx is not None:
            padding_idx = as_int(padding_idx, "padding_idx", owner, lo=-n, hi=n - 1) % n
        self.num_embeddings, self.embedding_dim, self.padding_idx = n, d, padding_idx
        rng = make_rng(seed)
        self.register_parameter("weight", new_param(
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
        if isinstance(self.weight, PACKED):            # a packed table (a GGUF file's)
            return self.weight.rows(ids)
        return self.weight[ids]

    def extra_repr(self):
        pad = "" if self.padding_idx is None else f", padding_idx={self.padding_idx}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}"


# ----------------------------------------------------------------------------
# Real tokens of a padded batch


