"""cattn.server — an OpenAI-compatible HTTP server for embeddings and
generation on one CPU box: `cattn serve` (cattn.cli.serve), or the ASGI
app `cattn.server.app(...)` under any ASGI server. Needs the `server`
extra (pip install 'cattn[server]': starlette and uvicorn).

Modules: app (routes, auth, SSE), requests (request checks), errors
(OpenAI's error bodies), embeddings (dynamic batching), generation
(continuous batching), metrics (Prometheus text).
"""
try:
    import starlette  # noqa: F401
except ImportError:                     # pragma: no cover - the extra is missing
    raise ImportError("cattn.server needs starlette and uvicorn: "
                      "pip install 'cattn[server]'") from None

from .app import app  # noqa: E402

__all__ = ["app"]
