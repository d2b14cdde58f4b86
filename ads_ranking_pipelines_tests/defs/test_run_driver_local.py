"""ONE Ray job driver per run (issue 24), on the local backend with real Ray: a daily run of
the three Ray assets submits exactly one Ray job (counted through the cluster's own job API,
on an existing local cluster, where the run's jobs stay listed), leaves that borrowed cluster as
it was, and each step's logs and live metrics still land on that step; a failing evaluation
fails that step with its error while training's materialization stands."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sys

import dagster as dg
import pytest
import requests

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.ray_job_api import RayJobApi
from ads_ranking_pipelines.cli.pipeline import run_config
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.assets import batch_scores, impressions, model_evaluation, trained_model
from ads_ranking_pipelines.defs.jobs import range_tags
from ads_ranking_pipelines.defs.progress import DASHBOARD_TAG, PROGRESS_TAG
from ads_ranking_pipelines.defs.local_ray_resource import LocalRayResource
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines.storage.run_progress import read_progress
from ads_ranking_pipelines_tests.defs.gates import TINY_MODEL_GATES
from ads_ranking_pipelines_tests.defs.existing_cluster import existing_local_cluster

DAY = dt.date(2026, 3, 10)
TINY = TrainingParams(dataset_window_days=2, num_workers=1, epochs=1, batch_size=256, hash_buckets=1000,
                      embedding_dim=8, dense_arch=(16, 8), over_arch=(16,))
SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=2000, num_users=500, num_ads=100))
LOOSE = {**TINY_MODEL_GATES, "min_calibration": 0.01, "max_calibration": 100.0}
RAY_ASSETS = ("trained_model", "model_evaluation", "batch_scores")


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory):
    """One existing cluster for this module's runs (each test counts only the jobs its run added)."""
    with existing_local_cluster("shared", 1, tmp_path_factory.mktemp("existing") / "clusters") as cluster:
        yield cluster


def _run(ads_home, cluster: LocalRayCluster, assets: list, job_name: str = "three_ray_steps"):
    home = str(ads_home)
    ray = LocalRayResource(state_dir=str(cluster.state_dir), existing_cluster="shared", job_python=sys.executable)
    job = dg.define_asset_job(job_name, selection=[a.key for a in assets if isinstance(a, dg.AssetsDefinition)])
    defs = dg.Definitions(assets=assets, jobs=[job], resources={
        "storage": StorageResource(home=home), "event_source": EventSourceResource(), "ray_cluster": ray})
    with dg.DagsterInstance.get() as instance:
        result = defs.resolve_job_def(job_name).execute_in_process(
            run_config=run_config(TINY, SOURCE, evaluation=LOOSE), tags=range_tags(DAY, DAY),
            instance=instance, raise_on_error=False)
        logs = instance.all_logs(result.run_id)
    return result, logs


def _nodes(cluster: LocalRayCluster) -> list[tuple[str, str]]:
    r = requests.get(f"{cluster.state.dashboard_url}/api/v0/nodes", params={"detail": "true"},
                     headers=cluster.auth_headers(), timeout=10)
    r.raise_for_status()
    return sorted((n["node_id"], n["state"]) for n in r.json()["data"]["result"]["result"])


def _jobs(cluster: LocalRayCluster, before: list[dict] = ()) -> list[dict]:
    """The cluster's Ray jobs, but those already listed in ``before``."""
    seen = {j["job_id"] for j in before}
    return [j for j in RayJobApi(cluster.state.dashboard_url, headers=cluster.auth_headers()).list_jobs()
            if j["job_id"] not in seen]


@pytest.mark.ray
@pytest.mark.integration
def test_a_daily_run_submits_one_ray_job_and_each_step_keeps_its_logs_and_metrics(shared_cluster, ads_home):
    nodes, before = _nodes(shared_cluster), _jobs(shared_cluster)
    result, logs = _run(ads_home, shared_cluster, [impressions, trained_model, model_evaluation, batch_scores])
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    # the borrowed cluster is left as it was: still running, the same nodes, no other cluster made
    assert shared_cluster.alive() and _nodes(shared_cluster) == nodes
    assert [c.name for c in LocalRayCluster.list(shared_cluster.state_dir)] == ["shared"]
    assert not LocalRayCluster.list(ads_home / "clusters")
    jobs = _jobs(shared_cluster, before)
    assert len(jobs) == 1, jobs                                # one submission for the three Ray steps
    assert jobs[0]["job_id"].startswith(f"run-{result.run_id[:8]}-") and jobs[0]["status"] == "SUCCEEDED"
    by_step = {s: [e.user_message for e in logs if e.step_key == s] for s in RAY_ASSETS}
    assert any("day 1/1: 2026-03-10" in m for m in by_step["trained_model"]), by_step["trained_model"]
    assert any("xgboost baseline: auc=" in m for m in by_step["model_evaluation"])
    assert any("gates passed" in m for m in by_step["model_evaluation"])
    for other in ("trained_model", "batch_scores"):      # the other steps' driver lines are not theirs
        assert not any("xgboost baseline: auc=" in m for m in by_step[other])
    assert not any("day 1/1: 2026-03-10" in m for m in by_step["model_evaluation"] + by_step["batch_scores"])
    observed = {(e.step_key, e.dagster_event.event_specific_data.asset_observation.metadata["kind"].value)
                for e in logs if e.dagster_event and e.dagster_event.event_type_value == "ASSET_OBSERVATION"}
    kinds = {step: {k for s, k in observed if s == step} for step in RAY_ASSETS}
    assert "epoch" in kinds["trained_model"] and "evaluation" not in kinds["trained_model"], observed
    assert "evaluation" in kinds["model_evaluation"] and "epoch" not in kinds["model_evaluation"], observed
    assert kinds["batch_scores"] and not kinds["batch_scores"] & {"epoch", "evaluation"}, observed
    assert {m.asset_key.to_user_string() for m in result.get_asset_materialization_events()} >= set(RAY_ASSETS)
    _progress_and_links(result, by_step, shared_cluster, jobs[0]["job_id"], ads_home)


