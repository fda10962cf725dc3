"""cattn.models.gguf_metadata — a GGUF file's metadata as a read-only
mapping, its long arrays of strings held compactly.

What this file is: GGUFMetadata (key -> value, the values gguf.py parsed)
and GGUFStrings (an array of strings as one bytes object and offsets: a
151936-token vocabulary in ~3 MiB instead of ~16 MiB of Python strings,
decoded when read). What it is not: the parser (gguf.py checks every
length and decodes every string once before it builds a GGUFStrings).
"""
import operator
from collections.abc import Mapping, Sequence

__all__ = ["GGUFMetadata", "GGUFStrings"]


class GGUFStrings(Sequence):
    """A GGUF array of strings held compactly: the array's bytes and each
    string's offsets (a 151936-token vocabulary: ~3 MiB instead of ~16 MiB
    of Python strings); s[i] decodes string i, list(s) all of them."""

    __slots__ = ("_blob", "_start", "_stop")

    def __init__(self, blob, start, stop):
        self._blob, self._start, self._stop = blob, start, stop

    def __len__(self):
        return len(self._start)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = operator.index(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"GGUFStrings index {i} out of range ({len(self)} strings)")
        return self._blob[int(self._start[i]):int(self._stop[i])].decode("utf-8")

    def __iter__(self):
        b = self._blob
        for c in range(0, len(self), 4096):                 # offsets as ints a chunk at a time
            for x, y in zip(self._start[c:c + 4096].tolist(), self._stop[c:c + 4096].tolist()):
                yield b[x:y].decode("utf-8")

    def tolist(self):
        return list(self)


class GGUFMetadata(Mapping):
    """A GGUF file's metadata, read-only: key -> value (ints, floats, bools,
    str; arrays as lists). Long arrays of strings (a vocabulary, its
    merges) are held as GGUFStrings and decoded into a new list each time
    they are read; strings(key) gives one without decoding it all.
    Compares equal to a dict of the same items."""

    __slots__ = ("_v",)

    def __init__(self, values):
        self._v = values

    def __getitem__(self, key):
        v = self._v[key]
        return v.tolist() if isinstance(v, GGUFStrings) else v

    def __contains__(self, key):
        return key in self._v

    def __iter__(self):
        return iter(self._v)

    def __len__(self):
        return len(self._v)

    def __repr__(self):
        return f"GGUFMetadata({len(self)} keys)"

    def strings(self, key):
        """The array of strings `key` as a sequence (GGUFStrings, or the list
        of a short one): indexing decodes one string. KeyError if missing."""
        return self._v[key]

    def subset(self, prefix):
        """The items whose key starts with prefix, as a GGUFMetadata sharing
        the compact arrays."""
        return GGUFMetadata({k: v for k, v in self._v.items() if k.startswith(prefix)})
