"""What the toy KubeRay operator's two controllers (:mod:`.raycluster_controller`,
:mod:`.rayjob_controller`) share: the :class:`Scenario` that drives them, the
:class:`OperatorHost` they act on, and the pods they make - with the kubelet that starts
them, which is Kubernetes, not KubeRay."""

from __future__ import annotations

import random
import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.store import ObjectStore, _Pod, now_rfc3339

if TYPE_CHECKING:
    from ads_ranking_pipelines_tests.kuberay.fake_apiserver.ray_runtime import LocalRayRuntime


def suffix(n: int = 5) -> str:
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(n))


@dataclass
class Scenario:
    """What the toy operator does with one RayJob (or standalone RayCluster).

    ``outcome``: ``succeed`` | ``app_failed`` | ``cluster_failed`` (the API server refuses the
    head pod: ReplicaFailure) | ``unschedulable`` (pods Pending, FailedScheduling) |
    ``deadline_exceeded`` | ``hang`` (the cluster never gets ready, nothing fails) |
    ``stopped`` (the Ray job is stopped from outside - ``ray job stop``, the dashboard - once
    its log is printed: ``jobStatus`` STOPPED).
    ``execute``: the cluster is a real local Ray cluster and the submitter really runs the
    RayJob's entrypoint (:mod:`.ray_runtime`); ``log_lines`` and ``outcome`` are then the job's.
    ``submitter_failures``: how many submitter pods die after ``crash_after_lines`` driver
    lines (each retry replays the log, behind its own banner: :mod:`.submitter`).
    ``tail_lines``: driver lines the submitter still prints after the Ray job
    is terminal (``jobStatus`` ahead of ``jobDeploymentStatus``). ``replica_failure_clears_after_s``
    (``cluster_failed``): KubeRay's retried pod creation succeeds after that long (the quota
    was freed). ``scale_up`` / ``karpenter`` (``unschedulable``): cluster-autoscaler's
    ``TriggeredScaleUp`` / Karpenter's ``Nominated`` event for each stuck pod;
    ``schedulable_after_s``: the new node is up after that long and the pods are scheduled.
    ``submitter``: ``start`` |
    ``refused`` (the API server refuses its pod: a namespace quota; FailedCreate on the Job) |
    ``unschedulable`` (its pod Pending, FailedScheduling). ``dashboard_wait_lines``: how many
    times each submitter pod's wait loop says it is waiting for the dashboard (every pod runs
    the loop: :mod:`.submitter`). ``hold_until``: the Ray job stays RUNNING (its log printed)
    until the test sets this event, for checks of a job in flight that no timing can race;
    ``drain_after``: likewise, the submitter prints what it still has to print after the terminal
    ``jobStatus`` (``tail_lines``, its final lines) only once the test sets this event.
    Times are real seconds.
    """

    outcome: str = "succeed"
    log_lines: tuple[str, ...] = ("hello from the driver",)
    cluster_ready_after_s: float = 0.15
    pod_running_after_s: float = 0.05
    line_interval_s: float = 0.01
    hold_running_s: float = 0.0
    hold_until: threading.Event | None = None
    drain_after: threading.Event | None = None
    tail_lines: int = 0
    tail_interval_s: float = 0.05
    submitter_failures: int = 0
    crash_after_lines: int = 1
    scale_up: bool = False
    karpenter: bool = False
    schedulable_after_s: float | None = None
    replica_failure_clears_after_s: float | None = None
    cluster_failure_reason: str = (
        'pods "%(cluster)s-head" is forbidden: exceeded quota: gpu-quota, requested: '
        "nvidia.com/gpu=32, used: nvidia.com/gpu=0, limited: nvidia.com/gpu=16")
    unschedulable_message: str = (
        "0/12 nodes are available: 12 Insufficient nvidia.com/gpu. preemption: 0/12 nodes are "
        "available: 12 No preemption victims found for incoming pod.")
    app_failure_message: str = (
        "Job entrypoint command failed with exit code 1, last available logs (truncated to "
        "20,000 chars):\nValueError: window has no _SUCCESS marker")
    deadline_after_s: float = 0.4
    submitter: str = "start"
    submitter_quota_message: str = (
        'pods "%(pod)s" is forbidden: exceeded quota: compute-quota, requested: cpu=500m, '
        "used: cpu=16, limited: cpu=16")
    submitter_unschedulable_message: str = (
        "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 "
        "No preemption victims found for incoming pod.")
    dashboard_wait_lines: int = 0
    execute: bool = False  # real Ray: pods are a local Ray cluster, the submitter runs the job


