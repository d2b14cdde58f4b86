"""realized_performance through Dagster without Ray: scores written and reported as batch_scores would.

The day's scores are the synthetic source's true click probabilities, written where batch_scores
writes them and recorded as its materialization (version, scores_uri); the versions are registry
folders with a manifest. What is tested is what follows a scoring: automation's request, the
check, the rollback through the registry (who, why), model_champion's history, the rescore request.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import dagster as dg
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.definitions import build_definitions, event_source_config
from ads_ranking_pipelines.events.layout import ensure_synthetic_days
from ads_ranking_pipelines.events.synthetic import generate_day
from ads_ranking_pipelines.metrics import evaluate
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.defs.realized import (
    IMPRESSIONS, REALIZED, check_evaluation, flip_labels, materialize, requested_days, rescore_requests,
)

D1, D2 = dt.date(2026, 3, 10), dt.date(2026, 3, 11)
SPEC = SyntheticSpec(rows_per_day=3000, num_users=500, num_ads=100)
RESOURCES = {"event_source": {"config": event_source_config(SourceConfig(synthetic=SPEC))}}
MODEL = TrainingParams().model_name
V1, V2 = "20260310-aaaaaaaa", "20260311-bbbbbbbb"


def _version(registry: ModelRegistry, version: str, day: dt.date) -> None:
    folder = Path(registry.version_uri(version))
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"files": {}, "train_days": [str(day - dt.timedelta(days=1))]}))


def _scored(instance: dg.DagsterInstance, registry: ModelRegistry, day: dt.date, version: str) -> dict:
    """``version`` scores ``day`` (the true probabilities) as batch_scores does; its metrics on the labels then."""
    g = generate_day(day, SPEC)
    out = Path(registry.layout.scores(MODEL, day, version))
    out.mkdir(parents=True)
    pq.write_table(pa.table({"impression_id": g.table.column("impression_id"),
                             "score": pa.array(g.click_prob.astype(np.float32))}), str(out / "part-00000.parquet"))
    (out / "_SUCCESS").write_text("{}")
    instance.report_runless_asset_event(dg.AssetMaterialization(
        "batch_scores", partition=day.isoformat(),
        metadata={"model_version": version, "scores_uri": dg.MetadataValue.path(str(out))}))
    return evaluate(g.labels, g.click_prob.astype(np.float32).astype(np.float64))


@pytest.fixture
def world(ads_home, environ):
    """Two champions (V2 current, promoted on D2's evaluation), D1 and D2 scored by them."""
    ensure_synthetic_days(SourceConfig(synthetic=SPEC).with_root(str(ads_home)), [D1, D2])
    registry = ModelRegistry(StorageLayout(str(ads_home)), MODEL)
    with dg.DagsterInstance.get() as instance:
        defs = build_definitions(environ)
        _, baseline = requested_days(defs, instance)                 # automation's first tick: before any scoring
        for version, day in ((V1, D1), (V2, D2)):
            instance.report_runless_asset_event(dg.AssetMaterialization(IMPRESSIONS, partition=day.isoformat()))
            _version(registry, version, day)
            metrics = _scored(instance, registry, day, version)
            registry.record_evaluation(version, day, metrics, passed=True, promoted=True)
            registry.promote(version, reason=f"passed gates on {day}", by="test")
        yield defs, instance, registry, baseline


@pytest.mark.slow
def test_a_healthy_champion_stays_and_a_degraded_one_is_rolled_back_with_the_numbers(world, ads_home):
    defs, instance, registry, baseline = world
    requested, cursor = requested_days(defs, instance, baseline)
    assert requested == {D1.isoformat(), D2.isoformat()}            # both days were just scored
    healthy = materialize(defs, instance, REALIZED, D2, RESOURCES)
    check = check_evaluation(healthy)
    assert healthy.success and check.passed
    assert check.metadata["realized_auc"].value == pytest.approx(check.metadata["predicted_auc"].value, abs=1e-6)
    assert registry.champion_version() == V2
    requested, cursor = requested_days(defs, instance, cursor)
    assert requested == set()                                        # both handled, nothing new landed

    flip_labels(ads_home, D2)
    assert materialize(defs, instance, IMPRESSIONS, D2, RESOURCES).success          # the late clicks landed
    requested, _ = requested_days(defs, instance, cursor)
    assert requested == {D2.isoformat()}
    degraded = materialize(defs, instance, REALIZED, D2, RESOURCES, {"rescore": True})
    check = check_evaluation(degraded)
    assert not degraded.success and not check.passed                 # blocking: the step fails
    assert "regression: auc drop" in check.description and "logloss rise" in check.description
    assert registry.champion_version() == V1
    event = registry.history()[-1]
    assert (event["action"], event["model_version"], event["from_version"], event["by"]) == \
        ("rollback", V1, V2, "check:realized_not_worse_than_evaluation")
    auc = check.metadata["realized_auc"].value
    assert event["reason"].startswith(f"realized labels: {D2}: {V2} realized auc {auc:.4f} (evaluation ")
    champion = instance.fetch_materializations(dg.AssetKey("model_champion"), limit=1).records[0]
    meta = champion.asset_materialization.metadata
    assert (meta["action"].value, meta["model_version"].value, meta["by"].value) == \
        ("rollback", V1, "check:realized_not_worse_than_evaluation")
    realized = instance.fetch_materializations(REALIZED, limit=1).records[0].asset_materialization.metadata
    assert realized["rollback"].value == f"{V2} -> {V1}" and realized["rescore_days"].value == D2.isoformat()

    (request,), cursor = rescore_requests(defs, instance)
    assert (request.partition_key, request.run_config["resources"]) == (D2.isoformat(), RESOURCES)
    assert request.job_name in (None, "rescore_batch_scores")
    assert rescore_requests(defs, instance, cursor)[0] == []         # the sensor's cursor moved past it


def test_a_regression_of_a_version_no_longer_champion_or_with_rollback_off_changes_nothing(world, ads_home):
    defs, instance, registry, _ = world
    flip_labels(ads_home, D1)                                        # V1 scored D1; V2 is champion
    result = materialize(defs, instance, REALIZED, D1, RESOURCES)
    assert not check_evaluation(result).passed and registry.champion_version() == V2
    meta = instance.fetch_materializations(REALIZED, limit=1).records[0].asset_materialization.metadata
    assert meta["rollback"].value == f"none: {V1} is no longer the champion ({V2})"
    flip_labels(ads_home, D2)
    result = materialize(defs, instance, REALIZED, D2, RESOURCES, {"rollback": False})
    assert not check_evaluation(result).passed and registry.champion_version() == V2
    assert rescore_requests(defs, instance)[0] == []


def test_a_day_never_scored_is_refused_naming_it(world):
    defs, instance, registry, _ = world
    day = D2 + dt.timedelta(days=1)
    ensure_synthetic_days(SourceConfig(synthetic=SPEC).with_root(registry.layout.root), [day])
    result = materialize(defs, instance, REALIZED, day, RESOURCES)
    failure = next(e for e in result.all_events if e.is_step_failure).step_failure_data.user_failure_data
    assert f"{day} has no batch_scores materialization" in failure.description
    assert f"materialize batch_scores for {day} first" in failure.description
