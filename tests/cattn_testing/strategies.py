"""Hypothesis strategies for cattn's property tests: shapes, values with
NaN / inf / huge entries, and memory layouts (transposed, negative-stride,
sliced, stride-0 broadcast, UNALIGNED, strides that are not whole elements,
read-only) of the very same values.

How an array is made: `draw(arrays(shape, dtype, ...))` draws a seed, a value
scale and up to a few special entries, fills the values from NumPy's
generator (fast for any size; hypothesis shrinks the seed and the specials),
then lays them out in memory by a drawn `Layout`. Gaps between elements of a
strided layout are filled with NaN bytes (0xff...), so a kernel that reads
outside the described elements turns the result NaN and fails the test.

The returned array is what every test passes to BOTH cattn and the float64
reference: a stride-0 layout repeats values (it broadcasts the first index of
the chosen axes), so the values can differ from the drawn ones.
"""
import math

import numpy as np
from hypothesis import event, settings
from hypothesis import strategies as st

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
dtypes = st.sampled_from([F32, F64])


def examples(weight):
    """Per-test settings: `weight` times the active profile's max_examples
    (cheap properties get more examples, expensive ones fewer)."""
    return settings(max_examples=max(1, int(round(settings().max_examples * weight))))


# ---------------------------------------------------------------- sizes

def sizes(hi, edges=()):
    """A dimension in [0, hi]: mostly in [1, hi], sometimes 0, 1 or 2 (empty
    and 1-sized dims), or one of `edges` (tile boundaries worth hitting)."""
    alts = [st.integers(1, max(hi, 1)), st.integers(1, max(hi, 1)), st.sampled_from([0, 1, 2])]
    if edges:
        alts.append(st.sampled_from([e for e in edges if e <= hi]))
    return st.one_of(*alts)


# ---------------------------------------------------------------- layouts

class Layout:
    """How an array's elements sit in memory (see module docstring).

    perm:     storage order of the axes (outermost first); identity = C order
    steps:    per-axis element step (2 = every other element of a bigger array)
    pad:      extra BYTES added to the innermost stored axis's stride (0, or
              1..itemsize-1: strides that are not whole elements)
    flips:    per-axis negative stride
    misalign: byte offset of the data (not a multiple of the itemsize =
              unaligned data, as np.frombuffer(bytearray, offset=1) gives)
    bcast:    axes replaced by a stride-0 broadcast of their first index
    readonly: writeable flag cleared
    """

    def __init__(self, perm, steps, pad, flips, misalign, bcast, readonly):
        self.perm, self.steps, self.pad, self.flips = tuple(perm), tuple(steps), pad, tuple(flips)
        self.misalign, self.bcast, self.readonly = misalign, tuple(bcast), readonly

    def is_plain(self):
        return (self.perm == tuple(sorted(self.perm)) and set(self.steps) <= {1} and not self.pad
                and not any(self.flips) and not self.misalign and not any(self.bcast)
                and not self.readonly)

    def __repr__(self):
        if self.is_plain():
            return "Layout(C)"
        parts = []
        if self.perm != tuple(sorted(self.perm)):
            parts.append(f"perm={self.perm}")
        if set(self.steps) - {1}:
            parts.append(f"steps={self.steps}")
        if self.pad:
            parts.append(f"pad={self.pad}B")
        if any(self.flips):
            parts.append(f"flips={self.flips}")
        if self.misalign:
            parts.append(f"misalign={self.misalign}B")
        if any(self.bcast):
            parts.append(f"stride0={self.bcast}")
        if self.readonly:
            parts.append("readonly")
        return "Layout(" + ", ".join(parts) + ")"


def plain(ndim):
    return Layout(range(ndim), (1,) * ndim, 0, (False,) * ndim, 0, (False,) * ndim, False)


