"""A run on an existing RayCluster (``KubeRayResource(existing_cluster=...)``) against the fake
API server: each step's RayJob uses ``clusterSelector`` (KubeRay makes no cluster for it), the
RayCluster is left as it was and the run's RayJobs are deleted (KubeRay v1.7's deletion rules
do not delete a ``clusterSelector`` RayJob). A run that does not fit the cluster - unknown name,
too few workers, another pool, another image - is refused before any RayJob."""

from __future__ import annotations

import datetime as dt
import sys

import dagster as dg
import pytest

from ads_ranking_pipelines.backends.base import JobSpec, JobState
from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS
from ads_ranking_pipelines.cli.pipeline import run_config
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.assets import batch_scores, impressions, model_evaluation, trained_model
from ads_ranking_pipelines.defs.jobs import daily_retraining
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.run_progress import read_progress
from ads_ranking_pipelines_tests.backends.kuberay_helpers import make_backend
from ads_ranking_pipelines_tests.defs.gates import TINY_MODEL_GATES
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    write_kubeconfig,
)

NS = "ads-ranking"
DAY = dt.date(2026, 3, 10)
TINY = TrainingParams(dataset_window_days=2, num_workers=1, epochs=1, batch_size=256, hash_buckets=1000,
                      embedding_dim=8, dense_arch=(16, 8), over_arch=(16,), learning_rate=0.05)
TINY_SOURCE = SourceConfig(synthetic=SyntheticSpec(rows_per_day=2000, num_users=1000, num_ads=300))
IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0"
SHARED = ClusterRequest(name="shared", owner="team", gpu_pool="local", workers=1, image=IMAGE, namespace=NS)
LOOSE = {**TINY_MODEL_GATES, "min_calibration": 0.01, "max_calibration": 100.0}


def _resource(fake: FakeKubeApiServer, tmp_path, home: str, **fields) -> KubeRayResource:
    fields.setdefault("image", IMAGE)
    return KubeRayResource(
        kube_config_file=write_kubeconfig(tmp_path / "kubeconfig", fake, context="fake"),
        kube_context="fake", namespace=NS, storage_home=home, shared_volume_claim="ads-ranking-data",
        job_python=sys.executable, ready_timeout_s=300, **fields)


def _refusal(resource: KubeRayResource, params: TrainingParams = TINY) -> str:
    with pytest.raises(dg.Failure) as failure:
        resource.cluster_request(params, "0123456789abcdef")
    return failure.value.description


def test_a_run_that_does_not_fit_the_raycluster_is_refused(fake_apiserver: FakeKubeApiServer, ads_home,
                                                           tmp_path) -> None:
    backend = make_backend(fake_apiserver)
    backend.create_cluster(SHARED, wait=True, timeout_s=10)
    home = str(ads_home)
    text = _refusal(_resource(fake_apiserver, tmp_path, home, existing_cluster="nope"))
    assert "existing_cluster='nope'" in text and "(shared)" in text, text
    text = _refusal(_resource(fake_apiserver, tmp_path, home, existing_cluster="shared"),
                    TINY.model_copy(update={"num_workers": 2}))
    assert "num_workers=2" in text and "at most 1 worker(s) of 1 CPU" in text and "1 x (1 CPU)" in text, text
    text = _refusal(_resource(fake_apiserver, tmp_path, home, existing_cluster="shared"),
                    TINY.model_copy(update={"gpu_pool": "cpu-standard"}))
    assert "gpu_pool='cpu-standard'" in text and "valid: local" in text, text
    other = IMAGE.replace("0.1.0", "0.2.0")
    text = _refusal(_resource(fake_apiserver, tmp_path, home, existing_cluster="shared", image=other))
    assert f"image={other!r}" in text and f"valid: {IMAGE}" in text, text
    # a fitting run passes, and nothing was made by any of them
    _resource(fake_apiserver, tmp_path, home, existing_cluster="shared").cluster_request(TINY, "0123456789abcdef")
    assert [k for k in fake_apiserver.created if k[0] == RAYJOBS] == []
    assert fake_apiserver.names(RAYCLUSTERS) == ["shared"]


def test_the_run_s_rayjob_selects_the_cluster(fake_apiserver: FakeKubeApiServer) -> None:
    from ads_ranking_pipelines.backends.kuberay.borrowed import SelectorSession

    backend = make_backend(fake_apiserver, run_id="run-1")
    backend.create_cluster(SHARED, wait=True, timeout_s=10)
    session = SelectorSession(backend, fake_apiserver.get(RAYCLUSTERS, NS, "shared"))
    manifest = session.render(JobSpec("train-20260310-run1", "python -m ads_ranking_pipelines.ray_jobs.train"))
    assert manifest["spec"]["clusterSelector"] == {"ray.io/cluster": "shared"}
    assert "rayClusterSpec" not in manifest["spec"] and manifest["spec"]["shutdownAfterJobFinishes"] is False
    assert manifest["metadata"]["labels"]["dagster/run-id"] == "run-1"


