"""cattn.distributed: embeddings on a Dask cluster equal SentenceEncoder.encode
bit for bit, in order, for a list, a bag and a dataframe column; the model is
loaded once per worker; a worker killed mid-job changes nothing; the CLI's
.npy equals the in-memory result.

One LocalCluster (2 worker processes x 1 thread) serves the module; the
worker-kill test runs last. Needs `dask[distributed,dataframe]` (the
`distributed` extra) and the model package; skips naming them otherwise.
"""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

for _mod in ("dask", "distributed", "dask.dataframe", "pandas"):
    pytest.importorskip(_mod, reason=f"needs {_mod} (dask): pip install 'cattn[distributed]'")
from cattn_testing.minilm import corpus, require_model  # noqa: E402

require_model()

import dask  # noqa: E402
import dask.bag as db  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402
from distributed import Client, LocalCluster  # noqa: E402

import cattn.distributed as cd  # noqa: E402
from cattn.cli import main  # noqa: E402
from cattn.cli.models import read_lines  # noqa: E402
from cattn.models import SentenceEncoder  # noqa: E402

HUGE = "word " * 20000          # ~20,000 tokens: truncated at 256, as encode does


# 43 texts = 6 partitions of 7 and one of a single text (partition_size=7)
TEXTS = corpus(37)[::-1] + ["", "x", HUGE, "ab\ufffdcd", "", "Hello world."]


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=50)
    c = Client(cluster)
    yield c
    c.close()
    cluster.close()


@pytest.fixture(scope="module")
def enc():
    return SentenceEncoder.from_pretrained()


@pytest.fixture(scope="module")
def want(enc):
    return enc.encode(TEXTS)


def same_bits(got, want):
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == np.float32
    diff = (got != want).any(axis=1)
    assert not diff.any(), f"rows {np.flatnonzero(diff).tolist()} differ from encode " \
                           f"(max abs diff {float(np.abs(got - want).max()):.3g})"


def test_list(client, want):
    emb = cd.embed(TEXTS, client=client, partition_size=7)
    assert emb.shape == (43, 384) and emb.dtype == np.float32
    assert emb.chunks == ((7,) * 6 + (1,), (384,))           # chunks follow the partitions
    same_bits(emb.compute(), want)
    same_bits(cd.embed(TEXTS, client=client, compute=True), want)   # one partition of 256


def test_bag_with_empty_and_single_partitions(client, want):
    parts = [TEXTS[:10], [], TEXTS[10:11], TEXTS[11:30], [], TEXTS[30:]]
    bag = db.from_delayed([dask.delayed(list)(p) for p in parts])
    emb = cd.embed(bag, client=client)
    assert emb.chunks[0] == (10, 0, 1, 19, 0, 13)           # one chunk per partition
    same_bits(emb.compute(), want)
    lazy = db.from_sequence(TEXTS, partition_size=5).map(str.strip).map(lambda s: s)
    same_bits(cd.embed(lazy, client=client).compute(),
              SentenceEncoder.from_pretrained().encode([t.strip() for t in TEXTS]))


def test_dataframe_column(client, want):
    df = dd.from_pandas(pd.DataFrame({"text": TEXTS, "id": range(len(TEXTS))}),
                        npartitions=5)
    same_bits(cd.embed(df["text"], client=client).compute(), want)
    frames = [pd.DataFrame({"text": t}) for t in (TEXTS[:20], TEXTS[:0], TEXTS[20:21], TEXTS[21:])]
    frames[1] = frames[0].iloc[:0]                           # an empty partition
    ddf = dd.from_delayed([dask.delayed(f) for f in frames], meta=frames[0].iloc[:0])
    emb = cd.embed(ddf, client=client)                       # a one-column frame
    assert emb.chunks[0] == (20, 0, 1, 22)
    same_bits(emb.compute(), want)
    with pytest.raises(ValueError, match="one column"):
        cd.embed(df, client=client)


def test_empty_and_errors(client):
    e = cd.embed([], client=client)
    assert e.shape == (0, 384) and e.compute().shape == (0, 384)
    # the same dtype as every other input (it was a float64 array once)
    assert e.dtype == np.float32 and e.compute().dtype == np.float32
    assert cd.embed([], client=client, compute=True).dtype == np.float32
    with pytest.raises(ValueError, match="weights"):
        cd.embed(TEXTS, client=client, weights="int3")
    with pytest.raises(ValueError, match="batch_size"):
        cd.embed(TEXTS, client=client, batch_size=0)
    with pytest.raises(TypeError, match="one string"):
        cd.embed("a text", client=client)
    with pytest.raises(TypeError, match="string"):          # as encode: at compute time
        cd.embed(["ok", 3], client=client).compute()


def test_local_scheduler_without_client(want):
    """No distributed client: dask's threads in this process, same bits."""
    with dask.config.set(scheduler="threads"):
        same_bits(cd.embed(TEXTS, partition_size=11, client=None).compute(), want)


