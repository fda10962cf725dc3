"""The `weights=` option of the models' from_pretrained (SentenceEncoder,
CausalLM, cattn.distributed.embed, the CLI's --weights): the format the
linear weights are packed in once loaded (cattn.nn.quantize)."""
import numpy as np

from .. import nn
from .._validate import show

# "float32": the checkpoint's values in the model's dtype (float64 models too)
# "bfloat16dot": bfloat16 with vdpbf16ps's arithmetic (cattn.ops.formats)
WEIGHTS = ("float32", "bfloat16", "int8", "int4", "bfloat16dot")


def check_weights(weights, owner, dtype=np.float32):
    """weights, or ValueError listing the choices (TypeError when the
    model's dtype cannot hold that format: bfloat16 and int8 compute in
    float32). Checked before anything is read from disk."""
    if not isinstance(weights, str) or weights not in WEIGHTS:
        raise ValueError(f"{owner}: weights must be one of {', '.join(map(repr, WEIGHTS))}, "
                         f"got {show(weights)}")
    if weights != "float32" and np.dtype(dtype) != np.float32:
        raise TypeError(f"{owner}: weights={weights!r} needs dtype=float32, got "
                        f"{np.dtype(dtype)} (a float64 model keeps weights='float32')")
    return weights


def pack(model, weights):
    """Every linear weight of model packed in the checked format `weights`."""
    return nn.pack_weights(model) if weights == "float32" else nn.quantize(model, weights)
