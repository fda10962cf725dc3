"""cattn.nn.program — a decoder stack as one program: the description of
its layers (weights, formats, shapes, flags) built once from the modules,
and each forward step on a KV cache (the prefill of L prompt tokens, or a
decode step of one token per sequence) run by one nogil C call
(cattn._ext.DecoderStack.step, cattn/_decoder.pxi).

What this file is: the builder and its checks. A stack of
nn.decoder.DecoderBlock modules of one shape (what CausalLM makes) becomes
a DecoderProgram; anything else (another block type or a subclass, float64,
a layer of another shape or activation, a weight in a form no kernel takes
as is) gives None and the caller runs the modules themselves. Results are
the bits of the modules' forward (DecoderBlock on a KVCache), for every
weight format and thread count: the same kernel calls with the same
arguments (tests/programs/test_decoder_program.py compares them). What it is not:
a layer (the layers are nn.decoder's, the reference this program must
equal) or a kernel.

Legend: B sequences, L new tokens each, E model width, H / Hk query / kv
heads, D head dim, F the MLP's hidden width, S0 cached positions.
"""
import math
import weakref

import numpy as np

from .. import _ext
from .._threads import get_num_threads
from ..ops.attention import KVCache
from .decoder import MLP, CausalSelfAttention, DecoderBlock, GatedMLP, RMSNorm
from .layers import LayerNorm, Linear
from .module import current
from .packed_params import weight_entry
from .positional import RotaryEmbedding

__all__ = ["DecoderProgram", "decoder_program", "linear_entry"]

_F32 = np.dtype(np.float32)
_CACHE_KINDS = (_F32, np.dtype(np.float16))        # float32 or float16 KV caches
_ACT = _ext.ACT_CODES
# the description of each layer stack, kept while its modules are unchanged
_built = weakref.WeakKeyDictionary()


def _f32_vector(a, n):
    """a usable as a kernel's (n,) float32 argument as it is (None passes)."""
    return a is None or (type(a) is np.ndarray and a.dtype == _F32 and a.shape == (n,)
                         and a.flags.c_contiguous and a.flags.aligned)


def linear_entry(lin):
    """An nn.Linear's weight and bias as the C programs take them
    (packed_params.weight_entry), or None."""
    if type(lin) is not Linear:
        return None
    return weight_entry(lin.weight, lin.bias, lin.out_features, lin.in_features)


def _norm_entry(norm, E):
    """('rms' or 'layer', weight, bias, eps) of a norm over E, or None."""
    if type(norm) is RMSNorm:
        if norm.dim != E or norm.dtype != _F32 or not _f32_vector(norm.weight, E):
            return None
        return "rms", norm.weight, None, float(norm.eps)
    if type(norm) is LayerNorm:
        if (norm.normalized_shape != (E,) or not _f32_vector(norm.weight, E)
                or not _f32_vector(norm.bias, E)):
            return None
        return "layer", norm.weight, norm.bias, float(norm.eps)
    return None


def _layer_entry(block, shape):
    """The layer as _ext.DecoderStack takes it and its shape key, or None."""
    if type(block) is not DecoderBlock:
        return None
    sa, mlp = block.self_attn, block.mlp
    if type(sa) is not CausalSelfAttention or sa.dtype != _F32:
        return None
    if (block.post_attn_norm is not None or block.post_mlp_norm is not None
            or block.residual_scale != 1.0 or sa.window is not None or sa.scale is not None):
        return None                 # (Gemma 3's, Granite's layers: their own forward)
    if type(mlp) is GatedMLP:
        up, down, F, gated = mlp.gate_up_proj, mlp.down_proj, mlp.hidden_dim, True
    elif type(mlp) is MLP:
        up, down, F, gated = mlp.fc1, mlp.fc2, mlp.fc1.out_features, False
    else:
        return None
    E, H, Hk, D = sa.embed_dim, sa.num_heads, sa.num_kv_heads, sa.head_dim
    n1, n2 = _norm_entry(block.norm1, E), _norm_entry(block.norm2, E)
    lins = (linear_entry(sa.qkv_proj), linear_entry(sa.o_proj), linear_entry(up),
            linear_entry(down))
    if n1 is None or n2 is None or n1[0] != n2[0] or any(w is None for w in lins):
        return None
    want = ((H + 2 * Hk) * D, E), (E, H * D), ((2 if gated else 1) * F, E), (E, F)
    if any(w[5:7] != s for w, s in zip(lins, want)):
        return None
    qk = (None, None, 0.0)
    if sa.qk_norm:                                   # Qwen3: RMSNorm of each q and k head
        nq, nk = _norm_entry(sa.q_norm, D), _norm_entry(sa.k_norm, D)
        if nq is None or nk is None or nq[0] != "rms" or nk[0] != "rms" or nq[3] != nk[3]:
            return None
        qk = (nq[1], nk[1], nq[3])
    key = (E, H, Hk, D, F, n1[0], gated, mlp.activation, sa.rotary, sa.qk_norm)
    if shape is not None and key != shape:
        return None
    return (*lins, *n1[1:], *n2[1:], *qk), key


