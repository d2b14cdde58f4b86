"""A cluster that is slow to start is not failed while it can still start (issue 23, gap 4),
against the fake API server:

* KubeRay retries pod creation: a ``ReplicaFailure`` (a quota still held by the previous job's
  Terminating pods) that clears within ``replica_failure_grace_s`` lets the job run; one that
  persists fails it after that window, in KubeRay's words, and the cluster is deleted;
* a pending Ray pod for which Karpenter nominated a NodeClaim (its ``Nominated`` event) waits,
  like one with cluster-autoscaler's ``TriggeredScaleUp``, past ``unschedulable_grace_s``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from ads_ranking_pipelines.backends.base import BackendError, JobState
from ads_ranking_pipelines.backends.kuberay.health import (
    StartupWatch,
    replica_failure,
    scale_up_triggered,
)
from ads_ranking_pipelines_tests.backends.kuberay_helpers import (
    JOB,
    REQUEST,
    assert_nothing_left,
    make_backend,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import FakeKubeApiServer, Scenario


def _run(backend: Any) -> tuple[JobState, list[str]]:
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        lines = list(session.logs(job_id, follow=True))
        return session.status(job_id).state, lines


def test_replica_failure_that_clears_lets_the_job_run(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="cluster_failed", replica_failure_clears_after_s=0.6)
    failures: list[str] = []

    def on_status(name: str, status: Any) -> None:
        failure = replica_failure(status.get("rayClusterStatus"))
        if failure:
            failures.append(failure)

    backend = make_backend(fake_apiserver, replica_failure_grace_s=10.0, on_status=on_status)
    state, lines = _run(backend)
    assert failures and "exceeded quota: gpu-quota" in failures[0]  # it did fail at first
    assert state is JobState.SUCCEEDED
    assert lines == ["hello from the driver"]
    assert_nothing_left(fake_apiserver)


def test_persistent_replica_failure_fails_after_the_window(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="cluster_failed")
    backend = make_backend(fake_apiserver, ready_timeout_s=30.0, replica_failure_grace_s=0.8)
    start = time.monotonic()
    with pytest.raises(BackendError) as info:
        _run(backend)
    elapsed = time.monotonic() - start
    text = str(info.value)
    assert 0.8 <= elapsed < 15, elapsed
    assert "cannot create its pods: FailedCreateHeadPod" in text
    assert ('pods "' in text and '-head" is forbidden: exceeded quota: gpu-quota, requested: '
            "nvidia.com/gpu=32" in text)
    assert "replica_failure_grace_s=0.8" in text and "did not start within" not in text
    assert fake_apiserver.names("rayclusters") == []
    assert_nothing_left(fake_apiserver)


def test_karpenter_nominated_pod_is_waited_for(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="unschedulable", karpenter=True,
                                       schedulable_after_s=1.0)
    backend = make_backend(fake_apiserver, unschedulable_grace_s=0.1)
    state, _ = _run(backend)
    assert state is JobState.SUCCEEDED
    nominated = [e for e in fake_apiserver.events if e["reason"] == "Nominated"]
    assert nominated and nominated[0]["source"]["component"] == "karpenter"
    assert nominated[0]["message"].startswith("Pod should schedule on: nodeclaim/default-")
    assert_nothing_left(fake_apiserver)


def _event(reason: str, component: str) -> dict[str, Any]:
    return {"reason": reason, "source": {"component": component}}


SCHEDULER = _event("FailedScheduling", "default-scheduler")


@pytest.mark.parametrize("events,coming", [
    ([], False),
    ([SCHEDULER], False),
    ([SCHEDULER, _event("TriggeredScaleUp", "cluster-autoscaler")], True),
    # The scheduler keeps retrying while the node is being added: not a "no".
    ([_event("TriggeredScaleUp", "cluster-autoscaler"), SCHEDULER], True),
    ([_event("TriggeredScaleUp", "cluster-autoscaler"),
      _event("NotTriggerScaleUp", "cluster-autoscaler")], False),
    ([SCHEDULER, _event("Nominated", "karpenter"), SCHEDULER], True),
    ([_event("Nominated", "karpenter"), _event("FailedScheduling", "karpenter")], False),
    ([_event("Nominated", "someone-else")], False),
    ([{"reason": "Nominated", "reportingComponent": "karpenter"}], True),
])
def test_capacity_is_coming_signals(events: list[dict[str, Any]], coming: bool) -> None:
    assert scale_up_triggered(events) is coming


def test_replica_failure_window_restarts_when_the_failure_clears() -> None:
    now = [0.0]
    watch = StartupWatch(list_pods=lambda _: [], list_events=lambda _: [],
                         replica_failure_grace_s=10.0, clock=lambda: now[0])
    failing = {"conditions": [{"type": "ReplicaFailure", "status": "True",
                               "reason": "FailedCreateWorkerPod", "message": "exceeded quota"}]}
    assert watch.check(None, failing) is None
    now[0] = 9.0
    assert watch.check(None, failing) is None
    now[0] = 9.5
    assert watch.check(None, {"conditions": []}) is None  # a create succeeded
    now[0] = 15.0
    assert watch.check(None, failing) is None             # a new window
    now[0] = 25.0
    problem = watch.check("c1", failing)
    assert problem is not None
    assert problem.startswith("RayCluster c1 cannot create its pods: FailedCreateWorkerPod: "
                              "exceeded quota (still failing after 10s")
