"""Warm reuse across runs (``pipeline run --keep-warm SECONDS``, the ``ray_cluster`` resource's
``keep_warm_s``): two concurrent runs share one warm local cluster under a lease each, neither
stops it under the other, and the GC reaps it once both are over and it has been idle past its
TTL. Before this a run always made its own cluster and stopped it when it ended."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.local_warm_lease import read_leases
from ads_ranking_pipelines.backends.processes import pid_alive
from ads_ranking_pipelines.backends.ray_job_api import RayJobApi
from ads_ranking_pipelines_tests.cli.helpers import REPO_ROOT, run_cli
from ads_ranking_pipelines_tests.processes import wait_no_processes
from ads_ranking_pipelines_tests.defs.gates import TINY_MODEL_GATES, gate_args

pytestmark = pytest.mark.slow  # real processes (README: Tests)

DAY_A, DAY_B = dt.date(2026, 3, 10), dt.date(2026, 3, 12)
TINY = ["--window-days", "2", "--workers", "1", "--batch-size", "256", "--rows-per-day", "2000", "--epochs", "1",
        "--param", "hash_buckets=1000", "--param", "embedding_dim=8", "--param", "dense_arch=[16, 8]",
        "--param", "over_arch=[16]"]
LOOSE = gate_args({**TINY_MODEL_GATES, "min_calibration": 0.01, "max_calibration": 100.0})
TTL_S = 20.0
CATALOG = REPO_ROOT / "ads_ranking_pipelines" / "config" / "pools.yaml"


def _two_runs_catalog(tmp_path: Path) -> Path:
    """The shipped catalog with the local pool allowing two runs at once (it allows one)."""
    doc = yaml.safe_load(CATALOG.read_text())
    for pool in doc["pools"]:
        if pool["name"] == "local":
            pool["max_concurrent_runs"] = 2
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


# The cluster holds one run's Ray Train worker group at a time. The second run starts once the
# first one trains, so its group waits for the first one's to end: when the first run has only its
# evaluation and scoring left, the second has its whole training (group start, 20 epochs) before
# its own, and is still on the cluster when the first one ends. (Started earlier, either group
# could be placed first.) The first run's 20 epochs outlast the second one's start (its lease).
EPOCHS = ["--epochs", "20", "--param", "early_stopping_patience=0"]


def _start(day: dt.date, model: str, out: Path, env: dict[str, str], extra: tuple[str, ...] = ()) -> subprocess.Popen:
    with open(out, "w") as sink:
        return subprocess.Popen(
            [sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run", "--verbose",
             "--date", day.isoformat(), "--model-name", model, *TINY, *LOOSE, *extra, "--keep-warm", f"{TTL_S:g}"],
            stdout=sink, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, env=env)


def _warm_cluster(state_dir: Path, proc: subprocess.Popen, out: Path) -> LocalRayCluster:
    """The first run's cluster once it is up (a warm cluster still starting is not reused)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        running = [c for c in LocalRayCluster.list(state_dir) if c.state.keep_warm_s and c.alive()]
        if running and f"Ray cluster {running[0].name} ready" in out.read_text():
            return running[0]
        assert proc.poll() is None, "the first run ended before its cluster was up:\n" + out.read_text()
        time.sleep(0.3)
    raise AssertionError("no warm cluster came up:\n" + out.read_text()[-4000:])


def _wait_training(proc: subprocess.Popen, out: Path) -> None:
    """Until the run reports its first epoch (its worker group holds the cluster's workers)."""
    deadline = time.monotonic() + 240
    while "[progress] trained_model: day 1/1" not in out.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, "no epoch reported:\n" + out.read_text()[-4000:]
        time.sleep(0.3)


def _summary(proc: subprocess.Popen, out: Path) -> dict:
    proc.wait(timeout=420)
    text = out.read_text()
    assert proc.returncode == 0, text[-6000:]
    return json.loads(text.strip().splitlines()[-1])


def _gc(env: dict[str, str]) -> subprocess.CompletedProcess:
    result = run_cli("cluster", "gc", env=env, timeout=120)
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}"
    return result


