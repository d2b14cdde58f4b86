"""Operating the pipeline day after day, on a real local Ray cluster, through the real commands.

One ``ads-ranking pipeline backfill`` over three days, then one ``pipeline run`` with an
injected worse model, then ``model rollback``:

* the backfill is ONE Dagster run on ONE cluster: three versions in date order, each warm
  started from the day before; day 1 is promoted (no champion yet) and so are the days whose
  gates pass; every day is scored by the champion as of the end of its evaluation;
* the worse model (learning rates ~0: an untrained model) fails the champion gate: the run
  fails on the blocking check with the numbers in its description, the champion and its
  history are unchanged, and the day's batch_scores used the champion;
* the terminal output of ``pipeline run`` is under 40 lines and ends with the JSON line;
* rollback restores the previous champion and records who/why.

Between the backfill and the bad day, the last day's labels land (what
``test_realized_step.py`` checks without Ray, here after real runs): the ``realized_performance``
partitions Dagster's automation asks for are materialized, first on the labels as they were
(healthy: realized equals predicted, the champion stays), then after the day's clicks landed
flipped (its events written again, ``impressions`` materialized again): the check fails with
the numbers and the champion goes back to the day before's version, in the registry and in
``model_champion``'s history, and the rescore sensor asks for that day.

It also carries what the single-day end-to-end test used to check (the run's one driver job and
its steps handed to it, per-epoch observations in the event log, the scores' parquet, nothing
left running) and what the realized-labels end-to-end test used to run on its own: the suite
pays for two real pipeline runs here instead of four.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import dagster as dg
import pytest

from ads_ranking_pipelines.config.dagster_instance import instance_settings, render_yaml
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.definitions import build_definitions, event_source_config
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.cli.helpers import cli_env, ok, run_cli
from ads_ranking_pipelines_tests.processes import wait_no_processes
from ads_ranking_pipelines_tests.defs.gates import TINY_MODEL_GATES_WITH_CHAMPION, gate_args
from ads_ranking_pipelines_tests.defs.realized import (
    IMPRESSIONS, REALIZED, check_evaluation, flip_labels, materialize, requested_days, rescore_requests,
)

DAYS = [dt.date(2026, 3, 10), dt.date(2026, 3, 11), dt.date(2026, 3, 12)]
BAD_DAY = dt.date(2026, 3, 13)
TINY = ["--window-days", "2", "--workers", "2", "--epochs", "2", "--batch-size", "256", "--rows-per-day", "6000",
        "--param", "hash_buckets=2000", "--param", "embedding_dim=8", "--param", "dense_arch=[16, 8]",
        "--param", "over_arch=[16]", "--param", "learning_rate=0.05"]
# tolerances for tiny data: the champion gate is what this test is about
LOOSE = gate_args(TINY_MODEL_GATES_WITH_CHAMPION)
# the source ``--rows-per-day 6000`` makes (the CLI's default synthetic source with that many rows)
SOURCE = SourceConfig(synthetic=SyntheticSpec(**{**SourceConfig().synthetic.model_dump(), "rows_per_day": 6000}))
RESOURCES = {"event_source": {"config": event_source_config(SOURCE)}}
# a tiny model is far from calibrated: the realized check keeps its AUC/logloss tolerances only
TINY_REALIZED = {"min_calibration": 0.01, "max_calibration": 100.0}
UNTRAINED = ["--param", "learning_rate=0.000001", "--param", "embedding_learning_rate=0.000001", "--epochs", "1",
             "--gate", "max_auc_drop_vs_champion=0.0"]


def _records(instance: dg.DagsterInstance, run_id: str, kind: str | None = None) -> list:
    records = instance.get_records_for_run(run_id, limit=100000).records
    return [r.event_log_entry for r in records
            if kind is None or (r.event_log_entry.dagster_event and r.event_log_entry.dagster_event.event_type_value == kind)]


def _materializations(instance: dg.DagsterInstance, run_id: str, asset: str) -> dict[str, dict]:
    out = {}
    for e in _records(instance, run_id, "ASSET_MATERIALIZATION"):
        mat = e.dagster_event.event_specific_data.materialization
        if mat.asset_key.to_user_string() == asset:
            out[mat.partition] = {k: v.value for k, v in mat.metadata.items()}
    return out


def _labels_land_and_the_champion_is_judged_again(env, versions: list[str], registry: ModelRegistry, cursor) -> None:
    """The last day judged on its labels: healthy, then flipped (the champion is rolled back)."""
    defs, day, (before, current) = build_definitions(env), DAYS[-1], versions[1:]
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        requested, cursor = requested_days(defs, instance, cursor)  # the days were just scored
        assert requested == {d.isoformat() for d in DAYS}
        healthy = materialize(defs, instance, REALIZED, day, RESOURCES, TINY_REALIZED)
        assert healthy.success
        check = check_evaluation(healthy)
        assert check.passed and check.metadata["model_version"].value == current
        # the labels are the ones evaluation saw: realized equals predicted (the join is row for row)
        assert check.metadata["realized_auc"].value == pytest.approx(check.metadata["predicted_auc"].value, abs=1e-3)
        assert registry.champion_version() == current
        requested, cursor = requested_days(defs, instance, cursor)  # the next tick: nothing new landed
        assert requested == set()

        flip_labels(Path(env["ADS_RANKING_HOME"]), day)
        assert materialize(defs, instance, IMPRESSIONS, day, RESOURCES).success    # the labels landed
        requested, _ = requested_days(defs, instance, cursor)
        assert requested == {day.isoformat()}
        degraded = materialize(defs, instance, REALIZED, day, RESOURCES, {**TINY_REALIZED, "rescore": True})
        assert not degraded.success                                 # a blocking check failed
        check = check_evaluation(degraded)
        # a tiny model may rank below chance: flipped clicks then show in logloss, not AUC
        assert not check.passed and "; regression: " in check.description
        m = {k: v.value for k, v in check.metadata.items()}
        assert m["realized_auc"] < m["predicted_auc"] - 0.02 or m["realized_logloss"] > m["predicted_logloss"] + 0.02

        assert registry.champion_version() == before
        event = registry.history()[-1]
        assert (event["action"], event["from_version"], event["by"]) == \
            ("rollback", current, "check:realized_not_worse_than_evaluation")
        assert f"{day}: {current} realized auc" in event["reason"] and "(evaluation " in event["reason"]
        champion = instance.fetch_materializations(dg.AssetKey("model_champion"), limit=1).records[0]
        meta = champion.asset_materialization.metadata
        assert (meta["action"].value, meta["model_version"].value) == ("rollback", before)
        requests, _ = rescore_requests(defs, instance)
        assert [(r.partition_key, r.run_config["resources"]["event_source"]) for r in requests] == \
            [(day.isoformat(), RESOURCES["event_source"])]


@pytest.fixture
def env(tmp_path):
    environ = cli_env(tmp_path, DAGSTER_HOME=str(tmp_path / "dagster_home"))
    (tmp_path / "dagster_home").mkdir()
    (tmp_path / "dagster_home" / "dagster.yaml").write_text(render_yaml(instance_settings(load_catalog(None))))
    return environ


@pytest.mark.ray
@pytest.mark.integration
def test_backfill_then_late_labels_then_a_bad_day_then_rollback(env, tmp_path):
    registry = ModelRegistry(StorageLayout(env["ADS_RANKING_HOME"]), "quest_ranker")
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        _, cursor = requested_days(build_definitions(env), instance)     # automation's first tick: before the run
    backfill = run_cli("pipeline", "backfill", "--from", str(DAYS[0]), "--to", str(DAYS[-1]), *TINY, *LOOSE,
                       env=env, timeout=1800)
    summary = json.loads(ok(backfill).stdout.strip().splitlines()[-1])
    assert [d["date"] for d in summary["days"]] == [d.isoformat() for d in DAYS]

    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        (run,) = instance.get_runs()                                          # one run for the range
        assert run.tags["ads-ranking/gpu-pool"] == "local" and run.tags["ads-ranking/model"] == "quest_ranker"
        messages = [e.user_message or "" for e in _records(instance, run.run_id)]
        assert sum("provisioning Ray cluster" in m for m in messages) == 1      # one cluster
        submitted = [m for m in messages if m.startswith("[pipes] Ray job") and "submitted" in m]
        assert [m.split()[3].split("-")[:2] for m in submitted] == [["run", run.run_id[:8]]], submitted
        handed = [m.split()[2].split("-")[0] for m in messages if m.startswith("[pipes] step ")]
        assert handed == ["train", "evaluate", "infer"], handed     # one driver; one step each for all days
        observed = [e.dagster_event.event_specific_data.asset_observation.metadata
                    for e in _records(instance, run.run_id, "ASSET_OBSERVATION")]
        trained = _materializations(instance, run.run_id, "trained_model")
        evaluated = _materializations(instance, run.run_id, "model_evaluation")
        scored = _materializations(instance, run.run_id, "batch_scores")
    versions = [trained[d.isoformat()]["model_version"] for d in DAYS]
    assert versions == sorted(versions) and registry.versions() == versions  # one per day, in date order
    manifests = [registry.manifest(v) for v in versions]
    assert [m.get("warm_started_from") for m in manifests] == [
        None, registry.version_uri(versions[0]), registry.version_uri(versions[1])]
    assert manifests[0]["train_days"] == ["2026-03-08", "2026-03-09"] and manifests[0]["cluster"]["request"]["gpu_pool"] == "local"
    assert all(m.get("code_version") for m in manifests)
    assert evaluated[str(DAYS[0])]["promoted"] is True                     # day 1: no champion yet
    for day in DAYS:                                                      # per-day plots: numbers per partition
        ev, tm = evaluated[str(day)], trained[str(day)]
        assert {"auc", "logloss", "normalized_entropy", "calibration", "lift_vs_baseline"} <= set(ev)
        assert {"samples_per_s", "job_wall_seconds", "worker_hours", "gpu_hours"} <= set(tm)
        assert scored[str(day)]["model_version"] == ev["champion_after"]   # the champion after that day's gates
    # lines printed inside the Ray jobs reach the event log (a Ray Train worker's print, a Pipes log
    # from the driver); per-epoch metrics arrive as observations while the job runs
    assert any("[train] epoch 2/2" in m for m in messages), "a worker's print is missing from the event log"
    assert any(m.startswith(f"model version {versions[0]} written") for m in messages)
    epochs = [(o["day"].value, o["epoch"].value) for o in observed if o["kind"].value == "epoch"]
    assert epochs == [(str(d), e) for d in DAYS for e in (1, 2)]
    import pyarrow.dataset as pads

    table = pads.dataset(scored[str(DAYS[0])]["scores_uri"], format="parquet").to_table()
    assert table.num_rows == 6000 and {"impression_id", "score", "model_version"} <= set(table.column_names)
    assert registry.champion_version() == evaluated[str(DAYS[-1])]["champion_after"] == versions[-1]
    assert [e["action"] for e in registry.history()] == ["promote", "promote", "promote"]  # loose champion gate

    _labels_land_and_the_champion_is_judged_again(env, versions, registry, cursor)
    champion, history = registry.champion_version(), registry.history()

    bad = run_cli("pipeline", "run", "--date", str(BAD_DAY), *TINY, *UNTRAINED, env=env, timeout=1800)
    lines = (bad.stdout + bad.stderr).strip().splitlines()
    assert bad.returncode == 1 and len(lines) < 40, "\n".join(lines)
    last = json.loads(bad.stdout.strip().splitlines()[-1])
    assert last["promoted"] is False and last["scored_with"] == champion
    assert any("gate not_worse_than_champion: FAILED" in line for line in lines), "\n".join(lines)
    assert registry.champion_version() == champion and registry.history() == history   # nothing changed
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        bad_run = instance.get_runs(limit=1)[0]
        checks = {e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data
                  for e in _records(instance, bad_run.run_id, "ASSET_CHECK_EVALUATION")}
    assert not checks["not_worse_than_champion"].passed
    assert f"vs champion {champion}" in checks["not_worse_than_champion"].description
    assert f"version={champion}" in last["scores_uri"]

    # rollback restores the champion before (day 2's version replaced day 1's, then was the one restored)
    back = json.loads(ok(run_cli("model", "rollback", "--reason", "test", "-o", "json", env=env)).stdout)
    assert back["model_version"] == versions[0] and registry.champion_version() == versions[0]
    assert registry.history()[-1]["reason"] == "test"

    assert wait_no_processes(env["ADS_RANKING_HOME"]) == []                 # no Ray process, no cluster state left
    clusters = tmp_path / "ads_home" / "clusters"
    assert not list(clusters.glob("*.json")) if clusters.exists() else True
