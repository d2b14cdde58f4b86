"""The code location loads, with the job, schedule and partitions users rely on."""

from __future__ import annotations

import subprocess
import sys

from ads_ranking_pipelines.definitions import build_definitions


def test_definitions_load(environ):
    defs = build_definitions(environ)
    job = defs.resolve_job_def("daily_retraining")
    assert set(job.graph.node_names()) == {"impressions", "trained_model", "model_evaluation", "batch_scores"}
    schedule = defs.resolve_schedule_def("daily_retraining_schedule")
    assert schedule.cron_schedule == "0 3 * * *"
    assert job.partitions_def.get_partition_keys()[0] == "2025-01-01"
    checks = {k.name for k in defs.resolve_asset_graph().asset_check_keys}
    assert checks == {"not_worse_than_xgboost_baseline", "not_worse_than_champion", "calibrated"}


def test_dagster_cli_validates_the_workspace(environ, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dagster", "definitions", "validate", "-w", "workspace.yaml"],
                          capture_output=True, text=True, timeout=180, env=environ)
    assert proc.returncode == 0, proc.stdout + proc.stderr
