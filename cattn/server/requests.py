"""cattn.server.requests — the request bodies of the OpenAI routes, read
and checked: JSON within the size limit, every field's type and range,
each error a 400/413 APIError naming the field (OpenAI's `param`). What it
is not: the models (cattn.server.embeddings / generation run them) or
HTTP (cattn.server.app).
"""
import json
import math

from .errors import APIError, bad_request

__all__ = ["read_json", "EmbeddingRequest", "GenerationRequest", "MAX_EMBED_INPUTS"]

MAX_EMBED_INPUTS = 2048          # OpenAI's limit on inputs per embeddings request
MAX_STOP = 4


def read_json(body):
    """bytes -> a JSON object (dict); 400 for invalid UTF-8, invalid or
    too deeply nested JSON, or a non-object."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad_request(f"the request body is not valid UTF-8 (byte {e.start})") from None
    try:
        obj = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise bad_request("the request body's JSON is nested too deeply") from None
    except ValueError as e:
        raise bad_request(f"the request body is not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise bad_request(f"the request body must be a JSON object, got {_kind(obj)}")
    return obj


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _kind(v):
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null", int: "an integer", float: "a number"}.get(type(v), "a value")


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _int(body, name, default, lo, hi=None):
    v = body.get(name, default)
    if v is None:
        return default
    if not _is_int(v):
        raise bad_request(f"'{name}' must be an integer, got {_kind(v)}", param=name)
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise bad_request(f"'{name}' must be {rng}, got {v}", param=name)
    return v


def _real(body, name, default, lo, hi, lo_open=False):
    v = body.get(name, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise bad_request(f"'{name}' must be a number, got {_kind(v)}", param=name)
    if v < lo or v > hi or (lo_open and v == lo):
        raise bad_request(f"'{name}' must be in {'(' if lo_open else '['}{lo}, {hi}], got {v}",
                          param=name)
    return float(v)


def _bool(body, name, default):
    v = body.get(name, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise bad_request(f"'{name}' must be a boolean, got {_kind(v)}", param=name)
    return v


def model_name(body, served):
    """The model a request names (one of `served`; the first when absent)."""
    m = body.get("model")
    if m is None:
        return served[0]
    if not isinstance(m, str):
        raise bad_request(f"'model' must be a string, got {_kind(m)}", param="model")
    if m not in served:
        raise APIError(404, f"The model '{m[:200]}' does not exist; this server has "
                       f"{', '.join(served)}", param="model", code="model_not_found")
    return m


def _ids(v, name, vocab):
    if not v:
        raise bad_request(f"'{name}' must not be empty", param=name)
    for t in v:
        if not _is_int(t):
            raise bad_request(f"'{name}' must hold integer token ids, got {_kind(t)}", param=name)
        if not 0 <= t < vocab:
            raise bad_request(f"'{name}' has token id {t} outside [0, {vocab})", param=name)
    return list(v)


class EmbeddingRequest:
    """POST /v1/embeddings: texts (a list of str) or ids (a list of id
    lists), encoding_format, truncate."""

    def __init__(self, body, vocab, dim):
        inp = body.get("input")
        self.texts = self.ids = None
        if isinstance(inp, str):
            self.texts = [inp]
        elif isinstance(inp, list) and inp and all(isinstance(s, str) for s in inp):
            self.texts = inp
        elif isinstance(inp, list) and inp and all(_is_int(t) for t in inp):
            self.ids = [_ids(inp, "input", vocab)]
        elif isinstance(inp, list) and inp and all(isinstance(s, list) for s in inp):
            self.ids = [_ids(s, "input", vocab) for s in inp]
        elif isinstance(inp, list) and not inp:
            raise bad_request("'input' must not be empty", param="input")
        else:
            raise bad_request("'input' must be a string, an array of strings, an array of "
                              "token ids or an array of token-id arrays, got "
                              f"{_kind(inp)}", param="input")
        n = len(self.texts if self.texts is not None else self.ids)
        if n > MAX_EMBED_INPUTS:
            raise bad_request(f"'input' has {n} items; at most {MAX_EMBED_INPUTS} per request",
                              param="input")
        if self.texts is not None and any(not s for s in self.texts):
            raise bad_request("'input' must not contain an empty string", param="input")
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            raise bad_request(f"'encoding_format' must be 'float' or 'base64', got "
                              f"{str(fmt)[:40]!r}", param="encoding_format")
        self.base64 = fmt == "base64"
        dims = _int(body, "dimensions", None, 1)
        if dims is not None and dims != dim:
            raise bad_request(f"this model gives {dim} dimensions and does not support "
                              f"'dimensions' = {dims}", param="dimensions")
        self.truncate = _bool(body, "truncate", True)


class GenerationRequest:
    """POST /v1/chat/completions (chat=True: messages) or /v1/completions
    (prompt): the prompt, max_tokens, sampling, stop and stream fields."""

    def __init__(self, body, chat, vocab):
        self.chat = chat
        if chat:
            self.messages = _messages(body.get("messages"))
            self.prompt = self.prompt_ids = None
            mt = _int(body, "max_completion_tokens", None, 1)
            self.max_tokens = _int(body, "max_tokens", mt, 1)
        else:
            p = body.get("prompt")
            self.messages = None
            self.prompt = self.prompt_ids = None
            if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
                p = p[0]
            if isinstance(p, str):
                if not p:
                    raise bad_request("'prompt' must not be empty", param="prompt")
                self.prompt = p
            elif isinstance(p, list) and p and all(_is_int(t) for t in p):
                self.prompt_ids = _ids(p, "prompt", vocab)
            elif isinstance(p, list) and len(p) > 1:
                raise bad_request("'prompt' holds several prompts; this server takes one per "
                                  "request", param="prompt")
            else:
                raise bad_request(f"'prompt' must be a string or an array of token ids, got "
                                  f"{_kind(p)}", param="prompt")
            self.max_tokens = _int(body, "max_tokens", 16, 1)
            for name in ("echo",):
                if _bool(body, name, False):
                    raise bad_request(f"'{name}' is not supported", param=name)
            if body.get("suffix") is not None:
                raise bad_request("'suffix' is not supported", param="suffix")
            if _int(body, "best_of", 1, 1) != 1:
                raise bad_request("'best_of' must be 1", param="best_of")
        if _int(body, "n", 1, 1) != 1:
            raise bad_request("'n' must be 1 (one choice per request)", param="n")
        lp = body.get("logprobs")
        if lp not in (None, False, 0):
            raise bad_request("'logprobs' is not supported", param="logprobs")
        self.temperature = _real(body, "temperature", 1.0, 0.0, 2.0)
        self.top_p = _real(body, "top_p", 1.0, 0.0, 1.0, lo_open=True)
        seed = body.get("seed")
        if seed is not None and (not _is_int(seed) or not -2 ** 63 <= seed < 2 ** 64):
            raise bad_request(f"'seed' must be an integer, got {_kind(seed)}", param="seed")
        self.seed = None if seed is None else seed % 2 ** 64
        stop = body.get("stop")
        if stop is None:
            stop = []
        elif isinstance(stop, str):
            stop = [stop]
        elif not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
            raise bad_request(f"'stop' must be a string or an array of strings, got "
                              f"{_kind(stop)}", param="stop")
        if len(stop) > MAX_STOP or any(not s or len(s) > 256 for s in stop):
            raise bad_request(f"'stop' takes at most {MAX_STOP} non-empty strings of at most "
                              "256 characters", param="stop")
        self.stop = stop
        self.stream = _bool(body, "stream", False)
        # not OpenAI's: vLLM's and llama.cpp's server's (fixed-length runs, benchmarks)
        self.ignore_eos = _bool(body, "ignore_eos", False)
        so = body.get("stream_options")
        if so is not None and not isinstance(so, dict):
            raise bad_request(f"'stream_options' must be an object, got {_kind(so)}",
                              param="stream_options")
        self.include_usage = bool(so) and _bool(so, "include_usage", False)


def _messages(msgs):
    if not isinstance(msgs, list) or not msgs:
        raise bad_request("'messages' must be a non-empty array", param="messages")
    out = []
    for i, m in enumerate(msgs):
        where = f"messages[{i}]"
        if not isinstance(m, dict):
            raise bad_request(f"'{where}' must be an object, got {_kind(m)}", param=where)
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise bad_request(f"'{where}.role' must be system, developer, user, assistant or "
                              f"tool, got {str(role)[:40]!r}", param=f"{where}.role")
        c = m.get("content")
        if isinstance(c, list):                 # content parts: text only
            parts = []
            for p in c:
                if not (isinstance(p, dict) and p.get("type") == "text"
                        and isinstance(p.get("text"), str)):
                    raise bad_request(f"'{where}.content' parts must be text parts "
                                      "({\"type\": \"text\", \"text\": ...})",
                                      param=f"{where}.content")
                parts.append(p["text"])
            c = "".join(parts)
        elif c is None and role == "assistant":
            c = ""
        elif not isinstance(c, str):
            raise bad_request(f"'{where}.content' must be a string or an array of text parts, "
                              f"got {_kind(c)}", param=f"{where}.content")
        out.append({"role": "system" if role == "developer" else role, "content": c})
    return out
