"""Queued RayClusters and RayJobs on a Kueue pool, against the fake API server's toy Kueue and
its visibility API (fake_apiserver/kueue_visibility.py): ``list_clusters`` / ``describe_cluster``
/ job status show them QUEUED with Kueue's words, the position Kueue gives and the time queued;
a 403 from the visibility API is "position unknown", not an error; an admitted cluster runs."""

from __future__ import annotations

import pytest

from ads_ranking_pipelines.backends.base import JobState
from ads_ranking_pipelines.backends.kuberay import calls
from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines_tests.backends.kuberay_helpers import NS, assert_nothing_left
from ads_ranking_pipelines_tests.backends.test_kuberay_kueue import (
    INSUFFICIENT,
    LOCAL_QUEUE,
    backend,
    request,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_controller import (
    KueueQueue,
)


def _queue(fake: FakeKubeApiServer) -> None:
    fake.kueue_queues = {LOCAL_QUEUE: KueueQueue(quota={"cpu": 3})}  # fits one 2-CPU cluster
    fake.kueue_priorities = {"interactive": 500}


def _rows(b) -> dict:
    return {i.name: i for i in b.list_clusters(NS)}


@pytest.mark.slow
def test_queued_clusters_are_listed_with_kueues_words_and_position_then_run_once_admitted(
        fake_apiserver: FakeKubeApiServer) -> None:
    _queue(fake_apiserver)
    b = backend(fake_apiserver)
    for name in ("c-first", "c-second", "c-third"):
        b.create_cluster(request(name, "interactive"), wait=False)
    assert b.wait_cluster_ready(NS, "c-first", 20).status == "ready"
    assert fake_apiserver.wait_for(lambda: all(
        (i.queue and i.queue.position and i.queue.position.in_local_queue is not None)
        for n, i in _rows(b).items() if n != "c-first"), 10)
    rows = _rows(b)
    for name, place in (("c-second", 1), ("c-third", 2)):
        row = rows[name]
        assert row.status == "queued" and row.kind == "RayCluster"
        assert row.queue.workload.startswith(f"raycluster-{name}-")
        assert f"LocalQueue {LOCAL_QUEUE}" in row.queue.words and INSUFFICIENT in row.queue.words
        assert row.queue.position.text() == f"position {place} in its LocalQueue " \
                                            f"({place} in its ClusterQueue)"
        assert row.queue.seconds_queued() is not None and row.queue.seconds_queued() >= 0
    # KubeRay keeps a suspended RayCluster without pods, in state "suspended".
    obj = fake_apiserver.get(RAYCLUSTERS, NS, "c-second")
    assert obj["status"]["state"] == "suspended"
    assert any(c["type"] == "RayClusterSuspended" and c["status"] == "True"
               for c in obj["status"]["conditions"])
    assert not [p for p in fake_apiserver.pod_names() if p.startswith("c-second")]
    info, pods = b.describe_cluster(NS, "c-third")
    assert info.status == "queued" and pods == [] and "position 2" in info.queue.text
    # The quota frees: the next in line is admitted, gets its pods and becomes ready.
    b.delete_cluster(NS, "c-first")
    assert b.wait_cluster_ready(NS, "c-second", 20).status == "ready"
    assert _rows(b)["c-third"].queue.position.text().startswith("position 1 in its LocalQueue")
    for name in ("c-second", "c-third"):
        b.delete_cluster(NS, name)
    assert_nothing_left(fake_apiserver)
    assert fake_apiserver.names("workloads") == []


def test_queued_rayjob_without_cluster_is_a_queued_row_and_job_status_says_queued(
        fake_apiserver: FakeKubeApiServer) -> None:
    _queue(fake_apiserver)
    b = backend(fake_apiserver)
    b.create_cluster(request("c-holder", "interactive"), wait=False)
    manifest = build_rayjob(b.resolve(request("run-q")), entrypoint="true", submission_id="q-1")
    name = calls.create(b.client, RAYJOBS, NS, manifest, what="RayJob")["metadata"]["name"]
    assert fake_apiserver.wait_for(lambda: (i := _rows(b).get(name)) is not None and bool(
        i.queue and i.queue.position and i.queue.position.in_local_queue == 0), 10)
    row = _rows(b)[name]
    assert row.kind == "RayJob" and row.status == "queued" and row.workers_desired == 1
    status, info = b.jobs.status_and_queue(NS, name)
    assert status.state is JobState.QUEUED
    assert INSUFFICIENT in status.message and "position 1 in its LocalQueue" in status.message
    assert "queued " in status.message
    described, pods = b.describe_cluster(NS, name)
    assert described.kind == "RayJob" and described.status == "queued" and pods == []
    b.stop_job(NS, name)
    b.delete_cluster(NS, "c-holder")
    assert_nothing_left(fake_apiserver)


@pytest.mark.parametrize("status,why", [
    (403, "no RBAC for Kueue's visibility API: HTTP 403"),
    (404, "Kueue's visibility API is not served here: HTTP 404")])
def test_visibility_api_forbidden_or_missing_is_position_unknown_not_an_error(
        fake_apiserver: FakeKubeApiServer, status: int, why: str) -> None:
    """No RBAC for the visibility API (403), or a Kueue that does not serve it (404)."""
    _queue(fake_apiserver)
    fake_apiserver.inject("GET", "pendingworkloads", status, times=None)
    b = backend(fake_apiserver)
    for name in ("c-first", "c-second"):
        b.create_cluster(request(name, "interactive"), wait=False)
    assert fake_apiserver.wait_for(lambda: INSUFFICIENT in (
        getattr(_rows(b)["c-second"].queue, "words", "") or ""), 10)
    queue = _rows(b)["c-second"].queue
    assert queue.position.in_local_queue is None
    assert queue.text.endswith(f"; position unknown ({why})")
    assert INSUFFICIENT in queue.words  # Kueue's words are still there
    assert fake_apiserver.count("GET", "pendingworkloads") >= 1
    for name in ("c-first", "c-second"):
        b.delete_cluster(NS, name)
    assert_nothing_left(fake_apiserver)
