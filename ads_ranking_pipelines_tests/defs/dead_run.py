"""What the dead-run tests check after a real SIGKILL of ``ads-ranking pipeline run`` /
``backfill`` (``test_dead_runs.py``; the kill while a backfill trains is the first half of
``test_resume_after_kill.py``): the run is FAILURE, nothing of it runs, its pool slot is free
(a run queued behind it takes the slot), and nothing it left can be promoted."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg

from ads_ranking_pipelines.defs.orphans import IN_FLIGHT
from ads_ranking_pipelines.defs.tags import GPU_POOL_TAG
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.cli.helpers import REPO_ROOT

DEAD_WITHIN_S = 60.0
TINY = ["--window-days", "2", "--workers", "1", "--batch-size", "256", "--rows-per-day", "2000",
        "--param", "hash_buckets=1000", "--param", "embedding_dim=8", "--param", "dense_arch=[16, 8]",
        "--param", "over_arch=[16]"]


def run_status(run_id: str) -> dg.DagsterRunStatus | None:
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(run_id)
        return run.status if run else None


def pool_in_flight(pool: str) -> int:
    with dg.DagsterInstance.get() as instance:
        return len(instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT, tags={GPU_POOL_TAG: pool})))


def wait_failure(run_id: str, timeout_s: float = DEAD_WITHIN_S) -> tuple[dg.DagsterRunStatus | None, float]:
    """The run's status once it is FAILURE (or ``timeout_s`` is over), and the seconds it took."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if run_status(run_id) == dg.DagsterRunStatus.FAILURE:
            break
        time.sleep(0.5)
    return run_status(run_id), time.monotonic() - t0


def queued_behind(tmp_path: Path, day: dt.date) -> tuple[subprocess.Popen, Path]:
    """A second ``pipeline run`` on the same pool (limit 1, the same Dagster instance), waiting
    for the running run's slot. Its storage and clusters are under a home of its own, so that the
    dead run's processes can be told from its own."""
    out, home = tmp_path / "second-run.txt", tmp_path / "second_home"
    home.mkdir()
    with open(out, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run", "--verbose",
             "--date", day.isoformat(), *TINY, "--epochs", "1"],
            stdout=sink, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
            env={**os.environ, "ADS_RANKING_HOME": str(home)})
    deadline = time.monotonic() + 120
    while "waiting for a slot" not in out.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
        time.sleep(0.2)
    return proc, out


def started_after_kill(proc: subprocess.Popen, out: Path, killed_at: float,
                       timeout_s: float = DEAD_WITHIN_S) -> float:
    """Seconds from the kill until the queued run took the slot (its Dagster run was created);
    once it has asked for its cluster it is interrupted (SIGINT: it cancels, tears its cluster
    down and exits)."""
    t0 = time.monotonic()
    while "provisioning Ray cluster" not in out.read_text():
        assert proc.poll() is None and time.monotonic() - t0 < timeout_s, out.read_text()[-3000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=180)
    with dg.DagsterInstance.get() as instance:
        (record,) = instance.get_run_records(limit=1)
    return record.create_timestamp.timestamp() - killed_at


def assert_dead_and_gone(ads_home: Path, status: dg.DagsterRunStatus | None, left: list, context: str = "") -> None:
    """The dead run is FAILURE, no process of it is left (``left``: what ``wait_no_processes``
    found), its cluster's state file is gone and the pool's slot is free."""
    assert status == dg.DagsterRunStatus.FAILURE, context
    assert left == [], f"processes of the dead run still there: {left}"
    assert not list((ads_home / "clusters").glob("*.json")), "the cluster's state file is left"
    assert pool_in_flight("local") == 0, "the pool's slot is still held"


def assert_nothing_promotable(ads_home: Path, day: dt.date, model: str = "quest_ranker") -> None:
    """The dead run changed no champion, left no candidate for ``day``, and every version it
    wrote is marked unattended."""
    registry = ModelRegistry(StorageLayout(str(ads_home)), model)
    assert registry.champion() is None, "a dead run changed the champion"
    assert registry.versions_for_day(day) == [], "a version of the dead run is a candidate"
    for version in registry.versions():
        assert registry.unattended(version) is not None, f"{version} is not marked unattended"
