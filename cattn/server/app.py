"""cattn.server.app — the OpenAI-compatible HTTP API as an ASGI app
(Starlette): POST /v1/embeddings, /v1/chat/completions, /v1/completions
(server-sent events with stream: true), GET /v1/models, /health, /metrics.

What this file is: routing, the API key, body limits, the response shapes
(OpenAI's, errors included), SSE framing and noticing a client that has
gone. What it is not: batching (cattn.server.embeddings / generation) or
request checks (cattn.server.requests). Models load in a thread after
start-up: /health answers 503 until they are ready, 200 after.
"""
import asyncio
import base64
import hmac
import json
import os
import sys
import threading
import time
import uuid

import numpy as np
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from .engine import Engine
from .errors import APIError, error_body
from .metrics import Metrics
from .requests import EmbeddingRequest, GenerationRequest, model_name, read_json

__all__ = ["app", "ServerState"]

PING_SECONDS = 5.0


class ServerState:
    """What the routes share: the options, the services once loaded, the
    metrics and the load error, if any."""

    def __init__(self, embed, llm, weights, embed_weights, api_key, slots, max_queue, threads,
                 context, max_body, load_embed_default, kv_dtype="float32"):
        self.opts = dict(embed=embed, llm=llm, weights=weights, embed_weights=embed_weights,
                         slots=slots, kv_dtype=kv_dtype,
                         max_queue=max_queue, threads=threads, context=context,
                         load_embed_default=load_embed_default)
        self.api_key = api_key
        self.max_body = max_body
        self.metrics = Metrics()
        self.engine = Engine()                  # the one thread of every model call
        self.embed = self.gen = None
        self.ready = threading.Event()
        self.error = None
        self.prev_detection = None
        self.created = int(time.time())

    def load(self):
        """Load the models (on the engine thread: /health says 503 meanwhile)."""
        try:
            from .. import set_contention_detection, set_num_threads
            o = self.opts
            # the engine sets it per service (engine.py); restored by close
            self.prev_detection = set_contention_detection(True)
            if o["threads"]:
                set_num_threads(o["threads"])
            if o["embed"] is not None or o["load_embed_default"]:
                from ..models import SentenceEncoder
                from .embeddings import EmbeddingService
                enc = o["embed"]
                if not isinstance(enc, SentenceEncoder):
                    enc = SentenceEncoder.from_pretrained(enc, weights=o["embed_weights"])
                mid = ("all-MiniLM-L6-v2" if o["embed"] is None
                       else _model_id(getattr(enc, "path", None) or "embeddings"))
                self.embed = EmbeddingService(enc, mid, self.metrics, self.engine,
                                              max_queue=o["max_queue"])
                self.engine.services.append(self.embed)
            if o["llm"] is not None:
                from ..models import CausalLM
                from .generation import GenerationService
                lm = o["llm"]
                path = lm if isinstance(lm, (str, os.PathLike)) else getattr(lm, "path", None)
                if not isinstance(lm, CausalLM):
                    lm = CausalLM.from_pretrained(lm, weights=o["weights"],
                                                  kv_dtype=o["kv_dtype"], tokenizer_first=True)
                self.gen = GenerationService(lm, _model_id(path or "llm"), self.metrics,
                                             self.engine, slots=o["slots"],
                                             context=o["context"], max_queue=o["max_queue"])
                self.engine.services.append(self.gen)
        except Exception as e:          # the server's log has it; clients see no path
            print(f"cattn serve: loading the models failed: {type(e).__name__}: {e}",
                  file=sys.stderr, flush=True)
            self.error = f"{type(e).__name__} (see the server's log)"
        finally:
            self.ready.set()

    def close(self):
        self.engine.close()
        if self.prev_detection is not None:
            from .. import set_contention_detection
            set_contention_detection(self.prev_detection)

    def models(self):
        return [s.model_id for s in (self.embed, self.gen) if s is not None]


def _model_id(path):
    """A model's id: its file's or folder's name (a folder named "model":
    its parent's name), without .gguf."""
    p = os.path.abspath(os.fspath(path))
    base = os.path.basename(p)
    if base == "model":
        base = os.path.basename(os.path.dirname(p)) or base
    return base[:-5] if base.endswith(".gguf") else base


