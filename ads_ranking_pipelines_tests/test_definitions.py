"""The code location loads, with the jobs, schedule, partitions, tags and checks users rely on."""

from __future__ import annotations

import datetime as dt
import hashlib
import subprocess
import sys

import dagster as dg
import pytest

from ads_ranking_pipelines.definitions import build_definitions
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry

TAGS = {"ads-ranking/gpu-pool": "local", "ads-ranking/model": "quest_ranker"}


def test_definitions_load(environ):
    defs = build_definitions(environ)
    job = defs.resolve_job_def("daily_retraining")
    assert set(job.graph.node_names()) == {"impressions", "trained_model", "model_evaluation", "batch_scores"}
    assert TAGS.items() <= job.tags.items()               # a launchpad run with the defaults is queued right
    assert job.partitions_def.get_partition_keys()[0] == "2025-01-01"
    graph = defs.resolve_asset_graph()
    checks = {k.name: graph.get_check_spec(k) for k in graph.asset_check_keys}
    assert set(checks) == {"not_worse_than_xgboost_baseline", "not_worse_than_champion", "calibrated",
                           "realized_not_worse_than_evaluation"}
    assert all(spec.blocking for spec in checks.values())
    for key in graph.materializable_asset_keys:            # a backfill of any range is one run
        assert graph.get(key).backfill_policy == dg.BackfillPolicy.single_run()
    assert graph.external_asset_keys == {dg.AssetKey("model_champion")}     # the champion's history
    # scores come from the champion, not from the fresh version: not downstream of the gates
    assert {k.to_user_string() for k in graph.get(dg.AssetKey("batch_scores")).parent_keys} == {"impressions"}
    assert {"promote_model", "rollback_model"} <= {j.name for j in defs.resolve_all_job_defs()}


def test_a_schedule_tick_runs_the_day_that_ended_with_the_pool_and_model_tags(environ):
    defs = build_definitions(environ)
    schedule = defs.resolve_schedule_def("daily_retraining_schedule")
    assert schedule.cron_schedule == "0 3 * * *" and schedule.execution_timezone == "UTC"
    tick = dt.datetime(2026, 3, 11, 3, 0, tzinfo=dt.timezone.utc)
    with dg.build_schedule_context(scheduled_execution_time=tick, repository_def=defs.get_repository_def()) as context:
        (request,) = schedule.evaluate_tick(context).run_requests
    assert request.partition_key == "2026-03-10"
    assert TAGS.items() <= request.tags.items()


def _complete(reg: ModelRegistry, name: str) -> None:
    fs.write_bytes(fs.join(reg.version_uri(name), "weights.pt"), b"w")
    fs.write_json(fs.join(reg.version_uri(name), "manifest.json"),
                  {"files": {"weights.pt": {"sha256": hashlib.sha256(b"w").hexdigest()}}})


def test_promote_and_rollback_jobs_record_who_and_why_and_refuse_bad_input(environ, ads_home):
    defs = build_definitions(environ)
    reg = ModelRegistry(StorageLayout(str(ads_home)), "quest_ranker")
    _complete(reg, "20260101-a")
    _complete(reg, "20260102-b")
    promote, rollback = defs.resolve_job_def("promote_model"), defs.resolve_job_def("rollback_model")
    with dg.instance_for_test() as instance:
        def run(job, config, **kw):
            return job.execute_in_process(run_config={"ops": {job.graph.node_names()[0]: {"config": config}}},
                                          instance=instance, raise_on_error=False, **kw)

        r = run(rollback, {"reason": "nothing yet"})
        assert not r.success and "no earlier champion" in _failure(r)
        for version in ("20260101-a", "20260102-b"):
            assert run(promote, {"version": version, "reason": f"ship {version}"}, tags={"dagster/user": "carol"}).success
        r = run(promote, {"version": "20260103-missing", "reason": "typo"})
        assert not r.success and "no version '20260103-missing'" in _failure(r)
        assert reg.champion_version() == "20260102-b"
        assert run(rollback, {"reason": "bad scores"}).success
        changes = [m.metadata for m in (r.asset_materialization for r in instance.fetch_materializations(
            dg.AssetKey("model_champion"), limit=10, ascending=True).records)]
    assert reg.champion_version() == "20260101-a"
    assert [(c["action"].value, c["model_version"].value, c["from_version"].value, c["reason"].value) for c in changes] == [
        ("promote", "20260101-a", "none", "ship 20260101-a"), ("promote", "20260102-b", "20260101-a", "ship 20260102-b"),
        ("rollback", "20260101-a", "20260102-b", "bad scores")]     # the UI's champion history
    last = reg.history()[-1]
    assert (last["action"], last["reason"]) == ("rollback", "bad scores") and last["by"].startswith("dagster run ")
    assert reg.history()[0]["by"].startswith("carol (dagster run ")


def _failure(result) -> str:
    return " ".join(e.step_failure_data.user_failure_data.description or "" for e in result.all_events
                    if e.is_step_failure and e.step_failure_data.user_failure_data)


@pytest.mark.slow
def test_dagster_cli_validates_the_workspace(environ, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
                          capture_output=True, text=True, timeout=180, env=environ)
    assert proc.returncode == 0, proc.stdout + proc.stderr
