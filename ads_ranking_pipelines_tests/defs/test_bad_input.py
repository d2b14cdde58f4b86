"""Bad input fails the run with a message naming the problem, before any cluster starts."""

from __future__ import annotations

import datetime as dt

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ads_ranking_pipelines.cli.pipeline import run_config
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.definitions import build_definitions
from ads_ranking_pipelines.events.layout import write_day
from ads_ranking_pipelines.events.synthetic import generate_table

DAY = dt.date(2026, 3, 10)
PARAMS = TrainingParams(dataset_window_days=2, num_workers=1, epochs=1, hash_buckets=100)


def _parquet_source(root, days, mutate=None) -> SourceConfig:
    spec = SyntheticSpec(rows_per_day=300, num_users=50, num_ads=20)
    for day in days:
        table = generate_table(day, spec)
        write_day(mutate(table) if mutate else table, str(root), day)
    base = SourceConfig()
    return SourceConfig(kind="parquet", uri=str(root), label_column="clicked",
                        dense_columns=base.dense_columns, sparse_columns=base.sparse_columns)


def _run(environ, run_config_dict):
    job = build_definitions(environ).resolve_job_def("daily_retraining")
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(run_config=run_config_dict, partition_key=DAY.isoformat(),
                                        instance=instance, raise_on_error=False)
        messages = [r.event_log_entry.user_message or ""
                    for r in instance.get_records_for_run(result.run_id, limit=10000).records]
    assert not result.success
    # batch_scores does not depend on training (it scores with the champion); with no champion
    # yet it fails too, on its own, saying so
    failures = [e for e in result.all_events if e.is_step_failure and e.step_key != "batch_scores"]
    assert len(failures) == 1
    data = failures[0].step_failure_data
    text = (data.user_failure_data.description if data.user_failure_data else "") or data.error.message
    return text, messages


def _assert_nothing_started(ads_home, messages):
    assert not any("provisioning Ray cluster" in m for m in messages)
    assert not list((ads_home / "clusters").glob("*.json")) if (ads_home / "clusters").exists() else True
    assert not (ads_home / "models").exists() or not any((ads_home / "models").rglob("manifest.json"))


def test_unknown_gpu_pool_names_valid_pools(ads_home, environ):
    cfg = run_config(PARAMS.model_copy(update={"gpu_pool": "tpu-v9"}), SourceConfig())
    text, messages = _run(environ, cfg)
    assert "gpu_pool='tpu-v9'" in text and "h100-80gb" in text and "local" in text
    _assert_nothing_started(ads_home, messages)


def test_gpu_pool_on_local_backend_is_refused(ads_home, environ):
    cfg = run_config(PARAMS.model_copy(update={"gpu_pool": "l4", "gpus_per_worker": 1}), SourceConfig())
    text, messages = _run(environ, cfg)
    assert "local backend has no GPUs" in text and "gpu_pool='l4'" in text
    _assert_nothing_started(ads_home, messages)


def test_zero_day_window_names_field_and_range(ads_home, environ):
    cfg = run_config(PARAMS, SourceConfig())
    cfg["ops"]["trained_model"]["config"]["dataset_window_days"] = 0
    text, messages = _run(environ, cfg)
    assert "dataset_window_days=0" in text and "[1, 90]" in text
    _assert_nothing_started(ads_home, messages)


def test_missing_partitions_in_window(ads_home, environ, tmp_path):
    # the partition day exists, the first day of the window does not
    source = _parquet_source(tmp_path / "events", [DAY - dt.timedelta(days=1), DAY])
    text, messages = _run(environ, run_config(PARAMS, source))
    assert "2026-03-08" in text and "missing" in text.lower()
    _assert_nothing_started(ads_home, messages)


def test_parquet_missing_declared_column(ads_home, environ, tmp_path):
    days = [DAY - dt.timedelta(days=2), DAY - dt.timedelta(days=1), DAY]
    source = _parquet_source(tmp_path / "events", days, mutate=lambda t: t.drop_columns(["dense_3"]))
    text, messages = _run(environ, run_config(PARAMS, source))
    assert "dense_3" in text
    _assert_nothing_started(ads_home, messages)


def test_all_one_class_labels(ads_home, environ, tmp_path):
    days = [DAY - dt.timedelta(days=2), DAY - dt.timedelta(days=1), DAY]

    def no_clicks(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index("clicked")
        return t.set_column(i, "clicked", pc.multiply(t.column("clicked"), 0))

    source = _parquet_source(tmp_path / "events", days, mutate=no_clicks)
    text, messages = _run(environ, run_config(PARAMS, source))
    assert "'clicked'" in text and "single class" in text
    _assert_nothing_started(ads_home, messages)


@pytest.mark.parametrize("args, needle", [
    (["--window-days", "0"], "dataset_window_days=0"),
    (["--workers", "0"], "num_workers=0"),
    (["--gpu-pool", ""], "gpu_pool=''"),
    (["--date", "2020-01-01"], "--date=2020-01-01"),
    (["--date", "yesterday"], "--date='yesterday'"),
])
@pytest.mark.slow
def test_cli_rejects_bad_input_with_exit_2(ads_home, args, needle):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run", *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert needle in proc.stderr


def _run_range(environ, run_config_dict, first: dt.date, last: dt.date, tags=None):
    from ads_ranking_pipelines.definitions import range_tags

    job = build_definitions(environ).resolve_job_def("daily_retraining")
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(run_config=run_config_dict, instance=instance, raise_on_error=False,
                                        tags={**range_tags(first, last), **(tags or {})})
        messages = [r.event_log_entry.user_message or ""
                    for r in instance.get_records_for_run(result.run_id, limit=10000).records]
    failures = [e for e in result.all_events if e.is_step_failure and e.step_key != "batch_scores"]
    assert not result.success and len(failures) == 1
    data = failures[0].step_failure_data
    return (data.user_failure_data.description if data.user_failure_data else "") or data.error.message, messages


def test_backfill_over_a_range_with_a_missing_day_names_it_before_any_cluster(ads_home, environ, tmp_path):
    window = [DAY - dt.timedelta(days=2), DAY - dt.timedelta(days=1)]
    later = [DAY + dt.timedelta(days=1), DAY + dt.timedelta(days=2)]
    source = _parquet_source(tmp_path / "events", window + [DAY] + later[1:])      # DAY+1 is missing
    text, messages = _run_range(environ, run_config(PARAMS, source), DAY, later[-1])
    assert "2026-03-11" in text and "missing" in text.lower()
    _assert_nothing_started(ads_home, messages)


def test_config_that_disagrees_with_the_run_tags_is_refused(ads_home, environ):
    cfg = run_config(PARAMS.model_copy(update={"gpu_pool": "cpu-standard"}), SourceConfig())
    job = build_definitions(environ).resolve_job_def("daily_retraining")     # default tags: pool 'local'
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(run_config=cfg, partition_key=DAY.isoformat(), instance=instance,
                                        raise_on_error=False)
        messages = [r.event_log_entry.user_message or ""
                    for r in instance.get_records_for_run(result.run_id, limit=10000).records]
    failure = next(e for e in result.all_events if e.is_step_failure)
    text = failure.step_failure_data.user_failure_data.description
    assert failure.step_key == "trained_model"
    assert "ads-ranking/gpu-pool='local' but the config says 'cpu-standard'" in text
    _assert_nothing_started(ads_home, messages)
