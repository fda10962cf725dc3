"""cattn.models.gguf — read GGUF files (llama.cpp's format) with NumPy and
the standard library alone: header, metadata, tensor infos, and each
tensor's values dequantized to float32 as ggml's own dequantization gives
them.

The format (little-endian, versions 2 and 3): "GGUF", uint32 version,
uint64 tensor count, uint64 metadata count; metadata as (string key,
uint32 type, value), strings as uint64 length + UTF-8 bytes, arrays as
uint32 element type + uint64 count + elements; tensor infos as (string
name, uint32 n_dims, n_dims uint64 sizes innermost first, uint32 ggml
type, uint64 offset); then padding to `general.alignment` (default 32) and
the tensor data, each tensor at its offset from there.

What this file is: a reader of what is in a file. The file is memory-mapped
once; every count, length, offset and shape is checked against the file
before it is used, so a truncated or hostile file gives a ValueError
naming the field and the file (never a crash, a hang or a huge
allocation). What it is not: a writer, a model builder (the architectures
and their key maps), or a tokenizer (gguf_tokenizer.py builds the file's).

Shapes are given in NumPy's order (rows first): a ggml tensor of sizes
(ne0, ne1) is an (ne1, ne0) array; blocks run along a row (ne0). A 2-D tensor is a linear
weight with rows = outputs, as cattn.linear takes it.
"""
import mmap
import os
import struct

import numpy as np

from .. import _ext
from ..ops import weight_memory
from ..ops.formats import (FORMATS, int4_arrays, int4_k_arrays, int5g_arrays, int6g_arrays,
                           int8g_arrays)
from ..ops.packed import PackedWeight, pack_weight
from .gguf_metadata import GGUFMetadata, GGUFStrings
from .gguf_tokenizer import GGUFTokenizer
from .heap import trim_heap

__all__ = ["GGUFFile", "GGUFMetadata", "GGUFStrings", "GGUF_TYPES"]

# metadata value types -> (struct code, size); 8 string, 9 array
_SCALARS = {0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
            6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8)}
_NUMPY = {0: "u1", 1: "i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?",
          10: "<u8", 11: "<i8", 12: "<f8"}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")
_COMPACT_MIN = 64          # arrays of this many strings or more are held as GGUFStrings

# ggml types read here: id -> (name, elements per block, bytes per block)
GGUF_TYPES = {0: ("F32", 1, 4), 1: ("F16", 1, 2), 30: ("BF16", 1, 2),
              2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20), 6: ("Q5_0", 32, 22),
              7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 12: ("Q4_K", 256, 144),
              13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210)}
# other ggml type ids, named in the error for a tensor of that type
_OTHER = {9: "Q8_1", 10: "Q2_K", 11: "Q3_K", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS",
          18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL", 21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS",
          24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 34: "TQ1_0",
          35: "TQ2_0", 39: "MXFP4"}
_MAX_DIMS = 4                                  # GGML_MAX_DIMS


