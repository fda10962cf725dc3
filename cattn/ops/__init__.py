"""cattn.ops — the NumPy-facing operations, one module per concern:

    gemm.py       matmul, linear (packed GEMM, bias and activation in the epilogue)
    packed.py     pack_weight, PackedWeight (weights packed once for linear)
    stacked.py    stack_weights (blocks of rows in different formats, one weight)
    attention.py  scaled_dot_product_attention, attention_weights, KVCache
                  (the call described once as an AttentionPlan)
    rows.py       softmax, log_softmax, layer_norm, rms_norm, gelu, silu, relu

Each op validates its arguments once (cattn._validate), broadcasts,
allocates the result and calls the C kernels through cattn._ext. Shape
legend: M/N/K for matrix products; B batch, Hq query heads, H kv heads,
L queries, S keys, E is the head dim, Ev the value dim for attention.
"""
from .attention import AttentionPlan, KVCache, attention_weights, scaled_dot_product_attention
from .gemm import ACTIVATIONS, linear, matmul
from .packed import PackedWeight, pack_weight
from .rows import gelu, layer_norm, log_softmax, relu, rms_norm, silu, softmax
from .stacked import stack_weights

__all__ = [
    "matmul", "linear", "ACTIVATIONS", "pack_weight", "PackedWeight", "stack_weights",
    "scaled_dot_product_attention", "attention_weights", "KVCache", "AttentionPlan",
    "softmax", "log_softmax", "layer_norm", "rms_norm", "gelu", "silu", "relu",
]
