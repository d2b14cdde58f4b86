"""RayJob operations: wait for a job's cluster, read its status, follow its driver log, stop
it, list ours. Used by sessions (one RayJob per submitted job) and by the CLI directly.

Reading a status also does the one cleanup KubeRay's deletion rules cannot: the RayCluster of
a job that ended STOPPED is deleted at once (:meth:`RayJobs.release_stopped`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from ads_ranking_pipelines.backends.base import BackendError, JobStatus
from ads_ranking_pipelines.backends.kuberay import calls, queueing
from ads_ranking_pipelines.backends.kuberay.client import (
    RAYCLUSTERS,
    RAYJOBS,
    KubeError,
    NotFound,
)
from ads_ranking_pipelines.backends.kuberay.context import KubeRayContext
from ads_ranking_pipelines.backends.kuberay.health import StartupWatch, SubmitterWatch
from ads_ranking_pipelines.backends.kuberay.logs import LogFollower, ReplayFilter
from ads_ranking_pipelines.backends.kuberay.status import (
    FAILED_DEPLOYMENT,
    JOB_NAME_LABELS,
    failure_text,
    job_status_from_rayjob,
    owned,
    stopped_job_cluster,
)
from ads_ranking_pipelines.kuberay.labels import LABEL_MANAGED_BY, MANAGED_BY

log = logging.getLogger(__name__)


class RayJobs:
    """The RayJob operations over one :class:`KubeRayContext`."""

    def __init__(self, ctx: KubeRayContext) -> None:
        self.ctx = ctx
        self._released: set[str] = set()  # uids of STOPPED RayJobs whose cluster is gone

    def startup_watch(self, namespace: str) -> StartupWatch:
        client = self.ctx.client
        return StartupWatch(
            list_pods=lambda selector: client.list_pods(namespace, selector),
            list_events=lambda pod: client.list_events(
                namespace, f"involvedObject.kind=Pod,involvedObject.name={pod}"),
            replica_failure_grace_s=self.ctx.replica_failure_grace_s,
            unschedulable_grace_s=self.ctx.unschedulable_grace_s)

    def submitter_watch(self, namespace: str, name: str) -> SubmitterWatch:
        client = self.ctx.client
        return SubmitterWatch(
            list_pods=lambda: self.submitter_pods(namespace, name),
            list_job_events=lambda: client.list_events(
                namespace, f"involvedObject.kind=Job,involvedObject.name={name}"),
            list_pod_events=lambda pod: client.list_events(
                namespace, f"involvedObject.kind=Pod,involvedObject.name={pod}"),
            unschedulable_grace_s=self.ctx.unschedulable_grace_s)

    def wait_until_running(self, namespace: str, name: str, timeout_s: float | None = None) -> dict:
        """Poll the RayJob until KubeRay reports its cluster up and the job submitted
        (``jobDeploymentStatus`` Complete, or Running with a ``jobStatus`` or a started
        submitter pod). Fails with KubeRay's / the scheduler's / the Job controller's words as
        soon as the deployment fails, the cluster cannot create its pods (``ReplicaFailure``),
        a Ray pod stays unschedulable (:class:`StartupWatch`) or the submitter Job's pod is
        refused or unschedulable (:class:`SubmitterWatch`: KubeRay itself would wait until
        ``activeDeadlineSeconds``), and on timeout."""
        watch = self.startup_watch(namespace)
        submitter = self.submitter_watch(namespace, name)

        def ready(obj: dict[str, Any], status: dict[str, Any]) -> dict | None:
            deployment = status.get("jobDeploymentStatus") or ""
            if deployment in FAILED_DEPLOYMENT:
                raise BackendError(failure_text("RayJob", name, namespace, status))
            if deployment == "Complete" or (deployment == "Running" and status.get("jobStatus")):
                return status
            if deployment == "Running":
                problem = submitter.check(name)
                return status if submitter.started else self._raise_if(namespace, name, problem)
            problem = watch.check(status.get("rayClusterName"), status.get("rayClusterStatus"))
            return self._raise_if(namespace, name, problem)

        def late(status: dict[str, Any], timeout_s: float) -> str:
            cluster = status.get("rayClusterStatus") or {}
            text = (f"RayJob {namespace}/{name} did not start within {timeout_s:.0f}s "
                    f"(jobDeploymentStatus {status.get('jobDeploymentStatus') or 'New'!r}, "
                    f"RayCluster state {cluster.get('state') or 'unknown'!r}")
            if status.get("jobDeploymentStatus") == "Running":
                text += ", its submitter pod not started"
            return text + ")"

        return self.ctx.poll_status(RAYJOBS, namespace, name, timeout_s, ready, late)

    @staticmethod
    def _raise_if(namespace: str, name: str, problem: str | None) -> None:
        if problem:
            raise BackendError(f"RayJob {namespace}/{name}: {problem}")

    def status(self, namespace: str, name: str) -> JobStatus:
        return self.status_and_queue(namespace, name)[0]

    def status_and_queue(self, namespace: str, name: str
                         ) -> tuple[JobStatus, queueing.QueueInfo | None]:
        """The job's status and, while Kueue holds it (suspended: not admitted yet, or
        preempted), where it stands in the queue; a queued job is QUEUED, not STOPPED."""
        obj = calls.read_status(self.ctx.client, RAYJOBS, namespace, name,
                                missing="not found (deleted, or never created)")
        if queueing.is_queued(obj):
            info = queueing.queue_info(self.ctx.client, obj)
            return queueing.queued_status(info), info
        self.release_stopped(obj)
        return job_status_from_rayjob(obj.get("status")), None

    def wait_until_admitted(self, namespace: str, name: str,
                            watch: queueing.QueueWatch) -> None:
        """Poll a Kueue-managed RayJob until Kueue has admitted it (``spec.suspend`` false),
        telling ``watch`` Kueue's words; BackendError with them past the queue-wait limit."""
        def ready(obj: dict[str, Any], status: dict[str, Any]) -> bool | None:
            if not queueing.is_queued(obj):
                watch.admitted()
                return True
            watch.observe(queueing.queue_info(self.ctx.client, obj))
            return None

        def late(status: dict[str, Any], timeout_s: float) -> str:
            return f"RayJob {namespace}/{name}: still queued after {timeout_s:.0f}s"

        self.ctx.poll_status(RAYJOBS, namespace, name, float("inf"), ready, late)

    def release_stopped(self, rayjob: dict[str, Any]) -> bool:
        """Delete the RayCluster of our RayJob that ended STOPPED (no KubeRay deletion rule
        matches it: :func:`~.status.stopped_job_cluster`) - only a cluster the RayJob owns
        (its controller owner reference is the RayJob's uid). The RayJob stays, so its status
        and log can still be read; teardown or the garbage collector removes it. A failed
        delete is logged, not raised: the next status read tries again. True when deleted."""
        meta = rayjob.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        cluster = stopped_job_cluster(rayjob)
        uid = meta.get("uid") or ""
        if cluster is None or not owned(rayjob) or uid in self._released:
            return False
        client = self.ctx.client
        try:
            obj = client.get(RAYCLUSTERS, namespace, cluster)
        except NotFound:
            self._released.add(uid)
            return False
        except KubeError as exc:
            log.warning("cannot read RayCluster %s/%s of stopped RayJob %s: %s", namespace,
                        cluster, name, exc)
            return False
        cmeta = obj.get("metadata") or {}
        owners = {o.get("uid") for o in cmeta.get("ownerReferences") or [] if o.get("controller")}
        if uid not in owners:
            self._released.add(uid)
            return False
        try:
            if not cmeta.get("deletionTimestamp"):
                client.delete(RAYCLUSTERS, namespace, cluster)
        except KubeError as exc:
            log.warning("cannot delete RayCluster %s/%s of stopped RayJob %s: %s", namespace,
                        cluster, name, exc)
            return False
        self._released.add(uid)
        log.info("RayJob %s/%s ended STOPPED, which no KubeRay deletion rule matches: deleted "
                 "its RayCluster %s", namespace, name, cluster)
        return True

    def submitter_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The submitter Job's pods of RayJob ``name`` (KubeRay names the Job after the RayJob;
        Kubernetes labels a Job's pods with its name), oldest first."""
        for key in JOB_NAME_LABELS:
            pods = self.ctx.client.list_pods(namespace, f"{key}={name}")
            if pods:
                return sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                                   p["metadata"].get("name", "")))
        return []

    def logs(self, namespace: str, name: str, follow: bool = True,
             terminal: Callable[[], bool] | None = None) -> Iterator[str]:
        """The driver log lines; with ``follow`` until the RayJob is terminal (``terminal()``,
        by default its status read here), each line once even when the submitter was retried
        (:class:`LogFollower`)."""
        if follow:
            return LogFollower(self.ctx, namespace, name,
                               pods=lambda: self.submitter_pods(namespace, name),
                               terminal=terminal or (lambda: self._terminal(namespace, name))).lines()
        pods = self.submitter_pods(namespace, name)
        if not pods or (pods[-1].get("status") or {}).get("phase") == "Pending":
            return iter(())
        try:
            text = self.ctx.client.read_pod_log(namespace, pods[-1]["metadata"]["name"])
        except KubeError as exc:
            raise BackendError(f"cannot read the log of RayJob {namespace}/{name}: {exc}") from exc
        replay = ReplayFilter()  # one pod: only the submitter's own lines go
        return iter([line for line in text.splitlines() if replay.accept(line)])

    def _terminal(self, namespace: str, name: str) -> bool:
        try:
            return self.status(namespace, name).state.terminal
        except BackendError:
            return True  # deleted: nothing more will come

    def stop(self, namespace: str, name: str, *, require_owned: bool = True,
             wait: bool = True) -> bool:
        """Delete the RayJob; KubeRay's finalizer stops the Ray job, and the RayJob's own
        cluster goes with it. False when it was already gone."""
        try:
            obj = self.ctx.client.get(RAYJOBS, namespace, name)
        except NotFound:
            return False
        if require_owned and not owned(obj):
            raise BackendError(f"RayJob {namespace}/{name} is not managed by {MANAGED_BY}; "
                               "not touching it")
        deleted = self.ctx.client.delete(RAYJOBS, namespace, name)
        if wait:
            self.ctx.await_deleted(RAYJOBS, namespace, name)
        return deleted

    def list(self, namespace: str) -> list[dict[str, Any]]:
        return self.ctx.client.list(RAYJOBS, namespace, f"{LABEL_MANAGED_BY}={MANAGED_BY}")
