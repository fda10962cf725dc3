"""`cattn serve`: the OpenAI-compatible server (cattn.server) under uvicorn
on 127.0.0.1 by default (registered by cattn.cli through `add_command`).
Not here: the routes or batching (cattn.server)."""
import os
import sys


def add_command(sub):
    from . import add_threads_option
    from .models import add_kv_dtype_option, add_weights_option
    p = sub.add_parser("serve", help="serve embeddings and chat over HTTP (OpenAI's API; "
                                     "needs pip install 'cattn[server]')")
    p.add_argument("--embed", metavar="MODEL", default=None,
                   help="sentence-encoder folder (default: the installed all-MiniLM-L6-v2 "
                        "when no --llm is given)")
    p.add_argument("--no-embed", action="store_true", help="serve no embeddings model")
    p.add_argument("--llm", metavar="MODEL", default=None,
                   help="decoder LLM: a Hugging Face folder or a GGUF file")
    add_weights_option(p, gguf=True)
    add_kv_dtype_option(p)
    p.add_argument("--embed-weights", choices=["float32", "bfloat16", "int8"],
                   default="float32", help="the encoder's weight format (default float32)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: any free)")
    key = p.add_mutually_exclusive_group()
    key.add_argument("--api-key", metavar="KEY", default=None,
                     help="require Authorization: Bearer KEY on /v1 routes")
    key.add_argument("--api-key-file", metavar="F", default=None,
                     help="read the API key from file F (its first line)")
    p.add_argument("--slots", type=int, default=4, metavar="N",
                   help="sequences generating together (continuous batching; default 4)")
    p.add_argument("--context", type=int, default=2048, metavar="N",
                   help="positions per generation slot, prompt and reply (default 2048)")
    p.add_argument("--max-queue", type=int, default=256, metavar="N",
                   help="requests that may wait per model before 429 (default 256)")
    p.add_argument("--max-body", type=int, default=4 << 20, metavar="BYTES",
                   help="largest request body (413 beyond; default 4 MiB)")
    p.add_argument("--cors-origin", action="append", default=None, metavar="ORIGIN",
                   help="allow this origin by CORS (repeatable; none by default)")
    p.add_argument("--access-log", action="store_true",
                   help="log a line per request (off by default: on a 2-core host each "
                        "line cost the event loop ~0.25 ms, 4%% of a one-sentence embedding)")
    add_threads_option(p)
    p.set_defaults(func=_serve)


def _serve(args):
    def fail(msg):
        print(f"cattn: error: {msg}", file=sys.stderr)
        return 2
    try:
        import uvicorn
        from ..server import app
    except ImportError as e:
        return fail(f"{e} (pip install 'cattn[server]')")
    for name in ("slots", "context", "max_queue", "max_body"):
        if getattr(args, name) < 1:
            return fail(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    for what, path in (("--embed", args.embed), ("--llm", args.llm)):
        if path is not None and not os.path.exists(path):
            return fail(f"{what} {path}: no such file or folder")
    key = args.api_key
    if args.api_key_file:
        try:
            with open(args.api_key_file, encoding="utf-8") as f:
                key = f.readline().strip()
        except OSError as e:
            return fail(f"--api-key-file: {e.strerror}: {args.api_key_file}")
        if not key:
            return fail(f"--api-key-file {args.api_key_file} is empty")
    load_default = not args.no_embed and args.embed is None and args.llm is None
    if args.no_embed and args.llm is None:
        return fail("--no-embed without --llm leaves nothing to serve")
    a = app(embed=None if args.no_embed else args.embed, llm=args.llm, weights=args.weights,
            embed_weights=args.embed_weights, kv_dtype=args.kv_dtype,
            api_key=key, slots=args.slots, max_queue=args.max_queue, threads=args.threads,
            context=args.context, max_body=args.max_body, cors_origin=args.cors_origin,
            load_embed_default=load_default)
    uvicorn.run(a, host=args.host, port=args.port, log_level="info",
                access_log=args.access_log, timeout_graceful_shutdown=5)
    return 0
