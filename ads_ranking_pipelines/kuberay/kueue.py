"""What a RayJob or RayCluster on a Kueue pool carries (kubernetes-sigs/kueue, the RayJob and
RayCluster integrations in ``pkg/controller/jobs/rayjob`` and ``.../raycluster``).

Kueue manages a job labelled ``kueue.x-k8s.io/queue-name: <LocalQueue>``; it must be created
suspended (``spec.suspend: true``): Kueue's jobframework (``ReconcileGenericJob``) makes a
``Workload`` for it and unsuspends it once the ClusterQueue has quota. ``kueue.x-k8s.io/
priority-class`` names the ``WorkloadPriorityClass`` that orders it in the queue and lets it
preempt lower-priority work.

KubeRay v1.7 refuses a suspendable RayJob that uses deletion rules (utils/validation.go
``ValidateRayJobSpec``: suspend requires ``shutdownAfterJobFinishes``; kueue issue #3994), so a
Kueue RayJob cleans up with ``shutdownAfterJobFinishes`` + ``ttlSecondsAfterFinished`` (the
session and the garbage collector delete the RayJob itself). It has no
``preRunningDeadlineSeconds``: KubeRay counts it from the RayJob's start, which would fail a
job legitimately waiting in the queue; the backend bounds the wait itself (queue-wait limit).
Labels go on the top-level object only, never on its pods (Kueue's pod integration would
otherwise gate them as plain pods).
"""

from __future__ import annotations

from typing import Any

from ads_ranking_pipelines.config.validation import ResolvedRequest
from ads_ranking_pipelines.kuberay.labels import sanitize_label_value

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"


def priority_class(resolved: ResolvedRequest) -> str | None:
    """The request's WorkloadPriorityClass: its own, else the pool's for its run kind."""
    kueue = resolved.pool.kueue
    if kueue is None:
        return None
    return resolved.request.priority_class or kueue.priority_class(resolved.request.run_kind)


def kueue_labels(resolved: ResolvedRequest) -> dict[str, str]:
    """The Kueue labels of the request's RayJob / RayCluster (empty off Kueue)."""
    kueue = resolved.pool.kueue
    if kueue is None:
        return {}
    labels = {QUEUE_NAME_LABEL: kueue.local_queue}
    priority = priority_class(resolved)
    if priority:
        labels[PRIORITY_CLASS_LABEL] = sanitize_label_value(priority)
    return labels


def apply_to_manifest(manifest: dict[str, Any], resolved: ResolvedRequest) -> dict[str, Any]:
    """Label ``manifest`` for Kueue and create it suspended (no-op off Kueue)."""
    labels = kueue_labels(resolved)
    if not labels:
        return manifest
    meta = manifest["metadata"]
    meta["labels"] = dict(sorted({**meta.get("labels", {}), **labels}.items()))
    manifest["spec"]["suspend"] = True
    return manifest


def is_kueue_managed(obj: dict[str, Any]) -> bool:
    """Whether ``obj`` (a RayJob / RayCluster read back) is queued through Kueue."""
    return bool(((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME_LABEL))
