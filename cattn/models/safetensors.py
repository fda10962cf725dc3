"""cattn.models.safetensors — read Hugging Face safetensors checkpoints with
NumPy alone (no `safetensors` package, no torch), bfloat16 included.

The format: an 8-byte little-endian header length n, n bytes of JSON
({name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
{...}}), then the raw little-endian tensor bytes, offsets counted from the
end of the header. A sharded checkpoint adds model.safetensors.index.json
({"weight_map": {name: shard file}}).

What this file is: a per-tensor reader. Each tensor is read from disk
straight into a float32 array (the caller's buffer when given, e.g. a slice
of a fused weight): float16 widens with NumPy, bfloat16 as uint16 << 16 (its
bits are the top half of a float32). No float64 detour, and the checkpoint
is never held in memory at once: only the tensor being read.
What it is not: a writer, or a general dtype zoo (integer tensors are read
as they are; only F32, F16, BF16 become float32).
"""
import json
import os
import struct

import numpy as np

__all__ = ["SafetensorsFile", "Checkpoint", "CheckpointError"]

# safetensors dtype names -> NumPy dtypes of the stored bytes
_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2",
           "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}
_FLOAT = ("F64", "F32", "F16", "BF16")
_MAX_HEADER = 100 << 20        # the format's own limit on the JSON header


class CheckpointError(ValueError):
    """A checkpoint file or tensor that cannot be read as described."""


class SafetensorsFile:
    """One .safetensors file: `names`, `info(name)` -> (dtype, shape), and
    `read(name, out=None)` -> float32 array (or into `out`)."""

    def __init__(self, path):
        self.path = path
        try:
            with open(path, "rb") as f:
                raw = f.read(8)
                if len(raw) != 8:
                    raise CheckpointError(f"{path}: not a safetensors file (shorter than 8 bytes)")
                (n,) = struct.unpack("<Q", raw)
                if n > _MAX_HEADER:
                    raise CheckpointError(f"{path}: not a safetensors file (header length {n})")
                header = json.loads(f.read(n))
            self._data_start = 8 + n
            self._size = os.path.getsize(path)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise CheckpointError(f"{path}: not a safetensors file (bad JSON header: "
                                  f"{e})") from None
        header.pop("__metadata__", None)
        self._header = header

    @property
    def names(self):
        return list(self._header)

    def info(self, name):
        """(safetensors dtype name, shape tuple) of a tensor."""
        h = self._header[name]
        return h["dtype"], tuple(h["shape"])

    def read(self, name, out=None):
        """Tensor `name` as float32 (integers keep their type), read from disk
        per tensor. out: a float32 array of the tensor's shape (any view, e.g.
        rows of a fused weight or a transposed view) to read into instead."""
        h = self._header[name]
        dt, shape = h["dtype"], tuple(h["shape"])
        if dt not in _DTYPES:
            raise CheckpointError(f"{self.path}: tensor {name!r} has unsupported dtype {dt}")
        raw = np.dtype(_DTYPES[dt])
        begin, end = h["data_offsets"]
        count = int(np.prod(shape, dtype=np.int64))
        if end - begin != count * raw.itemsize or self._data_start + end > self._size:
            raise CheckpointError(f"{self.path}: tensor {name!r} ({dt} {list(shape)}) does not "
                                  f"match its data offsets {begin}..{end} (file truncated?)")
        if (dt == "F32" and out is not None and out.dtype == np.float32
                and out.flags.c_contiguous and out.shape == shape):
            with open(self.path, "rb") as f:             # straight into the caller's buffer
                f.seek(self._data_start + begin)
                f.readinto(memoryview(out).cast("B"))
            return out
        data = np.fromfile(self.path, dtype=raw, count=count,
                           offset=self._data_start + begin).reshape(shape)
        if dt not in _FLOAT:
            return data if out is None else _store(out, data, name)
        if dt == "BF16":                                   # bits of the top half of a float32
            wide = data.astype(np.uint32)
            wide <<= 16
            data = wide.view(np.float32)
        elif dt != "F32":
            data = data.astype(np.float32)                 # float16 widens exactly
        if out is None:
            return data
        return _store(out, data, name)


def _store(out, data, name):
    if out.shape != data.shape:
        raise CheckpointError(f"tensor {name!r} has shape {list(data.shape)}, expected "
                              f"{list(out.shape)}")
    out[...] = data
    return out


class Checkpoint:
    """A Hugging Face checkpoint folder's tensors: model.safetensors, or the
    shards listed by model.safetensors.index.json. `names`, `info(name)`,
    `read(name, out=None)` as SafetensorsFile, over all shards."""

    def __init__(self, folder):
        index = os.path.join(folder, "model.safetensors.index.json")
        single = os.path.join(folder, "model.safetensors")
        self._where = {}
        if os.path.isfile(index):
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f).get("weight_map", {})
            files = {}
            for name, shard in weight_map.items():
                if shard not in files:
                    files[shard] = SafetensorsFile(os.path.join(folder, shard))
                self._where[name] = files[shard]
        elif os.path.isfile(single):
            f = SafetensorsFile(single)
            self._where = {name: f for name in f.names}
        else:
            raise FileNotFoundError(f"{folder}: no model.safetensors or "
                                    "model.safetensors.index.json (only safetensors "
                                    "checkpoints are supported)")

    @property
    def names(self):
        return list(self._where)

    def __contains__(self, name):
        return name in self._where

    def info(self, name):
        return self._file(name).info(name)

    def read(self, name, out=None):
        return self._file(name).read(name, out)

    def _file(self, name):
        try:
            return self._where[name]
        except KeyError:
            raise CheckpointError(f"checkpoint has no tensor {name!r}") from None
