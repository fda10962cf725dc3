"""cattn.ops.attention — scaled-dot-product attention with torch semantics on
NumPy arrays, the attention-weights matrix, and a KV cache.

Shape legend (as everywhere in cattn): B batch, Hq query heads, H kv heads
(H = Hq without GQA), L queries, S keys, E is the head dim (of queries and
keys), Ev the value dim; "..." are free leading batch dims (broadcast).
Under GQA (enable_gqa, Hq = H * group) query head h uses kv head h // group.

Python checks and describes the call once (`_prepare` -> an AttentionPlan
plus the arrays); cattn._ext.attention copies the plan into C's
cattn_attn_args (csrc/cattn.h) and runs the fused kernel without the GIL.
"""
import functools
import math
from typing import NamedTuple

import numpy as np

from .. import _ext
from .._threads import get_num_threads
from .._validate import (FLOAT_DTYPES, alloc, as_flag, as_float_array, as_float_dtype, as_int,
                         as_real, check_out, native, readable, result_dtype, show)
from .gemm import batch_offsets

_OP = "scaled_dot_product_attention"
_ALIGN = ("upper_left", "lower_right")
_MASK = _ext.MASK_KINDS


class AttentionPlan(NamedTuple):
    """One fused attention call as the C kernel sees it (immutable; filled
    into cattn_attn_args by cattn._ext.attention). Sizes are ints, offsets
    int64 arrays, strides in elements. The call runs over nkv "units" (one
    per (batch, kv head)), each with `group` query heads.

    The arrays passed beside the plan: O, the result (..., Hq, L, Ev), or
    the probabilities (..., Hq, L, S) when `weights`; Q (..., Hq, L, E);
    K (..., H, S, E); V (..., H, S, Ev); mask None or viewed as (..., Hq,
    L, S). Query-side arrays (Q, O, mask) are indexed per (unit, group head)
    (nkv * group offsets), K and V per unit (nkv offsets).
    """
    weights: bool      # O holds the probabilities (attention_weights), V is not read
    nkv: int           # units: prod of the broadcast batch dims, times H
    group: int         # query heads per kv head (Hq // H under GQA, else 1)
    L: int             # queries
    S: int             # keys
    E: int             # the head dim (of Q and K)
    Ev: int            # the value dim (S when `weights`: the width of O's rows)
    scale: float       # multiplies Q K^T
    causal: bool       # key s visible to query row i iff s <= i + shift
    shift: int         # 0 ("upper_left", torch) or S - L ("lower_right", KV cache)
    mask_kind: int     # _ext.MASK_KINDS: "none", "bool" (uint8 bytes, 1 = attend), "additive"
    offo: np.ndarray   # (nkv * group,) offset of each (L, Ev) / (L, S) block of O
    rso: int           # row stride of O
    offq: np.ndarray   # (nkv * group,) offset of each (L, E) block of Q
    rsq: int
    offk: np.ndarray   # (nkv,) offset of each (S, E) block of K
    rsk: int
    offv: np.ndarray   # (nkv,) offset of each (S, Ev) block of V
    rsv: int
    offm: np.ndarray   # (nkv * group,) offset of each (L, S) block of the mask (zeros if none)
    rsm: int           # mask row stride (along L)
    csm: int           # mask column stride (along S; 0 when broadcast)


def _scale(scale, E, dtype, op):
    """The softmax scale as a float: default 1/sqrt(E); a given scale may be
    any real number that is finite in the compute dtype (0 and negative
    values included, as torch allows); NaN, inf or a value past the dtype's
    largest finite number raise ValueError (the kernels scale queries in
    the compute dtype, where such a value would turn every score into
    inf or NaN)."""
    if scale is None:
        return 1.0 / math.sqrt(E) if E > 0 else 1.0
    s = as_real(scale, "scale", op, finite=True)
    big = float(np.finfo(dtype).max)
    if not -big <= s <= big:
        raise ValueError(f"{op}: scale={show(scale)} is not finite in {np.dtype(dtype)}, the "
                         f"compute dtype (|scale| must be <= {big:.6g})")
    return s