def app(embed=None, llm=None, *, weights=None, embed_weights="float32", api_key=None, slots=4,
        max_queue=256, kv_dtype="float32",
        threads=None, context=2048, max_body=4 << 20, cors_origin=None,
        load_embed_default=None, ping_seconds=PING_SECONDS):
    """The ASGI app (run it with any ASGI server: `uvicorn.run(app(...))`).

    embed: a sentence-encoder folder or a SentenceEncoder (None: the
    installed all-MiniLM-L6-v2 when no llm is given); llm: an LLM folder,
    a GGUF file or a CausalLM; weights: the LLM's format (None: the
    checkpoint's / file's); embed_weights: the encoder's (float32, bfloat16,
    int8); kv_dtype: a loaded LLM's KV caches, "float32" or "float16"
    (CausalLM.kv_dtype; a CausalLM given keeps its own);
    api_key: every /v1 route then needs `Authorization: Bearer KEY`;
    slots: sequences decoding together; max_queue: requests waiting per
    model before 429; threads: cattn's threads; context: positions per
    generation slot; max_body: request bytes (413 beyond); cors_origin:
    an origin (or list) allowed by CORS (none by default); ping_seconds: a
    `: ping` comment after this long without a streamed event."""
    if kv_dtype not in ("float32", "float16"):
        raise ValueError(f"cattn.server.app: kv_dtype must be 'float32' or 'float16', got "
                         f"{kv_dtype!r}")
    if load_embed_default is None:
        load_embed_default = embed is None and llm is None
    st = ServerState(embed, llm, weights, embed_weights, api_key, slots, max_queue, threads,
                     context, max_body, load_embed_default, kv_dtype)
    st.ping_seconds = ping_seconds
    middleware = []
    if cors_origin:
        from starlette.middleware.cors import CORSMiddleware
        origins = [cors_origin] if isinstance(cors_origin, str) else list(cors_origin)
        middleware.append(Middleware(CORSMiddleware, allow_origins=origins,
                                     allow_methods=["GET", "POST"],
                                     allow_headers=["Authorization", "Content-Type"]))
    routes = [Route("/health", _route(st, _health, v1=False), methods=["GET"]),
              Route("/metrics", _route(st, _metrics, v1=False), methods=["GET"]),
              Route("/v1/models", _route(st, _models), methods=["GET"]),
              Route("/v1/embeddings", _route(st, _embeddings), methods=["POST"]),
              Route("/v1/chat/completions", _route(st, _chat), methods=["POST"]),
              Route("/v1/completions", _route(st, _completions), methods=["POST"])]

    def lifespan(application):
        return _Lifespan(st)

    handlers = {HTTPException: _http_error, Exception: _server_error}
    a = Starlette(routes=routes, middleware=middleware, exception_handlers=handlers,
                  lifespan=lifespan)
    a.state.cattn = st
    return a


class _Lifespan:
    def __init__(self, st):
        self.st = st

    async def __aenter__(self):
        self.st.engine.run_soon(self.st.load)

    async def __aexit__(self, *exc):
        self.st.close()


def _json_error(e):
    return JSONResponse(e.body(), status_code=e.status, headers=e.headers)


async def _http_error(request, exc):
    msg = {404: f"no route {request.method} {request.url.path[:200]}",
           405: f"method {request.method} is not allowed on {request.url.path[:200]}"}
    status = exc.status_code
    return _json_error(APIError(status, msg.get(status, str(exc.detail)[:200])))


async def _server_error(request, exc):
    return _json_error(APIError(500, "internal server error", type="server_error"))


def _route(st, handler, v1=True):
    """The handler wrapped: the API key (v1 routes), readiness, APIError
    answered as its status and body, the request counted by outcome."""
    async def endpoint(request):
        route = request.url.path
        try:
            if v1:
                _check_key(st, request)
                if not st.ready.is_set():
                    raise APIError(503, "the server is loading its models; retry shortly",
                                   headers={"Retry-After": "2"})
                if st.error:
                    raise APIError(503, "the server failed to load its models: " + st.error)
            resp = await handler(st, request)
        except APIError as e:
            resp = _json_error(e)
        except Exception:                       # no stack trace or path to the client
            resp = _json_error(APIError(500, "internal server error", type="server_error"))
        st.metrics.inc("requests_total", route=route, status=resp.status_code)
        return resp
    return endpoint


def _check_key(st, request):
    if st.api_key is None:
        return
    got = request.headers.get("authorization", "")
    want = "Bearer " + st.api_key
    if not hmac.compare_digest(got.encode("utf-8", "surrogateescape"),
                               want.encode("utf-8", "surrogateescape")):
        raise APIError(401, "a valid API key is required (Authorization: Bearer KEY)",
                       code="invalid_api_key")


async def _body(st, request):
    n = request.headers.get("content-length")
    if n is not None and n.isdigit() and int(n) > st.max_body:
        raise APIError(413, f"the request body has {n} bytes; at most {st.max_body}")
    chunks, size = [], 0
    async for c in request.stream():
        size += len(c)
        if size > st.max_body:
            raise APIError(413, f"the request body exceeds {st.max_body} bytes")
        chunks.append(c)
    return read_json(b"".join(chunks))


