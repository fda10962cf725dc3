"""`cattn embed --workers N | --scheduler ADDRESS`: the embed subcommand on a
Dask cluster (cattn.distributed). Imported only when one of the two options
is given, so the rest of the CLI never imports dask."""
import sys

from ..models._progress import isatty
from ._common import fail


def embed_on_cluster(texts, args):
    """Embed texts on a LocalCluster of args.workers processes x 1 thread, or
    on the cluster at args.scheduler; write args.out (.npy, streamed block by
    block) or print the rows in order. A progress bar on stderr when it is a
    terminal."""
    try:
        from ..distributed import DEFAULT_PARTITION_SIZE, embed, save_npy
        from distributed import Client, LocalCluster
    except ImportError as e:
        return fail(str(e))
    if args.workers is not None and args.workers < 1:
        return fail(f"embed: --workers must be >= 1, got {args.workers}")
    size = args.partition_size or DEFAULT_PARTITION_SIZE
    if size < 1:
        return fail(f"embed: --partition-size must be >= 1, got {size}")
    cluster = None
    if args.scheduler is None:
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                               dashboard_address=":0")
    client = Client(cluster if cluster is not None else args.scheduler)
    try:
        emb = embed(texts, args.model, weights=args.weights, client=client,
                    batch_size=args.batch_size,
                    partition_size=size, normalize_embeddings=not args.no_normalize,
                    threads=args.threads)
        if args.out:
            N, E = save_npy(emb, args.out, client=client, progress=isatty(sys.stderr))
            print(f"wrote {args.out}: {N} x {E} float32", file=sys.stderr)
        else:                                 # all blocks run at once, printed in order
            for fut in client.compute(list(emb.to_delayed().ravel())):
                for row in fut.result():
                    print(" ".join(f"{v:.7g}" for v in row))
                fut.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    return 0
