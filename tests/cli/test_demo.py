"""cattn.demo: the printed worked example agrees with the formula
Z = softmax(X W^Q (X W^K)^T / sqrt(d_k)) X W^V, computed in float64."""
import io
import re

import numpy as np

from cattn import demo
from cattn import reference as ref

NUM = re.compile(r"-?\d+\.\d+")


def printed_block(text, header):
    """The matrix printed under the line starting with `header`."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 1:]:
        if not line.strip():
            break
        rows.append([float(v) for v in NUM.findall(line.split("[", 1)[1])])
    return np.array(rows)


def expected():
    X, WQ, WK, WV = (np.array(m, dtype=np.float64) for m in (demo.X, demo.W_Q, demo.W_K, demo.W_V))
    Q, K, V = X @ WQ, X @ WK, X @ WV
    A = ref.softmax(Q @ K.T / np.sqrt(4.0))
    return Q, K, V, A, A @ V


def test_demo_prints_formula_values():
    buf = io.StringIO()
    res = demo.run(file=buf)
    text = buf.getvalue()
    Q, K, V, A, Z = expected()
    for tok in demo.TOKENS:
        assert tok in text
    np.testing.assert_allclose(printed_block(text, "Step 1. Q"), Q, atol=5e-5)
    np.testing.assert_allclose(printed_block(text, "Step 2."), Q @ K.T, atol=5e-5)
    np.testing.assert_allclose(printed_block(text, "Step 3."), Q @ K.T / 2, atol=5e-5)
    np.testing.assert_allclose(printed_block(text, "Step 4. A"), A, atol=5.1e-5)
    np.testing.assert_allclose(printed_block(text, "Step 5. Z"), Z, atol=5.1e-5)
    np.testing.assert_allclose(printed_block(text, "  Z_mha"), Z, atol=5.1e-5)
    # the returned arrays, every route: step by step, fused kernel, MultiheadAttention
    for key in ("A", "A_fused", "A_mha"):
        np.testing.assert_allclose(res[key], A, rtol=1e-6, atol=1e-6)
    for key in ("Z", "Z_fused", "Z_mha"):
        np.testing.assert_allclose(res[key], Z, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(A.sum(axis=1), 1.0)


class _AsciiOut(io.StringIO):
    encoding = "ascii"


def test_demo_falls_back_to_ascii_labels():
    buf = _AsciiOut()
    demo.run(file=buf)
    text = buf.getvalue()
    text.encode("ascii")
    assert "laoshu" in text


def test_cli_demo_runs(capsys):
    from cattn.cli import main
    assert main(["demo"]) == 0
    assert "softmax" in capsys.readouterr().out.lower()
