"""A STARTED run whose controller tag names a dead process is seen dead: by ``dead_runs`` /
``mark_orphaned`` (the GC, the sensor, the watchdog) and by Dagster's own run monitoring with
the shipped instance settings (``ProcessCheckingRunLauncher``); its unjudged versions are
marked unattended and can no longer be promoted."""

from __future__ import annotations

import datetime as dt
import logging
import socket
import subprocess
import uuid

import dagster as dg
import pytest
from dagster._core.test_utils import create_run_for_test
from dagster._daemon.monitoring.run_monitoring import monitor_started_run

from ads_ranking_pipelines.backends.processes import process_start
from ads_ranking_pipelines.config.dagster_instance import instance_settings
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.defs.orphans import dead_runs, mark_orphaned
from ads_ranking_pipelines.defs.tags import CONTROLLER_TAG, MODEL_TAG, controller_tag
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry, RegistryError

DAY = dt.date(2026, 3, 10)
MODEL = "quest_ranker"


def _dead_controller() -> dict[str, str]:
    """The controller tag of a process that has exited (its pid and start time were real)."""
    proc = subprocess.Popen(["sleep", "30"])
    tag = f"{socket.gethostname()}/{proc.pid}/{process_start(proc.pid)}"
    proc.kill()
    proc.wait()
    return {CONTROLLER_TAG: tag}


def _started(instance: dg.DagsterInstance, tags: dict[str, str]) -> str:
    run_id = str(uuid.uuid4())
    create_run_for_test(instance, run_id=run_id, status=dg.DagsterRunStatus.STARTED,
                        tags={MODEL_TAG: MODEL, **tags})
    return run_id


def _version(registry: ModelRegistry, run_id: str, hhmm: str) -> str:
    version = f"{DAY:%Y%m%d}-{hhmm}-{run_id[:8]}"
    fs.write_json(fs.join(registry.version_uri(version), "manifest.json"),
                  {"model_version": version, "files": {}})
    return version


@pytest.fixture
def instance():
    """An instance with the shipped settings: our run launcher, run monitoring on."""
    with dg.instance_for_test(overrides=instance_settings(load_catalog())) as inst:
        yield inst


def test_dead_runs_finds_only_runs_whose_controller_died_and_mark_orphaned_fails_them(
        instance, tmp_path) -> None:
    dead = _started(instance, _dead_controller())
    alive = _started(instance, controller_tag())
    elsewhere = _started(instance, {CONTROLLER_TAG: "another-host/1/1"})
    untagged = _started(instance, {})
    registry = ModelRegistry(StorageLayout(str(tmp_path)), MODEL)
    unjudged, judged = _version(registry, dead, "0100"), _version(registry, dead, "0200")
    registry.record_evaluation(judged, DAY, {"auc": 0.7})
    registry.promote(judged, reason="its gates passed before the run died (killed while scoring)")
    other = _version(registry, alive, "0300")

    found = dict(dead_runs(instance))
    assert list(found) == [dead], found
    assert "is gone" in found[dead]
    assert mark_orphaned(instance, dead, found[dead], str(tmp_path))

    run = instance.get_run_by_id(dead)
    assert run.status == dg.DagsterRunStatus.FAILURE
    (failure,) = [e for e in instance.all_logs(dead) if e.dagster_event
                  and e.dagster_event.event_type == dg.DagsterEventType.RUN_FAILURE]
    assert found[dead] in failure.message and unjudged in failure.message
    assert registry.unattended(unjudged)["run_id"] == dead
    assert registry.unattended(judged) is None and registry.unattended(other) is None
    assert registry.champion_version() == judged          # a judged, promoted version keeps its place
    assert registry.versions_for_day(DAY) == [judged, other]
    with pytest.raises(RegistryError, match="died before evaluating it"):
        registry.promote(unjudged, reason="test")
    for run_id in (alive, elsewhere, untagged):
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED
    assert not mark_orphaned(instance, dead, "again", str(tmp_path))     # finished: left alone
    assert dead_runs(instance) == []


def test_dagster_run_monitoring_fails_a_started_run_whose_process_died(instance) -> None:
    dead = _started(instance, _dead_controller())
    alive = _started(instance, controller_tag())
    log = logging.getLogger("test-run-monitoring")
    for run_id in (dead, alive):
        (record,) = instance.get_run_records(filters=dg.RunsFilter(run_ids=[run_id]))
        monitor_started_run(instance, None, record, log)   # no resume: the workspace is unused
    assert instance.get_run_by_id(dead).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(alive).status == dg.DagsterRunStatus.STARTED
    messages = [e.message for e in instance.all_logs(dead) if e.dagster_event
                and e.dagster_event.event_type == dg.DagsterEventType.RUN_FAILURE]
    assert messages and "is gone" in messages[-1], messages
