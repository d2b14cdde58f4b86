"""KubeRayBackend on a pool shared through Kueue, against the fake API server and its toy Kueue
(fake_apiserver/kueue_controller.py): a run whose quota is taken is QUEUED with Kueue's words
and runs when the quota frees; the queue-wait limit fails it with those words; nothing is
left behind."""

from __future__ import annotations

import threading
import time

import pytest

from ads_ranking_pipelines.backends.base import BackendError, JobSpec, JobState
from ads_ranking_pipelines.backends.kuberay import (
    KubeRayBackend,
    job_status_from_rayjob,
)
from ads_ranking_pipelines.backends.kuberay.client import RAYJOBS
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import PoolCatalog, load_catalog
from ads_ranking_pipelines_tests.backends.kuberay_helpers import NS, assert_nothing_left
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    client_for,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_controller import (
    KueueQueue,
)

LOCAL_QUEUE = "team-a-cpu"
INSUFFICIENT = "insufficient unused quota for cpu in flavor default-flavor"


def kueue_catalog() -> PoolCatalog:
    data = load_catalog().model_dump(mode="json")
    data["pools"].append({
        "name": "cpu-kueue", "machine_type": "n2-standard-32",
        "node_selector": {"cloud.google.com/machine-family": "n2"},
        "cpus_per_node": 32, "memory_per_node": "128Gi", "max_workers": 8,
        "max_concurrent_runs": None,
        "kueue": {"local_queue": LOCAL_QUEUE,
                  "priority_classes": {"scheduled": "daily", "backfill": "backfill-low"}}})
    return PoolCatalog.model_validate(data)


def request(name: str, run_kind: str = "scheduled") -> ClusterRequest:
    # head 1 CPU + one 1-CPU worker: 2 CPUs of the ClusterQueue's quota
    return ClusterRequest(name=name, owner="dagster", gpu_pool="cpu-kueue", workers=1,
                          cpus_per_worker=1, run_kind=run_kind)


def backend(fake: FakeKubeApiServer, **kwargs) -> KubeRayBackend:
    kwargs.setdefault("poll_interval_s", 0.02)
    kwargs.setdefault("ready_timeout_s", 10.0)
    kwargs.setdefault("teardown_timeout_s", 20.0)
    # Generous: strict CRD validation of a create is slow on a loaded machine.
    return KubeRayBackend(client_for(fake, request_timeout_s=30.0), kueue_catalog(), **kwargs)


def run_one(fake: FakeKubeApiServer, name: str, said: list[str], out: dict,
            run_kind: str = "scheduled", **kwargs) -> None:
    b = backend(fake, on_queue=said.append, **kwargs)
    job = JobSpec(submission_id=f"{name}-1", entrypoint="python -m ads_ranking_pipelines.ray_jobs.train")
    try:
        with b.session(request(name, run_kind)) as session:
            job_id = session.submit(job)
            out["lines"] = list(session.logs(job_id, follow=True))
            while not (status := session.status(job_id)).state.terminal:
                time.sleep(0.02)
            out["status"] = status
    except Exception as exc:  # reported to the test thread
        out["error"] = exc


