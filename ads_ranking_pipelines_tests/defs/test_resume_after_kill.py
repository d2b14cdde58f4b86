"""Resume keyed on content (issue 25): a 3-day backfill whose process is SIGKILLed while day 2
trains, then run again (the same ``ads-ranking pipeline backfill``: a new Dagster run, as a run
retry is) picks up where the work stopped: day 1 is not trained again, day 2 resumes at the
epoch its last checkpoint holds, day 3 is trained; every day keeps the first attempt's version
name, and the days' metadata has the shape of an uninterrupted run's.

Before this, the second run trained all three days again from scratch under new version names.

The kill is also the dead-run case of a run killed while it trains (the other phases are in
``test_dead_runs.py``): the killed run is FAILURE, nothing of it runs, a run queued behind it on
the pool takes its slot, and day 1's complete version is unattended (no candidate) until the
run again takes it over.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.cli.helpers import REPO_ROOT, ok, run_cli
from ads_ranking_pipelines_tests.processes import wait_no_processes
from ads_ranking_pipelines_tests.defs.dead_run import (
    DEAD_WITHIN_S,
    assert_dead_and_gone,
    assert_nothing_promotable,
    queued_behind,
    started_after_kill,
    wait_failure,
)
from ads_ranking_pipelines_tests.defs.gates import TINY_MODEL_GATES, gate_args

DAYS = [dt.date(2026, 3, 10), dt.date(2026, 3, 11), dt.date(2026, 3, 12)]
EPOCHS = 30         # ~0.3 s each: the dead run's processes stop (~1-3 s) well before day 2 could end
COMMAND = ["pipeline", "backfill", "--from", DAYS[0].isoformat(), "--to", DAYS[-1].isoformat(), "--verbose",
           "--window-days", "2", "--workers", "1", "--batch-size", "256", "--rows-per-day", "2000",
           "--epochs", str(EPOCHS), "--param", "early_stopping_patience=0", "--param", "hash_buckets=1000",
           "--param", "embedding_dim=8", "--param", "dense_arch=[16, 8]", "--param", "over_arch=[16]",
           *gate_args({**TINY_MODEL_GATES, "min_calibration": 0.01, "max_calibration": 100.0,
                       "max_auc_drop_vs_champion": 1.0})]     # 60 epochs on 3600 rows: no gate is the point
MODEL = "quest_ranker"


def _checkpoints(ads_home: Path, version: str) -> list[Path]:
    """Complete checkpoints of ``version``'s day (``train_state.json`` is written last)."""
    return sorted((ads_home / "ray_results" / f"{MODEL}-{version}").glob("checkpoint_2*/train_state.json"))


@dataclass
class Killed:
    """The first run, SIGKILLed while day 2 trains, and the run queued behind it on the pool."""

    run_id: str
    at: float                       # time.time() of the kill
    queued: subprocess.Popen
    queued_out: Path


def _kill_while_day_two_trains(ads_home: Path, tmp_path: Path) -> Killed:
    """Start the backfill; once it holds the pool's slot, a run queued behind it; SIGKILL the
    backfill once day 1's version is written and day 2 has a checkpoint."""
    registry = ModelRegistry(StorageLayout(str(ads_home)), MODEL)
    out, queued = tmp_path / "first.txt", None
    with open(out, "w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "ads_ranking_pipelines.cli.main", *COMMAND], stdout=sink,
                                stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                env=dict(os.environ))
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the backfill ended before day 2 trained:\n" + out.read_text()[-4000:]
            if queued is None and "provisioning Ray cluster" in out.read_text():
                queued, queued_out = queued_behind(tmp_path, DAYS[0])
            versions = registry.versions()
            if queued is not None and versions and versions[0].startswith("20260310-"):
                run8 = versions[0].split("-")[1]
                if _checkpoints(ads_home, f"20260311-{run8}"):
                    proc.send_signal(signal.SIGKILL)
                    killed_at = time.time()
                    proc.wait(30)
                    break
            time.sleep(0.1)
        else:
            raise AssertionError("day 2 never checkpointed:\n" + out.read_text()[-4000:])
    except BaseException:
        if queued is not None:
            queued.kill()
        raise
    finally:
        if proc.poll() is None:
            proc.kill()
    with dg.DagsterInstance.get() as instance:
        (run,) = [r for r in instance.get_runs() if r.run_id.startswith(run8)]
    return Killed(run.run_id, killed_at, queued, queued_out)