# -- routes

async def _health(st, request):
    if not st.ready.is_set():
        return JSONResponse({"status": "loading"}, status_code=503)
    if st.error:
        return JSONResponse({"status": "error", "message": st.error}, status_code=503)
    return JSONResponse({"status": "ok", "models": st.models()})


async def _metrics(st, request):
    return PlainTextResponse(st.metrics.render(),
                             media_type="text/plain; version=0.0.4; charset=utf-8")


async def _models(st, request):
    data = [{"id": m, "object": "model", "created": st.created, "owned_by": "cattn"}
            for m in st.models()]
    return JSONResponse({"object": "list", "data": data})


def _service(st, body, svc, what):
    served = st.models()
    if svc is None:
        raise APIError(404, f"this server has no {what} model (it serves "
                       f"{', '.join(served) or 'none'})", param="model",
                       code="model_not_found")
    model_name(body, [svc.model_id])
    return svc


async def _wait(request, fut, on_gone):
    """Await an asyncio future while watching the client: on_gone() and
    None when it disconnects first."""
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        done, _ = await asyncio.wait({fut, gone}, return_when=asyncio.FIRST_COMPLETED)
        if fut in done:
            return fut.result()
        on_gone()
        return None
    finally:
        gone.cancel()


async def _disconnected(request):
    while True:
        msg = await request.receive()
        if msg["type"] == "http.disconnect":
            return


async def _embeddings(st, request):
    t0 = time.perf_counter()
    body = await _body(st, request)
    svc = _service(st, body, st.embed, "embeddings")
    req = EmbeddingRequest(body, svc.vocab, svc.dim)
    if req.ids is None and sum(len(t) for t in req.texts) > 20000:   # long: off the loop
        seqs = await asyncio.get_running_loop().run_in_executor(None, svc.token_ids, req)
    else:
        seqs = svc.token_ids(req)
    job = svc.submit(seqs)
    vecs = await _wait(request, asyncio.wrap_future(job.future), lambda: svc.cancel(job))
    if vecs is None:
        return Response(status_code=499)
    vecs = np.ascontiguousarray(vecs, "<f4")
    if req.base64:
        data = [base64.b64encode(v.tobytes()).decode("ascii") for v in vecs]
    else:
        data = vecs.tolist()
    n = sum(len(s) for s in seqs)
    ms = lambda a, b: f"{(b - a) * 1e3:.3f}"            # noqa: E731
    timing = {"x-queue-time": ms(job.t0, job.t_start), "x-compute-time": ms(job.t_start, job.t_end),
              "x-tokenization-time": ms(t0, job.t0), "x-total-time": ms(t0, time.perf_counter())}
    return JSONResponse({"object": "list", "model": svc.model_id,
                         "data": [{"object": "embedding", "index": i, "embedding": e}
                                  for i, e in enumerate(data)],
                         "usage": {"prompt_tokens": n, "total_tokens": n}}, headers=timing)


async def _chat(st, request):
    return await _generate(st, request, chat=True)


async def _completions(st, request):
    return await _generate(st, request, chat=False)


def _prompt(svc, req):
    """(prompt ids, end ids) of a generation request."""
    from ..models.chat import end_of_turn_ids
    lm, tok = svc.lm, svc.tokenizer
    if req.chat:
        try:
            ids = lm.apply_chat_template(req.messages, tokenize=True)
        except ImportError as e:
            raise APIError(500, f"chat needs jinja2 on the server: {e}", type="server_error")
        except (ValueError, TypeError, LookupError) as e:
            raise APIError(400, f"the chat template failed on these messages: {e}",
                           param="messages")
        return list(ids), end_of_turn_ids(lm, tok)
    ids = tok.encode(req.prompt) if req.prompt is not None else req.prompt_ids
    eos = lm.generation_config.get("eos_token_id", lm.config.eos_token_id)
    eos = [e for e in (eos if isinstance(eos, list) else [eos]) if isinstance(e, int)]
    return list(ids), eos


async def _generate(st, request, chat):
    body = await _body(st, request)
    svc = _service(st, body, st.gen, "chat" if chat else "completions")
    req = GenerationRequest(body, chat, svc.vocab)
    loop = asyncio.get_running_loop()
    ids, eos = await loop.run_in_executor(None, _prompt, svc, req)
    if not ids:
        raise APIError(400, "the prompt encodes to no tokens", param="prompt")
    g = svc.new(loop, ids, req.max_tokens, req.temperature, req.top_p, req.seed, req.stop,
                [] if req.ignore_eos else eos)
    svc.submit(g)
    rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:24]
    created = int(time.time())
    if req.stream:
        return _SSE(_chunks(g, req, rid, created, svc.model_id, chat, st.ping_seconds), g.cancel)
    return await _whole(request, g, rid, created, svc.model_id, chat)


