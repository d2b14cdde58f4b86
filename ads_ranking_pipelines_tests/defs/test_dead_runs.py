"""A run whose process is SIGKILLed is seen dead: its Ray work stops, the run is FAILURE, its
pool slot is free and no model version it left can be promoted.

Before this, a SIGKILLed ``ads-ranking pipeline run`` left its local cluster training for nobody
(it wrote a complete version 9 s after the kill) and its Dagster run STARTED for good, holding
the pool's only slot. Each case kills the real CLI process in one phase of the run and measures
the time from the kill to the run's FAILURE and to no process of the run left.

A kill while the day is scored is not a case of its own: it stops the same one driver as the
kill in evaluation, and what differs (a version judged before the kill keeps its champion place
and is not marked unattended) is checked against a dead run's records in ``test_orphans.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from ads_ranking_pipelines.defs.orphans import IN_FLIGHT
from ads_ranking_pipelines.defs.tags import GPU_POOL_TAG
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.cli.helpers import REPO_ROOT
from ads_ranking_pipelines_tests.processes import wait_no_processes
from ads_ranking_pipelines_tests.defs.gates import TINY_MODEL_GATES, gate_args

DAY = dt.date(2026, 3, 10)
TINY = ["--window-days", "2", "--workers", "1", "--batch-size", "256", "--rows-per-day", "2000",
        "--param", "hash_buckets=1000", "--param", "embedding_dim=8", "--param", "dense_arch=[16, 8]",
        "--param", "over_arch=[16]"]
# When to kill, by the run's log line; training waits for its first checkpoint.
LONG = ["--epochs", "100", "--param", "early_stopping_patience=0"]   # trains its whole budget
PHASES = {
    "provisioning": ("provisioning Ray cluster", LONG),
    "training": (None, LONG),
    "evaluation": ("step evaluate-", ["--epochs", "1", *gate_args(TINY_MODEL_GATES)]),
}
DEAD_WITHIN_S = 60.0


def _wait_for(proc: subprocess.Popen, lines: list[str], marker: str | None, ads_home: Path) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if marker is None and any((ads_home / "ray_results").glob("*/checkpoint_2*")):
            return
        line = proc.stdout.readline()
        assert line or proc.poll() is None, "the run ended before the phase:\n" + "".join(lines)
        lines.append(line)
        if marker is not None and marker in line:
            return
    raise AssertionError("the phase never came:\n" + "".join(lines[-40:]))


def _head_started(ads_home: Path) -> bool:
    """The run's cluster is coming up: its state file records a head node (and so a watchdog).
    A kill before that leaves no cluster: only run monitoring or the GC fail such a run."""
    for path in (ads_home / "clusters").glob("*.json"):
        try:
            if json.loads(path.read_text()).get("head_pid"):
                return True
        except (OSError, ValueError):
            continue
    return False


def _run_status(run_id: str | None) -> dg.DagsterRunStatus | None:
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs(limit=1) if run_id is None else [instance.get_run_by_id(run_id)]
        return runs[0].status if runs and runs[0] else None


def _pool_in_flight(pool: str) -> int:
    with dg.DagsterInstance.get() as instance:
        return len(instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT, tags={GPU_POOL_TAG: pool})))


def _wait_failure(run_id: str, timeout_s: float) -> tuple[dg.DagsterRunStatus | None, float]:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if _run_status(run_id) == dg.DagsterRunStatus.FAILURE:
            break
        time.sleep(0.5)
    return _run_status(run_id), time.monotonic() - t0


def _latest_run_id() -> str:
    with dg.DagsterInstance.get() as instance:
        (run,) = instance.get_runs(limit=1)
        return run.run_id


def _queued_behind(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """A second ``pipeline run`` on the same pool (limit 1, the same Dagster instance), waiting
    for the dead run's slot. Its storage and clusters are under a home of its own, so that the
    dead run's processes can be told from its own."""
    out, home = tmp_path / "second-run.txt", tmp_path / "second_home"
    home.mkdir()
    with open(out, "w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run", "--verbose",
             "--date", DAY.isoformat(), *TINY, "--epochs", "1"],
            stdout=sink, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
            env={**os.environ, "ADS_RANKING_HOME": str(home)})
    deadline = time.monotonic() + 120
    while "waiting for a slot" not in out.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
        time.sleep(0.2)
    return proc, out


def _started_after_kill(proc: subprocess.Popen, out: Path, killed_at: float, timeout_s: float) -> float:
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


@pytest.mark.ray
@pytest.mark.parametrize("phase", list(PHASES))
def test_sigkill_of_the_run_process_is_seen_dead(phase, ads_home, tmp_path) -> None:
    marker, extra = PHASES[phase]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run", "--verbose",
         "--date", DAY.isoformat(), *TINY, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ), cwd=REPO_ROOT)
    lines: list[str] = []
    second = None       # training: a run queued behind this one on the pool
    try:
        _wait_for(proc, lines, marker, ads_home)
        while phase == "provisioning" and not _head_started(ads_home):
            assert proc.poll() is None, "the run ended before its cluster:\n" + "".join(lines)
            time.sleep(0.05)
        run_id = _latest_run_id()
        assert _run_status(run_id) == dg.DagsterRunStatus.STARTED
        if phase == "training":
            second, second_out = _queued_behind(tmp_path)
        proc.send_signal(signal.SIGKILL)
        killed_at = time.time()
        proc.wait(timeout=10)
        status, to_failure = _wait_failure(run_id, DEAD_WITHIN_S)
        t0 = time.monotonic()
        left = wait_no_processes(str(ads_home), timeout_s=DEAD_WITHIN_S)
        to_empty = to_failure + time.monotonic() - t0
        if phase == "training":
            to_next = _started_after_kill(second, second_out, killed_at, DEAD_WITHIN_S)
            left += wait_no_processes(str(tmp_path / "second_home"), timeout_s=DEAD_WITHIN_S)
    finally:
        for p in (proc, second):
            if p is not None and p.poll() is None:
                p.kill()
    print(f"{phase}: kill -> run FAILURE {to_failure:.1f}s, -> 0 processes {to_empty:.1f}s"
          + (f", -> the queued run started {to_next:.1f}s" if phase == "training" else ""))
    assert status == dg.DagsterRunStatus.FAILURE, "".join(lines[-30:])
    assert left == [], f"processes of the dead run still there: {left}"
    assert not list((ads_home / "clusters").glob("*.json")), "the cluster's state file is left"
    assert _pool_in_flight("local") == 0, "the pool's slot is still held"
    if phase == "training":     # the run queued on the pool took the dead run's slot
        assert 0 < to_next <= DEAD_WITHIN_S, to_next
    registry = ModelRegistry(StorageLayout(str(ads_home)), "quest_ranker")
    assert registry.champion() is None, "a dead run changed the champion"
    assert registry.versions_for_day(DAY) == [], "a version of the dead run is a candidate"
    for version in registry.versions():
        assert registry.unattended(version) is not None, f"{version} is not marked unattended"
