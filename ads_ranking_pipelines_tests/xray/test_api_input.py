"""X-Ray refuses what it does not understand (issue 27): a JSON body that is not an object, unknown
fields, a body over the size limit (by Content-Length or as read, chunked), and errors never echo
more than a short prefix of a bad value. No Ray: ``XrayService.create`` is replaced by a recorder,
so a request that would have created a cluster shows up as a recorded call."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
import warnings

import pytest

from ads_ranking_pipelines.config.messages import QUOTE_LIMIT
from ads_ranking_pipelines.xray import forms
from ads_ranking_pipelines.xray.app import create_app
from ads_ranking_pipelines.xray.security import CSRF_COOKIE
from ads_ranking_pipelines.xray.limits import MAX_BODY_BYTES, BodyLimitMiddleware, BodyTooLarge
from ads_ranking_pipelines_tests.xray.test_app import csrf_of, dead_cluster, settings_for

with warnings.catch_warnings():  # Starlette 1.10 suggests httpx2 for its test client
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

VALID = ", ".join(forms.FIELDS)
LONG = "a" * 10_000


@pytest.fixture
def app(tmp_path):
    dead_cluster(tmp_path, "old-one")
    return create_app(settings_for(tmp_path), {})


@pytest.fixture
def created(app) -> list[tuple]:
    """The clusters X-Ray was asked to create (recorded instead of started)."""
    calls: list[tuple] = []
    app.state.service.create = lambda *args: calls.append(args)
    return calls


@pytest.fixture
def client(app):
    with TestClient(app, base_url="http://127.0.0.1:8080") as c:
        c.headers["X-CSRF-Token"] = csrf_of(c)
        yield c


@pytest.mark.parametrize("body,kind", [
    ("[]", "a JSON array"), ('[{"name": "x1"}]', "a JSON array"), ('"x1"', "a JSON string"),
    ("5", "a JSON number"), ("null", "JSON null"), ("true", "a JSON boolean"),
])
def test_a_body_that_is_not_a_json_object_is_refused(client, created, body, kind) -> None:
    answer = client.post("/api/clusters", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"] == (f"invalid body = {kind}: it must be a JSON object with the "
                                      f"create form's fields; valid fields: {VALID}")
    assert created == []


def test_a_body_that_is_not_json_names_the_fields(client, created) -> None:
    answer = client.post("/api/clusters", content="name=x1", headers={"Content-Type": "application/json"})
    assert answer.status_code == 400
    assert answer.json()["error"].startswith("invalid body = not JSON: it must be a JSON object")
    assert VALID in answer.json()["error"] and created == []


def test_unknown_fields_are_refused_by_name(client, created) -> None:
    answer = client.post("/api/clusters", json={"name": "x1", "wokers": 2, "gpus": 1})
    assert answer.status_code == 400
    assert answer.json() == {"error": f"unknown fields 'wokers', 'gpus'; valid fields: {VALID}",
                             "fields": ["gpus", "wokers"]}
    one = client.post("/api/clusters", json={"name": "x1", "csrf_token": "t"})
    assert one.json()["error"] == f"unknown field 'csrf_token'; valid fields: {VALID}"
    long_key = client.post("/api/clusters", json={LONG: 1})
    assert long_key.status_code == 400 and len(long_key.text) < 600, long_key.text
    many = client.post("/api/clusters", json={f"f{i}": i for i in range(1000)})
    assert many.status_code == 400 and "'f19' and 980 more; valid fields" in many.json()["error"]
    assert len(many.json()["fields"]) == forms.UNKNOWN_SHOWN
    assert created == []


def test_values_that_are_objects_or_arrays_are_refused(client, created) -> None:
    answer = client.post("/api/clusters", json={"name": "x1", "workers": [2], "owner": {"a": 1}})
    assert answer.status_code == 400
    assert answer.json()["error"] == ("invalid workers = [2]: a JSON object or array; valid: a "
                                      "string, number or boolean; invalid owner = {'a': 1}: a JSON "
                                      "object or array; valid: a string, number or boolean")
    assert answer.json()["fields"] == ["owner", "workers"] and created == []


def test_zero_and_false_are_values_not_defaults(client, created) -> None:
    answer = client.post("/api/clusters", json={"name": "x1", "workers": 0, "notebook": False})
    assert answer.status_code == 202, answer.text
    ((backend, resolved, notebook),) = created
    assert (backend, resolved.request.workers, notebook) == ("local", 0, False)
    assert client.post("/api/clusters", json={"name": "x2", "workers": None}).status_code == 202


def test_a_good_json_body_still_creates(client, created) -> None:
    answer = client.post("/api/clusters", json={"name": "x1", "workers": "1", "gpus_per_worker": 0})
    assert answer.status_code == 202, answer.text
    assert [c[1].request.name for c in created] == ["x1"]


def big_json() -> bytes:
    return b'{"name": "' + b"a" * MAX_BODY_BYTES + b'"}'


@pytest.mark.parametrize("path", ["/api/clusters", "/clusters", "/clusters/review", "/login",
                                  "/api/clusters/old-one/delete"])
def test_a_body_over_the_limit_is_413_by_content_length(client, created, app, path) -> None:
    answer = client.post(path, content=big_json(), headers={"Content-Type": "application/json"})
    assert answer.status_code == 413, answer.text
    assert answer.json()["error"] == (f"the request body is {len(big_json())} bytes; valid: at most "
                                      f"{MAX_BODY_BYTES} bytes (64 KiB)")
    assert created == [] and app.state.service.local.find("old-one") is not None


@pytest.mark.parametrize("path,content_type", [
    ("/api/clusters", "application/json"),
    ("/clusters", "application/x-www-form-urlencoded"),
    ("/clusters/review", "application/x-www-form-urlencoded"),
])
def test_a_chunked_body_over_the_limit_is_413_as_read(client, created, path, content_type) -> None:
    def chunks():  # no Content-Length: httpx sends it chunked
        yield b"name=x1&owner=" if "form" in content_type else b'{"name": "'
        yield b"a" * MAX_BODY_BYTES

    answer = client.post(path, content=chunks(), headers={"Content-Type": content_type,
                                                          "Accept": "text/html"})
    assert answer.status_code == 413, answer.text
    assert f"the request body is over {MAX_BODY_BYTES} bytes" in answer.text
    assert created == []


def test_the_limit_stops_reading_a_body_that_never_ends() -> None:
    pulled = 0

    async def endless():
        nonlocal pulled
        pulled += 1
        return {"type": "http.request", "body": b"x" * 4096, "more_body": True}

    async def reader(scope, receive, send):
        while True:
            await receive()

    scope = {"type": "http", "method": "POST", "path": "/api/clusters", "headers": []}
    with pytest.raises(BodyTooLarge, match=f"over {MAX_BODY_BYTES} bytes"):
        asyncio.run(BodyLimitMiddleware(reader)(scope, endless, None))
    assert pulled == MAX_BODY_BYTES // 4096 + 1


@pytest.mark.parametrize("field", ["name", "owner", "gpu_pool", "workers", "memory_per_worker",
                                   "notebook", "backend"])
def test_errors_quote_only_a_prefix_of_a_long_value(client, created, field) -> None:
    value = "a" * (MAX_BODY_BYTES // 8)
    answer = client.post("/api/clusters", json={field: value})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert "a" * (QUOTE_LIMIT + 1) not in error
    assert f"'{'a' * (QUOTE_LIMIT - 1)}… ({len(value)} characters)" in error
    assert len(error) < 500, error
    page = client.post("/clusters/review", data={field: value, "csrf_token": client.headers["X-CSRF-Token"]})
    assert page.status_code == 400
    shown = page.text.split('class="error form-error">', 1)[1].split("</p>", 1)[0]
    assert "a" * (QUOTE_LIMIT + 1) not in shown and len(shown) < 500, shown
    assert created == []


def test_short_values_are_quoted_whole_as_the_cli_does(client) -> None:
    bad = client.post("/api/clusters", json={"name": "x1", "gpus_per_worker": 99, "gpu_pool": "tpu"})
    assert "invalid --gpus-per-worker (gpus_per_worker) = 99: " in bad.json()["error"]
    name = "n" * 48
    too_long = client.post("/api/clusters", json={"name": name})
    assert f"invalid --name (name) = '{name}': String should have at most 47 characters" \
        in too_long.json()["error"]  # 48 characters: under the quote limit, quoted whole


def test_not_found_quotes_a_prefix_of_the_name(client) -> None:
    answer = client.get(f"/api/clusters/{'z' * 5000}")
    assert answer.status_code == 404 and len(answer.text) < 300, answer.text


# ---- the limit in a real uvicorn ----------------------------------------------------------------
@contextlib.contextmanager
def uvicorn_server(app):
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def exchange(port: int, head: str, chunks) -> tuple[bytes, int]:
    """Send ``head`` and then ``chunks`` until the server answers; (answer, bytes sent)."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head.encode())
        conn.settimeout(0.01)
        answer = b""
        for chunk in chunks:
            try:
                conn.sendall(chunk)
                sent += len(chunk)
            except OSError:  # the server answered and closed
                break
            with contextlib.suppress(socket.timeout):
                answer += conn.recv(65536)
            if b"\r\n\r\n" in answer:
                break
        conn.settimeout(10)
        with contextlib.suppress(OSError):
            while b"\r\n\r\n" not in answer and (more := conn.recv(65536)):
                answer += more
    return answer, sent


def test_uvicorn_refuses_a_20_mb_body_without_reading_it(app, created) -> None:
    head = ("POST /api/clusters HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Cookie: {CSRF_COOKIE}=t0ken\r\nX-CSRF-Token: t0ken\r\n")
    with uvicorn_server(app) as port:
        answer, sent = exchange(port, head + "Content-Length: 20000000\r\n\r\n", [])
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]  # before a byte of the body
        endless = (b"4000\r\n" + b"a" * 0x4000 + b"\r\n" for _ in range(10_000))  # 160 MB, chunked
        answer, sent = exchange(port, head + "Transfer-Encoding: chunked\r\n\r\n", endless)
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert b"over 65536 bytes" in answer and sent < 20_000_000
    assert created == []