def _progress_and_links(result, by_step, cluster: LocalRayCluster, job_id: str, ads_home) -> None:
    """Progress you can see (issue 25): each step's ``[progress]`` lines, the run's tags, links to
    the Ray job on every day's materialization, and the run's record that X-Ray reads."""
    told = {s: [m for m in by_step[s] if m.startswith(f"[progress] {s}: ")] for s in RAY_ASSETS}
    assert all(told.values()) and all("% done" in m and "ETA" in m for ms in told.values() for m in ms), told
    assert told["trained_model"][0].startswith("[progress] trained_model: day 1/1 (2026-03-10), epoch 1/1: "), told
    assert all(ms[-1].startswith(f"[progress] {s}: 100.0% done") for s, ms in told.items()), told
    dashboard = cluster.state.dashboard_url
    with dg.DagsterInstance.get() as instance:
        tags = instance.get_run_by_id(result.run_id).tags
    assert tags[PROGRESS_TAG] == "batch_scores done" and tags[DASHBOARD_TAG] == dashboard, tags
    for event in result.get_asset_materialization_events():
        meta = event.event_specific_data.materialization.metadata
        if event.asset_key.to_user_string() in RAY_ASSETS:
            assert meta["ray_dashboard"] == dg.MetadataValue.url(dashboard), meta
            assert meta["ray_job_logs"] == dg.MetadataValue.url(f"{dashboard}/#/jobs/{job_id}"), meta
            assert result.run_id in meta["ray_logs_after_teardown"].value
    (record,) = read_progress(StorageLayout(str(ads_home)))
    assert record["run_id"] == result.run_id and record["links"]["ray_job_id"] == job_id
    assert {s: record["steps"][s]["percent"] for s in RAY_ASSETS} == {s: 100.0 for s in RAY_ASSETS}, record


@dg.asset(deps=[trained_model], op_tags={"dagster/priority": "25"})
def spoiled_weights(storage: StorageResource) -> None:
    """Between training and evaluation (by priority): the new version's weights replaced by bytes
    that are no model, its manifest's checksum made to match, so only loading it fails."""
    registry = ModelRegistry(StorageLayout(storage.home), TINY.model_name)
    uri = registry.version_uri(registry.versions()[-1])
    junk = b"not a torch checkpoint"
    with open(f"{uri}/weights.pt", "wb") as f:
        f.write(junk)
    manifest = json.loads(open(f"{uri}/manifest.json").read())
    manifest["files"]["weights.pt"]["sha256"] = hashlib.sha256(junk).hexdigest()
    open(f"{uri}/manifest.json", "w").write(json.dumps(manifest))


@pytest.mark.ray
@pytest.mark.integration
def test_a_failing_evaluation_fails_its_step_only_and_training_stands(shared_cluster, ads_home):
    before = _jobs(shared_cluster)
    result, logs = _run(ads_home, shared_cluster, [impressions, trained_model, spoiled_weights, model_evaluation],
                        "spoiled")
    assert not result.success
    failures = [e for e in result.all_events if e.is_step_failure]
    assert [f.step_key for f in failures] == ["model_evaluation"]
    text = failures[0].step_failure_data.user_failure_data.description
    assert "evaluate step ended FAILED" in text and "UnpicklingError" in text, text
    assert [m.asset_key.to_user_string() for m in result.get_asset_materialization_events()
            if m.asset_key.to_user_string() == "trained_model"] == ["trained_model"]
    assert any("job failed after 0 finished day(s)" in (e.user_message or "") for e in logs
               if e.step_key == "model_evaluation")
    jobs = _jobs(shared_cluster, before)
    assert len(jobs) == 1 and jobs[0]["status"] == "SUCCEEDED", jobs   # the driver outlived the failed step
