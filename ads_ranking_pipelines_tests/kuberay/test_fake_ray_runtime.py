"""The fake KubeRay's Ray runtime keeps the Ray logs of a cluster that never took its job, so a
submission that failed (e.g. the head's job agent never registered) can be read afterwards."""

from __future__ import annotations

import socket
import threading
from types import SimpleNamespace

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.ray_runtime import LocalRayRuntime, _Cluster


class StubCluster:
    """Stands where a LocalRayCluster would: a dashboard URL, auth headers, and its stops."""

    def __init__(self, url: str) -> None:
        self.state = SimpleNamespace(dashboard_url=url)
        self.stops: list[bool] = []

    def auth_headers(self) -> dict[str, str]:
        return {}

    def stop(self, keep_logs: bool = False) -> None:
        self.stops.append(keep_logs)


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _entry(url: str) -> _Cluster:
    done = threading.Thread(target=lambda: None)
    done.start()
    return _Cluster(thread=done, cluster=StubCluster(url))


def test_a_cluster_whose_submission_failed_keeps_its_ray_logs_at_stop(tmp_path):
    runtime = LocalRayRuntime(tmp_path)
    failed, untouched = ("ns", "RayCluster", "a"), ("ns", "RayCluster", "b")
    runtime.clusters = {failed: _entry(_closed_port_url()), untouched: _entry(_closed_port_url())}
    clusters = {k: e.cluster for k, e in runtime.clusters.items()}
    running = runtime.submit(("ns", "RayJob", "j"), failed, {"jobId": "run-1", "entrypoint": "true"},
                             [].append, address="http://head:8265")
    running.thread.join(60)
    assert running.status == "FAILED" and running.message.startswith("submitter: "), running
    runtime.stop_all()
    assert clusters[failed].stops == [True] and clusters[untouched].stops == [False]


def test_the_runtime_s_dir_goes_with_it_unless_it_kept_logs(tmp_path):
    for kept in (False, True):
        state = tmp_path / f"kept-{kept}"
        state.mkdir()
        if kept:
            (state / "a.logs").mkdir()
        runtime = LocalRayRuntime(state)
        runtime.clusters = {("ns", "RayCluster", "a"): _entry(_closed_port_url())}
        runtime.stop_all()
        assert state.exists() is kept


class SlowStop(StubCluster):
    """A cluster whose stop takes a while and removes its state file at the end, as
    ``LocalRayCluster.stop`` does."""

    def __init__(self, url: str, state_file) -> None:
        super().__init__(url)
        self.state_file = state_file

    def stop(self, keep_logs: bool = False) -> None:
        import time

        time.sleep(0.5)
        self.state_file.unlink()
        super().stop(keep_logs)


def test_the_runtime_s_dir_goes_even_while_a_deleted_cluster_is_still_stopping(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "a.json").write_text("{}")
    runtime = LocalRayRuntime(state)
    key = ("ns", "RayCluster", "a")
    done = threading.Thread(target=lambda: None)
    done.start()
    runtime.clusters = {key: _Cluster(thread=done, cluster=SlowStop(_closed_port_url(), state / "a.json"))}
    runtime.stop_in_background(key)       # the RayCluster was deleted; then the server stops
    runtime.stop_all()
    assert not state.exists()
