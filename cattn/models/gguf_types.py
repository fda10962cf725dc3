"""cattn.models.gguf_types — the ggml tensor types of GGUF files, one row
each in GGML_TYPES: values per block, bytes per block, how an array of
blocks decodes into its named parts, and the cattn weight format that
holds those parts exactly.

What this file is: the one place a ggml type is known. A block decodes to
Parts (the stored values q and the scales and mins as the block holds
them); Parts.dequantize() is the one float32 dequantization (ggml's
arithmetic, bit for bit as gguf-py), so GGUFFile.dequantize and the values
of GGUFFile.weight cannot drift apart; Exact names the cattn format a
type's parts go into unchanged. What it is not: the file parser (gguf.py),
the weight formats or their panels (cattn.ops.formats builds a format's
arrays, cattn.ops.packed lays them out), or a quantizer.

Every quantized type's values are one formula over its parts, per group of
values sharing a scale:

    w = (d sc) (q - zero) + m - dmin mn

d, m, dmin: float16 per block; sc: sub-block scales (uint8 per 32 in the
K types, int8 per 16 in Q6_K), mn: the K types' uint8 sub-block mins;
absent parts drop out (no sc: d alone). Legend: nb blocks; n rows of K
values; a part of a block array is (nb, per block), of rows (n, per row).
"""
from typing import Callable, NamedTuple, Optional

import numpy as np

from ..ops.formats import (int4_arrays, int4_k_arrays, int5g_arrays, int6g_arrays, int8g_arrays,
                           preferred_bfloat16)

__all__ = ["GGMLType", "GGML_TYPES", "GGML_TYPE_IDS", "Parts", "Exact"]

_GROUP = 32                 # the group formats' values per scale


class Parts:
    """The named parts of blocks of one ggml type (module docstring): q
    uint8 stored values, zero, d, m, sc, dmin, mn (None where the type has
    none); a float type's parts are its values (float32). Each array is
    (nb, per block) or, for rows, (n, per row): every method takes both."""

    ARRAYS = ("q", "d", "m", "sc", "dmin", "mn", "values")
    __slots__ = ARRAYS + ("zero",)

    def __init__(self, q=None, zero=0, d=None, m=None, sc=None, dmin=None, mn=None, values=None):
        self.q, self.zero, self.d, self.m, self.sc = q, zero, d, m, sc
        self.dmin, self.mn, self.values = dmin, mn, values

    def map(self, f):
        """The parts with f applied to each array (rows reshaped, permuted...)."""
        return Parts(zero=self.zero, **{k: None if getattr(self, k) is None else
                                        f(getattr(self, k)) for k in self.ARRAYS})

    def rows(self, n):
        """The parts of n rows' blocks as (n, per row) arrays."""
        return self.map(lambda a: a.reshape(n, -1))

    @staticmethod
    def concatenate(parts):
        """The rows of several Parts of one type, stacked in order."""
        first = parts[0]
        if len(parts) == 1:
            return first
        return Parts(zero=first.zero, **{k: None if getattr(first, k) is None else
                                         np.concatenate([getattr(p, k) for p in parts])
                                         for k in Parts.ARRAYS})

    def finite(self):
        """Whether every float16 scale and min is finite (a float type's
        values may be anything: float32 holds them)."""
        return all(a is None or np.isfinite(a).all() for a in (self.d, self.m, self.dmin))

    def dequantize(self):
        """The float32 values, (nb, values per block): w = (d sc) (q - zero)
        + m - dmin mn in float32, in ggml's order of operations."""
        if self.values is not None:
            return self.values
        nb, f32 = self.d.size, np.float32
        with np.errstate(all="ignore"):                # inf / NaN scales are the file's
            scale = self.d.reshape(nb, 1).astype(f32)
            if self.sc is not None:
                scale = scale * self.sc.reshape(nb, -1).astype(f32)
            out = np.subtract(self.q.reshape(nb, scale.shape[1], -1), f32(self.zero), dtype=f32)
            out *= scale[:, :, None]
            if self.m is not None:
                out += self.m.reshape(nb, 1, 1).astype(f32)
            if self.dmin is not None:
                out -= (self.dmin.reshape(nb, 1).astype(f32)
                        * self.mn.reshape(nb, -1).astype(f32))[:, :, None]
        return out.reshape(nb, -1)

    def groups(self):
        """(d, mn, sub) of rows' parts per group of 32 values, as the group
        formats (int4, int8g, int6g, int5g) hold them: d and mn the stored
        float16 d and m (d repeated over a block's groups), or for the K
        types d sc and -(dmin mn) multiplied out in float32 (exact); sub
        Q6_K's int8 scales per 16, else None."""
        per = self.q.shape[1] // _GROUP // self.d.shape[1]    # groups a block
        d = np.repeat(self.d, per, axis=1) if per > 1 else self.d
        if self.dmin is None:
            return d, self.m, self.sc
        f32 = np.float32
        with np.errstate(all="ignore"):
            dmin = np.repeat(self.dmin, per, axis=1).astype(f32)
            return d.astype(f32) * self.sc.astype(f32), -(dmin * self.mn.astype(f32)), None


