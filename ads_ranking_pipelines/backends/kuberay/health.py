"""Why a Ray cluster is not coming up, in the words KubeRay v1.7 and the scheduler use.

KubeRay v1.7 no longer sets ``status.state: failed`` on a RayCluster. A pod it could not create
(quota, Pod Security admission, a bad spec) shows as the condition ``ReplicaFailure`` (status
True, reason ``FailedCreateHeadPod`` / ``FailedCreateWorkerPod`` …, message the API server's
error) in the RayCluster's ``status.conditions`` - copied into a RayJob's
``status.rayClusterStatus`` while it is Initializing. A pod that was created but cannot be
placed shows only on the pod: condition ``PodScheduled`` False with reason ``Unschedulable``
and the scheduler's message ("0/12 nodes are available: 12 Insufficient nvidia.com/gpu…"),
and as ``FailedScheduling`` events. That capacity is coming shows as the node provisioner's
event on the pod: cluster-autoscaler's ``TriggeredScaleUp`` (``NotTriggerScaleUp`` when it
cannot help), or Karpenter's ``Nominated`` "Pod should schedule on: nodeclaim/…" (karpenter v1
``NominatePodEvent``; its own ``FailedScheduling`` when it cannot).

KubeRay keeps retrying pod creation (every reconcile) and drops ``ReplicaFailure`` once a create
succeeds - a quota still held by the previous job's Terminating pods clears by itself.
:class:`StartupWatch` turns these into a failure once they persist (``replica_failure_grace_s``,
``unschedulable_grace_s``) instead of waiting out the readiness timeout; a pod whose node is
coming is waited for, up to that timeout.
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

from ads_ranking_pipelines.kuberay.labels import RAY_CLUSTER_LABEL

REPLICA_FAILURE = "ReplicaFailure"
# The node provisioner's word on a pending pod: (component, reason) -> capacity is coming.
# cluster-autoscaler's reasons are recognised from any component (older events carry none).
PROVISIONER_SIGNALS = {
    ("cluster-autoscaler", "TriggeredScaleUp"): True,
    ("cluster-autoscaler", "NotTriggerScaleUp"): False,
    ("karpenter", "Nominated"): True,
    ("karpenter", "FailedScheduling"): False,
}
AUTOSCALER_REASONS = {"TriggeredScaleUp": True, "NotTriggerScaleUp": False}
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


def _provisioner_signal(event: Mapping[str, Any]) -> bool | None:
    """True: the event says a node is being added for the pod; False: the provisioner cannot
    add one; None: not the provisioner's word (the scheduler repeats ``FailedScheduling``
    while a node is being added, so its events say nothing about capacity)."""
    reason = event.get("reason") or ""
    component = (event.get("source") or {}).get("component") or event.get(
        "reportingComponent") or ""
    if (component, reason) in PROVISIONER_SIGNALS:
        return PROVISIONER_SIGNALS[(component, reason)]
    return AUTOSCALER_REASONS.get(reason)


def scale_up_triggered(events: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the node provisioner's newest event about a pod says capacity is coming for it
    (events sorted oldest first): cluster-autoscaler's ``TriggeredScaleUp`` or Karpenter's
    ``Nominated``."""
    signals = [s for s in map(_provisioner_signal, events) if s is not None]
    return bool(signals) and signals[-1]


@dataclass
class StartupWatch:
    """Follows one cluster across polls; :meth:`check` returns the failure text once a
    ``ReplicaFailure`` condition has stayed for ``replica_failure_grace_s`` (every poll in
    between saw it; KubeRay retried all along), or a Ray pod has been unschedulable for
    ``unschedulable_grace_s`` with no node coming for it."""

    list_pods: Callable[[str], list[dict[str, Any]]]
    list_events: Callable[[str], list[dict[str, Any]]]
    replica_failure_grace_s: float = 120.0
    unschedulable_grace_s: float = 60.0
    clock: Callable[[], float] = time.monotonic
    _failing_since: float | None = None
    _unschedulable_since: dict[str, float] = field(default_factory=dict)

    def check(self, cluster_name: str | None, cluster_status: Mapping[str, Any] | None) -> str | None:
        failure = replica_failure(cluster_status)
        now = self.clock()
        if failure is None:
            self._failing_since = None
        elif self._failing_since is None:
            self._failing_since = now
        if failure and now - self._failing_since >= self.replica_failure_grace_s:
            return (f"RayCluster {cluster_name or '?'} cannot create its pods: {failure} "
                    f"(still failing after {now - self._failing_since:.0f}s of KubeRay's "
                    f"retries; replica_failure_grace_s={self.replica_failure_grace_s:g})")
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