@pytest.mark.slow
def test_second_run_is_queued_with_kueues_words_then_runs_when_the_first_ends(
        fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.kueue_queues = {LOCAL_QUEUE: KueueQueue(quota={"cpu": 3})}  # fits one
    fake_apiserver.kueue_priorities = {"daily": 1000, "backfill-low": 100}
    release = threading.Event()     # run-a keeps the quota until run-b has been seen queued
    fake_apiserver.scenario = Scenario(log_lines=("training", "done"), hold_until=release)
    said_a, said_b, out_a, out_b = [], [], {}, {}
    first = threading.Thread(target=run_one, args=(fake_apiserver, "run-a", said_a, out_a))
    first.start()
    try:
        assert fake_apiserver.wait_for(lambda: any(
            "Running" in h for h in fake_apiserver.deployment_history.values()), 30)
        second = threading.Thread(target=run_one, args=(fake_apiserver, "run-b", said_b, out_b))
        second.start()
        queued_seen = fake_apiserver.wait_for(lambda: any(INSUFFICIENT in s for s in said_b), 30)
        # While run-a holds the quota, run-b's RayJob is Suspended with no cluster: QUEUED.
        (b_job,) = [n for n in fake_apiserver.names(RAYJOBS) if n.startswith("run-b")]
        b_obj = fake_apiserver.get(RAYJOBS, NS, b_job)
    finally:
        release.set()
    first.join(60)
    second.join(60)
    assert queued_seen, said_b
    assert b_obj["spec"]["suspend"] is True
    assert b_obj["status"]["jobDeploymentStatus"] == "Suspended"
    assert "rayClusterName" not in b_obj["status"] or not b_obj["status"]["rayClusterName"]
    assert job_status_from_rayjob(b_obj["status"]).state is JobState.STOPPED  # what KubeRay says
    assert any(s.startswith(f"RayJob {NS}/{b_job} QUEUED: Workload rayjob-{b_job}-")
               and f"LocalQueue {LOCAL_QUEUE}" in s and "QuotaReserved=False (Pending)" in s
               and "2 more needed" not in s for s in said_b), said_b
    assert any("admitted by Kueue after" in s for s in said_b), said_b
    assert not any(INSUFFICIENT in s for s in said_a), said_a  # run-a was admitted at once
    for out in (out_a, out_b):
        assert "error" not in out, out.get("error")
        assert out["status"].state is JobState.SUCCEEDED and out["lines"] == ["training", "done"]
    history = fake_apiserver.deployment_history[b_job]
    # case Suspended -> New ("") once Kueue unsuspends it, then the usual way.
    assert history == ["Suspended", "", "Initializing", "Running", "Complete"], history
    assert_nothing_left(fake_apiserver)
    assert fake_apiserver.names("workloads") == []


def test_queue_wait_limit_fails_with_kueues_words_and_deletes_the_rayjob(
        fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.kueue_queues = {LOCAL_QUEUE: KueueQueue(quota={"cpu": 1})}  # never fits
    said: list[str] = []
    b = backend(fake_apiserver, on_queue=said.append, queue_wait_limit_s=1.0)
    job = JobSpec(submission_id="late-1", entrypoint="python -V")
    started = time.monotonic()
    with pytest.raises(BackendError) as info:
        with b.session(request("run-late")) as session:
            session.submit(job)
    took = time.monotonic() - started
    text = str(info.value)
    assert "queue-wait limit of 1s" in text and "QuotaReserved=False (Pending)" in text
    assert f"couldn't assign flavors to pod set workers: {INSUFFICIENT}, 1 more needed" in text
    assert took < 1.0 + 8.0, took  # within seconds of the limit, not the ready timeout
    assert any("QUEUED" in s for s in said)
    assert_nothing_left(fake_apiserver)
    assert fake_apiserver.names("workloads") == []


def test_fake_kuberay_refuses_suspend_with_deletion_rules(
        fake_apiserver: FakeKubeApiServer) -> None:
    """ValidateRayJobSpec: suspend needs shutdownAfterJobFinishes (kueue #3994) - why Kueue
    RayJobs use shutdownAfterJobFinishes + TTL."""
    b = backend(fake_apiserver)
    with b.session(request("run-rules")) as session:
        manifest = session.render(JobSpec(submission_id="r-1", entrypoint="python -V"))
    spec = manifest["spec"]
    assert spec["suspend"] is True and spec["shutdownAfterJobFinishes"] is True
    spec.pop("ttlSecondsAfterFinished")
    spec["shutdownAfterJobFinishes"] = False
    spec["deletionStrategy"] = {"deletionRules": [
        {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 0}}]}
    b.client.create(RAYJOBS, NS, manifest)
    name = manifest["metadata"]["name"]
    assert fake_apiserver.wait_for(lambda: (fake_apiserver.get(RAYJOBS, NS, name) or {}).get(
        "status", {}).get("jobDeploymentStatus") == "ValidationFailed")
    assert "not allowed to be suspended" in fake_apiserver.get(RAYJOBS, NS, name)["status"]["message"]
    b.client.delete(RAYJOBS, NS, name)


@pytest.mark.slow
def test_preempted_run_is_queued_then_readmitted_and_its_new_log_is_delivered_whole(
        fake_apiserver: FakeKubeApiServer) -> None:
    """Kueue evicts a running backfill for a higher-priority run: the backfill is QUEUED with
    Kueue's eviction words (not failed, not ended), readmitted once the other run ends, and
    the log of its new submitter Job - the job submitted again on a new cluster, printing its
    driver log from the first line - is delivered whole, though it repeats the first lines."""
    queue = KueueQueue(quota={"cpu": 3})  # fits one
    fake_apiserver.kueue_queues = {LOCAL_QUEUE: queue}
    fake_apiserver.kueue_priorities = {"daily": 1000, "backfill-low": 100}
    lines = tuple(f"epoch {i}" for i in range(6))
    fake_apiserver.scenario = Scenario(log_lines=lines, line_interval_s=0.3)
    said_low, said_high, out_low, out_high = [], [], {}, {}
    low = threading.Thread(target=run_one, args=(fake_apiserver, "run-low", said_low, out_low),
                           kwargs={"run_kind": "backfill"})
    low.start()

    def printed() -> int:   # driver lines (the submitter's own lines come first)
        return sum(1 for p in fake_apiserver.pods.values()
                   if p.obj["metadata"]["labels"].get("job-name", "").startswith("run-low")
                   for _, line in p.lines if line in lines)

    assert fake_apiserver.wait_for(lambda: printed() >= 2, 30)
    fake_apiserver.scenarios.update({n: Scenario(hold_running_s=1.0) for n in ("run-high",)})
    high = threading.Thread(target=run_one, args=(fake_apiserver, "run-high", said_high, out_high))
    high.start()
    high.join(60)
    low.join(60)
    for out in (out_low, out_high):
        assert "error" not in out, out.get("error")
        assert out["status"].state is JobState.SUCCEEDED
    (low_job,) = [n for n in fake_apiserver.deployment_history if n.startswith("run-low")]
    assert queue.evictions == [w for w in queue.evictions if w.startswith(f"rayjob-{low_job}-")]
    assert len(queue.evictions) == 1, queue.evictions
    history = fake_apiserver.deployment_history[low_job]
    assert history == ["Suspended", "", "Initializing", "Running", "Suspending", "Suspended", "",
                       "Initializing", "Running", "Complete"], history
    evicted = [s for s in said_low if s.startswith(f"RayJob {NS}/{low_job} evicted by Kueue")]
    assert evicted and evicted[0].startswith(
        f"RayJob {NS}/{low_job} evicted by Kueue: Preempted: Preempted to accommodate a "
        "workload (UID: "), said_low
    assert "due to prioritization in the ClusterQueue; waiting to be readmitted" in evicted[0]
    assert "Preempted=True (InClusterQueue)" in evicted[-1]
    assert any("readmitted by Kueue after" in s and "(it was evicted by Kueue: Preempted: "
               in s for s in said_low[said_low.index(evicted[-1]):]), said_low
    # the first attempt's lines, then the whole log of the readmitted attempt
    first = out_low["lines"][: len(out_low["lines"]) - len(lines)]
    assert len(first) >= 2 and tuple(first) == lines[: len(first)], out_low["lines"]
    assert tuple(out_low["lines"][len(first):]) == lines, out_low["lines"]
    assert_nothing_left(fake_apiserver)
    assert fake_apiserver.names("workloads") == []
