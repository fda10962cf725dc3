"""cattn — a CPU attention engine for Python.

C kernels (packed GEMM, fused attention, softmax, norms) behind a NumPy API.
"""
__version__ = "0.1.0"

try:
    from . import _ext
except ImportError as _e:   # an unbuilt source tree (e.g. the repo root on sys.path)?
    import importlib.machinery as _m, os as _os
    _here = _os.path.dirname(_os.path.abspath(__file__))
    if any(_os.path.exists(_os.path.join(_here, "_ext" + _s)) for _s in _m.EXTENSION_SUFFIXES):
        raise                # the module is there but failed to load: keep that error
    raise ImportError(
        f"cattn's compiled extension (cattn._ext) is missing in {_here}: this is the "
        "unbuilt source tree, found first on sys.path. Install cattn (`pip install .`) "
        "and run from another directory, or build it in place with "
        "`python setup.py build_ext --inplace`.") from _e
if _ext.isa_error():       # CATTN_ISA named a path this build or CPU lacks
    raise ImportError(_ext.isa_error())
from ._threads import get_num_threads, num_threads, set_contention_detection, set_num_threads
from .ops import (KVCache, PackedWeight, attention_weights, gelu, layer_norm, linear, log_softmax,
                  matmul, pack_weight, relu, rms_norm, scaled_dot_product_attention, silu, softmax)
from ._config import show_config
from .plot import plot_attention
from . import nn

__all__ = [
    "matmul", "linear", "pack_weight", "PackedWeight",
    "scaled_dot_product_attention", "attention_weights", "KVCache",
    "softmax", "log_softmax", "layer_norm", "rms_norm", "gelu", "silu", "relu",
    "get_num_threads", "set_num_threads", "num_threads", "set_contention_detection",
    "show_config",
    "plot_attention",
]


def __getattr__(name):
    # `cattn.models` on first use: its optional dependencies load only then
    if name == "models":
        import importlib
        return importlib.import_module(".models", __name__)
    raise AttributeError(f"module 'cattn' has no attribute {name!r}")