class GGUFFile:
    """One GGUF file. Attributes: path, version, alignment, metadata (a
    GGUFMetadata: key -> value, ints, floats, bools, str; arrays as lists),
    tensors (name -> (ggml type name, shape in NumPy's order)).
    dequantize(name) -> float32 array of that shape."""

    def __init__(self, path):
        self.path = os.fspath(path)
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 24:
                raise self._error(f"header: the file has {size} bytes, fewer than a GGUF "
                                  "header's 24")
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self._size = size
        self._pos = 0
        self._parse()

    def _error(self, what):
        return ValueError(f"GGUF file {self.path}: {what}")

    # -- the byte reader: every read checked against the file's size

    def _take(self, n, field):
        if n < 0 or n > self._size - self._pos:
            raise self._error(f"{field}: needs {n} bytes at offset {self._pos}, the file ends "
                              f"at {self._size} (truncated or corrupt)")
        b = self._map[self._pos:self._pos + n]
        self._pos += n
        return b

    def _scalar(self, t, field):
        code, n = _SCALARS[t]
        return struct.unpack(code, self._take(n, field))[0]

    def _string(self, field):
        n = self._scalar(10, f"{field} (string length)")
        try:
            return self._take(n, field).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._error(f"{field}: not UTF-8 ({e.reason} at byte {e.start})") from None

    def _value(self, t, field):
        if t in _SCALARS:
            return self._scalar(t, field)
        if t == _STRING:
            return self._string(field)
        if t != _ARRAY:
            raise self._error(f"{field}: unknown metadata value type {t}")
        et = self._scalar(4, f"{field} (array element type)")
        n = self._scalar(10, f"{field} (array length)")
        if et in _SCALARS:                             # read at once, checked first
            b = self._take(n * _SCALARS[et][1], f"{field} ({n} array elements)")
            return np.frombuffer(b, _NUMPY[et]).tolist()
        if et == _STRING:
            if n > (self._size - self._pos) // 8:      # each string needs its 8-byte length
                raise self._error(f"{field}: an array of {n} strings cannot fit in the "
                                  f"{self._size - self._pos} bytes left")
            if n < _COMPACT_MIN:
                return [self._string(f"{field}[{i}]") for i in range(n)]
            return self._strings(n, field)
        raise self._error(f"{field}: array element type {et} is not supported "
                          "(nested arrays included)")

    def _strings(self, n, field):
        """An array of n strings as GGUFStrings: the bytes of the array (each
        length and string) copied once, each string's offsets; every length
        checked and every string decoded (UTF-8) once, then let go."""
        base, q = self._pos, _U64.unpack_from
        start = np.empty(n, np.int64)
        for i in range(n):
            if self._size - self._pos < 8:
                raise self._error(f"{field}[{i}] (string length): needs 8 bytes at offset "
                                  f"{self._pos}, the file ends at {self._size} (truncated or "
                                  "corrupt)")
            k = q(self._map, self._pos)[0]
            self._pos += 8
            start[i] = self._pos - base
            self._string_bytes(k, f"{field}[{i}]")
        end = self._pos - base
        blob = self._map[base:self._pos]
        stop = np.empty(n, np.int64)
        stop[:-1] = start[1:] - 8
        stop[-1] = end
        kind = np.uint32 if end < 2 ** 32 else np.int64
        return GGUFStrings(blob, start.astype(kind), stop.astype(kind))

    def _string_bytes(self, k, field):
        try:
            self._take(k, field).decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._error(f"{field}: not UTF-8 ({e.reason} at byte {e.start})") from None

    # -- the layout

    def _parse(self):
        if self._take(4, "magic") != b"GGUF":
            raise self._error("magic: not a GGUF file (the first 4 bytes are not 'GGUF'; a "
                              "big-endian file is not supported)")
        self.version = self._scalar(4, "version")
        if self.version not in (2, 3):
            raise self._error(f"version: {self.version} is not supported (2 and 3 are)")
        n_tensors = self._scalar(10, "tensor_count")
        n_kv = self._scalar(10, "metadata_kv_count")
        left = self._size - self._pos
        if n_kv > left // 13:                          # key length 8 + >= 1 byte + type 4
            raise self._error(f"metadata_kv_count: {n_kv} entries cannot fit in {left} bytes")
        meta = {}
        for i in range(n_kv):
            key = self._string(f"metadata key {i}")
            t = self._scalar(4, f"metadata {key!r} (value type)")
            if key in meta:
                raise self._error(f"metadata {key!r}: given twice")
            meta[key] = self._value(t, f"metadata {key!r}")
        self.metadata = GGUFMetadata(meta)
        align = self.metadata.get("general.alignment", 32)
        if (not isinstance(align, int) or isinstance(align, bool) or align <= 0
                or align & (align - 1)):
            raise self._error(f"metadata 'general.alignment': {align!r} is not a power of two")
        self.alignment = align
        left = self._size - self._pos
        if n_tensors > left // 24:                     # name 8 + n_dims 4 + type 4 + offset 8
            raise self._error(f"tensor_count: {n_tensors} tensors cannot fit in {left} bytes")
        infos = []
        for i in range(n_tensors):
            name = self._string(f"tensor {i} name")
            nd = self._scalar(4, f"tensor {name!r} n_dims")
            if not 1 <= nd <= _MAX_DIMS:
                raise self._error(f"tensor {name!r} n_dims: {nd} (1 to {_MAX_DIMS})")
            ne = [self._scalar(10, f"tensor {name!r} dimension {d}") for d in range(nd)]
            t = self._scalar(4, f"tensor {name!r} type")
            off = self._scalar(10, f"tensor {name!r} offset")
            infos.append((name, ne, t, off))
        self._data = -(-self._pos // align) * align
        self.tensors, self._where = {}, {}
        for name, ne, t, off in infos:
            self._add_tensor(name, ne, t, off)

    def _add_tensor(self, name, ne, t, off):
        if name in self.tensors:
            raise self._error(f"tensor {name!r}: named twice")
        if t not in GGUF_TYPES:
            kind = _OTHER.get(t, f"type id {t}")
            raise self._error(f"tensor {name!r} type: {kind} is not supported (supported: "
                              f"{', '.join(v[0] for v in GGUF_TYPES.values())})")
        tname, block, bsize = GGUF_TYPES[t]
        n = 1
        for d in ne:
            if d <= 0 or d > self._size * 8:           # no tensor has more values than bits
                raise self._error(f"tensor {name!r} shape {ne}: dimension {d} is out of range")
            n *= d
        if ne[0] % block:
            raise self._error(f"tensor {name!r} shape {ne}: a row of {ne[0]} values is not a "
                              f"whole number of {tname} blocks of {block}")
        nbytes = n // block * bsize
        if off % self.alignment:
            raise self._error(f"tensor {name!r} offset: {off} is not a multiple of the "
                              f"alignment {self.alignment}")
        start = self._data + off
        if start + nbytes > self._size:
            raise self._error(f"tensor {name!r} offset: its {nbytes} bytes at {start} run past "
                              f"the end of the file ({self._size} bytes; truncated?)")
        self.tensors[name] = (tname, tuple(reversed(ne)))
        self._where[name] = (start, nbytes)

    # -- values

    def raw(self, name):
        """The stored bytes of tensor `name` (a read-only uint8 view of the map)."""
        if name not in self._where:
            raise KeyError(f"GGUF file {self.path}: no tensor named {name!r}")
        start, nbytes = self._where[name]
        return np.frombuffer(self._map, np.uint8, nbytes, start)

    def dequantize(self, name):
        """Tensor `name` as a new float32 array of its shape (NumPy's order),
        the values ggml's dequantization gives."""
        raw = self.raw(name)
        tname, shape = self.tensors[name]
        block, bsize = next((b, s) for n, b, s in GGUF_TYPES.values() if n == tname)
        with np.errstate(all="ignore"):                # inf / NaN scales are the file's
            out = _DEQUANT[tname](raw.reshape(-1, bsize)) if block > 1 else _plain(tname, raw)
        return out.reshape(shape)

    def _rows(self, name, r0, r1):
        """(type name, K, the stored blocks of rows [r0, r1) as (n, block
        bytes) uint8) of a 2-D tensor: a row's blocks are contiguous."""
        raw = self.raw(name)
        tname, (N, K) = self.tensors[name]
        block, bsize = next((b, s) for n, b, s in GGUF_TYPES.values() if n == tname)
        per_row = K // block * bsize
        return tname, K, raw[r0 * per_row:r1 * per_row].reshape(-1, bsize)

    def _parts(self, name, kind, r0=0, r1=None):
        self.raw(name)
        tname, shape = self.tensors[name]
        if len(shape) != 2 or shape[1] == 0:
            return None
        tname, K, b = self._rows(name, r0, shape[0] if r1 is None else r1)
        return kind(tname, b, len(b) * GGUF_TYPES_BY_NAME[tname][0] // K, K)

    def int4_parts(self, name):
        """(q uint8 (N, K) in [0, 15], d float32 (N, K/32), mn float32 (N,
        K/32) or None, z) with values d q + mn (mn None: d (q - z)) equal
        to dequantize(name), for a 2-D Q4_0 (z = 8), Q4_1 or Q4_K tensor
        (Q4_0, Q4_1: the blocks' float16 scales; Q4_K: float32 d = D sc and
        mn = -(Dmin m) per 32, products exact in float32); None for another
        type or a scale that is not finite."""
        return self._parts(name, _int4_parts)

    def int4_k_parts(self, name):
        """(q uint8 (N, K), D, Dmin float16 (N, K/256), sc, m uint8 (N, K/32))
        of a 2-D Q4_K tensor as stored (values (D sc) q - (Dmin m)), or None
        for another type or a scale that is not finite."""
        return self._parts(name, _int4_k_parts)

    def int8g_parts(self, name):
        """(u uint8 (N, K), d (N, K/32), mn or None, sub or None, z) with
        values (d sub) (u - z) + mn equal to dequantize(name), for a 2-D
        Q8_0 (u = q + 128, z = 128), Q5_0 (z = 16), Q5_1, Q5_K (float32 d =
        D sc, mn = -(Dmin m)) or Q6_K (d = D per 32, sub = its int8 scales
        per 16, z = 32) tensor; None for another type or a scale that is not
        finite."""
        return self._parts(name, _int8g_parts)

    def weight(self, name):
        """Tensor `name` (2-D: rows = outputs) as the cattn.PackedWeight that
        holds its values exactly, in the narrowest cattn format that does:
        Q4_0, Q4_1, Q4_K -> "int4" (the blocks' scales and 4-bit values as
        they are; Q4_K's two-level scales too, D, Dmin per 256 and sc, m per
        32: int4_k_parts); Q5_0, Q5_1, Q5_K -> "int5g" and Q6_K -> "int6g"
        (their 5- and 6-bit values, the blocks' scales); Q8_0 -> "int8g"; BF16
        -> "bfloat16"; F32, F16 -> "float32" (a quantized tensor whose
        scales are not finite too). weight(name).unpack() equals
        dequantize(name). Built a block of rows at a time into the packed
        arrays (no full-size temporary), and the tensor's pages of the map
        are let go after (release)."""
        self.raw(name)                                 # KeyError naming an unknown tensor
        tname, shape = self.tensors[name]
        if len(shape) != 2:
            raise ValueError(f"GGUF file {self.path}: tensor {name!r} has shape {shape}; a "
                             "weight is 2-D (rows = outputs)")
        try:
            for kind, arrays in _EXACT.get(tname, ()):
                w = self._chunked(name, kind, arrays)
                if w is not None:
                    return w
            return self._chunked_plain(name, "bfloat16" if tname == "BF16" else "float32")
        finally:
            self.release(name)

    def _chunked(self, name, kind, arrays):
        """The exact group-format weight of `name` built CHUNK_ROWS rows at a
        time (a multiple of the 16-row panels: each block's panels and
        scale rows are a contiguous part of the whole's), or None when a
        block's parts are None (a scale that is not finite)."""
        N, K = self.tensors[name][1]
        full = None
        for r0 in range(0, max(N, 1), CHUNK_ROWS):
            r1 = min(N, r0 + CHUNK_ROWS)
            parts = self._parts(name, kind, r0, r1)
            if parts is None:
                return None
            d = arrays(*parts)
            if full is None:
                full = {k: (np.asarray(v) if v.ndim == 0 else
                            np.empty((N,) + v.shape[1:], v.dtype)) for k, v in d.items()
                        if k != "data"}
                full["shape"] = np.array((N, K), np.int64)
                fmt = str(d["format"])
                size = _ext_layout(fmt, N, K)
                full["data"] = weight_memory.empty(size, np.uint8, "GGUFFile.weight", name)
                per_row = size // max(1, -(-N // 16) * 16)
            full["data"][r0 * per_row:r0 * per_row + d["data"].size] = d["data"]
            for k, v in d.items():
                if k not in ("data", "shape") and v.ndim:
                    full[k][r0:r1] = v
            del d, parts
            self.release(name, r0, r1)
            trim_heap()
        return PackedWeight.from_arrays(full, copy=False)

    def _chunked_plain(self, name, fmt):
        """An F32 / F16 / BF16 tensor (or a quantized one whose scales are
        not finite) packed in float32 or bfloat16 panels, CHUNK_ROWS rows at
        a time: each block packed alone and its panels put in place per KC
        block (the panels of different rows never mix)."""
        N, K = self.tensors[name][1]
        if N == 0 or K == 0:
            return pack_weight(self.dequantize(name), fmt)
        size, kc = FORMATS[fmt].layout(N, K)
        stored = FORMATS[fmt].stored
        data = weight_memory.empty(size, stored, "GGUFFile.weight", name)
        np_all = size // K                                 # N rounded up to the panels
        step = _plain_chunk_rows()
        for r0 in range(0, N, step):
            r1 = min(N, r0 + step)
            tname, _, b = self._rows(name, r0, r1)
            with np.errstate(all="ignore"):
                vals = (_DEQUANT[tname](b) if GGUF_TYPES_BY_NAME[tname][0] > 1
                        else _plain(tname, b.reshape(-1))).reshape(r1 - r0, K)
            # packed into a plain array: a packed weight's own memory is carved
            # from shared huge-page blocks that a freed part would hold on to
            part = np.empty(FORMATS[fmt].layout(r1 - r0, K)[0], stored)
            assert FORMATS[fmt].layout(r1 - r0, K)[1] == kc
            FORMATS[fmt].pack(vals, part, "GGUFFile.weight")
            npc = part.size // K                           # its rows rounded up to the panels
            for pc in range(0, K, kc):
                k = min(kc, K - pc)
                data[pc * np_all + r0 * k:pc * np_all + r0 * k + npc * k] = \
                    part[pc * npc:pc * npc + npc * k]
            del vals, part
            self.release(name, r0, r1)
            trim_heap()
        return PackedWeight.from_arrays({"format": np.array(fmt), "shape": np.array((N, K)),
                                         "kc": np.array(kc), "data": data}, copy=False)

    def release(self, name, r0=0, r1=None):
        """Let the pages of the map that hold tensor `name` (its rows [r0,
        r1) of a 2-D one), and the rest of the 2 MiB windows around them, go;
        the values stay readable: they are read again from the file when
        touched. A loader's resident memory then holds what it built, not
        the file."""
        start, nbytes = self._where[name]
        shape = self.tensors[name][1]
        if r1 is not None and len(shape) == 2 and shape[0]:
            per_row = nbytes // shape[0]
            start, nbytes = start + r0 * per_row, (r1 - r0) * per_row
        # whole 2 MiB windows around the bytes: the kernel maps a file's pages
        # in large folios / fault-around blocks, so a small tensor's read maps
        # its neighbours' too; dropping more of a read-only map costs nothing
        # but a later re-read
        w = _RELEASE_WINDOW
        a, b = start // w * w, min(-(-(start + nbytes) // w) * w, len(self._map))
        if b > a and hasattr(mmap, "MADV_DONTNEED"):
            try:
                self._map.madvise(mmap.MADV_DONTNEED, a, b - a)
            except (OSError, ValueError):
                pass

    def tokenizer(self):
        """The file's tokenizer (tokenizer.ggml.* metadata; a vocabulary-only
        file has one too): a cattn.models.GGUFTokenizer with encode(text,
        add_special=True) and decode(ids). Needs the `tokenizers` package."""
        if "tokenizer.ggml.model" not in self.metadata:
            raise ValueError(f"GGUF file {self.path}: no tokenizer (tokenizer.ggml.model is "
                             "missing)")
        return GGUFTokenizer(self.metadata, self.path)

    def close(self):
        self._map.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ----------------------------------------------------------------------------
# dequantization: blocks (nb, bytes per block) -> (nb, values per block) float32,
# in ggml's arithmetic (float32: d * q, d * q + m, d * sc * q - dmin * m)

GGUF_TYPES_BY_NAME = {n: (b, s) for n, b, s in GGUF_TYPES.values()}
CHUNK_ROWS = 1024        # rows a weight is built at a time (a multiple of the 16-row panels)
_RELEASE_WINDOW = 1 << 21  # release()'s unit (bytes)


def _plain_chunk_rows():
    """CHUNK_ROWS rounded to a multiple of the float32 panels' rows too."""
    nr = int(np.lcm(16, _ext.gemm_blocks()["f32"]["NR"]))
    return -(-CHUNK_ROWS // nr) * nr


def _ext_layout(fmt, N, K):
    return FORMATS[fmt].layout(N, K)[0]


def _int4_parts(tname, b, N, K):
    """int4_parts of n rows' blocks b (see GGUFFile.int4_parts)."""
    if tname not in ("Q4_0", "Q4_1", "Q4_K"):
        return None
    with np.errstate(all="ignore"):
        if tname == "Q4_K":
            D, Dmin = _f16(b, 0), _f16(b, 2)
            sc, m = _scale_min_k4(b[:, 4:16])
            q = _k4_values(b[:, 16:]).reshape(N, K)
            d, mn = (D * sc).reshape(N, K // 32), (-(Dmin * m)).reshape(N, K // 32)
        else:
            off = 2 if tname == "Q4_0" else 4
            q = _nibbles(b[:, off:]).reshape(N, K)
            h = np.ascontiguousarray(b[:, :off]).view("<f2").astype(np.float16)
            d = h[:, 0].reshape(N, K // 32)
            mn = None if tname == "Q4_0" else h[:, 1].reshape(N, K // 32)
    if not (np.isfinite(d).all() and (mn is None or np.isfinite(mn).all())):
        return None
    return q, d, mn, 8 if tname == "Q4_0" else 0


def _int4_k_parts(tname, b, N, K):
    """int4_k_parts of n rows' blocks b (see GGUFFile.int4_k_parts)."""
    if tname != "Q4_K":
        return None
    h = np.ascontiguousarray(b[:, :4]).view("<f2").astype(np.float16)
    if not np.isfinite(h).all():
        return None
    sc, m = _scale_min_k4(b[:, 4:16])
    q = _k4_values(b[:, 16:]).reshape(N, K)
    return (q, h[:, 0].reshape(N, K // 256), h[:, 1].reshape(N, K // 256),
            sc.astype(np.uint8).reshape(N, K // 32), m.astype(np.uint8).reshape(N, K // 32))


def _int8g_parts(tname, b, N, K):
    """int8g_parts of n rows' blocks b (see GGUFFile.int8g_parts)."""
    if tname not in ("Q8_0", "Q5_0", "Q5_1", "Q5_K", "Q6_K"):
        return None
    G = K // 32
    mn = sub = None
    with np.errstate(all="ignore"):
        if tname == "Q8_0":
            d = np.ascontiguousarray(b[:, :2]).view("<f2").astype(np.float16).reshape(N, G)
            u, z = b[:, 2:] ^ np.uint8(0x80), 128            # int8 q + 128, bytewise
        elif tname in ("Q5_0", "Q5_1"):
            off = 2 if tname == "Q5_0" else 4
            h = np.ascontiguousarray(b[:, :off]).view("<f2").astype(np.float16)
            d = h[:, 0].reshape(N, G)
            u = _nibbles(b[:, off + 4:]) | _high_bits(b[:, off:off + 4])
            z = 16 if tname == "Q5_0" else 0
            mn = None if tname == "Q5_0" else h[:, 1].reshape(N, G)
        elif tname == "Q5_K":
            D, Dmin = _f16(b, 0), _f16(b, 2)
            sc, m = _scale_min_k4(b[:, 4:16])
            qh = b[:, 16:48]
            bits = (qh[:, None, :] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1
            u, z = _k4_values(b[:, 48:]) | (bits << 4), 0
            d, mn = (D * sc).reshape(N, G), (-(Dmin * m)).reshape(N, G)
        else:                                          # Q6_K
            ql, qh = b[:, :128], b[:, 128:192]
            q = np.empty((len(b), 2, 4, 32), np.uint8)
            for hh in range(2):
                lo, hi = ql[:, 64 * hh:64 * hh + 64], qh[:, 32 * hh:32 * hh + 32]
                q[:, hh] = np.stack([(lo[:, :32] & 0x0F) | ((hi >> 0) & 3) << 4,
                                     (lo[:, 32:] & 0x0F) | ((hi >> 2) & 3) << 4,
                                     (lo[:, :32] >> 4) | ((hi >> 4) & 3) << 4,
                                     (lo[:, 32:] >> 4) | ((hi >> 6) & 3) << 4], axis=1)
            u, z = q, 32
            sub = b[:, 192:208].view(np.int8).reshape(N, 2 * G)
            dd = np.ascontiguousarray(b[:, 208:210]).view("<f2").astype(np.float16)
            d = np.repeat(dd, 8, axis=1).reshape(N, G)
    u = np.ascontiguousarray(u.reshape(N, K))
    if not (np.isfinite(d).all() and (mn is None or np.isfinite(mn).all())):
        return None
    return u, d, mn, sub, z


# the exact formats each quantized type tries in turn (then float32 panels)
_EXACT = {"Q4_0": [(_int4_parts, int4_arrays)], "Q4_1": [(_int4_parts, int4_arrays)],
          "Q4_K": [(_int4_k_parts, int4_k_arrays), (_int4_parts, int4_arrays)],
          "Q8_0": [(_int8g_parts, int8g_arrays)],
          **{t: [(_int8g_parts, int5g_arrays)] for t in ("Q5_0", "Q5_1", "Q5_K")},
          "Q6_K": [(_int8g_parts, int6g_arrays)]}


def _plain(tname, raw):
    if tname == "F32":
        return raw.view("<f4").astype(np.float32)
    if tname == "F16":
        return raw.view("<f2").astype(np.float32)
    return (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)      # BF16


def _f16(b, i):
    """The float16 at bytes i, i+1 of each block -> (nb, 1) float32."""
    return np.ascontiguousarray(b[:, i:i + 2]).view("<f2").astype(np.float32)


def _nibbles(qs):
    """(nb, 16) bytes -> (nb, 32): low nibbles then high nibbles."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


def _high_bits(qh):
    """(nb, 4) bytes of a little-endian uint32 -> (nb, 32) bit j of it, as 16 or 0."""
    h = np.ascontiguousarray(qh).view("<u4")
    return (((h >> np.arange(32, dtype=np.uint32)) & 1) << 4).astype(np.uint8)


def _q8_0(b):
    return _f16(b, 0) * b[:, 2:].view(np.int8).astype(np.float32)


def _q4_0(b):
    return _f16(b, 0) * (_nibbles(b[:, 2:]).astype(np.int8) - 8).astype(np.float32)


def _q4_1(b):
    return _f16(b, 0) * _nibbles(b[:, 4:]).astype(np.float32) + _f16(b, 2)


def _q5_0(b):
    q = (_nibbles(b[:, 6:]) | _high_bits(b[:, 2:6])).astype(np.int8) - 16
    return _f16(b, 0) * q.astype(np.float32)


def _q5_1(b):
    q = _nibbles(b[:, 8:]) | _high_bits(b[:, 4:8])
    return _f16(b, 0) * q.astype(np.float32) + _f16(b, 2)


def _scale_min_k4(s):
    """(nb, 12) packed 6-bit scales and mins of Q4_K/Q5_K -> two (nb, 8) arrays."""
    s = s.astype(np.uint8)
    sc = np.empty((len(s), 8), np.uint8)
    mn = np.empty((len(s), 8), np.uint8)
    sc[:, :4] = s[:, 0:4] & 63
    mn[:, :4] = s[:, 4:8] & 63
    sc[:, 4:] = (s[:, 8:12] & 0x0F) | ((s[:, 0:4] >> 6) << 4)
    mn[:, 4:] = (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)
    return sc.astype(np.float32), mn.astype(np.float32)


def _k4_values(qs):
    """(nb, 128) bytes -> (nb, 8, 32): per 64 values, 32 low nibbles then 32 high."""
    q = qs.reshape(-1, 4, 1, 32)
    return np.concatenate([q & 0x0F, q >> 4], axis=2).reshape(-1, 8, 32)


def _q4_k(b):
    d, dmin = _f16(b, 0), _f16(b, 2)
    sc, mn = _scale_min_k4(b[:, 4:16])
    q = _k4_values(b[:, 16:]).astype(np.float32)
    return ((d * sc)[:, :, None] * q - (dmin * mn)[:, :, None]).reshape(-1, 256)


def _q5_k(b):
    d, dmin = _f16(b, 0), _f16(b, 2)
    sc, mn = _scale_min_k4(b[:, 4:16])
    qh = b[:, 16:48]                                    # bit 2i, 2i+1 of byte l: values
    bits = (qh[:, None, :] >> np.arange(8, dtype=np.uint8)[None, :, None]) & 1  # (nb, 8, 32)
    q = (_k4_values(b[:, 48:]) | (bits << 4)).astype(np.float32)
    return ((d * sc)[:, :, None] * q - (dmin * mn)[:, :, None]).reshape(-1, 256)


def _q6_k(b):
    ql, qh = b[:, :128], b[:, 128:192]
    sc = b[:, 192:208].view(np.int8).astype(np.float32)
    d = _f16(b, 208)
    out = np.empty((len(b), 2, 4, 32), np.float32)      # per 128 values: 4 runs of 32
    for h in range(2):
        lo = ql[:, 64 * h:64 * h + 64]
        hi = qh[:, 32 * h:32 * h + 32]
        q = np.stack([(lo[:, :32] & 0x0F) | ((hi >> 0) & 3) << 4,
                      (lo[:, 32:] & 0x0F) | ((hi >> 2) & 3) << 4,
                      (lo[:, :32] >> 4) | ((hi >> 4) & 3) << 4,
                      (lo[:, 32:] >> 4) | ((hi >> 6) & 3) << 4], axis=1)
        out[:, h] = (q.astype(np.int8) - 32).astype(np.float32)
    scale = (d * sc).reshape(-1, 2, 4, 2)               # one scale per 16 values
    return (out.reshape(-1, 2, 4, 2, 16) * scale[..., None]).reshape(-1, 256)


_DEQUANT = {"Q8_0": _q8_0, "Q4_0": _q4_0, "Q4_1": _q4_1, "Q5_0": _q5_0, "Q5_1": _q5_1,
            "Q4_K": _q4_k, "Q5_K": _q5_k, "Q6_K": _q6_k}
