"""cattn.ops.stack_weights: the "stack" format (blocks of rows in different
formats, run as one weight; cattn/ops/stacked.py, csrc/weights.c
CATTN_W_STACK).

What it promises and how it is checked: the linear by a stack is, column
block by column block, each part's own linear (bias slice and activation
included) bit for bit, for row counts on the few-row and the blocked paths
and any thread count (each part's kernel is checked against its formula in
test_int4.py / test_packed.py, so this compares against the parts run
alone); unpack / rows / nbytes are the parts'; to_arrays, np.savez and
pickle keep the parts; a module assignment repacks each block in its
part's format; malformed stacks are errors naming what is wrong.

Legend: M rows of x, N outputs (the parts' rows added up), K inputs.
"""
import pickle

import numpy as np
import pytest

import cattn
from cattn import nn
from cattn.ops import PackedWeight, pack_weight, stack_weights
from cattn_testing.numerics import randn, threads_bitwise

F32 = np.float32
PARTS = [("int4", 32), ("int6g", 16), ("float32", 21), ("int8", 5), ("int5g", 48),
         ("bfloat16", 7), ("int8g", 17)]


def make(rng, K, spec=PARTS):
    ws = [randn(rng, (n, K)) for _, n in spec]
    return [pack_weight(w, f) for (f, _), w in zip(spec, ws)]


@pytest.mark.parametrize("M", [1, 2, 3, 4, 5, 9, 40])
@pytest.mark.parametrize("K", [96, 70])
@pytest.mark.parametrize("act", [None, "silu"])
def test_linear_is_each_part_alone(rng, M, K, act):
    parts = make(rng, K)
    s = stack_weights(parts)
    N = sum(p.shape[0] for p in parts)
    assert s.shape == (N, K) and s.format == "stack" and s.parts == tuple(parts)
    x, b = randn(rng, (M, K)), randn(rng, (N,))
    starts = np.cumsum([0] + [p.shape[0] for p in parts])
    want = np.concatenate([cattn.linear(x, p, b[a:z], activation=act)
                           for p, a, z in zip(parts, starts, starts[1:])], axis=1)
    got = cattn.linear(x, s, b, activation=act)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(threads_bitwise(cattn.linear, x, s, b, activation=act), want)
    one = cattn.linear(x[M // 2:M // 2 + 1], s, b, activation=act)       # a row alone
    np.testing.assert_array_equal(one, want[M // 2:M // 2 + 1])


def test_values_rows_bytes_and_round_trips(rng, tmp_path):
    parts = make(rng, 64)
    s = stack_weights(parts)
    full = np.concatenate([p.unpack() for p in parts])
    np.testing.assert_array_equal(s.unpack(), full)
    ids = np.array([0, 31, 32, 47, 48, 68, 69, 73, 74, 121, 128, 145, 3, 3])
    np.testing.assert_array_equal(s.rows(ids), full[ids])
    assert s.rows(np.array([], int)).shape == (0, 64)
    assert s.nbytes == sum(p.nbytes for p in parts)
    x = randn(rng, (3, 64))
    want = cattn.linear(x, s)
    np.savez(tmp_path / "s.npz", **s.to_arrays())
    for back in (PackedWeight.from_arrays(s.to_arrays()),
                 PackedWeight.from_arrays(np.load(tmp_path / "s.npz")),
                 pickle.loads(pickle.dumps(s))):
        assert [str(p.format) for p in back.parts] == [f for f, _ in PARTS]
        np.testing.assert_array_equal(cattn.linear(x, back), want)


def test_module_assignment_repacks_each_block_in_its_format(rng):
    lin = nn.Linear(64, 40)
    lin.weight = stack_weights(make(rng, 64, [("int4", 16), ("int6g", 24)]))
    w = randn(rng, (40, 64))
    lin.load_state_dict({"weight": w, "bias": lin.state_dict()["bias"]})
    assert [str(p.format) for p in lin.weight.parts] == ["int4", "int6g"]
    np.testing.assert_array_equal(lin.weight.unpack(), np.concatenate(
        [pack_weight(w[:16], "int4").unpack(), pack_weight(w[16:], "int6g").unpack()]))


def test_errors(rng):
    parts = make(rng, 64, [("int4", 16), ("float32", 8)])
    with pytest.raises(ValueError, match="at least one part"):
        stack_weights([])
    with pytest.raises(TypeError, match="part 1 must be a PackedWeight"):
        stack_weights([parts[0], np.zeros((3, 64), F32)])
    with pytest.raises(ValueError, match="share K"):
        stack_weights([parts[0], pack_weight(randn(rng, (4, 32)), "int4")])
    with pytest.raises(ValueError, match="not a stack"):
        stack_weights([parts[0], stack_weights(parts)])
    with pytest.raises(ValueError, match="float64"):
        stack_weights([pack_weight(randn(rng, (4, 64)).astype(np.float64), "float64")])
    with pytest.raises(ValueError, match="stack_weights"):
        pack_weight(randn(rng, (4, 64)), "stack")
    d = stack_weights(parts).to_arrays()
    for bad in ({**d, "parts": np.array(0)}, {**d, "parts": np.array(3)},
                {**d, "shape": np.array([25, 64])}):
        with pytest.raises(ValueError):
            PackedWeight.from_arrays(bad)
