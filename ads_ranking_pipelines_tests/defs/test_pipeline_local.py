"""The whole daily pipeline on a real local Ray cluster, on tiny data."""

from __future__ import annotations

import datetime as dt
import json

import dagster as dg
import pytest

from ads_ranking_pipelines.cli.pipeline import run_config
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.definitions import build_definitions
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.conftest import wait_no_processes

DAY = dt.date(2026, 3, 10)

TINY = TrainingParams(dataset_window_days=2, num_workers=2, epochs=2, batch_size=256, hash_buckets=2000,
                      embedding_dim=8, dense_arch=(16, 8), over_arch=(16,), learning_rate=0.05)
TINY_SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=4000, num_users=2000, num_ads=500))


def _messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [r.event_log_entry.user_message or "" for r in instance.get_records_for_run(run_id, limit=100000).records]


@pytest.mark.ray
@pytest.mark.integration
def test_daily_pipeline_end_to_end(ads_home, environ):
    defs = build_definitions(environ)
    job = defs.resolve_job_def("daily_retraining")
    with dg.DagsterInstance.get() as instance:
        # gates are blocking: tolerances for tiny data (the gates have their own tests)
        loose = {"max_auc_gap_vs_baseline": 0.5, "min_calibration": 0.2, "max_calibration": 5.0}
        result = job.execute_in_process(run_config=run_config(TINY, TINY_SOURCE, evaluation=loose),
                                        partition_key=DAY.isoformat(),
                                        instance=instance, raise_on_error=False)
        assert result.success, [e.message for e in result.all_events if e.is_failure]
        messages = _messages(instance, result.run_id)
        records = instance.get_records_for_run(result.run_id, limit=100000).records

    mats = {m.asset_key.to_user_string(): {k: v.value for k, v in m.metadata.items()}
            for node in ("trained_model", "model_evaluation", "batch_scores")
            for m in result.asset_materializations_for_node(node)}

    # a complete model version with its manifest, data window and metrics
    version = mats["trained_model"]["model_version"]
    registry = ModelRegistry(StorageLayout(str(ads_home)), TINY.model_name)
    assert registry.is_complete(version)
    manifest = fs.read_json(fs.join(registry.version_uri(version), "manifest.json"))
    assert manifest["train_days"] == ["2026-03-08", "2026-03-09"]
    assert mats["trained_model"]["epochs"] == 2 and mats["trained_model"]["rows"] == 8000

    # metrics in plausible ranges; the held-out day is the partition day
    ev = mats["model_evaluation"]
    assert ev["eval_day"] == DAY.isoformat()
    assert 0.5 < ev["auc"] <= 1.0 and 0.5 < ev["baseline_auc"] <= 1.0
    assert ev["auc"] <= ev["oracle_auc"] + 0.03
    assert 0.0 < ev["logloss"] < 1.0 and 0.0 < ev["ctr"] < 0.5
    checks = {e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data.passed
              for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    assert set(checks) == {"not_worse_than_xgboost_baseline", "not_worse_than_champion", "calibrated"}
    assert all(checks.values()) and ev["promoted"] is True          # day 1: no champion, loose gates

    # batch scores: versioned parquet with one score per impression of the day
    scores = mats["batch_scores"]
    assert scores["rows"] == 4000 and scores["rows_per_s"] > 0
    assert f"version={version}" in scores["scores_uri"]
    import pyarrow.dataset as ds

    table = ds.dataset(scores["scores_uri"], format="parquet").to_table()
    assert table.num_rows == 4000 and set(table.column_names) >= {"impression_id", "score", "model_version"}

    # lines printed inside the Ray job reach the Dagster event log: a Ray Train worker's
    # print and a Pipes log from the driver; metrics arrive as structured observations
    assert any("[train] epoch 2/2" in m for m in messages), "a worker's print is missing from the event log"
    assert any(m.startswith(f"model version {version} written") for m in messages)
    observed = [r.event_log_entry.dagster_event.event_specific_data.asset_observation
                for r in records if r.event_log_entry.dagster_event
                and r.event_log_entry.dagster_event.event_type_value == "ASSET_OBSERVATION"]
    epochs = [o for o in observed if o.metadata["kind"].value == "epoch"]
    assert [o.metadata["epoch"].value for o in epochs] == [1, 2]
    assert all(o.metadata["samples_per_s"].value > 0 for o in epochs)

    # no Ray process is left running and the cluster state file is gone
    assert wait_no_processes(str(ads_home)) == []
    assert not list((ads_home / "clusters").glob("*.json"))