@st.composite
def layouts(draw, ndim, itemsize=8, broadcast=True):
    """A Layout for an ndim array: C order half of the time, else a random
    combination of the layout features (each one drawn independently)."""
    if draw(st.booleans()):
        return plain(ndim)
    perm = draw(st.permutations(range(ndim))) if ndim > 1 else (0,) * ndim
    steps = draw(st.lists(st.sampled_from([1, 2]), min_size=ndim, max_size=ndim))
    flips = draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim))
    odd = draw(st.sampled_from([0, 0, 0, 1]))
    pad = draw(st.integers(1, itemsize - 1)) if odd and ndim and itemsize > 1 else 0
    mis = draw(st.sampled_from([0, 0, 1, 2, 3, 4, 5, 6, 7]))
    misalign = 0 if mis % itemsize == 0 else mis % itemsize
    bcast = (draw(st.lists(st.sampled_from([False, False, True]), min_size=ndim, max_size=ndim))
             if broadcast else [False] * ndim)
    readonly = draw(st.booleans())
    return Layout(perm, steps, pad, flips, misalign, bcast, readonly)


def _store(x, lay):
    """A view with lay's strides / offset holding x's values; everything else
    in its buffer is NaN bytes."""
    item, shape, nd = x.itemsize, x.shape, x.ndim
    strides = [0] * nd
    s = item
    for j, ax in enumerate(reversed(lay.perm)):          # innermost stored axis first
        strides[ax] = s * lay.steps[ax] + (lay.pad if j == 0 else 0)
        s = strides[ax] * max(shape[ax], 1)
    nbytes = s + lay.misalign + 2 * item
    buf = bytearray(b"\xff" * nbytes)                    # 0xff.. is NaN in float32 and float64
    arr = np.ndarray(shape, x.dtype, buffer=buf, offset=lay.misalign, strides=tuple(strides))
    if nd:
        arr = arr[tuple(slice(None, None, -1) if f else slice(None) for f in lay.flips)]
    arr[...] = x
    return arr


def lay_out(x, lay):
    """x laid out by `lay` (values repeated along stride-0 axes)."""
    x = np.asarray(x)
    axes = tuple(a for a in range(x.ndim) if lay.bcast[a] and x.shape[a] > 1)
    small = x[tuple(slice(0, 1) if a in axes else slice(None) for a in range(x.ndim))]
    arr = _store(small, lay)
    if axes:
        arr = np.broadcast_to(arr, x.shape)              # read-only, stride 0 on `axes`
    elif lay.readonly:
        arr.flags.writeable = False
    return arr


# ---------------------------------------------------------------- values

SPECIALS = (np.nan, np.inf, -np.inf)


@st.composite
def values(draw, shape, dtype, scales=(1.0,), specials=False, n_special=3, extra_specials=()):
    """Contiguous values: unit normal * a drawn scale, from a drawn seed;
    with `specials`, up to n_special entries set to NaN / +inf / -inf (and
    `extra_specials`) at drawn positions."""
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from(list(scales)))
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * scale
    with np.errstate(over="ignore"):
        x = x.astype(dtype)
    size = x.size
    if specials and size:
        k = draw(st.integers(0, n_special))
        flat = x.reshape(-1)
        for _ in range(k):
            i = draw(st.integers(0, size - 1))
            flat[i] = draw(st.sampled_from(list(SPECIALS) + list(extra_specials)))
    return x


@st.composite
def arrays(draw, shape, dtype, broadcast=True, **value_kw):
    """values(...) laid out by a drawn layout: (array, layout)."""
    x = draw(values(shape, dtype, **value_kw))
    lay = draw(layouts(len(shape), np.dtype(dtype).itemsize, broadcast=broadcast))
    for feature in ("misalign", "pad", "readonly"):
        if getattr(lay, feature):
            event(f"layout: {feature}")
    if any(lay.bcast):
        event("layout: stride 0")
    if any(lay.flips):
        event("layout: negative stride")
    if x.size == 0:
        event("empty array")
    return lay_out(x, lay), lay


def poisoned_out(shape, dtype, lay):
    """An `out=` array of the given shape laid out by `lay` (no stride 0, no
    misalignment: out must be writeable and aligned) and filled with NaN, so
    an element the kernel forgets to write shows up."""
    nd = len(shape)
    lay = Layout(lay.perm, lay.steps, 0, lay.flips, 0, (False,) * nd, False)
    return _store(np.full(shape, np.nan, dtype), lay)


def assert_same_values(view, x):
    """Self-check of the layout machinery: the view holds x's values."""
    np.testing.assert_array_equal(np.asarray(view), np.asarray(x))


def prod(shape):
    return math.prod(shape)