class OperatorHost(ObjectStore):
    """The store and the operator's settings the controllers read and write: declarations
    only, held by :class:`FakeKubeApiServer` (which sets them and defines ``runtime``)."""

    validate: bool
    scenario: Scenario
    scenarios: dict[str, Scenario]
    rejected: list[str]
    time_scale: float
    feature_gates: dict[str, bool]
    delete_rayjob_cr_after_job_finishes: bool
    stopped_jobs: list[str]
    operator_made: list[dict[str, Any]]
    events: list[dict[str, Any]]
    runtime: Callable[[], LocalRayRuntime]


def scenario_for(host: OperatorHost, name: str, owner_job: str | None = None) -> Scenario:
    return host.scenarios.get(name) or (host.scenarios.get(owner_job) if owner_job else None) \
        or host.scenario


def new_pod(host: OperatorHost, ns: str, name: str, labels: dict[str, str], owner: dict[str, Any],
            container: str, start_in_s: float, unschedulable: str | None = None) -> _Pod:
    meta = {"name": name, "namespace": ns, "labels": dict(labels),
            "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                 "name": owner["metadata"]["name"],
                                 "uid": owner["metadata"]["uid"], "controller": True,
                                 "blockOwnerDeletion": True}]}
    host._stamp_new(meta)
    status: dict[str, Any] = {"phase": "Pending"}
    if unschedulable:
        status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "Unschedulable", "message": unschedulable,
                                 "lastTransitionTime": now_rfc3339()}]
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
           "spec": {"containers": [{"name": container, "image": "ads-ranking-pipelines"}]},
           "status": status, "_start": time.monotonic() + start_in_s,
           "_unschedulable": bool(unschedulable)}
    pod = _Pod(obj)
    host.pods[(ns, name)] = pod
    return pod


def start_due_pods(host: OperatorHost, now: float) -> None:
    """The kubelet: a schedulable Pending pod runs once its start time has come."""
    for pod in host.pods.values():
        status = pod.obj["status"]
        if status["phase"] == "Pending" and not pod.obj.get("_unschedulable") \
                and now >= pod.obj["_start"]:
            status["phase"] = "Running"
            status["conditions"] = [{"type": "PodScheduled", "status": "True"},
                                    {"type": "Ready", "status": "True"}]
            host.changed.notify_all()


def emit_event(host: OperatorHost, ns: str, kind: str, name: str, reason: str, message: str,
               component: str, warning: bool = True) -> None:
    """A core Event about ``kind``/``name``, as the scheduler (``FailedScheduling``), the
    cluster autoscaler (``TriggeredScaleUp``) or the Job controller (``FailedCreate``:
    kubernetes pkg/controller/controller_utils.go ``RealPodControl.createPods``, reason
    ``FailedCreatePodReason``, message ``"Error creating: <API error>"``) record it."""
    host._resource_version += 1
    host.events.append({
        "apiVersion": "v1", "kind": "Event", "type": "Warning" if warning else "Normal",
        "reason": reason, "message": message,
        "metadata": {"name": f"{name}.{suffix(8)}", "namespace": ns,
                     "resourceVersion": str(host._resource_version)},
        "involvedObject": {"kind": kind, "name": name, "namespace": ns,
                           "apiVersion": "batch/v1" if kind == "Job" else "v1"},
        "lastTimestamp": now_rfc3339(), "count": 1, "source": {"component": component}})
