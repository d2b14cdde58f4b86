"""Ray nodes that die during the start of a local cluster (CI, loaded 2-core machine: the head's
raylet gave up waiting 15 s for its dashboard agent, `ray start` exited, and the start waited out
its whole 120 s with no clue). A worker that dies before it joins is started again once; a head
that dies makes the whole start begin again from scratch; a second worker death fails at once,
quoting the node's log. Nothing is left behind."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines_tests.conftest import wait_no_processes


class NodeKiller(threading.Thread):
    """Kills the process group of each of the first ``count`` worker nodes (or head nodes) the
    moment the cluster's state file names it, before it can join."""

    def __init__(self, state_file: Path, count: int, role: str = "worker"):
        super().__init__(daemon=True)
        self.state_file, self.count, self.role = state_file, count, role
        self.killed: list[int] = []
        self.temp_dirs: list[str] = []
        self.done = threading.Event()

    @property
    def temp_dir(self) -> str:
        return self.temp_dirs[-1] if self.temp_dirs else ""

    def run(self) -> None:
        while not self.done.is_set() and len(self.killed) < self.count:
            try:
                state = json.loads(self.state_file.read_text())
            except (OSError, ValueError):
                time.sleep(0.02)
                continue
            if state["temp_dir"] not in self.temp_dirs:
                self.temp_dirs.append(state["temp_dir"])
            pids = state["worker_pids"] if self.role == "worker" else [state["head_pid"]] if state["head_pid"] else []
            for pid in pids:
                if pid not in self.killed and len(self.killed) < self.count:
                    os.killpg(pid, signal.SIGKILL)
                    self.killed.append(pid)
            time.sleep(0.02)


def start_with_killer(state_dir: Path, kills: int, role: str = "worker",
                      ) -> tuple[NodeKiller, LocalRayCluster | None, Exception | None]:
    killer = NodeKiller(LocalRayCluster.state_file(state_dir, "restart"), kills, role)
    killer.start()
    try:
        return killer, LocalRayCluster.start(ClusterRequest(name="restart", workers=1), state_dir,
                                             start_timeout_s=60), None
    except BackendError as exc:
        return killer, None, exc
    finally:
        killer.done.set()


@pytest.mark.ray
def test_a_worker_node_that_dies_before_joining_is_started_again(tmp_path) -> None:
    killer, cluster, error = start_with_killer(tmp_path / "clusters", kills=1)
    assert error is None, error
    try:
        assert len(killer.killed) == 1
        assert cluster.alive_nodes() == 2
        (worker,) = cluster.state.worker_pids
        assert worker not in killer.killed and cluster.live_worker_pids() == [worker]
    finally:
        cluster.stop()
    assert wait_no_processes(cluster.state.temp_dir) == []


@pytest.mark.ray
def test_a_worker_node_that_dies_twice_fails_the_start_with_its_log(tmp_path) -> None:
    killer, cluster, error = start_with_killer(tmp_path / "clusters", kills=2)
    assert cluster is None and len(killer.killed) == 2
    message = str(error)
    assert "worker node" in message and "exited before the cluster was up" in message, message
    assert "tried 2 times" in message and "last lines of its log" in message, message
    assert "came up within" not in message  # failed on the death, not after the timeout
    assert LocalRayCluster.find("restart", tmp_path / "clusters") is None
    assert wait_no_processes(killer.temp_dir) == []


@pytest.mark.ray
def test_a_head_node_that_dies_during_start_makes_the_start_begin_again(tmp_path) -> None:
    killer, cluster, error = start_with_killer(tmp_path / "clusters", kills=1, role="head")
    assert error is None, error
    try:
        assert len(killer.killed) == 1 and cluster.state.head_pid not in killer.killed
        assert cluster.state.temp_dir != killer.temp_dirs[0] and cluster.alive_nodes() == 2
        assert wait_no_processes(killer.temp_dirs[0]) == []       # the first attempt is all gone
    finally:
        cluster.stop()
    assert wait_no_processes(cluster.state.temp_dir) == []