def _seen_dead(ads_home: Path, tmp_path: Path, killed: Killed) -> None:
    """The killed run is FAILURE and nothing of it runs; the queued run takes its slot; nothing
    the killed run left can be promoted (test_dead_runs.py's checks, for a kill while training)."""
    try:
        status, to_failure = wait_failure(killed.run_id)
        left = wait_no_processes(str(ads_home), timeout_s=120)         # the dead run's Ray work has stopped
        to_next = started_after_kill(killed.queued, killed.queued_out, killed.at)
        left += wait_no_processes(str(tmp_path / "second_home"), timeout_s=DEAD_WITHIN_S)
    finally:
        if killed.queued.poll() is None:
            killed.queued.kill()
    print(f"training: kill -> run FAILURE {to_failure:.1f}s, -> the queued run started {to_next:.1f}s")
    assert_dead_and_gone(ads_home, status, left)
    assert 0 < to_next <= DEAD_WITHIN_S, to_next
    assert_nothing_promotable(ads_home, DAYS[0], MODEL)


def _day_metadata(run_id: str) -> dict[str, dict]:
    out = {}
    with dg.DagsterInstance.get() as instance:
        for r in instance.get_records_for_run(run_id, limit=100000).records:
            de = r.event_log_entry.dagster_event
            if de is not None and de.event_type_value == "ASSET_MATERIALIZATION":
                mat = de.event_specific_data.materialization
                if mat.asset_key.to_user_string() == "trained_model" and mat.partition:
                    out[mat.partition] = {k: v.value for k, v in mat.metadata.items()}
    return out


def _epoch_days(run_id: str) -> set[str]:
    """The days the run trained epochs of (its live ``epoch`` observations)."""
    with dg.DagsterInstance.get() as instance:
        return {de.event_specific_data.asset_observation.partition
                for r in instance.get_records_for_run(run_id, limit=100000).records
                if (de := r.event_log_entry.dagster_event) is not None and de.event_type_value == "ASSET_OBSERVATION"
                and de.event_specific_data.asset_observation.metadata.get("kind") == dg.MetadataValue.text("epoch")}


@pytest.mark.ray
@pytest.mark.integration
def test_a_backfill_killed_on_day_two_resumes_there_when_run_again(ads_home, tmp_path) -> None:
    killed = _kill_while_day_two_trains(ads_home, tmp_path)
    _seen_dead(ads_home, tmp_path, killed)
    first = killed.run_id
    v1, v2, v3 = (f"{d:%Y%m%d}-{first[:8]}" for d in DAYS)
    done_before = max(json.loads(p.read_text())["epochs_done"] for p in _checkpoints(ads_home, v2))
    assert 1 <= done_before < EPOCHS

    result = ok(run_cli(*COMMAND, env=dict(os.environ), timeout=900))
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    with dg.DagsterInstance.get() as instance:
        retry = instance.get_runs(limit=1)[0].run_id
    assert retry != first
    log = result.stdout + result.stderr                 # --verbose: the event log on stderr
    assert "[resume] key " in log and f"resuming run {first}" in log, log[-5000:]
    assert f"1 day(s) complete, not trained again ({DAYS[0]}); training {DAYS[1]}, {DAYS[2]}" in log
    assert f"[resume] {v1} was marked unattended (" in log and "): this run judges it" in log, log[-5000:]

    meta = _day_metadata(retry)
    assert [meta[d.isoformat()]["model_version"] for d in DAYS] == [v1, v2, v3]      # the first attempt's names
    assert meta[DAYS[0].isoformat()]["resumed"] == f"trained complete by run {first}: not trained again"
    assert meta[DAYS[0].isoformat()]["epochs"] == EPOCHS                 # its figures, from its manifest
    assert meta[DAYS[1].isoformat()]["resumed_from_epoch"] == done_before, (done_before, meta[DAYS[1].isoformat()])
    assert meta[DAYS[1].isoformat()]["epochs"] == EPOCHS and meta[DAYS[2].isoformat()]["epochs"] == EPOCHS
    assert not meta[DAYS[2].isoformat()].get("resumed_from_epoch")
    assert _epoch_days(retry) == {DAYS[1].isoformat(), DAYS[2].isoformat()}             # day 1 not retrained
    # the run's days came out as an uninterrupted backfill's: one version, evaluated and scored, per day
    assert [d["date"] for d in summary["days"]] == [d.isoformat() for d in DAYS]
    assert [d["model_version"] for d in summary["days"]] == [v1, v2, v3]
    assert len({frozenset(d) for d in summary["days"]}) == 1, summary["days"]
    registry = ModelRegistry(StorageLayout(str(ads_home)), MODEL)
    assert registry.versions() == [v1, v2, v3] and all(registry.unattended(v) is None for v in (v1, v2, v3))
