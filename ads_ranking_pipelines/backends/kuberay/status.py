"""Reading KubeRay objects: the names and labels KubeRay uses, RayJob names for submissions,
a RayJob's status as a :class:`JobStatus`, KubeRay's failure words, and ``cluster list`` rows."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ads_ranking_pipelines.backends.base import JobState, JobStatus
from ads_ranking_pipelines.backends.kuberay.health import replica_failure
from ads_ranking_pipelines.backends.kuberay.queueing import QueueInfo, is_queued
from ads_ranking_pipelines.kuberay.labels import (
    LABEL_GPU_TYPE,
    LABEL_MANAGED_BY,
    LABEL_OWNER,
    LABEL_POOL,
    MANAGED_BY,
)

# Labels and names KubeRay itself uses (ray-operator/controllers/ray/utils/constant.go).
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
ORIGINATED_FROM_CRD_LABEL = "ray.io/originated-from-crd"
ORIGINATED_FROM_NAME_LABEL = "ray.io/originated-from-cr-name"
# Pods of a Kubernetes Job carry these (job-name everywhere, the prefixed one since 1.27).
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")

FAILED_DEPLOYMENT = ("Failed", "ValidationFailed")
READY_DEPLOYMENT = ("Running", "Complete")
RAY_TERMINAL = {"SUCCEEDED": JobState.SUCCEEDED, "FAILED": JobState.FAILED,
                "STOPPED": JobState.STOPPED}


def failure_text(kind: str, name: str, namespace: str, status: Mapping[str, Any]) -> str:
    """KubeRay's own words for a failure: ``reason`` and ``message`` verbatim."""
    reason = status.get("reason") or ""
    message = status.get("message") or ""
    text = f"{kind} {namespace}/{name} failed"
    if reason:
        text += f" with reason {reason}"
    if message:
        text += f": {message}"
    return text


def job_status_from_rayjob(status: Mapping[str, Any] | None) -> JobStatus:
    """Map a RayJob's ``status`` (``jobDeploymentStatus`` + ``jobStatus``) to a JobStatus.

    Only ``jobDeploymentStatus`` Complete / Failed / ValidationFailed is terminal: KubeRay
    (rayjob_controller.go, ``Reconcile``, case Running) writes a terminal ``jobStatus`` while
    the deployment stays Running until the submitter has finished - i.e. until the driver log
    has been fully printed. A job is therefore never reported done before its last log lines.
    Failure reasons come back verbatim as ``"<reason>: <message>"``.
    """
    status = status or {}
    deployment = status.get("jobDeploymentStatus") or ""
    ray_status = status.get("jobStatus") or ""
    reason = status.get("reason") or ""
    message = status.get("message") or ""
    verbatim = ": ".join(p for p in (reason, message) if p)
    if deployment in FAILED_DEPLOYMENT:
        return JobStatus(JobState.FAILED, verbatim or f"jobDeploymentStatus {deployment}")
    if deployment in ("Suspending", "Suspended"):
        return JobStatus(JobState.STOPPED, verbatim or f"RayJob {deployment.lower()}")
    if deployment == "Complete":
        if ray_status in RAY_TERMINAL:
            return JobStatus(RAY_TERMINAL[ray_status], verbatim)
        # The submitter ended without a terminal Ray job status.
        return JobStatus(JobState.FAILED, verbatim or "RayJob complete without a Ray job status")
    if deployment == "Running" and ray_status in RAY_TERMINAL:
        return JobStatus(JobState.RUNNING, f"Ray job {ray_status}; waiting for the submitter "
                         "to finish (jobDeploymentStatus Running)")
    if ray_status == "RUNNING":
        return JobStatus(JobState.RUNNING, verbatim)
    detail = f"jobDeploymentStatus {deployment or 'New'}"
    failure = replica_failure(status.get("rayClusterStatus"))
    if failure:
        detail += f", RayCluster {failure}"
    if verbatim:
        detail += f": {verbatim}"
    return JobStatus(JobState.PENDING, detail)


