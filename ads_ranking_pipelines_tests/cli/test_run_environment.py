"""``pipeline run`` in-process leaves the process's environment as it found it: the run's
Dagster home (``DAGSTER_HOME``, else ``./.dagster_home``) is the run's, not written into
``os.environ`` for whatever runs next in the process."""

from __future__ import annotations

import datetime as dt
import os

import dagster as dg
import yaml

from ads_ranking_pipelines.cli.pipeline import run_pipeline
from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams


def test_an_in_process_run_does_not_write_dagster_home_into_the_environment(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.setenv("ADS_RANKING_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "events").mkdir()       # a source with no day: the run fails its first step, no cluster
    base = SourceConfig()
    source = SourceConfig.model_validate(yaml.safe_load(yaml.safe_dump({
        "kind": "parquet", "uri": str(tmp_path / "events"), "label_column": "clicked",
        "dense_columns": list(base.dense_columns), "sparse_columns": list(base.sparse_columns)})))
    before = dict(os.environ)
    summary = run_pipeline(dt.date(2026, 3, 10), TrainingParams(), source, dict(os.environ), verbose=False)
    assert "error" in summary and os.environ == before
    with dg.DagsterInstance.from_config(str(tmp_path / ".dagster_home")) as instance:
        assert [r.run_id for r in instance.get_runs()] == [summary["run_id"]]
