"""cattn.models.heap — give the C heap's freed pages back to the system.

What this file is: trim_heap(), called by the loaders after each block of
work that frees large temporaries (a GGUF weight's row blocks, a tokenizer
build). glibc raises its mmap threshold after the first large free, so
later temporaries of a few MiB come from the heap, and the freed ones stay
resident (~30-60 MiB after a 0.5B model's file) until malloc_trim. What it
is not: an allocator; elsewhere than glibc it does nothing.
"""
import ctypes
import ctypes.util

__all__ = ["trim_heap"]

_LIBC = []


def trim_heap():
    """glibc's malloc_trim(0), best effort: nothing where it is missing."""
    if not _LIBC:
        try:
            _LIBC.append(ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim)
        except (OSError, AttributeError, TypeError):
            _LIBC.append(None)
    if _LIBC[0] is not None:
        _LIBC[0](0)
