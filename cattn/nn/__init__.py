"""cattn.nn — the Transformer of "Attention Is All You Need", in Python over
cattn's kernels.

What this package is: small layer classes with torch's constructor arguments,
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
RotaryEmbedding -> the LLM layers (RMSNorm, GatedMLP, MLP,
CausalSelfAttention with a KV cache, DecoderBlock) -> DecoderOnly (a
GPT-style stack of DecoderBlock with per-layer KV caches) -> program (a
DecoderBlock stack as one C call per step).
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
  encoder layer and stack, forward_tokens. The torch-compatible modules
  have torch's signatures and nothing else: rotary positions and KV caches
  belong to the LLM layers (CausalSelfAttention, DecoderBlock, DecoderOnly).
- Linear weights in a packed format, as torch's quantize_dynamic:
  quantize(module, "float32" | "bfloat16" | "int8") and pack_weights(module)
  (cattn/nn/quantize.py); a packed MultiheadAttention holds in_proj_weight
  as a PackedRows (query rows | key and value rows, or one block for the
  layers' self-attention).

Files, one concern each (bottom first; none imports a file above it):
    module.py              Module, ModuleList, skip_init, state_dict; shared argument checks
    packed_params.py       packed parameters: PackedRows, compute_dtype, repack
    layers.py              Linear, LayerNorm, Embedding
    positional.py          PositionalEncoding, RotaryEmbedding
    attention.py           MultiheadAttention, RealTokens, mask helpers
    transformer_layers.py  TransformerEncoderLayer, TransformerDecoderLayer
    fastpath.py            the encoder stack's real-tokens programs (kernel calls, C loop)
    decoder.py             the LLM layers: RMSNorm, GatedMLP, MLP, CausalSelfAttention, DecoderBlock
    program.py             a DecoderBlock stack as one program (one C call per step)
    transformer.py         TransformerEncoder, TransformerDecoder, DecoderOnly (DecoderBlocks)
    quantize.py            quantize, pack_weights
"""

from .module import Module, ModuleList, mutation_count, skip_init
from .packed_params import PackedRows
from .layers import Embedding, LayerNorm, Linear
from .positional import PositionalEncoding, RotaryEmbedding
from .attention import MultiheadAttention, RealTokens, generate_square_subsequent_mask
from .transformer_layers import TransformerDecoderLayer, TransformerEncoderLayer
from .transformer import DecoderOnly, TransformerDecoder, TransformerEncoder
from .decoder import CausalSelfAttention, DecoderBlock, GatedMLP, MLP, RMSNorm, causal_mask
from .program import DecoderProgram, decoder_program
from .quantize import pack_weights, quantize

__all__ = [
    "Module", "ModuleList", "Linear", "LayerNorm", "MultiheadAttention",
    "TransformerEncoderLayer", "TransformerDecoderLayer",
    "TransformerEncoder", "TransformerDecoder",
    "PositionalEncoding", "RotaryEmbedding", "DecoderOnly", "Embedding", "RealTokens",
    "generate_square_subsequent_mask", "skip_init",
    # linear weights in a packed format (quantize.py)
    "quantize", "pack_weights", "PackedRows",
    # the decoder-only LLM layers (decoder.py)
    "RMSNorm", "GatedMLP", "MLP", "CausalSelfAttention", "DecoderBlock", "causal_mask",
    # a DecoderBlock stack as one program (program.py); what invalidates a built one
    "DecoderProgram", "decoder_program", "mutation_count",
]