def _heads(x):
    """(batch dims, heads) of a (..., H, N, D) array; 2-D means one head."""
    return (x.shape[:-3], x.shape[-3]) if x.ndim >= 3 else ((), 1)


@functools.lru_cache(maxsize=64)
def _zeros_offsets(n):
    z = np.zeros(max(1, n), np.int64)
    z.flags.writeable = False
    return z


def _offsets(x, batch_shape):
    """(offsets of each (N, D) block of x over `batch_shape`, row stride)."""
    es = tuple(s // x.itemsize for s in x.strides)
    return batch_offsets(batch_shape, x.shape[:-2], es[:-2]), es[-2]


def _prepare(op, query, key, value, attn_mask, is_causal, scale, enable_gqa,
             causal_alignment, out=None):
    """Check the arguments and describe the call: (plan, O, Q, K, V, mask),
    the arrays as _ext.attention takes them (see AttentionPlan).

    value=None: attention_weights (O is the new (..., Hq, L, S) weights
    array). Otherwise O is `out` when the kernel can write it in place, else
    a new (..., Hq, L, Ev) array (the caller copies it into `out`)."""
    weights = value is None
    q = as_float_array(query, "query", op)
    half = not weights and _float16(key) and _float16(value)   # a float16 KV cache's
    if half:
        if q.dtype != np.float32:
            raise TypeError(f"{op}: float16 key and value (a float16 KV cache) need a float32 "
                            f"query, got {q.dtype}")
        k = native(key)
        v = None if weights else native(value)
    else:
        k = as_float_array(key, "key", op)
        v = None if weights else as_float_array(value, "value", op)
    arrays = (q, k) if weights else (q, k, v)
    for name, a in zip(("query", "key", "value"), arrays):
        if a.ndim < 2:
            raise ValueError(f"{op}: {name} must have at least 2 dims (..., L, E), got shape {a.shape}")
    is_causal = as_flag(is_causal, "is_causal", op)
    enable_gqa = as_flag(enable_gqa, "enable_gqa", op)
    if not isinstance(causal_alignment, str) or causal_alignment not in _ALIGN:
        raise ValueError(f"{op}: causal_alignment must be 'upper_left' or 'lower_right', "
                         f"got {causal_alignment!r}")
    if is_causal and attn_mask is not None:
        raise ValueError(f"{op}: pass either attn_mask or is_causal=True, not both")
    L, E = q.shape[-2:]
    S = k.shape[-2]
    if k.shape[-1] != E:
        raise ValueError(f"{op}: query has shape {q.shape} and key has shape {k.shape}: "
                         f"head dims differ ({E} != {k.shape[-1]})")
    if v is not None and v.shape[-2] != S:
        raise ValueError(f"{op}: key has shape {k.shape} and value has shape {v.shape}: "
                         f"sequence lengths differ ({S} != {v.shape[-2]})")
    qb, Hq = _heads(q)
    kb, H = _heads(k)
    if v is not None:
        vb, Hv = _heads(v)
        if Hv != H:
            raise ValueError(f"{op}: key has shape {k.shape} and value has shape {v.shape}: "
                             "head counts differ")
    else:
        vb = kb
    group = 1
    if enable_gqa and Hq != H:
        if H == 0 or Hq % H:
            raise ValueError(f"{op}: enable_gqa needs query heads ({Hq}) to be a multiple of "
                             f"kv heads ({H}); shapes {q.shape} and {k.shape}")
        group = Hq // H
    try:
        if group > 1:
            batch = np.broadcast_shapes(qb, kb, vb) + (H,)
        else:
            batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2],
                                        v.shape[:-2] if v is not None else ())
    except ValueError:
        shapes = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(f"{op}: batch/head dims of {shapes} do not broadcast") from None
    dtype = np.dtype(np.float32) if half else result_dtype(*arrays)
    out_batch = batch + ((group,) if group > 1 else ())   # (..., H, group) or (..., Hq)
    full = (batch[:-1] + (Hq,) if group > 1 else batch)   # (..., Hq)
    scale = _scale(scale, E, dtype, op)

    def view_q(x):  # (..., Hq, N, D) -> (..., H, group, N, D) view
        if group == 1:
            return x
        sh = x.shape[:-3] + (H, group) + x.shape[-2:]
        st = x.strides[:-3] + (x.strides[-3] * group, x.strides[-3]) + x.strides[-2:]
        return np.lib.stride_tricks.as_strided(x, sh, st, writeable=x.flags.writeable)

    # ---- the mask: viewed through its strides, never expanded
    mask, mkind, offm, rsm, csm = None, _MASK["none"], _zeros_offsets(math.prod(out_batch)), 0, 0
    if attn_mask is not None:
        try:
            m = native(np.asarray(attn_mask))
        except Exception as e:  # ragged lists, objects NumPy rejects
            raise TypeError(f"{op}: attn_mask could not be converted to an array: {e}") from None
        if m.dtype == np.bool_:
            mkind = _MASK["bool"]
        elif m.dtype in FLOAT_DTYPES:
            mkind = _MASK["additive"]
        else:
            raise TypeError(f"{op}: attn_mask has dtype {m.dtype}; expected bool or float")
        target = full + (L, S)
        try:
            ok = np.broadcast_shapes(m.shape, target) == target
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"{op}: attn_mask of shape {m.shape} does not broadcast to {target}")
        if mkind == _MASK["additive"] and m.dtype.itemsize > np.dtype(dtype).itemsize:
            # float64 mask, float32 compute: finite values stay finite (a value
            # beyond float32's range saturates at +-FLT_MAX instead of becoming
            # the -inf "excluded" sentinel or +inf); +-inf and NaN are kept
            big = np.finfo(dtype).max
            m = np.where(np.isfinite(m), np.clip(m, -big, big), m)
        m = readable(m, dtype if mkind == _MASK["additive"] else m.dtype)  # cast, aligned
        mb = view_q(np.broadcast_to(m, target))
        if mkind == _MASK["bool"]:
            mb = mb.view(np.uint8)
        es = tuple(s // m.itemsize for s in mb.strides)
        offm = batch_offsets(out_batch, mb.shape[:-2], es[:-2])
        rsm, csm = es[-2], es[-1]
        mask = mb

    # ---- the result
    Ev = S if weights else v.shape[-1]
    shape = full + (L, Ev)
    if weights:
        O = alloc(shape, dtype, op, "the (..., L, S) weights")
    else:
        if q.ndim == 2 and k.ndim == 2 and v.ndim == 2:
            shape = shape[-2:]
        if out is not None:
            check_out(out, shape, dtype, op, arrays)
        O = out
        if O is None or (O.shape[-1] > 1 and O.strides[-1] != O.itemsize):
            O = alloc(shape, dtype, op, "the result")

    # ---- the operands, readable by the kernels
    Q = view_q(readable(q, dtype, True))
    kv_dtype = np.dtype(np.float16) if half else dtype
    K = readable(k, kv_dtype, True)
    V = K if weights else readable(v, kv_dtype, True)
    offq, rsq = _offsets(Q, out_batch)
    offk, rsk = _offsets(K, batch)
    offv, rsv = _offsets(V, batch)
    offo, rso = _offsets(view_q(O), out_batch)
    plan = AttentionPlan(weights, math.prod(batch), group, L, S, E, Ev, scale, is_causal,
                         (S - L) if causal_alignment == "lower_right" else 0, mkind,
                         offo, rso, offq, rsq, offk, rsk, offv, rsv, offm, rsm, csm)
    return plan, O, Q, K, V, mask


def _float16(x):
    """x is a float16 ndarray (a float16 KV cache's keys or values)."""
    return isinstance(x, np.ndarray) and x.dtype == np.float16


@functools.lru_cache(maxsize=512)
def _bh_offsets(B, H, s0, s1):
    """Offsets of the (N, D) blocks of a (B, H, N, D) array with element
    strides s0, s1 over its first two dims (0 along a dim of length 1)."""
    return batch_offsets((B, H), (B, H), (s0, s1))


def fast_plan(q, k, v, is_causal, out=None):
    """The plan of the common call, checked in a few attribute reads: three
    native, aligned float32 / float64 arrays of one dtype, shapes (B, H, L,
    E), (B, H, S, E), (B, H, S, Ev) with nothing empty, unit-stride rows,
    no mask, no GQA, default scale and alignment; out= None or a writeable
    aligned (B, H, L, Ev) array of that dtype with unit-stride rows whose
    memory cannot overlap the inputs'. Returns (plan, O) — the same plan
    _prepare builds for such a call — or None."""
    if not (type(q) is np.ndarray and type(k) is np.ndarray and type(v) is np.ndarray):
        return None
    dt = q.dtype
    if (k.dtype != dt or v.dtype != dt or dt not in FLOAT_DTYPES or not dt.isnative
            or q.ndim != 4 or k.ndim != 4 or v.ndim != 4):
        return None
    B, H, L, E = q.shape
    S, Ev = v.shape[2], v.shape[3]
    if (k.shape != (B, H, S, E) or v.shape[:2] != (B, H) or not (B and H and L and S and E and Ev)
            or not (q.flags.aligned and k.flags.aligned and v.flags.aligned)):
        return None
    item = dt.itemsize
    es = []
    for a in (q, k, v):
        st = a.strides
        if st[3] != item or st[0] % item or st[1] % item or st[2] % item:
            return None
        es.append((st[0] // item, st[1] // item, st[2] // item))
    (q0, q1, rsq), (k0, k1, rsk), (v0, v1, rsv) = es
    if out is None:
        O = np.empty((B, H, L, Ev), dt)
        offo, rso = _bh_offsets(B, H, H * L * Ev, L * Ev), Ev
    else:
        if (type(out) is not np.ndarray or out.dtype != dt or out.shape != (B, H, L, Ev)
                or not (out.flags.aligned and out.flags.writeable)):
            return None
        st = out.strides
        if (st[3] != item or st[0] % item or st[1] % item or st[2] % item
                or any(np.may_share_memory(out, a) for a in (q, k, v))):
            return None
        O = out
        offo, rso = _bh_offsets(B, H, st[0] // item, st[1] // item), st[2] // item
    plan = AttentionPlan(False, B * H, 1, L, S, E, Ev, 1.0 / math.sqrt(E), bool(is_causal), 0,
                         _MASK["none"], offo, rso, _bh_offsets(B, H, q0, q1), rsq,
                         _bh_offsets(B, H, k0, k1), rsk, _bh_offsets(B, H, v0, v1), rsv,
                         _zeros_offsets(B * H), 0, 0)
    return plan, O


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, *, scale=None, enable_gqa=False,
                                 causal_alignment="upper_left", out=None):
    """softmax(Q K^T * scale + mask) V, fused (the (L, S) scores are never stored).

    query (..., Hq, L, E), key (..., H, S, E), value (..., H, S, Ev) ->
    (..., Hq, L, Ev), E the head dim; 2-D (L, E) inputs are one head.
    Leading dims broadcast.
    attn_mask: bool (True = attend) or float (added), broadcastable to
    (..., Hq, L, S), read through its strides (never expanded).
    is_causal: row i sees keys 0..i ("upper_left", torch) or 0..i+S-L
    ("lower_right", the KV-cache convention); not together with attn_mask.
    enable_gqa: Hq a multiple of H, query head h uses kv head h // (Hq/H).
    A row with no key to attend to gives zeros; masked keys never
    contribute, even if their K or V holds NaN. dropout_p must be 0.
    key and value may both be float16 with a float32 query (a float16 KV
    cache): the result is, bit for bit, that of their widened float32 values.
    query, key or value None: TypeError naming it (as torch).
    """
    if type(dropout_p) is not float or dropout_p != 0.0:
        if as_real(dropout_p, "dropout_p", _OP, finite=False) != 0.0:
            raise ValueError(f"{_OP}: dropout_p must be 0 (cattn is an inference engine), "
                             f"got {show(dropout_p)}")
    if (attn_mask is None and scale is None and enable_gqa is False
            and (is_causal is False or is_causal is True)
            and type(causal_alignment) is str and causal_alignment == "upper_left"):
        fast = fast_plan(query, key, value, is_causal, out)   # the common call, checked quickly
        if fast is not None:
            _ext.attention(fast[0], fast[1], query, key, value, None, get_num_threads())
            return fast[1]
    for name, a in (("query", query), ("key", key), ("value", value)):
        if a is None:                  # _prepare's value=None is attention_weights' call
            raise TypeError(f"{_OP}: {name} must be an array, got None"
                            + (" (attention_weights gives the weights without a value)"
                               if name == "value" else ""))
    plan, O, Q, K, V, mask = _prepare(_OP, query, key, value, attn_mask, is_causal, scale,
                                      enable_gqa, causal_alignment, out)
    _ext.attention(plan, O, Q, K, V, mask, get_num_threads())
    if out is not None and O is not out:
        out[...] = O
        return out
    return O


def attention_weights(query, key, attn_mask=None, is_causal=False, *, scale=None,
                      enable_gqa=False, causal_alignment="upper_left"):
    """The probability matrix A = softmax(Q K^T * scale + mask): (..., Hq, L, S).

    Same arguments and semantics as scaled_dot_product_attention (rows with
    nothing to attend to are zeros), computed by the same kernel tiles."""
    op = "attention_weights"
    plan, W, Q, K, V, mask = _prepare(op, query, key, None, attn_mask, is_causal, scale,
                                      enable_gqa, causal_alignment)
    if W.size:
        _ext.attention(plan, W, Q, K, V, mask, get_num_threads())
    return W


_CACHE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16))


def _cache_dtype(dtype, op):
    """float32, float64, or float16 (a float16 cache: half the memory and
    the bytes a decode step reads; attended by float32 queries)."""
    try:
        if np.dtype(dtype) == np.float16:
            return np.dtype(np.float16)
    except TypeError:
        pass
    return as_float_dtype(dtype, op)


class KVCache:
    """Preallocated keys and values for incremental decoding.

    k: (B, H, max_len, E) and v: (B, H, max_len, Ev) arrays (B = batch,
    H = kv_heads, E = head_dim, Ev = value_dim, default E); `append` writes new
    positions; `keys` / `values` are views of the filled prefix (no copy);
    `attend(q)` runs attention of new queries over the filled prefix with
    the KV-cache causal convention (lower_right).

    Sizes are ints >= 0 (TypeError for another type, bool included;
    ValueError for a negative one); a cache too large for memory raises
    MemoryError (ValueError past what NumPy can describe) naming the sizes.
    dtype float32, float64 or float16 (TypeError otherwise): a float16
    cache holds each appended value rounded to the nearest float16 (half the
    memory, and half the bytes a decode step reads), is attended by float32
    queries exactly as its values widened to float32 would be, and refuses
    a finite value that would overflow it (|x| >= 65520) with ValueError."""

    def __init__(self, batch, kv_heads, max_len, head_dim, dtype=np.float32, value_dim=None):
        op = "KVCache"
        dtype = _cache_dtype(dtype, op)
        batch = as_int(batch, "batch", op)
        kv_heads = as_int(kv_heads, "kv_heads", op)
        max_len = as_int(max_len, "max_len", op)
        head_dim = as_int(head_dim, "head_dim", op)
        value_dim = head_dim if value_dim is None else as_int(value_dim, "value_dim", op)
        what = (f"the cache (batch={show(batch)}, kv_heads={show(kv_heads)}, "
                f"max_len={show(max_len)}, head_dim={show(head_dim)}, "
                f"value_dim={show(value_dim)})")
        self.k = alloc((batch, kv_heads, max_len, head_dim), dtype, op, what + ": keys", np.zeros)
        self.v = alloc((batch, kv_heads, max_len, value_dim), dtype, op, what + ": values",
                       np.zeros)
        self._length = 0

    @property
    def length(self):
        """Filled positions (read-only: append and reset change it)."""
        return self._length

    @property
    def max_len(self):
        return self.k.shape[2]

    @property
    def keys(self):
        return self.k[:, :, :self.length]

    @property
    def values(self):
        return self.v[:, :, :self.length]

    def _new(self, x, name):
        """k or v to append: a float32 / float64 array (or a list of numbers),
        cast to the cache's dtype; ValueError if a finite float64 value
        overflows the float32 cache."""
        op = "KVCache.append"
        x = as_float_array(x, name, op)
        if x.dtype != self.k.dtype:
            with np.errstate(over="ignore"):
                c = x.astype(self.k.dtype)
            if c.dtype.itemsize < x.itemsize and not np.array_equal(np.isfinite(c),
                                                                    np.isfinite(x)):
                raise ValueError(f"{op}: {name} has values that overflow when cast from "
                                 f"{x.dtype} to the cache's dtype {self.k.dtype}")
            x = c
        return x

    def append(self, k, v):
        """Append k (batch, kv_heads, T, head_dim) and v (..., T, value_dim);
        returns the new length. k and v must be float32 or float64 (TypeError
        naming the dtype otherwise, as every op); they are cast to the cache's
        dtype. Raises ValueError for wrong shapes and past max_len, and
        leaves the cache unchanged on any error."""
        op = "KVCache.append"
        k = as_float_array(k, "k", op)
        v = as_float_array(v, "v", op)
        b, h, _, e = self.k.shape
        ev = self.v.shape[-1]
        if k.ndim != 4 or k.shape[:2] != (b, h) or k.shape[3] != e:
            raise ValueError(f"{op}: k has shape {k.shape}, expected ({b}, {h}, T, {e})")
        t = k.shape[2]
        if v.shape != (b, h, t, ev):
            raise ValueError(f"{op}: v has shape {v.shape}, expected ({b}, {h}, {t}, {ev})")
        if self.length + t > self.max_len:
            raise ValueError(f"{op}: {self.length} + {t} positions exceed max_len "
                             f"{self.max_len}")
        k = self._new(k, "k")
        v = self._new(v, "v")
        self.k[:, :, self.length:self.length + t] = k
        self.v[:, :, self.length:self.length + t] = v
        self._length += t
        return self._length

    @classmethod
    def of(cls, k, v, length=0):
        """A cache over existing arrays (no copy; views stay views): k
        (B, H, max_len, E) and v (B, H, max_len, Ev) of one dtype (float32,
        float64 or float16), C-contiguous and writeable, their first `length` positions
        counted as filled. A slot of a batch of caches (rows b:b+1 of
        larger arrays) runs as a cache of its own."""
        op = "KVCache.of"
        for name, a in (("k", k), ("v", v)):
            if not (isinstance(a, np.ndarray) and a.ndim == 4 and a.dtype in _CACHE_DTYPES
                    and a.flags.c_contiguous and a.flags.writeable):
                raise TypeError(f"{op}: {name} must be a writeable C-contiguous 4-D float32, "
                                f"float64 or float16 array, got {show(a)}")
        if v.shape[:3] != k.shape[:3] or v.dtype != k.dtype:
            raise ValueError(f"{op}: v {v.shape} {v.dtype} does not match k {k.shape} "
                             f"{k.dtype}")
        length = as_int(length, "length", op, lo=0)
        if length > k.shape[2]:
            raise ValueError(f"{op}: length {length} exceeds max_len {k.shape[2]}")
        self = object.__new__(cls)
        self.k, self.v, self._length = k, v, length
        return self

    def reset(self):
        self._length = 0

    def mark_filled(self, t):
        """Count t more positions as filled: positions length..length+t-1 of
        k and v were written in place (a decoder program's step does so);
        returns the new length. ValueError past max_len."""
        t = as_int(t, "t", "KVCache.mark_filled", lo=0)
        if self._length + t > self.max_len:
            raise ValueError(f"KVCache.mark_filled: {self._length} + {t} positions exceed "
                             f"max_len {self.max_len}")
        self._length += t
        return self._length

    def attend(self, q, attn_mask=None, is_causal=True, *, scale=None, out=None):
        """Attention of q (batch, Hq, L, head_dim) over the filled prefix;
        Hq may be a multiple of kv_heads (GQA). Causal is lower-right aligned:
        the last query row sees every cached key."""
        q = np.asarray(q)
        is_causal = as_flag(is_causal, "is_causal", "KVCache.attend")
        gqa = q.ndim == 4 and q.shape[1] != self.k.shape[1]
        return scaled_dot_product_attention(
            q, self.keys, self.values, attn_mask=attn_mask,
            is_causal=is_causal and attn_mask is None, scale=scale, enable_gqa=gqa,
            causal_alignment="lower_right", out=out)
