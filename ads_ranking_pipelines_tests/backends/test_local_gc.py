"""A run killed with SIGKILL left its local cluster's Ray processes running (measured before
the watchdog: 8 processes, training for nobody). Now the cluster's watchdog stops it within
seconds; when the watchdog is gone too (a machine-wide kill), ``ads-ranking cluster gc`` finds
the cluster - its controlling process is gone - and stops exactly its processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.processes import pid_alive, pids_mentioning
from ads_ranking_pipelines_tests.cli.helpers import cli_env, run_cli
from ads_ranking_pipelines_tests.processes import wait_no_processes

CONTROLLER = """
import sys, time
from ads_ranking_pipelines.backends.local import LocalRayBackend
from ads_ranking_pipelines.config.cluster import ClusterRequest
backend = LocalRayBackend(sys.argv[1], run_id="run-killed")
with backend.session(ClusterRequest(name="gc-victim", workers=1)) as session:
    print("READY", flush=True)
    time.sleep(600)
"""


@pytest.mark.ray
def test_gc_stops_the_cluster_of_a_killed_run(tmp_path) -> None:
    env = cli_env(tmp_path)
    state_dir = tmp_path / "ads_home" / "clusters"
    child = subprocess.Popen([sys.executable, "-c", CONTROLLER, str(state_dir)], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "READY"
        cluster = LocalRayCluster.find("gc-victim", state_dir)
        assert cluster.state.session and cluster.state.run_id == "run-killed"
        temp_dir = cluster.state.temp_dir
        assert cluster.state.watchdog_pid
        os.kill(cluster.state.watchdog_pid, signal.SIGKILL)     # watchdog and controller both die
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        assert pids_mentioning(temp_dir), "the Ray processes outlive the killed run"
        # a long-lived `cluster create` cluster would be kept; this one is collected
        dry = run_cli("cluster", "gc", "--dry-run", env=env)
        assert dry.returncode == 0, dry.stderr
        assert pids_mentioning(temp_dir)
        result = run_cli("cluster", "gc", env=env)
        assert result.returncode == 0, result.stderr
        (line,) = [json.loads(x) for x in result.stdout.splitlines()]
        assert line["name"] == "gc-victim" and line["action"] == "deleted"
        assert f"(pid {child.pid}) is gone" in line["reason"]
        assert wait_no_processes(temp_dir) == []
        assert LocalRayCluster.find("gc-victim", state_dir) is None
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        leftover = LocalRayCluster.find("gc-victim", state_dir)
        if leftover is not None:
            leftover.stop()


@pytest.mark.ray
def test_the_watchdog_stops_the_cluster_of_a_killed_run_without_gc(tmp_path) -> None:
    env = cli_env(tmp_path)
    state_dir = tmp_path / "ads_home" / "clusters"
    child = subprocess.Popen([sys.executable, "-c", CONTROLLER, str(state_dir)], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "READY"
        cluster = LocalRayCluster.find("gc-victim", state_dir)
        temp_dir, watchdog = cluster.state.temp_dir, cluster.state.watchdog_pid
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        assert wait_no_processes(temp_dir, timeout_s=30) == []
        deadline = time.monotonic() + 10      # its files go after its processes
        while (pid_alive(watchdog) or LocalRayCluster.find("gc-victim", state_dir)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert LocalRayCluster.find("gc-victim", state_dir) is None
        assert not pid_alive(watchdog), "the watchdog did not exit after its work"
        log = (state_dir / "gc-victim.watchdog.log").read_text()
        assert f"(pid {child.pid}) is gone" in log and "stopped" in log
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        leftover = LocalRayCluster.find("gc-victim", state_dir)
        if leftover is not None:
            leftover.stop()
