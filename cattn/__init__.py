"""cattn — a CPU attention engine for Python.

C kernels (packed GEMM, fused attention, softmax, norms) behind a NumPy API.
"""
__version__ = "0.1.0"

from . import _ext
from ._threads import get_num_threads, num_threads, set_num_threads
from .ops import (KVCache, attention_weights, gelu, layer_norm, linear, log_softmax, matmul, relu,
                  rms_norm, scaled_dot_product_attention, silu, softmax)
from ._config import show_config
from .plot import plot_attention
from . import nn

__all__ = [
    "matmul", "linear",
    "scaled_dot_product_attention", "attention_weights", "KVCache",
    "softmax", "log_softmax", "layer_norm", "rms_norm", "gelu", "silu", "relu",
    "get_num_threads", "set_num_threads", "num_threads", "show_config",
    "plot_attention",
]


def __getattr__(name):
    # `cattn.models` on first use: its optional dependencies load only then
    if name == "models":
        import importlib
        return importlib.import_module(".models", __name__)
    raise AttributeError(f"module 'cattn' has no attribute {name!r}")
