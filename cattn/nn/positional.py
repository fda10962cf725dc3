"""cattn.nn.positional — positional encodings: the paper's sinusoids
(PositionalEncoding) and rotary embeddings (RotaryEmbedding, the half-split
layout of GPT-NeoX / Llama).
"""


import numpy as np

from .._validate import FLOAT_DTYPES as _FLOATS
from .._validate import as_float_dtype, as_int, as_real, check_size, show
from .module import Module, as_input, positive_int


class PositionalEncoding(Module):
    """The paper's sinusoids (section 3.5), added to the input:
        PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)).
    `pe` (max_len, d_model) is a constant table (not in state_dict).
    forward(x, offset=0): x (B, L, E) (or (L, B, E) if not batch_first)
    plus PE[offset : offset + L]; returns a new array."""

    def __init__(self, d_model, max_len=5000, *, batch_first=True, dtype=np.float32):
        super().__init__()
        d = positive_int(d_model, "d_model", "PositionalEncoding")
        n = positive_int(max_len, "max_len", "PositionalEncoding")
        self.dtype = as_float_dtype(dtype, "PositionalEncoding")
        check_size((n, d), self.dtype, "PositionalEncoding", f"the table (max_len={show(n)}, "
                   f"d_model={show(d)})", eager=True, extra_bytes_per_item=8)  # + float64 temp
        self.batch_first = bool(batch_first)
        pos = np.arange(n, dtype=np.float64)[:, None]
        div = 10000.0 ** (np.arange(0, d, 2, dtype=np.float64) / d)  # 10000^(2i/d)
        pe = np.empty((n, d))
        pe[:, 0::2] = np.sin(pos / div)
        pe[:, 1::2] = np.cos(pos / div[: d // 2])
        self.pe = pe.astype(self.dtype)

    def forward(self, x, offset=0):
        x = as_input(x, "x", self.dtype, "PositionalEncoding")
        offset = as_int(offset, "offset", "PositionalEncoding")
        ax = 1 if (self.batch_first and x.ndim == 3) else 0
        L = x.shape[ax] if x.ndim >= 2 else 0
        if x.ndim not in (2, 3) or x.shape[-1] != self.pe.shape[1]:
            raise ValueError(f"PositionalEncoding: x has shape {x.shape}; expected (..., L, "
                             f"{self.pe.shape[1]})")
        if offset < 0 or offset + L > self.pe.shape[0]:
            raise ValueError(f"PositionalEncoding: positions {offset}..{offset + L - 1} exceed "
                             f"max_len={self.pe.shape[0]}")
        pe = self.pe[offset:offset + L]
        return x + (pe if ax == 1 or x.ndim == 2 else pe[:, None, :])

    def extra_repr(self):
        return f"d_model={self.pe.shape[1]}, max_len={self.pe.shape[0]}"


def rotate_half(x, cos, sin):
    """RoPE's rotation of x (..., T, D) by angles with cos, sin (..., T, D/2)
    (broadcast): pairs (x_i, x_{i+D/2}) -> a new array."""
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    out = np.empty(x.shape, x.dtype)
    o1, o2 = out[..., :h], out[..., h:]
    np.multiply(x1, cos, out=o1)
    o1 -= x2 * sin
    np.multiply(x2, cos, out=o2)
    o2 += x1 * sin
    return out


class RotaryEmbedding(Module):
    """Rotary position embedding (RoPE, Su et al. 2021) for q and k.

    Pairing convention: the half-split ("rotate_half") layout of GPT-NeoX and
    LLaMA (Hugging Face): feature i is paired with feature i + D/2, not with
    its neighbour (GPT-J / the paper's interleaved layout). For position p and
    frequency theta_i = base^(-2i/D), i < D/2, the pair (x_i, x_{i+D/2}) read
    as the complex number x_i + 1j * x_{i+D/2} is multiplied by
    exp(1j * p * theta_i):
        out_i       = x_i * cos(p theta_i) - x_{i+D/2} * sin(p theta_i)
        out_{i+D/2} = x_{i+D/2} * cos(p theta_i) + x_i * sin(p theta_i)
    so q_m . k_n depends on positions only through m - n.
    """

    def __init__(self, head_dim, base=10000.0, *, inv_freq=None):
        """inv_freq (keyword-only): the (D/2,) frequencies theta_i to use instead
        of base^(-2i/D) (a scaled RoPE, e.g. Llama 3's; see cattn.models.llm_config.rope_frequencies)."""
        super().__init__()
        D = positive_int(head_dim, "head_dim", "RotaryEmbedding")
        if D % 2:
            raise ValueError(f"RotaryEmbedding: head_dim must be even, got {D}")
        self.head_dim = D
        self.base = as_real(base, "base", "RotaryEmbedding", finite=True, lo=0.0, lo_open=True)
        self.inv_freq = self.base ** (-np.arange(0, D, 2, dtype=np.float64) / D)  # (D/2,)
        if inv_freq is not None:
            f = np.asarray(inv_freq, dtype=np.float64)
            if f.shape != self.inv_freq.shape or not np.all(np.isfinite(f)):
                raise ValueError(f"RotaryEmbedding: inv_freq must hold {D // 2} finite "
                                 f"frequencies, got shape {f.shape}")
            self.inv_freq = f
        self._tables = {}

    # positions past this many are computed per call instead of growing the cached table
    _TABLE_MAX = TABLE_MAX = 1 << 20
    # positions must stay exact in the float64 angle p * theta
    _POS_MAX = 1 << 53

    def _cos_sin(self, start, n, dtype):
        """cos, sin (n, D/2) for positions start..start+n-1 (cached, grown by
        doubling up to _TABLE_MAX positions; a window past that is computed
        directly, with the same values)."""
        if start + n > self._TABLE_MAX:
            check_size((n, self.head_dim), np.float64, "RotaryEmbedding",
                       f"the cos/sin table of {n} positions", eager=True)
            ang = (np.arange(start, start + n, dtype=np.float64)[:, None]
                   * self.inv_freq[None, :])
            return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)
        c = self._tables.get(np.dtype(dtype))
        if c is None or c[0].shape[0] < start + n:
            m = max(64, start + n, 2 * (c[0].shape[0] if c is not None else 0))
            ang = np.arange(m, dtype=np.float64)[:, None] * self.inv_freq[None, :]
            c = (np.cos(ang).astype(dtype), np.sin(ang).astype(dtype))
            self._tables[np.dtype(dtype)] = c
        return c[0][start:start + n], c[1][start:start + n]

    def table(self, n, dtype=np.float32):
        """(cos, sin), each (n, D/2) in dtype: the angles p * theta_i of
        positions p = 0..n-1, the values apply() and apply_positions() use
        (read-only views of the cached table; n <= 2**20)."""
        n = as_int(n, "n", "RotaryEmbedding.table", lo=0, hi=self._TABLE_MAX)
        return self._cos_sin(0, n, np.dtype(dtype))

    def apply(self, x, offset=0):
        """x (..., T, D) at positions offset..offset+T-1 -> rotated copy."""
        x = np.asarray(x)
        if x.ndim < 2 or x.shape[-1] != self.head_dim:
            raise ValueError(f"RotaryEmbedding: x has shape {x.shape}; expected (..., T, {self.head_dim})")
        if x.dtype not in _FLOATS:
            raise TypeError(f"RotaryEmbedding: x has dtype {x.dtype}; expected float32 or float64")
        offset = as_int(offset, "offset", "RotaryEmbedding", lo=0,
                        hi=self._POS_MAX - x.shape[-2],
                        hi_why=" (positions must be exact in float64: offset + T <= 2**53)")
        cos, sin = self._cos_sin(offset, x.shape[-2], x.dtype)
        return rotate_half(x, cos, sin)

    def apply_positions(self, x, positions):
        """x (B, H, T, D) with token t of sequence b at position positions[b, t]
        (an integer array (B, T), e.g. counted from each sequence's first real
        token under left padding) -> rotated copy."""
        x = np.asarray(x)
        pos = np.asarray(positions)
        if x.ndim != 4 or x.shape[-1] != self.head_dim or pos.shape != (x.shape[0], x.shape[2]):
            raise ValueError(f"RotaryEmbedding: x has shape {x.shape} and positions "
                             f"{pos.shape}; expected (B, H, T, {self.head_dim}) and (B, T)")
        if pos.dtype.kind not in "iu" or (pos.size and (pos.min() < 0
                                                         or pos.max() >= self._TABLE_MAX)):
            raise ValueError(f"RotaryEmbedding: positions must be integers in "
                             f"[0, {self._TABLE_MAX})")
        cos, sin = self._cos_sin(0, int(pos.max()) + 1 if pos.size else 1, x.dtype)
        cos, sin = cos[pos][:, None], sin[pos][:, None]          # (B, 1, T, D/2)
        return rotate_half(x, cos, sin)

    def forward(self, q, k, offset=0):
        """(q, k) rotated: q (..., L, D), k (..., S, D), both from position offset."""
        return self.apply(q, offset), self.apply(k, offset)

    def extra_repr(self):
        return f"head_dim={self.head_dim}, base={self.base}"


# ----------------------------------------------------------------------------
# Decoder-only (GPT-style) stack with KV-cache decoding