class Exact(NamedTuple):
    """A cattn weight format that holds a type's values exactly: its name,
    and parts of rows -> its to_arrays() dict (None: a float format, packed
    from the values)."""
    format: str
    arrays: Optional[Callable] = None


def _group_format(name, arrays):
    return Exact(name, lambda p: arrays(p.q, *p.groups(), p.zero))


# BF16 values: "bfloat16dot" where this CPU runs vdpbf16ps, else "bfloat16"
# (cattn.ops.formats.preferred_bfloat16: the same values either way)
FLOAT32, BFLOAT16 = Exact("float32"), Exact(str(preferred_bfloat16()))
INT4 = Exact("int4", lambda p: int4_arrays(p.q, *p.groups()[:2], p.zero))
INT4_K = Exact("int4", lambda p: int4_k_arrays(p.q, p.d, p.dmin, p.sc, p.mn))  # two-level
INT8G, INT6G, INT5G = (_group_format("int8g", int8g_arrays), _group_format("int6g", int6g_arrays),
                       _group_format("int5g", int5g_arrays))


class GGMLType(NamedTuple):
    """One ggml type: id, name, values per block, bytes per block,
    decode(blocks (nb, nbytes) uint8) -> Parts, and the cattn format that
    holds it exactly (Exact); decode and exact None: known, not read."""
    id: int
    name: str
    block: int
    nbytes: int
    decode: Optional[Callable] = None
    exact: Optional[Exact] = None


# ---- decoding: blocks (nb, bytes per block) uint8 -> Parts, as ggml lays them out

def _f16(b, at, n=1):
    """The n float16 at bytes at.. of each block -> (nb, n) float16."""
    return np.ascontiguousarray(b[:, at:at + 2 * n]).view("<f2").astype(np.float16)


def _nibbles(qs):
    """(nb, 16) bytes -> (nb, 32): low nibbles then high nibbles."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def _high_bits(qh):
    """(nb, 4) bytes of a little-endian uint32 -> (nb, 32) bit j of it, as 16 or 0."""
    h = np.ascontiguousarray(qh).view("<u4")
    return (((h >> np.arange(32, dtype=np.uint32)) & 1) << 4).astype(np.uint8)


def _scale_min_k4(s):
    """(nb, 12) packed 6-bit scales and mins of Q4_K / Q5_K -> two (nb, 8) uint8."""
    sc = np.empty((len(s), 8), np.uint8)
    mn = np.empty((len(s), 8), np.uint8)
    sc[:, :4] = s[:, 0:4] & 63
    mn[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0x0F) | ((s[:, 0:4] >> 6) << 4)
    mn[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc, mn


def _k4_values(qs):
    """(nb, 128) bytes -> (nb, 256): per 64 values, 32 low nibbles then 32 high."""
    q = qs.reshape(-1, 4, 1, 32)
    return np.concatenate([q & 0x0F, q >> 4], axis=2).reshape(-1, 256)


def _k_parts(b, q):
    """A Q4_K / Q5_K block's parts: d, dmin at bytes 0-3, 12 bytes of scales and mins."""
    sc, mn = _scale_min_k4(b[:, 4:16])
    return Parts(q, d=_f16(b, 0), dmin=_f16(b, 2), sc=sc, mn=mn)


def _f32(b):
    return Parts(values=b.view("<f4").astype(np.float32))


def _f16_values(b):
    return Parts(values=b.view("<f2").astype(np.float32))


def _bf16(b):
    return Parts(values=(b.view("<u2").astype(np.uint32) << 16).view(np.float32))


def _q8_0(b):
    return Parts(b[:, 2:] ^ np.uint8(0x80), zero=128, d=_f16(b, 0))     # int8 + 128, bytewise


