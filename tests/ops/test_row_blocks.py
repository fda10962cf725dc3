"""PackedWeight.from_row_blocks: a weight built a block of rows at a time
(a loader's low-peak path) is the weight packed at once, array for array,
in every format that packs rows; blocks start on whole panels; a block
that is None stops it; a block that does not fit is refused by name."""
import numpy as np
import pytest

from cattn.ops import formats
from cattn.ops.packed import PackedWeight, pack_weight

ROW_FORMATS = ["float32", "float64", "bfloat16", "int8", "int4", "int8g", "int6g", "int5g"]


def same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.dtype == y.dtype and x.shape == y.shape, k
        assert x.tobytes() == y.tobytes(), k


@pytest.mark.parametrize("fmt", ROW_FORMATS)
@pytest.mark.parametrize("N, K", [(100, 96), (37, 70), (16, 300)])
def test_values_in_row_blocks_are_the_whole(fmt, N, K):
    w = np.random.default_rng(N + K).standard_normal((N, K)).astype(np.float32)
    seen = []

    def block(r0, r1):
        seen.append((r0, r1))
        return w[r0:r1]
    p = PackedWeight.from_row_blocks(fmt, (N, K), block, rows=20,
                                     done=lambda r0, r1: seen.append(("done", r0, r1)))
    same(p.to_arrays(), pack_weight(w, fmt).to_arrays())
    panel = p.format.panel_rows()
    step = -(-20 // panel) * panel                   # 20 rows rounded up to whole panels
    assert [s[0] for s in seen if s[0] != "done"] == list(range(0, N, step))
    assert [s[1:] for s in seen if s[0] == "done"] == [s for s in seen if s[0] != "done"]


def test_arrays_in_row_blocks_and_a_stop():
    """Blocks given as a format's arrays (int4_arrays of the rows): the
    weight of the whole's arrays; None stops the build; a block of the
    wrong format is refused."""
    rng = np.random.default_rng(3)
    q = rng.integers(0, 16, (50, 64), dtype=np.uint8)
    d = rng.random((50, 2)).astype(np.float16)
    whole = PackedWeight.from_arrays(formats.int4_arrays(q, d, None, 8))
    built = PackedWeight.from_row_blocks(
        "int4", (50, 64), lambda r0, r1: formats.int4_arrays(q[r0:r1], d[r0:r1], None, 8), rows=16)
    same(built.to_arrays(), whole.to_arrays())
    assert PackedWeight.from_row_blocks(
        "int4", (50, 64), lambda r0, r1: None if r0 else q[r0:r1].astype(np.float32),
        rows=16) is None
    with pytest.raises(ValueError, match=r"rows \[0, 16\) came as a int8g"):
        PackedWeight.from_row_blocks(
            "int4", (50, 64), lambda r0, r1: formats.int8g_arrays(q[r0:r1], d[r0:r1]), rows=16)
    with pytest.raises(ValueError, match=r"rows \[16, 32\) have the arrays"):
        PackedWeight.from_row_blocks(                 # a zero point that changes
            "int4", (50, 64), lambda r0, r1: formats.int4_arrays(q[r0:r1], d[r0:r1], None,
                                                                 8 if r0 else 0), rows=16)
    with pytest.raises(ValueError, match="unknown format 'int3'"):
        PackedWeight.from_row_blocks("int3", (2, 32), lambda r0, r1: None)
