"""cattn.plot — an attention heat map with token labels (matplotlib, Agg).

matplotlib is imported only when a plot is drawn: pip install 'cattn[plot]'.
The figure is drawn on an Agg canvas directly, so pyplot's global state and
the caller's backend are left alone.
"""
import os

import numpy as np


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("cattn.plot_attention needs matplotlib: pip install 'cattn[plot]' "
                          "(or: pip install matplotlib)") from None
    return Figure, FigureCanvasAgg


def plot_attention(weights, tokens, path=None, *, key_tokens=None, title=None,
                   cmap="viridis", annotate=None, dpi=120):
    """Draw one attention matrix as a heat map and save it.

    weights: (L, S) probabilities (row i: how query token i spreads its
    attention over the keys), e.g. `encoder.attentions(s)[layer, head]`.
    tokens: L query labels; key_tokens: S key labels (default: tokens).
    path: output file (format from the suffix, e.g. .png); None returns the
    matplotlib Figure without saving. annotate: write the values in the
    cells (default: when L, S <= 16). Returns path (or the Figure)."""
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2:
        raise ValueError(f"plot_attention: weights must be 2-D (L, S), got shape {w.shape}; "
                         "select one layer and head, e.g. att[layer, head]")
    tokens = [str(t) for t in tokens]
    key_tokens = tokens if key_tokens is None else [str(t) for t in key_tokens]
    L, S = w.shape
    if len(tokens) != L or len(key_tokens) != S:
        raise ValueError(f"plot_attention: weights have shape {w.shape} but got {len(tokens)} "
                         f"query labels and {len(key_tokens)} key labels")
    Figure, FigureCanvasAgg = _matplotlib()
    if annotate is None:
        annotate = max(L, S) <= 16
    side = 1.5 + 0.42 * max(L, S, 4)
    fig = Figure(figsize=(side + 1.2, side), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(w, cmap=cmap, vmin=0.0, vmax=max(float(np.nanmax(w)) if w.size else 1.0, 1e-9),
                   aspect="equal", interpolation="nearest")
    ax.set_xticks(range(S))
    ax.set_xticklabels(key_tokens, rotation=60, ha="right", rotation_mode="anchor")
    ax.set_yticks(range(L))
    ax.set_yticklabels(tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if annotate:
        hi = np.nanmax(w) if w.size else 1.0
        for i in range(L):
            for j in range(S):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if w[i, j] > 0.6 * hi else "white")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    if path is None:
        return fig
    path = os.fspath(path)
    fig.savefig(path)
    return path
