"""KubeRayBackend: a job's lifecycle in a session, status mapping, names, refusals before any
API call, and long-lived clusters (the CLI's operations), against the fake API server."""

from __future__ import annotations

import logging
import threading

import pytest
import yaml

from ads_ranking_pipelines.backends.base import BackendError, JobSpec, JobState
from ads_ranking_pipelines.backends.kuberay import job_status_from_rayjob
from ads_ranking_pipelines.kuberay.rayjob import rayjob_name_for
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.validation import RequestError
from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS
from ads_ranking_pipelines_tests.backends.kuberay_helpers import (
    JOB,
    NS,
    PIPES_VALUE,
    REQUEST,
    RUN_ID,
    assert_nothing_left,
    make_backend,
)
from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import FakeKubeApiServer, Scenario


# ---- the happy path -------------------------------------------------------------------------
def test_submit_follow_logs_and_succeed(fake_apiserver: FakeKubeApiServer,
                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ads_ranking_pipelines")
    release = threading.Event()  # the job stays RUNNING until the in-flight checks are done
    fake_apiserver.scenario = Scenario(log_lines=("starting", "epoch 1 auc=0.71", "done"),
                                       hold_until=release)
    backend = make_backend(fake_apiserver, run_id=RUN_ID, code_location="ads_ranking_pipelines")
    seen: list[str] = []
    backend.on_status = lambda name, status: seen.append(status.get("jobDeploymentStatus") or "")
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        assert job_id == rayjob_name_for(REQUEST.name, JOB.submission_id)
        assert session.status(job_id).state in (JobState.PENDING, JobState.RUNNING)
        release.set()
        assert list(session.logs(job_id, follow=True)) == ["starting", "epoch 1 auc=0.71", "done"]
        final = session.status(job_id)
        assert final.state is JobState.SUCCEEDED, final
        assert list(session.logs(job_id, follow=False)) == ["starting", "epoch 1 auc=0.71", "done"]
        rayjob = fake_apiserver.get(RAYJOBS, NS, job_id)
        cluster = fake_apiserver.names(RAYCLUSTERS)
    assert "Initializing" in seen and seen[-1] in ("Running", "Complete")
    labels = rayjob["metadata"]["labels"]
    assert labels["dagster/run-id"] == RUN_ID
    assert labels["dagster/code-location"] == "ads_ranking_pipelines"
    assert labels["ads-ranking.io/submission-id"] == JOB.submission_id
    spec = rayjob["spec"]
    assert spec["jobId"] == JOB.submission_id and spec["shutdownAfterJobFinishes"] is False
    assert {r["policy"] for r in spec["deletionStrategy"]["deletionRules"]} == {"DeleteCluster", "DeleteSelf"}
    assert yaml.safe_load(spec["runtimeEnvYAML"])["env_vars"]["DAGSTER_PIPES_CONTEXT"] == PIPES_VALUE
    crd_schema.assert_valid({k: v for k, v in rayjob.items() if k != "status"})
    assert cluster == [] or all(c.startswith(job_id) for c in cluster)
    # The env var values never reach a log line of ours.
    assert caplog.records and PIPES_VALUE not in caplog.text
    assert_nothing_left(fake_apiserver)
    assert (RAYJOBS, NS, job_id) in fake_apiserver.deleted


@pytest.mark.parametrize("status,state,message", [
    ({}, JobState.PENDING, "jobDeploymentStatus New"),
    ({"jobDeploymentStatus": "Initializing", "rayClusterStatus": {"conditions": [
        {"type": "ReplicaFailure", "status": "True", "reason": "FailedCreateHeadPod",
         "message": "FailedCreateHeadPod\npods \"x-head\" is forbidden: exceeded quota"}]}},
     JobState.PENDING, 'RayCluster FailedCreateHeadPod: FailedCreateHeadPod pods "x-head" is forbidden'),
    # KubeRay writes a terminal jobStatus before the submitter has finished: not done yet.
    ({"jobDeploymentStatus": "Running", "jobStatus": "SUCCEEDED"}, JobState.RUNNING,
     "waiting for the submitter"),
    ({"jobDeploymentStatus": "Running", "jobStatus": "FAILED"}, JobState.RUNNING,
     "waiting for the submitter"),
    ({"jobDeploymentStatus": "Running", "jobStatus": "PENDING"}, JobState.PENDING, "Running"),
    ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, JobState.RUNNING, ""),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "ok"},
     JobState.SUCCEEDED, "ok"),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "FAILED", "message": "exit 1"},
     JobState.FAILED, "exit 1"),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}, JobState.STOPPED, ""),
    ({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "reason": "AppFailed",
      "message": "Job entrypoint command failed"}, JobState.FAILED,
     "AppFailed: Job entrypoint command failed"),
    ({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded", "message": "passed"},
     JobState.FAILED, "DeadlineExceeded: passed"),
    ({"jobDeploymentStatus": "ValidationFailed", "message": "bad spec"}, JobState.FAILED, "bad spec"),
    ({"jobDeploymentStatus": "Suspended"}, JobState.STOPPED, "suspended"),
    ({"jobDeploymentStatus": "Retrying"}, JobState.PENDING, "Retrying"),
])
def test_status_mapping(status: dict, state: JobState, message: str) -> None:
    got = job_status_from_rayjob(status)
    assert got.state is state
    assert message in got.message


