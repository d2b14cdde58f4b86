"""The local backend through the CLI, for real: a Ray cluster started by one ``ads-ranking``
process, used and deleted by others, and no process of it left afterwards."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from ads_ranking_pipelines_tests.cli.helpers import cli_env, ok, ok_json, run_cli
from ads_ranking_pipelines_tests.processes import wait_no_processes


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.ray
def test_local_cluster_lifecycle_across_invocations(tmp_path) -> None:
    env = cli_env(tmp_path)
    state_file = tmp_path / "ads_home" / "clusters" / "cli-local.json"
    started = time.monotonic()
    timings: dict[str, float] = {}
    try:
        t = time.monotonic()
        (created,) = ok_json(run_cli("cluster", "create", "--backend", "local", "--workers", "1",
                                     "--name", "cli-local", "-o", "json", env=env, timeout=180))
        timings["create"] = time.monotonic() - t
        assert created["status"] == "running" and created["workers_ready"] == 1
        state = json.loads(state_file.read_text())
        temp_dir = state["temp_dir"]
        # The CLI process has exited; the node processes it started live on.
        pids = [state["head_pid"], *state["worker_pids"]]
        assert pids and all(_alive(p) for p in pids), pids

        (listed,) = ok_json(run_cli("cluster", "list", "-o", "json", env=env))
        assert (listed["name"], listed["status"], listed["workers_ready"]) == ("cli-local", "running", 1)

        t = time.monotonic()
        job_id = ok(run_cli("job", "submit", "--", sys.executable, "-c", "print('hello')",
                            env=env)).stdout.strip()
        logs = ok(run_cli("job", "logs", job_id, "--follow", env=env)).stdout
        timings["job"] = time.monotonic() - t
        assert "hello" in logs.splitlines()
        status = ok_json(run_cli("job", "status", job_id, "--cluster", "cli-local", "-o", "json",
                                 env=env))
        assert status["state"] == "SUCCEEDED"

        t = time.monotonic()
        ok(run_cli("cluster", "delete", "cli-local", "--yes", env=env, timeout=120))
        timings["delete"] = time.monotonic() - t
        assert not state_file.exists()
        assert wait_no_processes(temp_dir, timeout_s=10) == []
        assert not os.path.exists(temp_dir)
    finally:
        if state_file.exists():  # a failed run must not leave a cluster behind
            from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster

            leftover = LocalRayCluster.find("cli-local", state_file.parent)
            if leftover is not None:
                leftover.stop()
    timings["total"] = time.monotonic() - started
    print("local CLI lifecycle timings (s):", {k: round(v, 1) for k, v in timings.items()})
