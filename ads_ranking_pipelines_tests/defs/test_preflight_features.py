"""Scoring and evaluation check day D against the feature spec of the model they use, before any cluster."""

from __future__ import annotations

import datetime as dt
import types

import dagster as dg
import pytest

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.definitions import build_definitions, event_source_config
from ads_ranking_pipelines.defs.evaluate_step import eval_day
from ads_ranking_pipelines.defs.score_step import check_scoring_ahead, check_scoring_day
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry

from .test_bad_input import DAY, _parquet_source

BASE = SourceConfig()
NEW_DENSE = tuple(c for c in BASE.dense_columns if c != "dense_0")      # the new source has no dense_0


def _version(registry: ModelRegistry, version: str, dense=BASE.dense_columns, train_days=(DAY,)) -> None:
    """A complete version whose model.json reads ``dense`` (no weights: nothing here loads it)."""
    uri = registry.version_uri(version)
    fs.write_json(fs.join(uri, "model.json"), {"params": {}, "feature_spec": {
        "label_column": "clicked", "dense_columns": list(dense), "sparse_columns": list(BASE.sparse_columns),
        "hash_buckets": 100}})
    fs.write_json(fs.join(uri, "manifest.json"), {"model_version": version, "files": {},
                                                  "train_days": [d.isoformat() for d in train_days]})


def _new_source(root, days) -> SourceConfig:
    source = _parquet_source(root, days, mutate=lambda t: t.drop_columns(["dense_0"]))
    return source.model_copy(update={"dense_columns": NEW_DENSE})


def test_scoring_with_a_champion_whose_column_the_day_lacks_starts_no_cluster(ads_home, environ, tmp_path):
    registry = ModelRegistry(StorageLayout(str(ads_home)), TrainingParams().model_name)
    _version(registry, "20260301-champion")
    registry.promote("20260301-champion", reason="trained on the old source")
    source = _new_source(tmp_path / "events", [DAY])
    job = build_definitions(environ).resolve_job_def("daily_retraining")
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(
            run_config={"resources": {"event_source": {"config": event_source_config(source)}}},
            partition_key=DAY.isoformat(), instance=instance, raise_on_error=False,
            asset_selection=[dg.AssetKey("impressions"), dg.AssetKey("batch_scores")])
        messages = [r.event_log_entry.user_message or ""
                    for r in instance.get_records_for_run(result.run_id, limit=10000).records]
    failure = next(e for e in result.all_events if e.is_step_failure)
    text = failure.step_failure_data.user_failure_data.description
    assert failure.step_key == "batch_scores"
    assert "feature spec of champion 20260301-champion, which scores 2026-03-10" in text
    assert f"day {DAY}" in text and f"event_date={DAY}/part-00000.parquet" in text
    assert "dense column 'dense_0' is missing" in text and "dense_1 (double)" in text     # what the file has
    assert not any("provisioning Ray cluster" in m for m in messages)
    assert not (ads_home / "clusters").exists() or not any((ads_home / "clusters").iterdir())   # no local cluster state
    assert not (ads_home / "scores").exists() and registry.versions() == ["20260301-champion"]


def test_check_scoring_day_passes_when_the_day_has_the_champions_columns(tmp_path):
    registry = ModelRegistry(StorageLayout(str(tmp_path / "home")), "m")
    _version(registry, "v1", dense=NEW_DENSE)
    source = _new_source(tmp_path / "events", [DAY])
    assert check_scoring_day(registry, source, DAY, "v1")["feature_spec"]["dense_columns"] == list(NEW_DENSE)
    _version(registry, "v0")
    with pytest.raises(dg.Failure, match="dense column 'dense_0' is missing"):
        check_scoring_day(registry, source, DAY, "v0")


def test_evaluation_checks_the_versions_columns_and_the_window_it_reads(tmp_path):
    registry = ModelRegistry(StorageLayout(str(tmp_path / "home")), "m")
    window = [DAY - dt.timedelta(days=1)]
    source = _new_source(tmp_path / "events", [DAY])
    log = types.SimpleNamespace(info=lambda m: None)
    _version(registry, "20260310-aaaaaaaa", dense=BASE.dense_columns, train_days=window)
    with pytest.raises(dg.Failure) as e:
        eval_day(registry, source, DAY, "a" * 32, log)
    assert "feature spec of version 20260310-aaaaaaaa, evaluated on 2026-03-10" in e.value.description
    assert "'dense_0' is missing" in e.value.description
    _version(registry, "20260310-aaaaaaaa", dense=NEW_DENSE, train_days=window)
    with pytest.raises(dg.Failure, match="2026-03-09"):               # the window the baseline trains on
        eval_day(registry, source, DAY, "a" * 32, log)
    _new_source(tmp_path / "events", window)
    assert eval_day(registry, source, DAY, "a" * 32, log).model_version == "20260310-aaaaaaaa"


def test_an_earlier_step_checks_the_runs_scoring_ahead(tmp_path):
    registry = ModelRegistry(StorageLayout(str(tmp_path / "home")), "m")
    _version(registry, "v0")
    registry.promote("v0", reason="old source")
    source = _new_source(tmp_path / "events", [DAY])
    warnings: list[str] = []
    context = types.SimpleNamespace(
        dagster_run=types.SimpleNamespace(asset_selection={dg.AssetKey("trained_model"), dg.AssetKey("batch_scores")}),
        run=types.SimpleNamespace(run_id="r" * 32), log=types.SimpleNamespace(warning=warnings.append))
    with pytest.raises(dg.Failure, match="champion v0, which scores 2026-03-10.*'dense_0' is missing"):
        check_scoring_ahead(context, registry, source, [DAY], settled=True)      # no evaluation before scoring
    check_scoring_ahead(context, registry, source, [DAY], settled=False)         # evaluation may promote one that fits
    assert len(warnings) == 1 and "unless this run promotes a new champion" in warnings[0]


def test_a_run_that_trains_then_scores_without_evaluating_fails_in_training_pre_flight(ads_home, environ, tmp_path):
    from ads_ranking_pipelines.cli.pipeline import run_config

    from .test_bad_input import PARAMS

    registry = ModelRegistry(StorageLayout(str(ads_home)), PARAMS.model_name)
    _version(registry, "20260301-champion")
    registry.promote("20260301-champion", reason="trained on the old source")
    source = _new_source(tmp_path / "events", [DAY - dt.timedelta(days=i) for i in range(3)])
    job = build_definitions(environ).resolve_job_def("daily_retraining")
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(
            run_config=run_config(PARAMS, source), partition_key=DAY.isoformat(), instance=instance,
            raise_on_error=False, asset_selection=[dg.AssetKey(k) for k in ("impressions", "trained_model", "batch_scores")])
        messages = [r.event_log_entry.user_message or ""
                    for r in instance.get_records_for_run(result.run_id, limit=10000).records]
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert failure.step_key == "trained_model"
    assert "champion 20260301-champion, which scores 2026-03-10" in failure.step_failure_data.user_failure_data.description
    assert not any("provisioning Ray cluster" in m for m in messages)
    assert registry.versions() == ["20260301-champion"]