def test_rayjob_names_fit_kuberay_and_are_deterministic() -> None:
    long = "a" * 47
    for base in ("arp-5f0c3d1e", long, "x"):
        name = rayjob_name_for(base, "sub-1")
        assert len(name) <= 47 and name[0].isalpha() and name == rayjob_name_for(base, "sub-1")
    assert rayjob_name_for("arp", "a") != rayjob_name_for("arp", "b")


# ---- nothing is created on bad input --------------------------------------------------------
def test_invalid_request_is_refused_before_any_api_call(fake_apiserver: FakeKubeApiServer) -> None:
    backend = make_backend(fake_apiserver)
    bad = ClusterRequest(name="arp-x", gpu_pool="h100-80gb", workers=2, gpus_per_worker=9,
                         image="rayproject/ray:2.60.0-py311-gpu")
    with pytest.raises(RequestError) as info:
        with backend.session(bad):
            pytest.fail("the session must not open")
    assert info.value.field == "gpus_per_worker" and info.value.valid == "1..8"
    assert fake_apiserver.requests == []


def test_invalid_job_is_refused_before_any_api_call(fake_apiserver: FakeKubeApiServer) -> None:
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        with pytest.raises(RequestError, match="working_dir"):
            session.submit(JobSpec("s1", "python x.py", working_dir="/home/me/code"))
        with pytest.raises(RequestError) as info:
            session.submit(JobSpec("s2", "python x.py", env_vars={"HF_TOKEN": "hf_abcdef"}))
        assert "hf_abcdef" not in str(info.value)
        with pytest.raises(RequestError, match="submission_id"):
            session.submit(JobSpec("bad id with spaces", "python x.py"))
    assert fake_apiserver.requests == []


def test_two_jobs_in_one_session_are_both_torn_down(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(hold_running_s=60)
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        a = session.submit(JOB)
        b = session.submit(JobSpec("eval-2026-11-29", "python -m ads_ranking_pipelines.ray_jobs.evaluate"))
        assert a != b and sorted(session.created) == sorted([a, b])
        assert len(fake_apiserver.names(RAYCLUSTERS)) == 2
        with pytest.raises(BackendError, match="already submitted"):
            session.submit(JOB)
    assert_nothing_left(fake_apiserver)


# ---- long-lived clusters and jobs on them (the CLI's operations) ------------------------------
def test_cluster_lifecycle_and_a_job_on_it(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(log_lines=("hello",))
    backend = make_backend(fake_apiserver)
    request = ClusterRequest(name="alice-h100", owner="alice", gpu_pool="h100-80gb", workers=2,
                             gpus_per_worker=8, image="rayproject/ray:2.60.0-py311-gpu")
    info = backend.create_cluster(request, wait=True, timeout_s=5)
    assert info.status == "ready" and info.workers_ready == 2 and info.workers_desired == 2
    assert info.gpu_type == "nvidia-h100-80gb" and info.owner == "alice"
    assert info.dashboard == "http://alice-h100-head-svc:8265"
    assert [c.name for c in backend.list_clusters(NS)] == ["alice-h100"]
    obj, pods = backend.get_cluster(NS, "alice-h100")
    assert len(pods) == 3
    job_id = backend.submit_to_cluster(NS, "alice-h100", JobSpec("adhoc-1", "python -c 'print(1)'"),
                                       owner="alice")
    rayjob = fake_apiserver.get(RAYJOBS, NS, job_id)
    assert rayjob["spec"]["clusterSelector"] == {"ray.io/cluster": "alice-h100"}
    assert "rayClusterSpec" not in rayjob["spec"]
    assert rayjob["metadata"]["labels"]["ads-ranking.io/cluster"] == "alice-h100"
    backend.wait_until_running(NS, job_id, timeout_s=5)
    assert list(backend.job_logs(NS, job_id)) == ["hello"]
    assert backend.job_status(NS, job_id).state is JobState.SUCCEEDED
    assert backend.stop_job(NS, job_id) is True
    # The cluster outlives its jobs…
    assert fake_apiserver.names(RAYCLUSTERS) == ["alice-h100"]
    # …and deleting the cluster deletes the jobs still recorded on it.
    second = backend.submit_to_cluster(NS, "alice-h100", JobSpec("adhoc-2", "python -c 'print(2)'"))
    assert fake_apiserver.names(RAYJOBS) == [second]
    assert backend.delete_cluster(NS, "alice-h100") is True
    assert backend.delete_cluster(NS, "alice-h100") is False
    assert_nothing_left(fake_apiserver)


def test_cluster_that_fails_is_deleted_with_its_reason(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="cluster_failed")
    backend = make_backend(fake_apiserver, replica_failure_grace_s=0.2)
    with pytest.raises(BackendError, match="exceeded quota: gpu-quota"):
        backend.create_cluster(ClusterRequest(name="doomed", owner="bob", workers=1), timeout_s=5)
    assert_nothing_left(fake_apiserver)


def test_clusters_we_do_not_manage_are_not_touched(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang")
    foreign = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "theirs", "namespace": NS, "labels": {"team": "search"}},
               "spec": {}}
    fake_apiserver.seed(RAYCLUSTERS, foreign)
    backend = make_backend(fake_apiserver)
    assert backend.list_clusters(NS) == []
    with pytest.raises(BackendError, match="not managed by"):
        backend.delete_cluster(NS, "theirs")
    with pytest.raises(BackendError, match="not managed by"):
        backend.submit_to_cluster(NS, "theirs", JobSpec("x", "python x.py"))
    assert fake_apiserver.names(RAYCLUSTERS) == ["theirs"] and fake_apiserver.deleted == []
    fake_apiserver.objects.clear()
    fake_apiserver.pods.clear()