def _usage(g):
    return {"prompt_tokens": g.prompt_tokens, "completion_tokens": g.completion_tokens,
            "total_tokens": g.prompt_tokens + g.completion_tokens}


async def _collect(g):
    parts = []
    while True:
        kind, v = await g.events.get()
        if kind == "text":
            parts.append(v)
        elif kind == "error":
            raise v
        else:
            return "".join(parts), v


async def _whole(request, g, rid, created, model, chat):
    fut = asyncio.ensure_future(_collect(g))
    try:
        got = await _wait(request, fut, g.cancel)
    except Exception:
        raise APIError(500, "generation failed", type="server_error") from None
    if got is None:
        return Response(status_code=499)
    text, reason = got
    if chat:
        choice = {"index": 0, "message": {"role": "assistant", "content": text},
                  "logprobs": None, "finish_reason": reason}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        obj = "text_completion"
    return JSONResponse({"id": rid, "object": obj, "created": created, "model": model,
                         "choices": [choice], "usage": _usage(g)})


async def _get(queue, seconds):
    """queue's next item; asyncio.TimeoutError after `seconds` without one.
    The item at hand without a timer; asyncio.timeout where Python has it
    (3.11+), which unlike wait_for starts no task per item."""
    if not queue.empty():
        return queue.get_nowait()
    if _timeout is None:
        return await asyncio.wait_for(queue.get(), seconds)
    async with _timeout(seconds):
        return await queue.get()


_timeout = getattr(asyncio, "timeout", None)


async def _chunks(g, req, rid, created, model, chat, ping):
    """The SSE lines of a streamed generation (bytes), ": ping" while waiting."""
    obj = "chat.completion.chunk" if chat else "text_completion"

    def chunk(delta, reason=None, usage=False):
        if chat:
            choices = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]
        else:
            choices = [{"index": 0, "text": delta.get("content", ""), "logprobs": None,
                        "finish_reason": reason}]
        c = {"id": rid, "object": obj, "created": created, "model": model, "choices": choices}
        if req.include_usage:
            c["usage"] = None
        return b"data: " + json.dumps(c, separators=(",", ":")).encode() + b"\n\n"

    if chat:
        yield chunk({"role": "assistant", "content": ""})
    while True:
        try:
            kind, v = await _get(g.events, ping)
        except asyncio.TimeoutError:
            yield b": ping\n\n"
            continue
        if kind == "text":
            yield chunk({"content": v})
        elif kind == "error":
            err = error_body("generation failed", "server_error")
            yield b"data: " + json.dumps(err).encode() + b"\n\n"
            return
        else:
            yield chunk({}, reason=v)
            break
    if req.include_usage:
        u = {"id": rid, "object": obj, "created": created, "model": model, "choices": [],
             "usage": _usage(g)}
        yield b"data: " + json.dumps(u, separators=(",", ":")).encode() + b"\n\n"
    yield b"data: [DONE]\n\n"


class _SSE:
    """A text/event-stream response from an async generator of bytes that
    stops it (and calls on_gone) as soon as the client disconnects: one task
    sends the chunks, one waits for the disconnect, and whichever ends first
    ends the other (no task per chunk: a decode step's tokens cost the event
    loop, which shares the cores with the model, as little as they can)."""

    def __init__(self, chunks, on_gone):
        self.chunks = chunks
        self.on_gone = on_gone
        self.status_code = 200

    async def _pump(self, send):
        """Every chunk sent -> True; False when the client went away mid-send."""
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream; charset=utf-8"),
                                    (b"cache-control", b"no-cache"),
                                    (b"x-accel-buffering", b"no")]})
            async for data in self.chunks:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return True
        except OSError:
            return False

    @staticmethod
    async def _watch(receive):
        while (await receive())["type"] != "http.disconnect":
            pass

    async def __call__(self, scope, receive, send):
        pump = asyncio.ensure_future(self._pump(send))
        watch = asyncio.ensure_future(self._watch(receive))
        finished = False
        try:
            await asyncio.wait({pump, watch}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watch.cancel()
            if not pump.done():
                pump.cancel()               # the generator stops at its await, before aclose
            try:
                finished = await pump
            except asyncio.CancelledError:
                pass
            finally:
                if not finished:
                    self.on_gone()
                await self.chunks.aclose()
