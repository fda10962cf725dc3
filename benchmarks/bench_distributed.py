"""cattn.distributed on a LocalCluster vs one process: all-MiniLM-L6-v2 over
10,000 corpus sentences. Two faces:

    pytest benchmarks/bench_distributed.py --benchmark-json=dist.json
    python benchmarks/report.py dist.json

    python benchmarks/bench_distributed.py [--n 10000] [--rounds 3] [--json out.json]

The two setups, same corpus (benchmarks/corpus.py, make_corpus(10000),
seeded), same batch size 32, same 2 cores:
  one process   SentenceEncoder.encode(corpus) with 2 cattn threads;
  cluster       cattn.distributed.embed(corpus, client=...) on a LocalCluster
                of 2 worker processes x 1 thread (cattn 1 thread per task),
                partitions of --partition-size sentences, every block gathered
                into one NumPy array on the client (as save_npy would write it).
Measured: sentences/s, and the time to the first result (one process:
encode returns everything at once, so the whole call; cluster: the first
block on the client). The cluster is started and the model loaded in each
worker before timing (both reported apart, as cold start).

Bar: cluster >= 0.85x the one-process throughput (medians), results
bitwise equal, the model loaded once per worker.

Under pytest (conftest's `bench`): one test per setup, extra_info items =
sentences per call (report.py: items/s); few rounds (each call is ~a minute
on 2 cores). As a script: rounds alternate the setups (one process first,
then the cluster first, ...), medians and paired per-round ratios printed;
--json writes the runs in pytest-benchmark's shape as well. Needs the
model package and `pip install 'cattn[distributed]'`.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from corpus import make_corpus  # noqa: E402

N, BATCH, PARTITION = 10000, 32, 256
GROUP = f"MiniLM {N} sentences: one process (2 threads) vs LocalCluster (2 x 1)"


def _load_avg():
    try:
        return os.getloadavg()
    except OSError:
        return None


def start_cluster(n_workers=2):
    """(cluster, client, seconds to start)."""
    from distributed import Client, LocalCluster
    t = time.perf_counter()
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                           dashboard_address=":0", silence_logs=50)
    client = Client(cluster)
    client.wait_for_workers(n_workers)
    return cluster, client, time.perf_counter() - t


def run_cluster(client, corpus, partition_size=PARTITION, batch_size=BATCH):
    """embed on the cluster, blocks gathered as they finish into one array:
    (embeddings, seconds to the first block, total seconds)."""
    from cattn.distributed import _blocks_as_completed, embed
    t = time.perf_counter()
    emb = embed(corpus, client=client, partition_size=partition_size, batch_size=batch_size)
    offsets = np.concatenate([[0], np.cumsum(emb.chunks[0])])
    out = np.empty(emb.shape, np.float32)
    first = None
    for i, block in _blocks_as_completed(emb, client):
        first = first or time.perf_counter() - t
        out[offsets[i]:offsets[i + 1]] = block
    return out, first, time.perf_counter() - t


def run_single(enc, corpus, threads=2, batch_size=BATCH):
    """(embeddings, seconds to the first result = total, total seconds)."""
    import cattn
    with cattn.num_threads(threads):
        t = time.perf_counter()
        out = enc.encode(corpus, batch_size=batch_size)
        dt = time.perf_counter() - t
    return out, dt, dt


def worker_loads(client):
    from cattn.distributed import worker_state
    return {addr: st["loads"] for addr, st in client.run(worker_state).items()}


# ---- pytest-benchmark ----------------------------------------------------------------

@pytest.fixture(scope="module")
def setup():
    pytest.importorskip("tokenizers")
    pytest.importorskip("safetensors")
    pytest.importorskip("distributed", reason="needs dask: pip install 'cattn[distributed]'")
    from cattn.models import ModelNotFoundError, SentenceEncoder
    try:
        enc = SentenceEncoder.from_pretrained()
    except ModelNotFoundError as e:
        pytest.skip(str(e))
    cluster, client, _ = start_cluster()
    corpus = make_corpus(N)
    run_cluster(client, corpus[:64], partition_size=32)        # each worker loads the model
    state = {"enc": enc, "client": client, "corpus": corpus, "results": {}}
    yield state
    client.close()
    cluster.close()


@pytest.mark.parametrize("setup_name", ["one process 2 threads", "LocalCluster 2x1"])
def test_throughput(bench, setup, setup_name):
    corpus = setup["corpus"]
    if setup_name.startswith("one"):
        fn = lambda: run_single(setup["enc"], corpus)[0]        # noqa: E731
        lib, threads = "cattn", 2
    else:
        fn = lambda: run_cluster(setup["client"], corpus)[0]    # noqa: E731
        lib, threads = "cattn.distributed", 1
    emb = bench(fn, group=GROUP, lib=lib, threads=threads, dtype="float32",
                shape=[N, BATCH], items=N, rounds=2)
    setup["results"][setup_name] = emb
    if len(setup["results"]) == 2:
        a, b = setup["results"].values()
        assert np.array_equal(a, b), "cluster result differs from one process"
        assert all(v == {(None, "float32"): 1} for v in worker_loads(setup["client"]).values())


# ---- the script ----------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=N)
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds")
    ap.add_argument("--partition-size", type=int, default=PARTITION)
    ap.add_argument("--batch-size", type=int, default=BATCH)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args(argv)

    from cattn.models import SentenceEncoder
    from conftest import machine_summary, thread_limit

    corpus = make_corpus(args.n)
    enc = SentenceEncoder.from_pretrained()
    cluster, client, t_start = start_cluster()
    t = time.perf_counter()
    run_cluster(client, corpus[:64], partition_size=32)           # model load in each worker
    t_load = time.perf_counter() - t
    print(f"{args.n} sentences, batch {args.batch_size}, partitions of {args.partition_size}; "
          f"cluster start {t_start:.2f} s, first job (model load per worker) {t_load:.2f} s; "
          f"load average {_load_avg()}", flush=True)
    runs = {"single": [], "cluster": []}
    ref = None
    with thread_limit(2):
        enc.encode(corpus[:200])                                   # warm-up
        for r in range(args.rounds):
            order = ["single", "cluster"] if r % 2 == 0 else ["cluster", "single"]
            for which in order:
                if which == "single":
                    emb, first, total = run_single(enc, corpus, 2, args.batch_size)
                else:
                    from distributed import get_task_stream
                    with get_task_stream(client) as ts:
                        emb, first, total = run_cluster(client, corpus, args.partition_size,
                                                        args.batch_size)
                    busy = sum(ss["stop"] - ss["start"] for d in ts.data
                               for ss in d["startstops"] if ss["action"] == "compute")
                if ref is None:
                    ref = emb
                identical = bool(np.array_equal(emb, ref))
                runs[which].append(dict(total=total, first=first, identical=identical,
                                        load=_load_avg()[0] if _load_avg() else None))
                # where the cluster's time goes: the workers' task time against
                # 2 x the wall time (the rest: scheduling, transfer, idle tail)
                busy_note = f", workers busy {busy / (2 * total):.0%}" if which == "cluster" else ""
                if which == "cluster":
                    runs[which][-1]["workers_busy"] = busy / (2 * total)
                print(f"  round {r + 1}: {which:7s} {args.n / total:7.1f} sentences/s "
                      f"({total:.2f} s, first result {first:.2f} s, identical {identical}"
                      f"{busy_note})", flush=True)
    loads = worker_loads(client)
    client.close()
    cluster.close()

    med = {k: dict(rate=statistics.median(args.n / x["total"] for x in v),
                   first=statistics.median(x["first"] for x in v)) for k, v in runs.items()}
    paired = [args.n / c["total"] / (args.n / s["total"])
              for s, c in zip(runs["single"], runs["cluster"])]
    ratio = med["cluster"]["rate"] / med["single"]["rate"]
    identical = all(x["identical"] for v in runs.values() for x in v)
    once = all(v == {(None, "float32"): 1} for v in loads.values())
    print(f"\n{'':34s}{'sentences/s':>12s}{'first result (s)':>18s}")
    print(f"{'one process, 2 threads':34s}{med['single']['rate']:12.1f}"
          f"{med['single']['first']:18.2f}")
    print(f"{'LocalCluster 2 workers x 1 thread':34s}{med['cluster']['rate']:12.1f}"
          f"{med['cluster']['first']:18.2f}")
    print(f"cluster / one process: {ratio:.2f}x (medians; bar >= 0.85), paired per round "
          f"[{', '.join(f'{p:.2f}' for p in paired)}]; identical: {identical}; model loads "
          f"per worker: {list(loads.values())}; load average {_load_avg()}")
    if args.json:
        res = dict(n=args.n, batch_size=args.batch_size, partition_size=args.partition_size,
                   cluster_start_s=t_start, first_job_s=t_load, runs=runs, medians=med,
                   ratio=ratio, paired=paired, identical=identical, loads_once=once,
                   machine_info=machine_summary())
        res["benchmarks"] = [
            dict(group=GROUP, name=name, extra_info=dict(lib=lib, threads=th, dtype="float32",
                                                          shape=[args.n, args.batch_size],
                                                          items=args.n),
                 stats=_stats([x["total"] for x in runs[key]]))
            for key, name, lib, th in (("single", "one-process", "cattn", 2),
                                       ("cluster", "localcluster-2x1", "cattn.distributed", 1))]
        with open(args.json, "w") as f:
            json.dump(res, f, indent=2, default=str)
        print(f"wrote {args.json}")
    return 0 if identical and once else 1


def _stats(seconds):
    q1, median, q3 = np.percentile(seconds, [25, 50, 75])
    return dict(min=min(seconds), max=max(seconds), mean=float(np.mean(seconds)),
                median=float(median), iqr=float(q3 - q1), rounds=len(seconds))


if __name__ == "__main__":
    sys.exit(main())
