"""The champion judged again when its labels land: healthy it stays, degraded it is rolled back.

One run trains, evaluates and scores two days (two champions, the second current); then the
``realized_performance`` partition that Dagster's automation asks for is materialized: first on
the labels as they were (healthy), then after day 2's clicks landed flipped (the day's events
written again, ``impressions`` materialized again): the check fails with the numbers and the
champion goes back to day 1's version, in the registry and in ``model_champion``'s history.
"""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pytest

from ads_ranking_pipelines.cli.pipeline import run_config
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.definitions import build_definitions, event_source_config, range_tags, run_tags
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.defs.realized import (
    IMPRESSIONS, REALIZED, check_evaluation, flip_labels, materialize, requested_days, rescore_requests,
)

D1, D2 = dt.date(2026, 3, 10), dt.date(2026, 3, 11)
SMALL = TrainingParams(dataset_window_days=2, num_workers=1, epochs=1, batch_size=256, hash_buckets=1000,
                       embedding_dim=8, dense_arch=(16, 8), over_arch=(16,))
SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=2000, num_users=500, num_ads=100))
# both days promoted whatever a tiny model does: this test is about what happens after
PROMOTE_BOTH = {"max_auc_gap_vs_baseline": 1.0, "min_calibration": 0.01, "max_calibration": 100.0,
                "max_auc_drop_vs_champion": 1.0}
# a tiny model is far from calibrated (16.8 measured): the realized check keeps its AUC/logloss tolerances only
TINY_REALIZED = {"min_calibration": 0.01, "max_calibration": 100.0}
RESOURCES = {"event_source": {"config": event_source_config(SOURCE)}}


@pytest.mark.ray
def test_realized_labels_keep_a_healthy_champion_and_roll_back_a_degraded_one(ads_home, environ):
    defs = build_definitions(environ)
    registry = ModelRegistry(StorageLayout(str(ads_home)), SMALL.model_name)
    with dg.DagsterInstance.get() as instance:
        _, baseline = requested_days(defs, instance)                # automation's first tick: before the run
        run = defs.resolve_job_def("daily_retraining").execute_in_process(
            run_config=run_config(SMALL, SOURCE, evaluation=PROMOTE_BOTH), instance=instance,
            tags={**run_tags(SMALL.model_name, SMALL.gpu_pool), **range_tags(D1, D2)}, raise_on_error=False)
        assert run.success, [e.message for e in run.all_events if e.is_failure]
        first, second = (v for v in registry.versions())
        assert registry.champion_version() == second and registry.past_champions() == [first]

        requested, cursor = requested_days(defs, instance, baseline)  # the days were just scored
        assert requested == {D1.isoformat(), D2.isoformat()}
        healthy = materialize(defs, instance, REALIZED, D2, RESOURCES, TINY_REALIZED)
        assert healthy.success
        check = check_evaluation(healthy)
        assert check.passed and check.metadata["model_version"].value == second
        # the labels are the ones evaluation saw: realized equals predicted (the join is row for row)
        assert check.metadata["realized_auc"].value == pytest.approx(check.metadata["predicted_auc"].value, abs=1e-3)
        assert registry.champion_version() == second
        requested, cursor = requested_days(defs, instance, cursor)  # the next tick: nothing new landed
        assert requested == set()

        flip_labels(ads_home, D2)
        assert materialize(defs, instance, IMPRESSIONS, D2, RESOURCES).success    # the labels landed
        requested, _ = requested_days(defs, instance, cursor)
        assert requested == {D2.isoformat()}
        degraded = materialize(defs, instance, REALIZED, D2, RESOURCES, {**TINY_REALIZED, "rescore": True})
        assert not degraded.success                                 # a blocking check failed
        check = check_evaluation(degraded)
        # a tiny model may rank below chance (0.48 measured): flipped clicks then show in logloss, not AUC
        assert not check.passed and "; regression: " in check.description
        m = {k: v.value for k, v in check.metadata.items()}
        assert m["realized_auc"] < m["predicted_auc"] - 0.02 or m["realized_logloss"] > m["predicted_logloss"] + 0.02

        assert registry.champion_version() == first
        event = registry.history()[-1]
        assert (event["action"], event["from_version"], event["by"]) == \
            ("rollback", second, "check:realized_not_worse_than_evaluation")
        assert f"{D2}: {second} realized auc" in event["reason"] and "(evaluation " in event["reason"]
        champion = instance.fetch_materializations(dg.AssetKey("model_champion"), limit=1).records[0]
        meta = champion.asset_materialization.metadata
        assert (meta["action"].value, meta["model_version"].value) == ("rollback", first)

        requests, _ = rescore_requests(defs, instance)
        assert [(r.partition_key, r.run_config["resources"]["event_source"]) for r in requests] == \
            [(D2.isoformat(), RESOURCES["event_source"])]