@pytest.mark.ray
@pytest.mark.integration
def test_two_runs_share_one_warm_cluster_and_the_gc_reaps_it_idle(ads_home, tmp_path) -> None:
    env = {**os.environ, "ADS_RANKING_POOL_CATALOG": str(_two_runs_catalog(tmp_path))}
    state_dir = ads_home / "clusters"
    out_a, out_b = tmp_path / "run-a.txt", tmp_path / "run-b.txt"
    run_a = _start(DAY_A, "warm_a", out_a, env, tuple(EPOCHS))
    run_b = None
    try:
        cluster = _warm_cluster(state_dir, run_a, out_a)
        _wait_training(run_a, out_a)
        run_b = _start(DAY_B, "warm_b", out_b, env, tuple(EPOCHS))
        # B holds a lease on A's cluster while A still runs: they share it at the same time
        deadline = time.monotonic() + 120
        while len(read_leases(state_dir, cluster.name)) < 2 and time.monotonic() < deadline:
            assert run_b.poll() is None, out_b.read_text()[-4000:]
            time.sleep(0.3)
        leases = read_leases(state_dir, cluster.name)
        assert len(leases) == 2 and not any(lease.released_at for lease in leases), leases
        assert run_a.poll() is None, "the first run ended before the second took its lease"

        summary_a = _summary(run_a, out_a)
        # A (which made the cluster) is over; B still runs on it, and A stopped nothing of it
        assert run_b.poll() is None, (f"the second run ended (exit {run_b.returncode}) by the time the first did "
                                      "(its cluster stopped under it, or nothing overlapped):\n"
                                      + out_b.read_text()[-3000:])
        assert cluster.alive() and LocalRayCluster.find(cluster.name, state_dir) is not None
        summary_b = _summary(run_b, out_b)
        assert summary_a["promoted"] and summary_b["promoted"], (summary_a, summary_b)
        assert f"reusing the warm Ray cluster {cluster.name}" in out_b.read_text()
        assert [c.name for c in LocalRayCluster.list(state_dir)] == [cluster.name], "B made a cluster"

        # every job of both runs ran on the one cluster and is over
        api = RayJobApi(cluster.state.dashboard_url, headers=cluster.auth_headers())
        jobs = {j["job_id"]: j["status"] for j in api.list_jobs()}
        for summary in (summary_a, summary_b):
            mine = sorted(j.split("-")[0] for j in jobs if summary["run_id"][:8] in j)
            assert mine == ["run"], jobs                    # the run's one driver, for all its steps
        assert set(jobs.values()) == {"SUCCEEDED"}, jobs

        # both over: kept until idle past its TTL, then reaped by `cluster gc`, nothing left
        assert cluster.alive() and all(lease.released_at for lease in read_leases(state_dir, cluster.name))
        # its watchdog exited when A ended, and recorded it (nothing kills that PID later)
        assert not pid_alive(cluster.state.watchdog_pid)
        assert LocalRayCluster.find(cluster.name, state_dir).state.watchdog_pid == 0
        watchdog_log = (state_dir / f"{cluster.name}.watchdog.log").read_text()
        assert "kept for the next runs" in watchdog_log and "stopped" not in watchdog_log, watchdog_log
        ended = time.monotonic()
        kept = _gc(env)
        assert time.monotonic() - ended < TTL_S, "the first gc came too late to see the cluster kept"
        assert cluster.name not in kept.stdout and cluster.alive(), kept.stdout
        time.sleep(max(0.0, TTL_S + 1 - (time.monotonic() - ended)))
        reaped = _gc(env)
        (line,) = [json.loads(x) for x in reaped.stdout.splitlines() if cluster.name in x]
        assert line["kind"] == "warm local cluster" and "idle for" in line["reason"], line
        assert LocalRayCluster.find(cluster.name, state_dir) is None
        assert wait_no_processes(cluster.state.temp_dir, timeout_s=30) == []
        assert not LocalRayCluster.lease_dir(state_dir, cluster.name).exists()
    finally:
        for proc in (run_a, run_b):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
        for leftover in LocalRayCluster.list(state_dir):
            leftover.stop(force=True)


def _refused(*args: str, env: dict[str, str]) -> str:
    result = run_cli("pipeline", "run", "--date", DAY_A.isoformat(), *TINY, *args, env=env, timeout=120)
    assert result.returncode == 2, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stderr


def test_keep_warm_is_refused_where_it_cannot_apply(ads_home) -> None:
    env = dict(os.environ)
    assert "invalid --keep-warm=0; valid: idle seconds > 0" in _refused("--keep-warm", "0", env=env)
    both = _refused("--keep-warm", "60", "--cluster", "shared", env=env)
    assert "invalid --keep-warm=60 with --cluster/--ray-address='shared'" in both, both
    kuberay = _refused("--keep-warm", "60", env={**env, "ADS_RANKING_BACKEND": "kuberay"})
    assert "invalid keep_warm_s=60.0; valid: existing_cluster (the fields of backend 'kuberay')" in kuberay, kuberay
    assert not (ads_home / "clusters").exists() or not list((ads_home / "clusters").iterdir())
