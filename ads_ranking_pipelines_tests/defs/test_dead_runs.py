"""A run whose process is SIGKILLed is seen dead: its Ray work stops, the run is FAILURE, its
pool slot is free and no model version it left can be promoted.

Before this, a SIGKILLed ``ads-ranking pipeline run`` left its local cluster training for nobody
(it wrote a complete version 9 s after the kill) and its Dagster run STARTED for good, holding
the pool's only slot. Each case kills the real CLI process in one phase of the run and measures
the time from the kill to the run's FAILURE and to no process of the run left.

The kill while the run trains is the first half of ``test_resume_after_kill.py`` (a backfill
killed while day 2 trains, with a run queued behind it on the pool, then run again): the same
checks (:mod:`.dead_run`), on the run that test makes anyway.
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

from ads_ranking_pipelines_tests.cli.helpers import REPO_ROOT
from ads_ranking_pipelines_tests.processes import wait_no_processes
from ads_ranking_pipelines_tests.defs.dead_run import (
    DEAD_WITHIN_S,
    TINY,
    assert_dead_and_gone,
    assert_nothing_promotable,
    run_status,
    wait_failure,
)
from ads_ranking_pipelines_tests.defs.gates import TINY_MODEL_GATES, gate_args

DAY = dt.date(2026, 3, 10)
# When to kill, by the run's log line.
PHASES = {
    "provisioning": ("provisioning Ray cluster", ["--epochs", "100", "--param", "early_stopping_patience=0"]),
    "evaluation": ("step evaluate-", ["--epochs", "1", *gate_args(TINY_MODEL_GATES)]),
}


def _wait_for(proc: subprocess.Popen, lines: list[str], marker: str) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        assert line or proc.poll() is None, "the run ended before the phase:\n" + "".join(lines)
        lines.append(line)
        if marker in line:
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


def _latest_run_id() -> str:
    with dg.DagsterInstance.get() as instance:
        (run,) = instance.get_runs(limit=1)
        return run.run_id


@pytest.mark.ray
@pytest.mark.parametrize("phase", list(PHASES))
def test_sigkill_of_the_run_process_is_seen_dead(phase, ads_home) -> None:
    marker, extra = PHASES[phase]
    proc = subprocess.Popen(
        [sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run", "--verbose",
         "--date", DAY.isoformat(), *TINY, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ), cwd=REPO_ROOT)
    lines: list[str] = []
    try:
        _wait_for(proc, lines, marker)
        while phase == "provisioning" and not _head_started(ads_home):
            assert proc.poll() is None, "the run ended before its cluster:\n" + "".join(lines)
            time.sleep(0.05)
        run_id = _latest_run_id()
        assert run_status(run_id) == dg.DagsterRunStatus.STARTED
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        status, to_failure = wait_failure(run_id)
        t0 = time.monotonic()
        left = wait_no_processes(str(ads_home), timeout_s=DEAD_WITHIN_S)
        to_empty = to_failure + time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"{phase}: kill -> run FAILURE {to_failure:.1f}s, -> 0 processes {to_empty:.1f}s")
    assert_dead_and_gone(ads_home, status, left, "".join(lines[-30:]))
    assert_nothing_promotable(ads_home, DAY)
