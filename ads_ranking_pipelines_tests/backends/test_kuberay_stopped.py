"""A Ray job that ends STOPPED on KubeRay v1.7 (issue 23, gap 3), against the fake API server.

KubeRay's deletion rules match ``jobStatus`` SUCCEEDED/FAILED or ``jobDeploymentStatus``
Failed only (the CRD cannot name STOPPED, kuberay #5184), so a Ray job stopped from outside
(``ray job stop``, the dashboard) ends Complete + STOPPED and its GPU cluster stays; and a
``clusterSelector`` RayJob never reaches its DeleteSelf rules. The backend deletes a STOPPED
job's own cluster itself as soon as it sees the state.
"""

from __future__ import annotations

import time

from ads_ranking_pipelines.backends.base import JobState
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines_tests.backends.kuberay_helpers import (
    JOB,
    NS,
    REQUEST,
    assert_nothing_left,
    make_backend,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import FakeKubeApiServer, Scenario


def _deployment(fake: FakeKubeApiServer, name: str) -> str:
    return ((fake.get("rayjobs", NS, name) or {}).get("status") or {}).get(
        "jobDeploymentStatus") or ""


def test_stopped_job_leaves_no_raycluster_behind(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="stopped", log_lines=("epoch 1",))
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        assert list(session.logs(job_id, follow=True)) == ["epoch 1"]
        status = session.status(job_id)
        assert status.state is JobState.STOPPED, status
        assert status.message == "Job was intentionally stopped."
        rayjob = fake_apiserver.get("rayjobs", NS, job_id)
        assert rayjob["status"]["jobDeploymentStatus"] == "Complete"
        assert rayjob["status"]["jobStatus"] == "STOPPED"
        # While the session is still open (no teardown, no GC): the cluster is gone.
        assert fake_apiserver.wait_for(lambda: fake_apiserver.names("rayclusters", NS) == [],
                                       timeout_s=5), fake_apiserver.names("rayclusters", NS)
        assert fake_apiserver.get("rayjobs", NS, job_id) is not None  # its status stays readable
        assert session.status(job_id).state is JobState.STOPPED
    assert_nothing_left(fake_apiserver)


def test_fake_keeps_a_stopped_jobs_cluster(fake_apiserver: FakeKubeApiServer) -> None:
    """The fake is no kinder than KubeRay: no deletion rule matches Complete + STOPPED."""
    fake_apiserver.scenario = Scenario(outcome="stopped")
    backend = make_backend(fake_apiserver)
    manifest = build_rayjob(backend.resolve(REQUEST.model_copy(update={"name": "halted"})),
                            entrypoint="python -c pass", submission_id="halted")
    backend.client.create("rayjobs", NS, manifest)
    assert fake_apiserver.wait_for(lambda: _deployment(fake_apiserver, "halted") == "Complete",
                                   timeout_s=10)
    time.sleep(0.5)  # many operator ticks; DeleteCluster's TTL is 0 and DeleteSelf's 30 s here
    assert len(fake_apiserver.names("rayclusters", NS)) == 1
    assert fake_apiserver.get("rayjobs", NS, "halted")["status"]["jobStatus"] == "STOPPED"
    backend.stop_job(NS, "halted")
    assert_nothing_left(fake_apiserver)


def test_fake_skips_deletion_rules_of_a_cluster_selector_job(
        fake_apiserver: FakeKubeApiServer) -> None:
    """rayjob_controller.go case Complete: a clusterSelector RayJob returns before its rules:
    even an overdue DeleteSelf leaves it."""
    fake_apiserver.time_scale = 0.001  # DeleteSelf's 600 s last 0.6 s
    backend = make_backend(fake_apiserver)
    backend.create_cluster(ClusterRequest(name="dev-long", owner="alice", workers=1))
    job_id = backend.submit_to_cluster(NS, "dev-long", JOB, owner="alice")
    assert fake_apiserver.wait_for(lambda: _deployment(fake_apiserver, job_id) == "Complete",
                                   timeout_s=10)
    time.sleep(1.0)
    assert fake_apiserver.get("rayjobs", NS, job_id) is not None
    assert backend.job_status(NS, job_id).state is JobState.SUCCEEDED
    assert fake_apiserver.names("rayclusters", NS) == ["dev-long"]  # never the shared cluster
    backend.delete_cluster(NS, "dev-long")
    assert_nothing_left(fake_apiserver)
