"""Runs that fail or are cancelled after the cluster started leave nothing behind."""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.cli.pipeline import run_config
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.definitions import build_definitions
from ads_ranking_pipelines.events.importers import shared_datasets_dir
from ads_ranking_pipelines_tests.processes import titles, wait_no_processes
from ads_ranking_pipelines_tests.defs.gates import TINY_MODEL_GATES
from ads_ranking_pipelines_tests.defs.existing_cluster import existing_local_cluster

DAY = dt.date(2026, 3, 10)
SMALL = TrainingParams(dataset_window_days=2, num_workers=1, epochs=1, batch_size=256, hash_buckets=1000,
                       embedding_dim=8, dense_arch=(16, 8), over_arch=(16,))
SMALL_SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=2000, num_users=500, num_ads=100))


def _no_model_versions(home: Path) -> bool:
    return not any(home.glob("models/*/versions/*"))


@pytest.mark.ray
def test_failing_ray_job_tears_the_cluster_down(ads_home, environ):
    """The train job's entrypoint cannot start: the step fails with Ray's reason, nothing is left."""
    defs = build_definitions(environ)
    job = defs.resolve_job_def("daily_retraining")
    cfg = run_config(SMALL, SMALL_SOURCE)
    cfg["resources"]["ray_cluster"] = {"config": {"state_dir": str(ads_home / "clusters"),
                                                  "job_python": "/nonexistent/python"}}
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(run_config=cfg, partition_key=DAY.isoformat(), instance=instance,
                                        raise_on_error=False)
        messages = [r.event_log_entry.user_message or ""
                    for r in instance.get_records_for_run(result.run_id, limit=10000).records]
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert failure.step_key == "trained_model"
    assert "ended FAILED" in failure.step_failure_data.user_failure_data.description
    assert any("provisioning Ray cluster" in m for m in messages)
    assert wait_no_processes(str(ads_home)) == []
    assert not list((ads_home / "clusters").glob("*.json"))
    assert _no_model_versions(ads_home)


