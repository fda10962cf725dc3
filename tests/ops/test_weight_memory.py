"""Where packed weights live (cattn/ops/weight_memory.py): weights of at least
SHARED_MIN bytes are carved from shared anonymous blocks madvised for
transparent huge pages; smaller ones, or every one where huge pages cannot be
asked for, are ordinary NumPy arrays. Only speed may differ: results are
checked against the plain weight's linear, bit for bit (the kernels' own
tests check the linear itself against float64 references).

Legend: M rows of x, N outputs, K inputs.
"""
import gc
import pickle

import numpy as np
import pytest

import cattn
from cattn.ops import weight_memory as wm

FORMATS = ["float32", "bfloat16", "int8"]


def _weight(N, K, seed=0):
    return np.random.default_rng(seed).standard_normal((N, K), dtype=np.float32)


def _vm_flags(address):
    """The VmFlags of the mapping holding `address` (/proc/self/smaps)."""
    start = end = None
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and all(c in "0123456789abcdef-" for c in head):
                lo, hi = (int(v, 16) for v in head.split("-"))
                start, end = lo, hi
            elif head == "VmFlags:" and start is not None and start <= address < end:
                return line.split()[1:]
    return None


needs_thp = pytest.mark.skipif(not wm.THP, reason="transparent huge pages cannot be asked for "
                               "here (no MADV_HUGEPAGE, or THP 'never')")


@needs_thp
@pytest.mark.parametrize("fmt", FORMATS)
def test_large_weights_share_huge_page_blocks(fmt):
    N, K = 384, 1536                          # >= SHARED_MIN in every format
    w = _weight(N, K)
    packs = [cattn.pack_weight(w, dtype=fmt) for _ in range(3)]
    addrs = [p._data.ctypes.data for p in packs]
    assert all(a % wm.ALIGN == 0 for a in addrs)
    # carved one after the other from one block (3 x <= 2.4 MB < BLOCK)
    assert addrs[1] - addrs[0] == -(-packs[0]._data.nbytes // wm.ALIGN) * wm.ALIGN
    assert not packs[0]._data.flags.writeable
    flags = _vm_flags(addrs[0])
    assert flags is not None and "hg" in flags, flags       # madvise(MADV_HUGEPAGE)
    x = np.random.default_rng(1).standard_normal((8, K), dtype=np.float32)
    plain = cattn.linear(x, w) if fmt == "float32" else None
    for p in packs:
        y = cattn.linear(x, p)
        assert np.array_equal(y, cattn.linear(x, packs[0]))
        if plain is not None:
            assert np.array_equal(y, plain)


@needs_thp
def test_a_block_is_released_with_its_last_weight(monkeypatch):
    monkeypatch.setattr(wm, "_block", None)   # a block of this test's own
    w = _weight(512, 512)
    packs = [cattn.pack_weight(w) for _ in range(2)]
    block = wm._block[0]
    assert block() is not None
    del packs
    gc.collect()
    assert block() is None                    # the module holds it weakly only
    p = cattn.pack_weight(w)                  # a fresh block
    assert wm._block[0]() is not None and p._data.ctypes.data % wm.ALIGN == 0


def test_small_weights_and_no_thp_are_ordinary_arrays(monkeypatch):
    small = cattn.pack_weight(_weight(16, 16))
    assert small._data.nbytes < wm.SHARED_MIN
    assert small._data.base is None           # NumPy's own allocation, not a block view
    monkeypatch.setattr(wm, "THP", False)
    w = _weight(384, 1536)
    p = cattn.pack_weight(w)
    assert p._data.flags.c_contiguous and p._data.nbytes >= wm.SHARED_MIN
    x = np.random.default_rng(2).standard_normal((5, 1536), dtype=np.float32)
    assert np.array_equal(cattn.linear(x, p), cattn.linear(x, w))


def test_a_weight_larger_than_a_block_gets_its_own():
    w = _weight(3000, 3000)                   # 36 MB float32 > BLOCK
    p = cattn.pack_weight(w)
    assert p._data.nbytes > wm.BLOCK
    x = np.random.default_rng(3).standard_normal((3, 3000), dtype=np.float32)
    assert np.array_equal(cattn.linear(x, p), cattn.linear(x, w))


@pytest.mark.parametrize("fmt", FORMATS)
def test_round_trips_leave_block_memory_independent(fmt):
    w = _weight(300, 700)
    p = cattn.pack_weight(w, dtype=fmt)
    q = cattn.PackedWeight.from_arrays(p.to_arrays())
    r = pickle.loads(pickle.dumps(p))
    for other in (q, r):
        assert other._data.ctypes.data != p._data.ctypes.data
        assert np.array_equal(other._data, p._data)
    d = p.to_arrays()
    d["data"][:] = 0                          # a copy: the packed weight is untouched
    assert np.array_equal(q._data, p._data)
    x = np.random.default_rng(4).standard_normal((7, 700), dtype=np.float32)
    assert np.array_equal(cattn.linear(x, q), cattn.linear(x, p))
    assert np.array_equal(cattn.linear(x, r), cattn.linear(x, p))


def test_concurrent_packing_never_overlaps():
    import threading
    w = _weight(256, 1024)
    out = []
    lock = threading.Lock()

    def work(seed):
        mine = [cattn.pack_weight(w * (seed + 1)) for _ in range(6)]
        with lock:
            out.extend(mine)

    ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    spans = sorted((p._data.ctypes.data, p._data.ctypes.data + p._data.nbytes) for p in out)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    x = np.random.default_rng(5).standard_normal((2, 1024), dtype=np.float32)
    assert sorted(float(p.unpack()[0, 0] / w[0, 0]) for p in out) == \
        sorted(float(np.float32(w[0, 0] * (s + 1)) / w[0, 0]) for s in range(4) for _ in range(6))
    for p in out:
        assert np.array_equal(cattn.linear(x, p), cattn.linear(x, p.unpack()))


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_packs_with_a_fresh_lock_and_block():
    import os
    w = _weight(256, 256)
    parent = cattn.pack_weight(w)
    wm._lock.acquire()                        # as if another thread were packing
    try:
        pid = os.fork()
        if pid == 0:                          # child: must not deadlock, must not reuse
            code = 1
            try:
                p = cattn.pack_weight(w)
                x = np.ones((2, 256), np.float32)
                with cattn.num_threads(1):    # no OpenMP team in a forked child
                    ok = (np.array_equal(cattn.linear(x, p), cattn.linear(x, parent))
                          and (wm._block is None or wm._block[0]() is not None))
                code = 0 if ok else 2
            finally:
                os._exit(code)
    finally:
        wm._lock.release()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
