"""The fake API server itself: a real HTTP server on 127.0.0.1 (one thread per connection)
over the store, the routes, the toy operator and fault injection; pod logs with
``follow=true`` stream with chunked transfer encoding (``timestamps``, ``sinceSeconds``)."""

from __future__ import annotations

import json
import re
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.faults import Fault, FaultInjection
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_controller import KueueQueue
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_routes import KueueRoutes
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_visibility import KueueVisibilityRoutes
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.ray_runtime import LocalRayRuntime
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.routes import ApiRoutes, format_log_line
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.store import _Pod
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.toy_operator import Scenario, ToyOperator


class FakeKubeApiServer(ToyOperator, ApiRoutes, KueueRoutes, KueueVisibilityRoutes,
                        FaultInjection):
    """Start with ``with FakeKubeApiServer() as fake:``; ``fake.url`` is the API server URL."""

    def __init__(self, *, tick_s: float = 0.01, deletion_delay_s: float = 0.05,
                 validate: bool = True) -> None:
        self.tick_s = tick_s
        self.deletion_delay_s = deletion_delay_s
        self.validate = validate
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.pods: dict[tuple[str, str], _Pod] = {}
        self.sim: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.deployment_history: dict[str, list[str]] = {}  # RayJob name -> its jobDeploymentStatus values
        self.scenario = Scenario()
        self.scenarios: dict[str, Scenario] = {}  # by RayJob / RayCluster name
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, int]] = []
        self.rejected: list[str] = []
        self.created: list[tuple[str, str, str]] = []  # (plural, ns, name) created via the API
        self.deleted: list[tuple[str, str, str]] = []  # (plural, ns, name) deleted via the API
        self.break_log_stream_after: int | None = None  # cut the next follow after N lines
        # The operator's deployment: feature gates, env, and seconds per spec second.
        self.feature_gates: dict[str, bool] = {"RayJobDeletionPolicy": True}
        self.delete_rayjob_cr_after_job_finishes = False
        self.time_scale = 0.05  # 600 s of TTL last 30 s; tests of TTLs set their own
        self.stopped_jobs: list[str] = []  # RayJobs whose Ray job the finalizer stopped
        self.operator_made: list[dict[str, Any]] = []  # RayClusters the operator created
        self.events: list[dict[str, Any]] = []
        # Kueue (.kueue_controller): LocalQueue name -> its ClusterQueue's quota; priorities.
        self.kueue_queues: dict[str, KueueQueue] = {}
        self.kueue_priorities: dict[str, int] = {}
        self._ray_runtime: LocalRayRuntime | None = None  # Scenario(execute=True) only
        self._pending_deletes: list[tuple[float, str, tuple]] = []
        self._stop = threading.Event()
        self._resource_version = 0
        self._server: ThreadingHTTPServer | None = None
        self._threads: list[threading.Thread] = []

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "FakeKubeApiServer":
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        serve = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                 name="fake-apiserver", daemon=True)
        operator = threading.Thread(target=self._operator_loop, name="fake-kuberay", daemon=True)
        self._threads = [serve, operator]
        for t in self._threads:
            t.start()
        return self

    def runtime(self) -> "LocalRayRuntime":
        """The real Ray behind ``Scenario(execute=True)``, made on first use."""
        if self._ray_runtime is None:
            self._ray_runtime = LocalRayRuntime(Path(tempfile.mkdtemp(prefix="fake-kuberay-")))
        return self._ray_runtime

    def _cluster_removed(self, key: tuple) -> None:
        if self._ray_runtime is not None and key in self._ray_runtime.clusters:
            self._ray_runtime.stop_in_background(key)

    def stop(self) -> None:
        if self._ray_runtime is not None:
            self._ray_runtime.stop_all()
        self._stop.set()
        with self.changed:
            self.changed.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for t in self._threads:
            t.join(timeout=5)

    def __enter__(self) -> "FakeKubeApiServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def count(self, method: str, path_regex: str) -> int:
        pattern = re.compile(path_regex)
        with self.lock:
            return sum(1 for m, p, _ in self.requests if m == method and pattern.search(p))

    def wait_for(self, predicate: Callable[[], bool], timeout_s: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.01)
        return predicate()

    # ---- request handling (called by the handler) --------------------------------------------
    def handle(self, method: str, path: str, query: dict[str, list[str]], body: Any
               ) -> tuple[int, Any, dict[str, str]]:
        with self.lock:
            fault = self._take_fault(method, path)
            if fault is not None and not fault.after_effect:
                return self._fault_answer(fault)
            code, payload, headers = self._route(method, path, query, body)
            if fault is not None:
                return self._fault_answer(fault)
            return code, payload, headers


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_fake: FakeKubeApiServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        if not length:
            return None
        raw = self.rfile.read(length)
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send_json(self, code: int, payload: Any, headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _dispatch(self, method: str) -> None:
        fake = self.server_fake
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        body = self._body()
        code, payload, headers = fake.handle(method, parts.path, query, body)
        with fake.lock:
            fake.requests.append((method, parts.path, code))
        if isinstance(payload, tuple) and payload and payload[0] == "LOG":
            self._send_log(payload[1], query)
            return
        self._send_json(code, payload, headers)

    def _send_log(self, pod: _Pod, query: dict[str, list[str]]) -> None:
        fake = self.server_fake
        follow = (query.get("follow") or ["false"])[0].lower() in ("true", "1")
        stamps = (query.get("timestamps") or ["false"])[0].lower() in ("true", "1")
        if not follow:
            data = fake.log_text(pod, query).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with fake.lock:
            since = (query.get("sinceSeconds") or [None])[0]
            cutoff = time.time() - float(since) if since else None
            index = 0
            if cutoff is not None:
                while index < len(pod.lines) and pod.lines[index][0] < cutoff:
                    index += 1
            break_after = fake.break_log_stream_after
            fake.break_log_stream_after = None
        sent = 0
        try:
            while True:
                with fake.changed:
                    while index >= len(pod.lines) and not pod.closed and not fake._stop.is_set():
                        fake.changed.wait(timeout=0.1)
                    batch = pod.lines[index:]
                    index = len(pod.lines)
                    done = pod.closed or fake._stop.is_set()
                for t, line in batch:
                    if break_after is not None and sent >= break_after:
                        # Cut the connection mid-stream, without the terminating chunk.
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    chunk = format_log_line(t, line, stamps).encode()
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                    sent += 1
                if done and index >= len(pod.lines):
                    break
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_PUT(self) -> None:
        self._dispatch("PUT")
