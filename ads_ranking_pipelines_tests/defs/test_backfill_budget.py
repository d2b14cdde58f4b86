"""A backfill run launched through Dagster (range tags, as the UI, ``dagster job launch`` and the
backfill daemon launch it) over its budget is refused in ``trained_model``'s pre-flight, before
any cluster, with the estimate on the step and the run; under budget the estimate is the step's
metadata. The history is written directly (what earlier runs recorded): no Ray is started. On
KubeRay (the fake API server) a refused range creates no RayCluster nor RayJob."""

from __future__ import annotations

import datetime as dt
import sys

import dagster as dg
import yaml

from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS
from ads_ranking_pipelines.cli.pipeline import run_config
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.definitions import build_definitions, range_tags, run_tags
from ads_ranking_pipelines.defs.assets import batch_scores, impressions, model_evaluation, trained_model
from ads_ranking_pipelines.defs.backfill_preview import ESTIMATE_TAG
from ads_ranking_pipelines.defs.jobs import daily_retraining
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.train_history import record_day
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import write_kubeconfig

D1, D2 = dt.date(2026, 3, 10), dt.date(2026, 3, 12)
PARAMS = TrainingParams(dataset_window_days=2, num_workers=1, epochs=1, hash_buckets=100)
SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=500, num_users=50, num_ads=20))


def _setup(ads_home, tmp_path, environ, **pool):
    catalog = tmp_path / "pools.yaml"
    catalog.write_text(yaml.safe_dump({"pools": [{"name": "local", "local": True, "cpus_per_node": 8,
                                                  "memory_per_node": "32Gi", "max_workers": 4, **pool}]}))
    for i, seconds in enumerate((60.0, 90.0)):
        record_day(StorageLayout(str(ads_home)), PARAMS.model_name, {
            "model_version": f"2026030{i + 1}-00000000", "day": f"2026-03-0{i + 1}", "gpu_pool": "local",
            "num_workers": 1, "gpus_per_worker": 0, "rows": 1000, "wall_seconds": seconds, "gpu_hours": 0.0,
            "worker_hours": seconds / 3600, "estimate": None})
    return {**environ, "ADS_RANKING_POOL_CATALOG": str(catalog)}


def _launch(environ, config):
    job = build_definitions(environ).resolve_job_def("daily_retraining")
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(run_config=config, instance=instance, raise_on_error=False,
                                        tags={**run_tags(PARAMS.model_name, "local"), **range_tags(D1, D2)})
        run = instance.get_run_by_id(result.run_id)
        messages = [r.event_log_entry.user_message or ""
                    for r in instance.get_records_for_run(result.run_id, limit=10000).records]
    return result, run, messages


def test_an_over_budget_backfill_run_is_refused_before_any_cluster_with_the_estimate_on_step_and_run(
        ads_home, tmp_path, environ):
    env = _setup(ads_home, tmp_path, environ, cost_per_worker_hour=1.0, budget_cost=0.05)
    result, run, messages = _launch(env, run_config(PARAMS, SOURCE))
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure and e.step_key == "trained_model"]
    data = failure.step_failure_data.user_failure_data
    # 3 days x 1000 window rows x 0.075 s/row (median of 0.06, 0.09) = 225 s = 0.0625 worker-hours at 1.0
    assert data.description.startswith("refused before any cluster starts: training quest_ranker on "
                                       "2026-03-10..2026-03-12 (3 day(s), pool local) is over its budget: "
                                       "estimated cost 0.0625 (from 2 past day(s), spread 0.05..0.075) > budget_cost 0.05 "
                                       "(pool local's budget in the pool catalog)")
    estimate = data.metadata["estimate"].value
    assert estimate["basis_days"] == 2 and estimate["wall_seconds"] == 225.0 and estimate["days"] == 3
    assert data.metadata["estimated_wall_seconds"].value == 225.0
    assert run.tags[ESTIMATE_TAG] == "3 day(s): ~0:03:45, 0 GPU-h, cost 0.0625 (from 2 past day(s))"
    assert any(m.startswith("backfill preview: quest_ranker on pool local, 2026-03-10..2026-03-12") for m in messages)
    assert not any("provisioning Ray cluster" in m for m in messages)
    assert not (ads_home / "models" / PARAMS.model_name / "versions").exists()


def test_the_runs_budget_override_in_run_config_refuses_a_range_the_pool_allows(ads_home, tmp_path, environ):
    env = _setup(ads_home, tmp_path, environ, cost_per_worker_hour=1.0, budget_cost=100)
    config = run_config(PARAMS, SOURCE)
    config["ops"]["trained_model"]["config"]["budget_cost"] = 0.01
    result, _, messages = _launch(env, config)
    (failure,) = [e for e in result.all_events if e.is_step_failure and e.step_key == "trained_model"]
    assert "> budget_cost 0.01 (the run's budget_cost)" in failure.step_failure_data.user_failure_data.description
    assert not any("provisioning Ray cluster" in m for m in messages)


def test_on_kuberay_an_over_budget_gpu_range_is_refused_before_any_raycluster_or_rayjob(
        fake_apiserver, ads_home, tmp_path):
    catalog = load_catalog().model_dump(mode="json", exclude_none=True)
    for pool in catalog["pools"]:
        if pool["name"] == "h100-80gb":
            pool.update(cost_per_gpu_hour=11.0, budget_gpu_hours=2.0)
    (tmp_path / "pools.yaml").write_text(yaml.safe_dump(catalog))
    params = PARAMS.model_copy(update={"gpu_pool": "h100-80gb", "gpus_per_worker": 8})
    record_day(StorageLayout(str(ads_home)), params.model_name, {     # 1 h100 worker: 900 s for 1000 rows
        "model_version": "20260301-00000000", "day": "2026-03-01", "gpu_pool": "h100-80gb", "num_workers": 1,
        "gpus_per_worker": 8, "rows": 1000, "wall_seconds": 900.0, "gpu_hours": 2.0, "worker_hours": 0.25,
        "estimate": None})
    ray = KubeRayResource(
        kube_config_file=write_kubeconfig(tmp_path / "kubeconfig", fake_apiserver, context="fake"),
        kube_context="fake", namespace="ads-ranking", storage_home=str(ads_home),
        shared_volume_claim="ads-ranking-data", pool_catalog=str(tmp_path / "pools.yaml"),
        image="registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0", job_python=sys.executable)
    defs = dg.Definitions(
        assets=[impressions, trained_model, model_evaluation, batch_scores], jobs=[daily_retraining],
        resources={"storage": StorageResource(home=str(ads_home)), "event_source": EventSourceResource(),
                   "ray_cluster": ray})
    with dg.DagsterInstance.get() as instance:
        result = defs.resolve_job_def("daily_retraining").execute_in_process(
            run_config=run_config(params, SOURCE), instance=instance, raise_on_error=False,
            tags={**run_tags(params.model_name, "h100-80gb"), **range_tags(D1, D2)})
    (failure,) = [e for e in result.all_events if e.is_step_failure and e.step_key == "trained_model"]
    text = failure.step_failure_data.user_failure_data.description
    # 3 days x 900 s x 8 GPUs = 6 GPU-hours > 2
    assert "estimated 6 GPU-hours (from 1 past day(s), spread 6..6) > budget_gpu_hours 2 " \
           "(pool h100-80gb's budget in the pool catalog)" in text, text
    assert not [k for k in fake_apiserver.created if k[0] in (RAYCLUSTERS, RAYJOBS)]
