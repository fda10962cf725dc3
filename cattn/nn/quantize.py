"""cattn.nn.quantize — the linear weights of cattn.nn modules in a packed
format (cattn.pack_weight): nn.quantize(module, dtype) and nn.pack_weights
(module), exported from cattn.nn (PackedRows: packed_params.py).

What this file is: which parameters are linear weights (nn.Linear's weight,
MultiheadAttention's projections), packing them in one format across a layer
or a stack, and repacking a new value in a parameter's format (assignment,
load_state_dict). What it is not: the packing itself (cattn.ops.packed) or
the layers (cattn.nn).

Formats (the `dtype` of quantize; a module computes in its own dtype):
    "float32"   float32 modules: the weights' values, packed once
    "bfloat16"  float32 modules: weights rounded to bfloat16 (nearest even)
    "int8"      float32 modules: int8 weights with per-output-channel scales,
                activations quantized per row at call time
    "float64"   float64 modules: the weights' values, packed once
A module remembers its format per parameter: state_dict() gives the values
the kernel uses as arrays of the module's dtype (float32: bfloat16-rounded
values; for int8 q * scale), and load_state_dict() / `layer.weight = array`
pack the new values in that parameter's format again.
"""

from .._validate import show
from ..ops.packed import FORMATS, pack_weight
from .attention import MultiheadAttention
from .layers import Linear
from .module import Module
from .packed_params import PACKED, PackedRows, compute_dtype

__all__ = ["quantize", "pack_weights", "DTYPES"]

DTYPES = ("float32", "bfloat16", "int8", "float64", "int4", "int8g", "int6g", "int5g",
          "bfloat16dot")


def _linear_weights(m):
    """(name, row cuts or None) of the linear weights that module m holds
    itself (not its sub-modules)."""
    if isinstance(m, Linear):
        return (("weight", None),)
    if isinstance(m, MultiheadAttention):     # in_proj: query rows | key and value rows
        cuts = (m.embed_dim,) if m.split_in_proj else ()
        return (("in_proj_weight", cuts), ("q_proj_weight", None),
                ("k_proj_weight", None), ("v_proj_weight", None))
    return ()


def _named_modules(m, prefix=""):
    """(dotted prefix, module) for m and its sub-modules, in torch's order."""
    yield prefix, m
    for k, c in m._modules.items():
        yield from _named_modules(c, f"{prefix}{k}.")


def _convert(module, target, op):
    """Pack every linear weight p of module (itself included) in format
    target(p) (None: leave p as it is). Every weight is checked before any
    is replaced. Returns the module."""
    if not isinstance(module, Module):
        raise TypeError(f"{op}: expected a cattn.nn.Module, got {show(module)}")
    plan = []
    for prefix, m in _named_modules(module):
        for name, cuts in _linear_weights(m):
            p = m._parameters.get(name)
            fmt = None if p is None else target(p)
            if fmt is None or (isinstance(p, PACKED) and p.format == fmt):
                continue
            have = compute_dtype(p)
            if have != FORMATS[fmt].compute:
                raise TypeError(f"{op}: {fmt!r} weights need a {FORMATS[fmt].compute} module, "
                                f"but {prefix}{name} is {have} (a float64 module packs as "
                                "'float64' only, a float32 one as 'float32', 'bfloat16', "
                                "'int8' or 'int4')")
            plan.append((m, name, fmt, cuts))
    for m, name, fmt, cuts in plan:
        p = m._parameters[name]
        w = p.unpack() if isinstance(p, PACKED) else p
        setattr(m, name, pack_weight(w, fmt) if cuts is None else PackedRows(w, fmt, cuts))
    return module


def quantize(module, dtype):
    """Convert every linear weight of `module` (a layer or a stack: nn.Linear
    weights and MultiheadAttention projections, its own and its
    sub-modules') to the packed format `dtype` and return the module, as
    torch's quantize_dynamic: "float32", "bfloat16", "int8", "int4",
    "int8g", "int6g" or "int5g" for a float32 module, "float64" for a float64 one (see the
    formats above; cattn/ops/formats.py says what each holds). Inputs and
    outputs keep the module's dtype. Weights already packed are converted
    from the values they hold (a bfloat16 or int8 layer does not get its
    original float32 weights back); those already in `dtype` are kept.
    state_dict() gives the values the kernels use as arrays; load_state_dict
    and assignment pack again in each parameter's format.
    ValueError for an unknown dtype, TypeError for a module that is not a
    cattn.nn.Module or a format the module's dtype cannot hold."""
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(f"quantize: dtype must be one of {', '.join(map(repr, DTYPES))}, "
                         f"got {show(dtype)}")
    return _convert(module, lambda p: dtype, "quantize")


def pack_weights(module):
    """Pack every linear weight of `module` that is still an array once, in
    its own dtype (quantize(module, "float32") for a float32 module,
    "float64" for a float64 one; packed weights are left as they are) and
    return the module: the outputs keep their bits, the few-row calls
    (decoding a token, a short sentence) stream the packed panels and the
    many-row calls skip packing. The packed weight replaces the array (no
    second copy)."""
    return _convert(module, lambda p: None if isinstance(p, PACKED) else p.dtype.name,
                    "pack_weights")