def _q4_0(b):
    return Parts(_nibbles(b[:, 2:]), zero=8, d=_f16(b, 0))


def _q4_1(b):
    return Parts(_nibbles(b[:, 4:]), d=_f16(b, 0), m=_f16(b, 2))


def _q5_0(b):
    return Parts(_nibbles(b[:, 6:]) | _high_bits(b[:, 2:6]), zero=16, d=_f16(b, 0))


def _q5_1(b):
    return Parts(_nibbles(b[:, 8:]) | _high_bits(b[:, 4:8]), d=_f16(b, 0), m=_f16(b, 2))


def _q4_k(b):
    return _k_parts(b, _k4_values(b[:, 16:]))


def _q5_k(b):
    bits = (b[:, None, 16:48] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1  # (nb, 8, 32)
    return _k_parts(b, _k4_values(b[:, 48:]) | (bits.reshape(-1, 256) << 4))


def _q6_k(b):
    ql, qh = b[:, :128], b[:, 128:192]
    q = np.empty((len(b), 2, 4, 32), np.uint8)         # per 128 values: 4 runs of 32
    for h in range(2):
        lo, hi = ql[:, 64 * h:64 * h + 64], qh[:, 32 * h:32 * h + 32]
        q[:, h] = np.stack([(lo[:, :32] & 0x0F) | ((hi >> 0) & 3) << 4,
                            (lo[:, 32:] & 0x0F) | ((hi >> 2) & 3) << 4,
                            (lo[:, :32] >> 4) | ((hi >> 4) & 3) << 4,
                            (lo[:, 32:] >> 4) | ((hi >> 6) & 3) << 4], axis=1)
    return Parts(q.reshape(-1, 256), zero=32, d=_f16(b, 208),
                 sc=b[:, 192:208].view(np.int8).copy())


# every ggml type gguf-py knows; those without decode are named in errors
_ROWS = [
    #        id  name      block nbytes decode        exact
    GGMLType(0, "F32", 1, 4, _f32, FLOAT32),
    GGMLType(1, "F16", 1, 2, _f16_values, FLOAT32),
    GGMLType(30, "BF16", 1, 2, _bf16, BFLOAT16),
    GGMLType(8, "Q8_0", 32, 34, _q8_0, INT8G),
    GGMLType(2, "Q4_0", 32, 18, _q4_0, INT4),
    GGMLType(3, "Q4_1", 32, 20, _q4_1, INT4),
    GGMLType(6, "Q5_0", 32, 22, _q5_0, INT5G),
    GGMLType(7, "Q5_1", 32, 24, _q5_1, INT5G),
    GGMLType(12, "Q4_K", 256, 144, _q4_k, INT4_K),
    GGMLType(13, "Q5_K", 256, 176, _q5_k, INT5G),
    GGMLType(14, "Q6_K", 256, 210, _q6_k, INT6G),
    GGMLType(9, "Q8_1", 32, 36),          # ggml's block_q8_1 (gguf-py says 40: 4 + 4 + 32)
    GGMLType(10, "Q2_K", 256, 84),
    GGMLType(11, "Q3_K", 256, 110),
    GGMLType(15, "Q8_K", 256, 292),
    GGMLType(16, "IQ2_XXS", 256, 66),
    GGMLType(17, "IQ2_XS", 256, 74),
    GGMLType(18, "IQ3_XXS", 256, 98),
    GGMLType(19, "IQ1_S", 256, 50),
    GGMLType(20, "IQ4_NL", 32, 18),
    GGMLType(21, "IQ3_S", 256, 110),
    GGMLType(22, "IQ2_S", 256, 82),
    GGMLType(23, "IQ4_XS", 256, 136),
    GGMLType(24, "I8", 1, 1),
    GGMLType(25, "I16", 1, 2),
    GGMLType(26, "I32", 1, 4),
    GGMLType(27, "I64", 1, 8),
    GGMLType(28, "F64", 1, 8),
    GGMLType(29, "IQ1_M", 256, 56),
    GGMLType(34, "TQ1_0", 256, 54),
    GGMLType(35, "TQ2_0", 256, 66),
    GGMLType(39, "MXFP4", 32, 17),
    GGMLType(40, "NVFP4", 64, 36),
    GGMLType(41, "Q1_0", 128, 18),
]
GGML_TYPES = {t.name: t for t in _ROWS}          # name -> row
GGML_TYPE_IDS = {t.id: t for t in _ROWS}         # id in a file's tensor info -> row