@pytest.mark.ray
def test_sigterm_mid_training_stops_job_and_cluster(ads_home, tmp_path):
    """A cancelled run (SIGTERM) stops the Ray job, tears the cluster down, keeps no half model."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run", "--date", DAY.isoformat(),
         "--window-days", "2", "--workers", "1", "--epochs", "50", "--rows-per-day", "2000"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    ray_results = ads_home / "ray_results"
    deadline = time.monotonic() + 300
    try:
        # wait until training has written a checkpoint: the job is well under way
        while not any(ray_results.glob("*/checkpoint_2*")):
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "training did not start"
            time.sleep(0.5)
        assert list((ads_home / "clusters").glob("*.json")), "no running cluster recorded"
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert "stopping Ray job" in out
    assert wait_no_processes(str(ads_home)) == []
    assert not list((ads_home / "clusters").glob("*.json"))
    assert _no_model_versions(ads_home)


@pytest.fixture(scope="module")
def sources_cluster(tmp_path_factory):
    """One existing cluster for the source tests' runs (the run's own cluster, made and deleted
    around it, is what the other tests here check): two workers, the most a run here asks for."""
    with existing_local_cluster("sources", 2, tmp_path_factory.mktemp("sources") / "clusters") as cluster:
        yield cluster


# Ray's own detached actors, made by a run's first Ray Data / Ray Train use and kept by the cluster
# for its later jobs (they carry that job's environment, hence the run's home)
CLUSTER_WIDE_ACTORS = {"ray::_StatsActor", "ray::_AutoscalingCoordinatorActor"}


def _left_on_the_cluster(home: Path) -> set[str]:
    """What still names the run's home once its run is over: on a cluster the run did not make,
    only Ray's cluster-wide actors may stay (the cluster itself is the fixture's to stop)."""
    return {title.split(" ")[0].split(".")[0] for title in titles(wait_no_processes(str(home), timeout_s=15))}


def _run(environ, params, source, cluster: LocalRayCluster):
    job = build_definitions(environ).resolve_job_def("daily_retraining")
    # gates are blocking: tolerances for tiny data, these tests are about the source
    cfg = run_config(params, source, evaluation=TINY_MODEL_GATES)
    cfg["resources"]["ray_cluster"] = {"config": {"state_dir": str(cluster.state_dir),
                                                  "existing_cluster": cluster.name}}
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(run_config=cfg, partition_key=DAY.isoformat(),
                                        instance=instance, raise_on_error=False)
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    return {k: v.value for m in result.asset_materializations_for_node("model_evaluation")
            for k, v in m.metadata.items()}


@pytest.mark.ray
@pytest.mark.integration
@pytest.mark.needs_datasets
def test_criteo_tsv_source_is_imported_on_first_use_and_trains(ads_home, environ, sources_cluster):
    """The public Criteo sample named as a criteo_tsv source: imported, trained, evaluated."""
    datasets = shared_datasets_dir()
    source = SourceConfig(kind="criteo_tsv", uri=str(datasets / "criteo-sample" / "train_head_10k.txt"),
                          start_date=DAY - dt.timedelta(days=3), rows_per_day=2500)
    params = SMALL.model_copy(update={"dataset_window_days": 3, "num_workers": 2, "epochs": 3})
    ev = _run(environ, params, source, sources_cluster)
    assert ev["rows"] == 2500 and 0.55 < ev["auc"] < 1.0 and 0.55 < ev["baseline_auc"] < 1.0
    assert ev["auc_ci_low"] < ev["auc"] < ev["auc_ci_high"] and 0.55 < ev["lr_auc"] < 1.0
    assert "oracle_auc" not in ev and "specified_auc" not in ev
    assert len(list(ads_home.glob("events/criteo_tsv-*/event_date=*/_SUCCESS"))) == 4
    left = _left_on_the_cluster(ads_home)
    assert left <= CLUSTER_WIDE_ACTORS, left


@pytest.mark.ray
@pytest.mark.integration
def test_parquet_without_markers_string_categories_and_nulls_runs_with_completeness_none(
        ads_home, environ, tmp_path, sources_cluster):
    """Another writer's days: no _SUCCESS, string categoricals, nullable dense, new ids on day D."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(5)
    root = tmp_path / "other_writer"
    for i in range(3):
        day = DAY - dt.timedelta(days=2 - i)
        n = 1500
        cat = rng.integers(0, 40 if i < 2 else 80, n)            # day D also has ids 40..79
        count = rng.poisson(3.0, n).astype("float")
        count[rng.random(n) < 0.3] = np.nan                         # nullable dense
        logit = -1.0 + np.where(cat % 2 == 0, 1.0, -1.0) + 0.2 * np.nan_to_num(count)
        df = pd.DataFrame({"clk": (rng.random(n) < 1 / (1 + np.exp(-logit))).astype("int64"),
                           "cnt": pd.array(count, dtype="Float64"),
                           "site": [f"site-{c}" for c in cat], "dev": rng.choice(["a", "b", None], n)})
        (root / f"event_date={day}").mkdir(parents=True)
        df.to_parquet(root / f"event_date={day}" / "part-00000.parquet", index=False)
    source = SourceConfig(kind="parquet", uri=str(root), completeness="none", label_column="clk",
                          dense_columns=("cnt",), sparse_columns=("site", "dev"))
    params = SMALL.model_copy(update={"dataset_window_days": 2, "num_workers": 1, "epochs": 3})
    ev = _run(environ, params, source, sources_cluster)
    assert ev["rows"] == 1500 and 0.55 < ev["auc"] < 1.0
    assert not list(root.glob("*/_SUCCESS"))                        # nothing written into their folders
    # the default still wants markers: without them the days are missing and impressions fails
    with pytest.raises(AssertionError, match="impressions"):
        _run(environ, params, source.model_copy(update={"completeness": "success_marker"}), sources_cluster)