def stopped_job_cluster(rayjob: Mapping[str, Any]) -> str | None:
    """The RayCluster a RayJob that ended STOPPED still holds, which no KubeRay rule deletes.

    KubeRay v1.7 ends a Ray job stopped from outside (``ray job stop``, the dashboard) with
    ``jobDeploymentStatus`` Complete + ``jobStatus`` STOPPED, and its deletion rules
    (rayjob_controller.go ``handleDeletionRules``) match only ``jobStatus`` SUCCEEDED/FAILED or
    ``jobDeploymentStatus`` Failed - the CRD's enums cannot name STOPPED (kuberay #5184). None
    for any other state, and for a ``clusterSelector`` job (the cluster is not its own).
    """
    spec, status = rayjob.get("spec") or {}, rayjob.get("status") or {}
    if spec.get("clusterSelector") or status.get("jobDeploymentStatus") != "Complete" \
            or status.get("jobStatus") != "STOPPED":
        return None
    return status.get("rayClusterName") or None


def queued_without_cluster(rayjob: Mapping[str, Any]) -> bool:
    """A RayJob Kueue holds that has no RayCluster (yet, or any more: preempted), and would
    have its own (not a ``clusterSelector`` job)."""
    spec, status = rayjob.get("spec") or {}, rayjob.get("status") or {}
    return is_queued(rayjob) and not spec.get("clusterSelector") \
        and not status.get("rayClusterName")


def owned(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` carries our ``app.kubernetes.io/managed-by`` label."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_MANAGED_BY) == MANAGED_BY


def _parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    with contextlib.suppress(ValueError):
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return None


@dataclass(frozen=True)
class ClusterInfo:
    """One row of ``cluster list``, for either backend."""

    name: str
    backend: str
    owner: str
    pool: str
    gpu_type: str
    workers_ready: int | None
    workers_desired: int
    status: str
    created_at: dt.datetime | None
    dashboard: str | None = None
    namespace: str | None = None
    detail: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    kind: str = "RayCluster"  # or a queued "RayJob" that has no RayCluster yet
    queue: QueueInfo | None = field(default=None, compare=False)  # while Kueue holds it

    @property
    def workers(self) -> str:
        """``ready/desired`` (``?`` when readiness is unknown)."""
        ready = "?" if self.workers_ready is None else self.workers_ready
        return f"{ready}/{self.workers_desired}"


def cluster_info(obj: Mapping[str, Any], queue: QueueInfo | None = None) -> ClusterInfo:
    """The ``cluster list`` row of a RayCluster object - or of a queued RayJob that has no
    RayCluster yet (its ``rayClusterSpec``); with ``queue`` (Kueue holds it) its status is
    ``queued``."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    kind = obj.get("kind") or "RayCluster"
    status = {} if kind == "RayJob" else obj.get("status") or {}
    spec = obj.get("spec") or {}
    spec = spec.get("rayClusterSpec") or {} if kind == "RayJob" else spec
    desired = status.get("desiredWorkerReplicas")
    if desired is None:
        desired = sum(int(g.get("replicas") or 0) for g in spec.get("workerGroupSpecs") or [])
    ready = status.get("readyWorkerReplicas", status.get("availableWorkerReplicas"))
    state = status.get("state") or ("suspended" if spec.get("suspend") else "provisioning")
    if queue is not None:
        state = "queued"
    if meta.get("deletionTimestamp"):
        state = "deleting"
    head = status.get("head") or {}
    endpoints = status.get("endpoints") or {}
    dashboard = None
    if head.get("serviceName") or head.get("serviceIP"):
        host = head.get("serviceName") or head.get("serviceIP")
        dashboard = f"http://{host}:{endpoints.get('dashboard', '8265')}"
    return ClusterInfo(
        name=meta.get("name", "?"), backend="kuberay", owner=labels.get(LABEL_OWNER, "?"),
        pool=labels.get(LABEL_POOL, "?"), gpu_type=labels.get(LABEL_GPU_TYPE, "?"),
        workers_ready=ready, workers_desired=int(desired), status=state,
        created_at=_parse_time(meta.get("creationTimestamp")), dashboard=dashboard,
        namespace=meta.get("namespace"), detail=dict(obj), kind=kind, queue=queue,
    )
