"""A backfill cancelled mid-training, as from the UI: the run is launched through the real run
queue (``dagster job launch`` + ``dagster-daemon run`` on a temporary instance with the shipped
settings) and cancelled through ``instance.run_coordinator.cancel_run`` (what the UI's
Terminate does) once day 1 is complete and day 2 trains.

Then: the run is CANCELED with a message naming the day it stopped in and what was kept and
discarded; the champion is unchanged; the days before that one are complete and recorded, its
half-written version is gone, the days after it never started; the cluster and every Ray process
are gone. The cancel travels (daemon, run process, Ray job) while training goes on: it lands in
day 2 as a rule, but a day of this size can end before it lands (seen once, 2026-12-07), so the
checks follow the day the run names, which must come after day 1 and before the end.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from ads_ranking_pipelines.cli.pipeline import run_config
from ads_ranking_pipelines.config.dagster_instance import instance_settings, render_yaml
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.definitions import range_tags, run_tags
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.processes import stop_process_group, wait_no_processes

DAYS = [dt.date(2026, 3, 10), dt.date(2026, 3, 11), dt.date(2026, 3, 12)]
# the whole epoch budget (no early stop): day 2 is still training when the cancel lands
PARAMS = TrainingParams(dataset_window_days=2, num_workers=1, epochs=8, early_stopping_patience=0, batch_size=256,
                        hash_buckets=1000, embedding_dim=8, dense_arch=(16, 8), over_arch=(16,))
SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=3000, num_users=500, num_ads=100))
PRIOR = "20260301-prior000"


@pytest.fixture
def daemon(tmp_path, ads_home):
    home = Path(os.environ["DAGSTER_HOME"])
    settings = instance_settings(load_catalog(None))
    settings["run_coordinator"]["config"]["dequeue_interval_seconds"] = 1
    (home / "dagster.yaml").write_text(render_yaml(settings))
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(yaml.safe_dump({"load_from": [{"python_module": {
        "module_name": "ads_ranking_pipelines.definitions", "location_name": "ads_ranking_pipelines"}}]}))
    with dg.DagsterInstance.from_config(str(home)):      # create the storage before two processes race to
        pass
    log = open(tmp_path / "daemon.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "-w", str(workspace)],
                            env=dict(os.environ), cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)

    def stop() -> None:
        """The daemon and its code server (their environment names ADS_RANKING_HOME too)."""
        if proc.poll() is not None:
            return
        stop_process_group(proc)

    try:
        yield workspace, stop
    finally:
        stop()
        log.close()


def _launch(workspace: Path) -> str:
    config = run_config(PARAMS, SOURCE)
    tags = {**run_tags(PARAMS.model_name, PARAMS.gpu_pool), **range_tags(DAYS[0], DAYS[-1])}
    out = subprocess.run([sys.executable, "-m", "dagster", "job", "launch", "-w", str(workspace),
                          "-j", "daily_retraining", "--tags", json.dumps(tags), "--config-json", json.dumps(config)],
                         env=dict(os.environ), capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    with dg.DagsterInstance.get() as instance:
        return instance.get_runs(limit=1)[0].run_id


def _wait_for(what: str, done, run_id: str, timeout_s: float = 420.0) -> None:
    deadline = time.monotonic() + timeout_s
    with dg.DagsterInstance.get() as instance:
        while not done():
            run = instance.get_run_by_id(run_id)
            assert not run.is_finished, f"the run ended ({run.status.value}) before {what}"
            assert time.monotonic() < deadline, f"no {what} within {timeout_s} s ({run.status.value})"
            time.sleep(0.2)


@pytest.mark.ray
@pytest.mark.integration
def test_cancelling_a_backfill_mid_training_keeps_finished_days_and_nothing_half_written(daemon, ads_home):
    workspace, stop_daemon = daemon
    registry = ModelRegistry(StorageLayout(str(ads_home)), PARAMS.model_name)
    fs.write_json(fs.join(registry.version_uri(PRIOR), "manifest.json"), {"model_version": PRIOR, "files": {}})
    registry.promote(PRIOR, reason="the champion before the backfill")
    history = registry.history()

    run_id = _launch(workspace)
    v1, v2, v3 = (f"{d:%Y%m%d}-{run_id[:8]}" for d in DAYS)
    day2_run = ads_home / "ray_results" / f"{PARAMS.model_name}-{v2}"
    _wait_for("day 2 training", lambda: registry.is_complete(v1) and day2_run.exists(), run_id)
    with dg.DagsterInstance.get() as instance:
        instance.run_coordinator.cancel_run(run_id)            # the UI's Terminate
        deadline = time.monotonic() + 180
        while not instance.get_run_by_id(run_id).is_finished:
            assert time.monotonic() < deadline, "the cancelled run did not end"
            time.sleep(0.5)
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.CANCELED
        messages = [r.event_log_entry.user_message or "" for r in instance.get_records_for_run(run_id, limit=100000).records]
        trained = instance.get_materialized_partitions(dg.AssetKey("trained_model"))

    said = next((m for m in messages if m.startswith("the run was cancelled while training")), None)
    assert said is not None, "\n".join(messages[-30:])
    versions = [v1, v2, v3]
    stopped = next((i for i, d in enumerate(DAYS) if said.startswith(f"the run was cancelled while training {d} (")),
                   None)
    assert stopped in (1, 2), said                            # after day 1 (waited for), before the end
    kept, after = versions[:stopped], DAYS[stopped + 1:]
    assert said.startswith(f"the run was cancelled while training {DAYS[stopped]} ({versions[stopped]} not kept"), said
    assert (f"kept {stopped} complete version(s) of the days before ({', '.join(kept)}); "
            f"not trained: {', '.join(map(str, after)) or 'none'}") in said
    assert f"the champion is unchanged ({PRIOR})" in said
    assert any("stopping Ray job" in m for m in messages)
    assert registry.champion_version() == PRIOR and registry.history() == history
    assert registry.versions() == [PRIOR, *kept]
    assert not any(fs.exists(registry.version_uri(v)) for v in versions[stopped:])
    assert trained == {d.isoformat() for d in DAYS[:stopped]}  # the kept days are recorded as materialized, nothing else
    stop_daemon()                 # the Ray nodes run in sessions of their own: stopping the daemon spares them
    assert wait_no_processes(str(ads_home)) == []
    assert not list((ads_home / "clusters").glob("*.json"))