def decoder_program(layers):
    """The DecoderProgram of a stack of DecoderBlock layers (an
    nn.ModuleList or a list), or None when a layer is not of the form it
    runs. Built once per stack and reused while no attribute of the stack's
    own modules is assigned (a ModuleList is remembered; a plain list is
    built each call)."""
    if isinstance(layers, list):
        return DecoderProgram._build(layers)
    return current(_built, layers, lambda stack: DecoderProgram._build(list(stack)))


class DecoderProgram:
    """One decoder stack's description, run one forward step at a time by
    run(); make one with decoder_program(layers)."""

    def __init__(self, *args, **kwargs):
        raise TypeError("DecoderProgram: make one with cattn.nn.decoder_program(layers)")

    @classmethod
    def _build(cls, layers):
        if not layers:
            return None
        entries, shape = [], None
        for block in layers:
            got = _layer_entry(block, shape)
            if got is None:
                return None
            entries.append(got[0])
            shape = got[1]
        E, H, Hk, D, F, norm, gated, act, rotary, qk_norm = shape
        self = object.__new__(cls)
        self.layers = layers
        self.rotary = rotary
        self.shape = dict(E=E, H=H, Hk=Hk, D=D, F=F)
        self._stack = _ext.DecoderStack(entries, E, H, Hk, D, F, norm == "rms", gated,
                                        _ACT[act or "none"], _ACT["none"], rotary is not None,
                                        1.0 / math.sqrt(D),   # the attention's default scale
                                        qk_norm)
        return self

    def _fits(self, x, caches):
        """(start, max_len) when x and caches are what step() takes, else None."""
        s = self.shape
        if not (type(x) is np.ndarray and x.dtype == _F32 and x.ndim == 3
                and x.shape[2] == s["E"] and x.flags.c_contiguous and x.flags.aligned
                and x.flags.writeable and isinstance(caches, (list, tuple))
                and len(caches) == len(self.layers)):
            return None
        B, L = x.shape[:2]
        c0 = caches[0]
        if type(c0) is not KVCache:
            return None
        start, max_len, want = c0.length, c0.max_len, (B, s["Hk"], c0.max_len, s["D"])
        kind = c0.k.dtype                                   # float32, or float16 caches
        if kind not in _CACHE_KINDS:
            return None
        for c in caches:
            if (type(c) is not KVCache or c.length != start or c.k.shape != want
                    or c.v.shape != want or c.k.dtype != kind or c.v.dtype != kind
                    or not (c.k.flags.c_contiguous and c.v.flags.c_contiguous)):
                return None
        if start + L > max_len or B * L == 0:
            return None
        return start, max_len

    def run(self, x, caches, positions=None, attn_mask=None):
        """x (B, L, E) -> (B, L, E), as the layers' forward on the caches:
        `for layer, c in zip(layers, caches): x = layer(x, positions,
        attn_mask, c)` (arguments as DecoderBlock.forward; every cache
        holds the same S0 positions and gets the L new ones). x is updated
        in place and returned when it is a writeable float32 C-contiguous
        array; anything the program does not take runs the layers."""
        fit = self._fits(x, caches)
        mask = pos = cos = sin = None
        msb = rsm = csm = 0
        if fit is not None:
            start, max_len = fit
            B, L, _ = x.shape
            if attn_mask is not None:
                m = attn_mask
                if not (type(m) is np.ndarray and m.dtype == np.bool_ and m.ndim == 4
                        and m.shape == (B, 1, L, start + L)):
                    fit = None
                else:
                    mask, (msb, _, rsm, csm) = m, m.strides
            if fit is not None and self.rotary is not None:
                if positions is None:
                    pos = np.arange(start, start + L, dtype=np.int64)
                    pos = np.tile(pos, B) if B > 1 else pos          # (B*L,), contiguous
                    top = start + L
                else:
                    p = np.asarray(positions)
                    if p.shape != (B, L) or p.dtype.kind not in "iu" or p.min() < 0:
                        fit = None
                    else:
                        pos = np.ascontiguousarray(p, np.int64).reshape(-1)
                        top = int(pos.max()) + 1
                if fit is not None:
                    if top > RotaryEmbedding.TABLE_MAX:
                        fit = None
                    else:
                        cos, sin = self.rotary.table(top)
        if fit is None:
            for layer, c in zip(self.layers, caches):
                x = layer(x, positions, attn_mask, c)
            return x
        self._stack.step(x.reshape(B * L, -1), B, L, [c.k for c in caches],
                         [c.v for c in caches], start, max_len, pos, cos, sin, mask, msb, rsm,
                         csm, get_num_threads())
        for c in caches:
            c.mark_filled(L)
        return x

    def run_ragged(self, x, kcache, vcache, lengths):
        """A ragged decode step: x (B, 1, E) float32 C-contiguous, one new
        token per sequence, updated in place and returned; kcache, vcache:
        per layer the (B, Hk, max_len, D) key and value arrays, float32 or
        (all of them) float16;
        lengths (B,) ints: sequence b holds lengths[b] positions (its
        token's position; rotary and causal alike), gets its keys and
        values written there and attends to its first lengths[b] + 1.
        Each sequence gets the bits its own run() gives alone, whatever
        else is in the step. Returns None (nothing run) when the program
        does not take the step: more than CATTN_DECODE_MAX_ROWS (8) query
        heads per kv head, or arrays of another form."""
        s = self.shape
        if s["H"] // s["Hk"] > _ext.DECODE_MAX_ROWS:
            return None
        if not (type(x) is np.ndarray and x.dtype == _F32 and x.ndim == 3 and x.shape[1] == 1
                and x.shape[2] == s["E"] and x.flags.c_contiguous and x.flags.writeable
                and len(kcache) == len(self.layers) == len(vcache)):
            return None
        B = x.shape[0]
        lens = np.ascontiguousarray(lengths, np.int64)
        if B == 0 or lens.shape != (B,):
            return None
        max_len = kcache[0].shape[2]
        want = (B, s["Hk"], max_len, s["D"])
        kind = getattr(kcache[0], "dtype", None)
        if kind not in _CACHE_KINDS:
            return None
        for a in (*kcache, *vcache):
            if not (type(a) is np.ndarray and a.dtype == kind and a.shape == want
                    and a.flags.c_contiguous and a.flags.writeable):
                return None
        if lens.min() < 0 or lens.max() >= max_len:
            raise ValueError(f"DecoderProgram.run_ragged: lengths {lens.tolist()} outside "
                             f"[0, {max_len}) (max_len {max_len})")
        start = int(lens.max())
        cos = sin = None
        if self.rotary is not None:
            if start + 1 > RotaryEmbedding.TABLE_MAX:
                return None
            cos, sin = self.rotary.table(start + 1)
        self._stack.step(x.reshape(B, -1), B, 1, list(kcache), list(vcache), start, max_len,
                         lens if self.rotary is not None else None, cos, sin, None, 0, 0, 0,
                         get_num_threads(), lens)
        return x