def test_the_session_deletes_its_rayjobs_and_leaves_the_cluster(fake_apiserver: FakeKubeApiServer) -> None:
    from ads_ranking_pipelines.backends.kuberay.borrowed import selector_session

    fake_apiserver.scenario = Scenario(hold_running_s=60)
    backend = make_backend(fake_apiserver)
    backend.create_cluster(SHARED, wait=True, timeout_s=10)
    with selector_session(backend, NS, "shared") as session:
        job_id = session.submit(JobSpec("train-20260310-run1", "python -m ads_ranking_pipelines.ray_jobs.train"))
        assert backend.job_status(NS, job_id).state is JobState.RUNNING
    assert fake_apiserver.names(RAYJOBS) == [] and job_id in fake_apiserver.stopped_jobs
    assert fake_apiserver.names(RAYCLUSTERS) == ["shared"]
    assert fake_apiserver.get(RAYCLUSTERS, NS, "shared")["status"]["state"] == "ready"


@pytest.mark.ray
@pytest.mark.integration
def test_a_dagster_run_on_an_existing_raycluster(fake_apiserver: FakeKubeApiServer, ads_home, tmp_path) -> None:
    fake_apiserver.scenario = Scenario(execute=True)
    fake_apiserver.time_scale = 1.0
    backend = make_backend(fake_apiserver, ready_timeout_s=300)
    backend.create_cluster(SHARED, wait=True, timeout_s=300)
    before = fake_apiserver.get(RAYCLUSTERS, NS, "shared")
    home = str(ads_home)
    defs = dg.Definitions(
        assets=[impressions, trained_model, model_evaluation, batch_scores], jobs=[daily_retraining],
        resources={"storage": StorageResource(home=home), "event_source": EventSourceResource(),
                   "ray_cluster": _resource(fake_apiserver, tmp_path, home, existing_cluster="shared")})
    with dg.DagsterInstance.get() as instance:
        result = defs.resolve_job_def("daily_retraining").execute_in_process(
            run_config=run_config(TINY, TINY_SOURCE, evaluation=LOOSE), partition_key=DAY.isoformat(),
            instance=instance, raise_on_error=False)
        assert result.success, [e.message for e in result.all_events if e.is_failure]
    # one RayJob, the run's driver for its three steps, on the shared cluster (clusterSelector:
    # KubeRay made no cluster for it)
    rayjobs = [key[2] for key in fake_apiserver.created if key[0] == RAYJOBS]
    assert len(rayjobs) == 1 and all(name.startswith("shared-") for name in rayjobs), rayjobs
    assert fake_apiserver.operator_made == []
    runtime = fake_apiserver.runtime()
    assert list(runtime.clusters) == [(RAYCLUSTERS, NS, "shared")]
    assert sorted(k[2] for k in runtime.jobs) == sorted(rayjobs)
    assert {job.status for job in runtime.jobs.values()} == {"SUCCEEDED"}
    # the RayCluster is untouched; the run's RayJobs are gone
    after = fake_apiserver.get(RAYCLUSTERS, NS, "shared")
    assert after["spec"] == before["spec"] and after["metadata"]["labels"] == before["metadata"]["labels"]
    assert after["status"]["state"] == "ready" and not after["metadata"].get("deletionTimestamp")
    assert (RAYCLUSTERS, NS, "shared") not in fake_apiserver.deleted
    assert fake_apiserver.names(RAYJOBS) == [] and fake_apiserver.names(RAYCLUSTERS) == ["shared"]
    record = [m.metadata for m in result.asset_materializations_for_node("trained_model")]
    assert record and record[0]["model_version"].value
    # no dashboard reachable from Dagster on KubeRay: the metadata says where the job's log is,
    # and that its lines stay in the run's event log; the run's progress reached 100% per step
    assert record[0]["ray_job_id"].value == rayjobs[0] and record[0]["ray_cluster"].value == "shared"
    assert "submitter pod log" in record[0]["ray_job_logs"].value and "ray_dashboard" not in record[0]
    (progress,) = read_progress(StorageLayout(home))
    assert {s: p["percent"] for s, p in progress["steps"].items()} == {
        "trained_model": 100.0, "model_evaluation": 100.0, "batch_scores": 100.0}, progress
