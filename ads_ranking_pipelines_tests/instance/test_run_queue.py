"""The shipped instance settings drive Dagster's real run queue (QueuedRunCoordinator + daemon).

Runs are launched with ``dagster job launch`` (so they are QUEUED, as from the UI or a
schedule) and dequeued by a real ``dagster-daemon run`` against a temporary instance whose
``dagster.yaml`` is the one ``ads-ranking instance dagster-yaml`` writes: two runs on a pool
limited to 1 never overlap, a run on another pool starts at once, and cancelling a running
run frees its slot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from ads_ranking_pipelines.config.dagster_instance import GPU_POOL_TAG, instance_settings, render_yaml
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines_tests.processes import stop_process_group

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def test_repo_dagster_yaml_is_generated_from_the_shipped_catalog():
    shipped = (REPO / "dagster.yaml").read_text()
    assert shipped == render_yaml(instance_settings(load_catalog(None))), \
        "regenerate: .venv/bin/ads-ranking instance dagster-yaml > dagster.yaml"
    settings = yaml.safe_load(shipped)
    limits = settings["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert {(l["value"], l["limit"]) for l in limits} == {(p.name, p.max_concurrent_runs) for p in load_catalog(None)}
    assert settings["telemetry"] == {"enabled": False} and settings["run_monitoring"]["enabled"] is True


def _launch(env: dict, workspace: Path, pool: str, seconds: float) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "dagster", "job", "launch", "-w", str(workspace), "-j", "hold_job",
         "--tags", json.dumps({GPU_POOL_TAG: pool}),
         "--config-json", json.dumps({"ops": {"hold": {"config": {"seconds": seconds}}}})],
        env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        return instance.get_runs(limit=1)[0].run_id


def _wait(instance: dg.DagsterInstance, run_ids: list[str], done, timeout_s: float = 240.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        runs = [instance.get_run_by_id(r) for r in run_ids]
        if done(runs):
            return
        time.sleep(0.5)
    raise TimeoutError({r.run_id[:8]: r.status.value for r in runs})


@pytest.fixture
def queue(tmp_path):
    home = tmp_path / "dagster_home"
    home.mkdir()
    settings = instance_settings(load_catalog(None))
    settings["run_coordinator"]["config"]["dequeue_interval_seconds"] = 1
    (home / "dagster.yaml").write_text(render_yaml(settings))
    workspace = tmp_path / "workspace.yaml"
    workspace.write_text(yaml.safe_dump({"load_from": [{"python_file": {
        "relative_path": str(HERE / "hold_location.py"), "location_name": "hold"}}]}))
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    with dg.DagsterInstance.from_config(str(home)):      # create the storage before two processes race to
        pass
    log = open(tmp_path / "daemon.log", "w")
    daemon = subprocess.Popen([sys.executable, "-m", "dagster._daemon", "run", "-w", str(workspace)],
                              env=env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield env, workspace
    finally:
        stop_process_group(daemon)
        log.close()


def _window(instance: dg.DagsterInstance, run_id: str) -> tuple[float, float]:
    record = instance.get_run_record_by_id(run_id)
    return record.start_time, record.end_time


@pytest.mark.slow
def test_second_run_on_a_full_pool_waits_other_pools_start_and_cancel_frees_the_slot(queue):
    """The first run on pool 'local' (limit 1) holds it until cancelled: the second waits
    QUEUED meanwhile, a run on another pool starts and ends, and the cancel frees the slot."""
    env, workspace = queue
    first = _launch(env, workspace, "local", 600)     # held until it is cancelled below
    second = _launch(env, workspace, "local", 1)
    other = _launch(env, workspace, "cpu-standard", 1)
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        _wait(instance, [first, other], lambda rs: rs[0].status == dg.DagsterRunStatus.STARTED and rs[1].is_finished)
        assert instance.get_run_by_id(other).status == dg.DagsterRunStatus.SUCCESS, "another pool's run failed"
        time.sleep(2)               # two more dequeues: the second must still wait for pool 'local'
        assert instance.get_run_by_id(second).status == dg.DagsterRunStatus.QUEUED
        assert instance.get_run_by_id(first).status == dg.DagsterRunStatus.STARTED
        assert instance.run_launcher.terminate(first)
        _wait(instance, [first, second], lambda rs: all(r.is_finished for r in rs), timeout_s=120)
        assert instance.get_run_by_id(first).status == dg.DagsterRunStatus.CANCELED
        assert instance.get_run_by_id(second).status == dg.DagsterRunStatus.SUCCESS
        w1, w2, w3 = (_window(instance, r) for r in (first, second, other))
        assert w2[0] >= w1[1], "the second run on pool 'local' (limit 1) started while the first was running"
        assert w3[1] < w1[1], "a run on another pool waited for pool 'local'"
