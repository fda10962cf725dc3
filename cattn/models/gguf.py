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
allocation). A tensor's blocks are read, decoded into their parts and
handed over. What it is not: the ggml types (gguf_types.py: their block
sizes, parts, dequantization and cattn formats, one row each), the
packed panels (cattn.ops lays them out: PackedWeight.from_row_blocks), a
writer, a model builder (the architectures and their key maps), or a
tokenizer (gguf_tokenizer.py builds the file's).

Shapes are given in NumPy's order (rows first): a ggml tensor of sizes
(ne0, ne1) is an (ne1, ne0) array; blocks run along a row (ne0). A 2-D tensor is a linear
weight with rows = outputs, as cattn.linear takes it.
"""
import mmap
import os
import struct

import numpy as np

from ..ops.packed import PackedWeight
from .gguf_metadata import GGUFMetadata, GGUFStrings
from .gguf_tokenizer import GGUFTokenizer
from .gguf_types import GGML_TYPE_IDS, GGML_TYPES, INT4, INT4_K, INT5G, INT6G, INT8G
from .heap import trim_heap

__all__ = ["GGUFFile", "GGUFMetadata", "GGUFStrings", "GGML_TYPES"]

# metadata value types -> (struct code, size); 8 string, 9 array
_SCALARS = {0: ("<B", 1), 1: ("<b", 1), 2: ("<H", 2), 3: ("<h", 2), 4: ("<I", 4), 5: ("<i", 4),
            6: ("<f", 4), 7: ("<?", 1), 10: ("<Q", 8), 11: ("<q", 8), 12: ("<d", 8)}
_NUMPY = {0: "u1", 1: "i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?",
          10: "<u8", 11: "<i8", 12: "<f8"}
_STRING, _ARRAY = 8, 9
_U64 = struct.Struct("<Q")
_COMPACT_MIN = 64          # arrays of this many strings or more are held as GGUFStrings
_MAX_DIMS = 4              # GGML_MAX_DIMS


class GGUFFile:
    """One GGUF file. Attributes: path, version, alignment, metadata (a
    GGUFMetadata: key -> value, ints, floats, bools, str; arrays as lists),
    tensors (name -> (ggml type name, shape in NumPy's order), the type a
    row of GGML_TYPES). dequantize(name) -> float32 array of that shape;
    parts(name) -> a 2-D tensor's blocks decoded (gguf_types.Parts);
    weight(name) -> the PackedWeight holding it exactly."""

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
        row = GGML_TYPE_IDS.get(t)
        if row is None or row.decode is None:
            kind = f"type id {t}" if row is None else row.name
            raise self._error(f"tensor {name!r} type: {kind} is not supported (supported: "
                              f"{', '.join(r.name for r in GGML_TYPES.values() if r.decode)})")
        tname, block, bsize = row.name, row.block, row.nbytes
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
        the values ggml's dequantization gives (gguf_types.Parts.dequantize)."""
        raw = self.raw(name)
        tname, shape = self.tensors[name]
        t = GGML_TYPES[tname]
        return t.decode(raw.reshape(-1, t.nbytes)).dequantize().reshape(shape)

    def parts(self, name, r0=0, r1=None):
        """The named parts (a gguf_types.Parts: q, zero, d, m, sc, dmin, mn,
        or a float type's values) of rows [r0, r1) of the 2-D tensor `name`,
        each array (rows, per row): a row's blocks are contiguous."""
        t, (N, K) = self._matrix(name)
        r1 = N if r1 is None else r1
        per_row = K // t.block * t.nbytes
        blocks = self.raw(name)[r0 * per_row:r1 * per_row].reshape(-1, t.nbytes)
        return t.decode(blocks).rows(r1 - r0)

    def _matrix(self, name):
        """(the type's row, shape) of a 2-D tensor; KeyError or ValueError naming it."""
        self.raw(name)
        tname, shape = self.tensors[name]
        if len(shape) != 2:
            raise ValueError(f"GGUF file {self.path}: tensor {name!r} has shape {shape}; a "
                             "weight is 2-D (rows = outputs)")
        return GGML_TYPES[tname], shape

    def _parts_held(self, name, held_as):
        """parts(name) of a 2-D tensor whose type one of held_as (gguf_types'
        Exact) holds, with finite scales; else None."""
        self.raw(name)
        tname, shape = self.tensors[name]
        if len(shape) != 2 or not any(GGML_TYPES[tname].exact is e for e in held_as):
            return None
        p = self.parts(name)
        return p if p.finite() else None

    def int4_parts(self, name):
        """(q uint8 (N, K) in [0, 15], d float32 (N, K/32), mn float32 (N,
        K/32) or None, z) with values d q + mn (mn None: d (q - z)) equal
        to dequantize(name), for a 2-D Q4_0 (z = 8), Q4_1 or Q4_K tensor
        (Q4_0, Q4_1: the blocks' float16 scales; Q4_K: float32 d = D sc and
        mn = -(Dmin m) per 32, products exact in float32); None for another
        type or a scale that is not finite."""
        p = self._parts_held(name, (INT4, INT4_K))
        return None if p is None else (p.q, *p.groups()[:2], p.zero)

    def int4_k_parts(self, name):
        """(q uint8 (N, K), D, Dmin float16 (N, K/256), sc, m uint8 (N, K/32))
        of a 2-D Q4_K tensor as stored (values (D sc) q - (Dmin m)), or None
        for another type or a scale that is not finite."""
        p = self._parts_held(name, (INT4_K,))
        return None if p is None else (p.q, p.d, p.dmin, p.sc, p.mn)

    def int8g_parts(self, name):
        """(u uint8 (N, K), d (N, K/32), mn or None, sub or None, z) with
        values (d sub) (u - z) + mn equal to dequantize(name), for a 2-D
        Q8_0 (u = q + 128, z = 128), Q5_0 (z = 16), Q5_1, Q5_K (float32 d =
        D sc, mn = -(Dmin m)) or Q6_K (d = D per 32, sub = its int8 scales
        per 16, z = 32) tensor; None for another type or a scale that is not
        finite."""
        p = self._parts_held(name, (INT8G, INT6G, INT5G))
        return None if p is None else (p.q, *p.groups(), p.zero)

    def weight(self, name):
        """Tensor `name` (2-D: rows = outputs) as the cattn.PackedWeight that
        holds its values exactly, in the format its type's row of GGML_TYPES
        names: Q4_0, Q4_1, Q4_K -> "int4" (the blocks' scales and 4-bit values
        as they are; Q4_K's two-level scales too, D, Dmin per 256 and sc, m per
        32: int4_k_parts); Q5_0, Q5_1, Q5_K -> "int5g" and Q6_K -> "int6g"
        (their 5- and 6-bit values, the blocks' scales); Q8_0 -> "int8g"; BF16
        -> cattn.ops.formats.preferred_bfloat16() ("bfloat16dot" where the CPU
        runs vdpbf16ps, else "bfloat16"); F32, F16 -> "float32" (a quantized tensor whose
        scales are not finite too). weight(name).unpack() equals
        dequantize(name). Read a block of rows at a time and handed to
        cattn.ops (PackedWeight.from_row_blocks lays out the panels: no
        full-size temporary), and the tensor's pages of the map are let go
        after (release)."""
        exact = self._matrix(name)[0].exact
        try:
            w = None
            if exact.arrays is not None:
                w = self._built(name, exact.format,
                                lambda p: exact.arrays(p) if p.finite() else None)
            if w is None:
                w = self._built(name, "float32" if exact.arrays else exact.format,
                                lambda p: p.dequantize())
            return w
        finally:
            self.release(name)

    def _built(self, name, fmt, arrays):
        """The PackedWeight of `name` in fmt built by cattn.ops CHUNK_ROWS
        rows at a time: arrays(parts of the rows) hands each block over (the
        format's arrays, the values, or None: no such weight)."""
        def done(r0, r1):
            self.release(name, r0, r1)
            trim_heap()
        return PackedWeight.from_row_blocks(
            fmt, self.tensors[name][1], lambda r0, r1: arrays(self.parts(name, r0, r1)),
            rows=CHUNK_ROWS, done=done)

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


CHUNK_ROWS = 1024          # rows a weight is read and handed over at a time
_RELEASE_WINDOW = 1 << 21  # release()'s unit (bytes)
