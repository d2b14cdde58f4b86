"""After a day is trained its actual time goes beside the pre-flight estimate: in the day's
metadata and in the history the next estimate is made from."""

from __future__ import annotations

import dataclasses
import datetime as dt

import dagster as dg

from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.ranges import DAY_RESULT
from ads_ranking_pipelines.defs import train_step
from ads_ranking_pipelines.defs.backfill_preview import day_estimates, range_preview, versus
from ads_ranking_pipelines.defs.range_jobs import DayMetadata, DayResults
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines.storage.train_history import read_history, record_day
from ads_ranking_pipelines_tests.defs.test_train_step import RUN, Context

D = [dt.date(2026, 3, 10), dt.date(2026, 3, 11)]
PARAMS = TrainingParams(model_name="m", dataset_window_days=2, num_workers=1)
SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=500))


def test_a_trained_day_records_its_actual_beside_the_estimate_and_the_next_estimate_uses_it(tmp_path):
    layout = StorageLayout(str(tmp_path))
    record_day(layout, "m", {"model_version": "20260301-00000000", "day": "2026-03-01", "gpu_pool": "local",
                             "num_workers": 1, "gpus_per_worker": 0, "rows": 1000, "wall_seconds": 50.0,
                             "gpu_hours": 0.0, "worker_hours": 50 / 3600, "estimate": None})
    pool = load_catalog().get("local")
    preview = range_preview(PARAMS, pool, layout, SOURCE, D)
    assert preview.estimate.basis_days == 1 and preview.estimate.wall_seconds() == 100.0
    registry = ModelRegistry(layout, "m")
    plan = dataclasses.replace(train_step.plan(registry, PARAMS, SOURCE, D, RUN, warm=True, cluster={}),
                               estimates=day_estimates(preview))
    v1 = plan.spec.days[0].model_version
    fs.write_json(fs.join(registry.version_uri(v1), "manifest.json"), {"model_version": v1, "files": {}})
    results = DayResults()
    results.add({"kind": DAY_RESULT, "values": {"day": D[0].isoformat(), "rows": 1000, "day_seconds": 40.0}})
    context = Context()
    train_step._keep_finished(context, registry, plan, results, DayMetadata(context), dg.Failure("x"))
    (event,) = context.events
    assert event.metadata["estimated_wall_seconds"].value == 50.0
    assert event.metadata["estimate_error_pct"].value == -20.0
    recorded = [r for r in read_history(layout, "m") if r["model_version"] == v1]
    assert recorded and recorded[0]["wall_seconds"] == 40.0 and recorded[0]["estimate"]["wall_seconds"] == 50.0
    # the next estimate rests on both days: median of 0.05 and 0.04 s/row
    assert range_preview(PARAMS, pool, layout, SOURCE, D).estimate.basis_days == 2
    assert range_preview(PARAMS, pool, layout, SOURCE, D[:1]).estimate.wall_seconds() == 45.0


def test_a_day_trained_without_history_says_it_had_no_estimate():
    assert versus(None, 12.0) == {"estimate_note": "none: no recorded day of the model on the pool before this run"}
    assert versus({"wall_seconds": 10.0, "gpu_hours": 0.0}, 12.0)["estimate_error_pct"] == 20.0
