"""Why a Ray cluster is not coming up, in the words KubeRay v1.7 and the scheduler use.

KubeRay v1.7 no longer sets ``status.state: failed`` on a RayCluster. A pod it could not create
(quota, Pod Security admission, a bad spec) shows as the condition ``ReplicaFailure`` (status
True, reason ``FailedCreateHeadPod`` / ``FailedCreateWorkerPod`` …, message the API server's
error) in the RayCluster's ``status.conditions`` - copied into a RayJob's
``status.rayClusterStatus`` while it is Initializing. A pod that was created but cannot be
placed shows only on the pod: condition ``PodScheduled`` False with reason ``Unschedulable``
and the scheduler's message ("0/12 nodes are available: 12 Insufficient nvidia.com/gpu…"),
and as ``FailedScheduling`` events; when the cluster autoscaler is adding a node for it, a
``TriggeredScaleUp`` event says so.

:class:`StartupWatch` turns these into a failure within a few polls instead of waiting out the
readiness timeout.

The submitter of a RayJob (the batch Job KubeRay creates once the cluster is ready,
rayjob_controller.go ``createK8sJobIfNeed``) can be stuck the same two ways: a pod the API
server refuses (a namespace CPU/memory ResourceQuota) is never created and the Job controller
records only ``FailedCreate`` events on the Job ("Error creating: pods "…" is forbidden:
exceeded quota: …"); a pod that fits no node stays Pending, Unschedulable. Neither gives the
Job a ``JobFailed`` condition, so KubeRay v1.7 just requeues (rayjob_controller.go, case
Running, ``checkSubmitterAndUpdateStatusIfNeeded``) and the RayJob stays Running with an empty
``jobStatus`` until ``activeDeadlineSeconds``, holding its whole cluster.
:class:`SubmitterWatch` fails such a job after the same grace as an unschedulable Ray pod.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REPLICA_FAILURE = "ReplicaFailure"
RAY_CLUSTER_LABEL = "ray.io/cluster"
SCALE_UP_REASONS = ("TriggeredScaleUp",)
# Phases of a pod whose container has started (its log can be read).
STARTED_PHASES = ("Running", "Succeeded", "Failed")


def replica_failure(cluster_status: Mapping[str, Any] | None) -> str | None:
    """``"<reason>: <message>"`` of a True ``ReplicaFailure`` condition, else None."""
    for cond in (cluster_status or {}).get("conditions") or []:
        if cond.get("type") == REPLICA_FAILURE and cond.get("status") == "True":
            reason = cond.get("reason") or REPLICA_FAILURE
            message = " ".join(str(cond.get("message") or "").split())
            return f"{reason}: {message}" if message else reason
    return None


def unschedulable_message(pod: Mapping[str, Any]) -> str | None:
    """The scheduler's message when the pod's ``PodScheduled`` condition is False with reason
    ``Unschedulable``, else None."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False" \
                and cond.get("reason") == "Unschedulable":
            return str(cond.get("message") or "Unschedulable")
    return None


def scale_up_triggered(events: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the newest scheduling-related event of a pod says the cluster autoscaler is
    adding a node for it (events sorted oldest first)."""
    relevant = [e for e in events if e.get("reason") in (*SCALE_UP_REASONS, "FailedScheduling",
                                                         "NotTriggerScaleUp")]
    return bool(relevant) and relevant[-1].get("reason") in SCALE_UP_REASONS


@dataclass
class StartupWatch:
    """Follows one cluster across polls; :meth:`check` returns the failure text once a
    ``ReplicaFailure`` has been seen ``failure_polls`` polls in a row, or a Ray pod has been
    unschedulable for ``unschedulable_grace_s`` with no scale-up under way for it."""

    list_pods: Callable[[str], list[dict[str, Any]]]
    list_events: Callable[[str], list[dict[str, Any]]]
    failure_polls: int = 3
    unschedulable_grace_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _failures_seen: int = 0
    _unschedulable_since: dict[str, float] = field(default_factory=dict)

    def check(self, cluster_name: str | None, cluster_status: Mapping[str, Any] | None) -> str | None:
        failure = replica_failure(cluster_status)
        self._failures_seen = self._failures_seen + 1 if failure else 0
        if failure and self._failures_seen >= self.failure_polls:
            return f"RayCluster {cluster_name or '?'} cannot create its pods: {failure}"
        if not cluster_name:
            return None
        return self._check_pods(cluster_name)

    def _check_pods(self, cluster_name: str) -> str | None:
        now = self.clock()
        stuck: dict[str, str] = {}
        for pod in self.list_pods(f"{RAY_CLUSTER_LABEL}={cluster_name}"):
            message = unschedulable_message(pod)
            if message is not None:
                stuck[(pod.get("metadata") or {}).get("name", "?")] = message
        self._unschedulable_since = {name: self._unschedulable_since.get(name, now)
                                     for name in stuck}
        for name, message in sorted(stuck.items()):
            if now - self._unschedulable_since[name] < self.unschedulable_grace_s:
                continue
            if scale_up_triggered(self.list_events(name)):
                continue
            return (f"RayCluster {cluster_name}: pod {name} cannot be scheduled: {message}")
        return None


def failed_create(events: Sequence[Mapping[str, Any]]) -> str | None:
    """The message of the newest pod-creation event of a Job (events sorted oldest first) when
    it is the Job controller's ``FailedCreate`` (a refused pod), else None."""
    relevant = [e for e in events if e.get("reason") in ("FailedCreate", "SuccessfulCreate")]
    if relevant and relevant[-1].get("reason") == "FailedCreate":
        return " ".join(str(relevant[-1].get("message") or "FailedCreate").split())
    return None


@dataclass
class SubmitterWatch:
    """Follows a RayJob's submitter Job across polls, once KubeRay reports the job Running.

    :meth:`check` sets :attr:`started` once a submitter pod's container has started, and
    returns the failure text once the Job has had no pod, its pods refused (``FailedCreate``),
    for ``unschedulable_grace_s``, or a pod has been unschedulable that long with no scale-up
    under way for it.
    """

    list_pods: Callable[[], list[dict[str, Any]]]
    list_job_events: Callable[[], list[dict[str, Any]]]
    list_pod_events: Callable[[str], list[dict[str, Any]]]
    unschedulable_grace_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    started: bool = False
    _stuck_since: dict[str, float] = field(default_factory=dict)

    def check(self, job_name: str) -> str | None:
        pods = self.list_pods()
        if any((p.get("status") or {}).get("phase") in STARTED_PHASES for p in pods):
            self.started = True
            return None
        stuck: dict[str, str] = {}
        for pod in pods:
            message = unschedulable_message(pod)
            if message is not None:
                stuck[(pod.get("metadata") or {}).get("name", "?")] = message
        refused = None if pods else failed_create(self.list_job_events())
        if refused is not None:
            stuck[""] = refused
        now = self.clock()
        self._stuck_since = {k: self._stuck_since.get(k, now) for k in stuck}
        for name, message in sorted(stuck.items()):
            if now - self._stuck_since[name] < self.unschedulable_grace_s:
                continue
            if not name:
                return f"submitter Job {job_name} cannot create its pod: {message}"
            if scale_up_triggered(self.list_pod_events(name)):
                continue
            return f"submitter pod {name} of Job {job_name} cannot be scheduled: {message}"
        return None