def test_model_loaded_once_per_worker_and_thread_budget(client):
    cd.embed(TEXTS, client=client, partition_size=3).compute()       # 15 more tasks
    states = client.run(cd.worker_state)
    assert len(states) == 2
    cores = client.run(cd._cpu_count)
    for addr, st in states.items():
        assert st["loads"] == {(None, "float32"): 1}, st
        # 2 workers x 1 thread on the host: cattn threads = cores // 2
        assert st["threads"] == max(1, cores[addr] // 2), st


def test_import_cattn_does_not_import_dask():
    code = ("import sys, cattn, cattn.models, cattn.cli, cattn.cli.models; "
            "cattn.cli.build_parser(); "
            "assert not [m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')]")
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")
    code = ("import sys; sys.modules['dask'] = None\n"
            "try:\n    import cattn.distributed\nexcept ImportError as e:\n"
            "    assert \"pip install 'cattn[distributed]'\" in str(e), e\nelse:\n"
            "    raise SystemExit('no ImportError')")
    subprocess.run([sys.executable, "-c", code], check=True, cwd="/")


def test_save_npy_streams_in_order(client, want, tmp_path, capsys):
    out = tmp_path / "emb.npy"
    emb = cd.embed(TEXTS, client=client, partition_size=4)
    assert cd.save_npy(emb, out, client=client, progress=True) == (43, 384)
    same_bits(np.load(out), want)
    assert not os.path.exists(str(out) + ".partial")
    assert "43/43" in capsys.readouterr().err
    with pytest.raises(TypeError, match="string"):          # a failed job leaves no file
        cd.save_npy(cd.embed(["ok", 3], client=client), tmp_path / "bad.npy", client=client)
    assert sorted(os.listdir(tmp_path)) == ["emb.npy"]


def test_cli_file_with_bad_lines(client, enc, tmp_path):
    """Empty, CRLF, invalid UTF-8 and huge lines: one row each, in order, as
    read_lines decodes them; the cluster's .npy equals the single-process CLI's
    and encode's."""
    raw = (b"first line\n\nsecond\r\n\xff\xfe bad \xc3( utf-8\n" + HUGE.encode() + b"\n"
           + "\n".join(TEXTS[:9]).encode() + b"\nno newline at the end")
    f = tmp_path / "corpus.txt"
    f.write_bytes(raw)
    with open(f, "rb") as fh:
        lines = read_lines(fh)
    assert len(lines) == 15 and lines[1] == "" and lines[2] == "second"
    assert lines[3] == "\ufffd\ufffd bad \ufffd( utf-8"
    want = enc.encode(lines)
    one, dist = tmp_path / "one.npy", tmp_path / "dist.npy"
    assert main(["embed", "--file", str(f), "--out", str(one)]) == 0
    assert main(["embed", "--file", str(f), "--out", str(dist), "--partition-size", "4",
                 "--scheduler", client.scheduler.address]) == 0
    same_bits(np.load(one), want)
    same_bits(np.load(dist), want)


def test_cli_workers_starts_a_local_cluster(enc, tmp_path, capsys):
    f = tmp_path / "c.txt"
    f.write_text("\n".join(TEXTS[:5]) + "\n", encoding="utf-8")
    assert main(["embed", "--file", str(f), "--workers", "1"]) == 0      # printed rows
    rows = np.array([[float(v) for v in ln.split()] for ln in
                     capsys.readouterr().out.splitlines()], np.float32)
    np.testing.assert_allclose(rows, enc.encode(TEXTS[:5]), rtol=1e-6, atol=0)
    assert main(["embed", "x", "--workers", "0"]) == 2


def test_weights_reach_the_workers(client):
    """weights= is the workers' from_pretrained format: the bits of a local
    int8 encoder; each worker caches the model by (path, weights)."""
    texts = TEXTS[:9]
    want = SentenceEncoder.from_pretrained(weights="int8").encode(texts)
    same_bits(cd.embed(texts, client=client, weights="int8", partition_size=4).compute(), want)
    assert any((None, "int8") in st["loads"] for st in client.run(cd.worker_state).values())


def _signal_then_wait(part, flag, marker):
    """Upstream task of one partition: write this worker's pid to `flag` and
    linger 3 s, so the test can kill the worker while the job runs."""
    if marker in part:
        with open(flag, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(3)
    return part


def test_worker_killed_mid_job(client, want, tmp_path):
    flag = str(tmp_path / "started")
    bag = db.from_sequence(TEXTS, partition_size=3).map_partitions(
        _signal_then_wait, flag, TEXTS[21])
    fut = client.compute(cd.embed(bag, client=client))
    deadline = time.time() + 60
    while not os.path.exists(flag) or not open(flag).read():
        assert time.time() < deadline, "the signalling task never started"
        time.sleep(0.05)
    pid = int(open(flag).read())
    assert pid in client.run(os.getpid).values()
    os.kill(pid, signal.SIGKILL)
    same_bits(fut.result(timeout=120), want)
    client.wait_for_workers(2, timeout=60)       # the nanny restarted it
