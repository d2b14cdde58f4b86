"""A run on an existing local Ray cluster (``pipeline run --cluster NAME``) that does not fit is
refused before any job, with one error naming the bad value and what would be valid, and a
run's session on the cluster stops its own jobs when it ends.

A run that fits, on the same kind of borrowed cluster, is ``test_run_driver_local.py``'s daily
run: it checks there that the run made no cluster, that its one job ran there and is over, and
that the cluster is left as it was (still running, the same nodes)."""

from __future__ import annotations

import datetime as dt
import os
import time

import dagster as dg
import pytest

from ads_ranking_pipelines.backends.base import JobSpec, JobState
from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.ray_job_api import RayJobApi
from ads_ranking_pipelines_tests.cli.helpers import run_cli
from ads_ranking_pipelines_tests.defs.existing_cluster import existing_local_cluster

pytestmark = pytest.mark.slow  # real processes (README: Tests)

DAY = dt.date(2026, 3, 10)
TINY = ["--window-days", "2", "--workers", "1", "--batch-size", "256", "--rows-per-day", "2000", "--epochs", "1",
        "--param", "hash_buckets=1000", "--param", "embedding_dim=8", "--param", "dense_arch=[16, 8]",
        "--param", "over_arch=[16]"]


def _runs() -> int:
    with dg.DagsterInstance.get() as instance:
        return len(instance.get_runs())


def _refused(*args: str, command: tuple[str, ...] = ("run", "--date", DAY.isoformat())) -> str:
    result = run_cli("pipeline", *command, *TINY, *args, env=dict(os.environ), timeout=120)
    assert result.returncode == 2, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stderr


@pytest.fixture
def shared_cluster(ads_home):
    """A long-lived local cluster of one 1-CPU worker, as `cluster create --backend local` makes."""
    with existing_local_cluster("shared", 1, ads_home / "clusters") as cluster:
        yield cluster


def test_a_run_that_does_not_fit_is_refused_before_anything_and_a_session_stops_its_jobs(shared_cluster, ads_home) -> None:
    api = RayJobApi(shared_cluster.state.dashboard_url, headers=shared_cluster.auth_headers())
    unknown = _refused("--cluster", "nope")
    assert "existing_cluster='nope'" in unknown and "shared" in unknown, unknown
    small = _refused("--cluster", "shared", "--workers", "2")
    assert "num_workers=2" in small and "at most 1 worker(s) of 1 CPU" in small, small
    pool = _refused("--cluster", "shared", "--gpu-pool", "cpu-standard")
    assert "gpu_pool='cpu-standard'" in pool and "valid: local" in pool, pool
    backfill = _refused("--cluster", "shared", "--workers", "3",
                        command=("backfill", "--from", DAY.isoformat(), "--to", "2026-03-12"))
    assert "num_workers=3" in backfill, backfill
    dead = _refused("--ray-address", "http://127.0.0.1:9")
    assert "ray_address='http://127.0.0.1:9'" in dead and "did not answer" in dead, dead
    # nothing made: no run, no job on the cluster, no other cluster
    assert _runs() == 0 and api.list_jobs() == []
    assert [c.name for c in LocalRayCluster.list(ads_home / "clusters")] == ["shared"]
    # a run's session there stops its own job still running when it ends; the cluster stays
    from ads_ranking_pipelines.backends.local_borrowed import BorrowedLocalBackend, find_target

    target = find_target(ads_home / "clusters", "shared")
    with BorrowedLocalBackend(target).session(shared_cluster.request) as session:
        job_id = session.submit(JobSpec("sleeper-1", "sleep 120"))
        deadline = time.monotonic() + 60
        while api.status(job_id).state is not JobState.RUNNING and time.monotonic() < deadline:
            time.sleep(0.2)
    assert api.status(job_id).state is JobState.STOPPED and shared_cluster.alive()
