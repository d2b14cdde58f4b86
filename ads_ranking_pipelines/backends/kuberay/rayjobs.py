"""RayJob operations: wait for a job's cluster, read its status, follow its driver log, stop
it, list ours. Used by sessions (one RayJob per submitted job) and by the CLI directly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ads_ranking_pipelines.backends.base import BackendError, JobStatus
from ads_ranking_pipelines.backends.kuberay import calls, queueing
from ads_ranking_pipelines.backends.kuberay.client import RAYJOBS, KubeError, NotFound
from ads_ranking_pipelines.backends.kuberay.context import KubeRayContext
from ads_ranking_pipelines.backends.kuberay.health import StartupWatch
from ads_ranking_pipelines.backends.kuberay.logs import LogFollower
from ads_ranking_pipelines.backends.kuberay.status import (
    FAILED_DEPLOYMENT,
    JOB_NAME_LABELS,
    READY_DEPLOYMENT,
    failure_text,
    job_status_from_rayjob,
    owned,
)
from ads_ranking_pipelines.kuberay.labels import LABEL_MANAGED_BY, MANAGED_BY


class RayJobs:
    """The RayJob operations over one :class:`KubeRayContext`."""

    def __init__(self, ctx: KubeRayContext) -> None:
        self.ctx = ctx

    def startup_watch(self, namespace: str) -> StartupWatch:
        client = self.ctx.client
        return StartupWatch(
            list_pods=lambda selector: client.list_pods(namespace, selector),
            list_events=lambda pod: client.list_events(
                namespace, f"involvedObject.kind=Pod,involvedObject.name={pod}"),
            failure_polls=self.ctx.failure_polls,
            unschedulable_grace_s=self.ctx.unschedulable_grace_s)

    def wait_until_running(self, namespace: str, name: str, timeout_s: float | None = None) -> dict:
        """Poll the RayJob until KubeRay reports its cluster up (``jobDeploymentStatus``
        Running or Complete). Fails with KubeRay's / the scheduler's words as soon as the
        deployment fails, the cluster cannot create its pods (``ReplicaFailure``) or a Ray
        pod stays unschedulable (:class:`StartupWatch`), and on timeout."""
        watch = self.startup_watch(namespace)

        def ready(obj: dict[str, Any], status: dict[str, Any]) -> dict | None:
            deployment = status.get("jobDeploymentStatus") or ""
            if deployment in FAILED_DEPLOYMENT:
                raise BackendError(failure_text("RayJob", name, namespace, status))
            if deployment in READY_DEPLOYMENT:
                return status
            problem = watch.check(status.get("rayClusterName"), status.get("rayClusterStatus"))
            if problem:
                raise BackendError(f"RayJob {namespace}/{name}: {problem}")
            return None

        def late(status: dict[str, Any], timeout_s: float) -> str:
            cluster = status.get("rayClusterStatus") or {}
            return (f"RayJob {namespace}/{name} did not start within {timeout_s:.0f}s "
                    f"(jobDeploymentStatus {status.get('jobDeploymentStatus') or 'New'!r}, "
                    f"RayCluster state {cluster.get('state') or 'unknown'!r})")

        return self.ctx.poll_status(RAYJOBS, namespace, name, timeout_s, ready, late)

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

    def submitter_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The submitter Job's pods of RayJob ``name`` (KubeRay names the Job after the RayJob;
        Kubernetes labels a Job's pods with its name), oldest first."""
        for key in JOB_NAME_LABELS:
            pods = self.ctx.client.list_pods(namespace, f"{key}={name}")
            if pods:
                return sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                                   p["metadata"].get("name", "")))
        return []

    def logs(self, namespace: str, name: str, follow: bool = True) -> Iterator[str]:
        """The driver log lines; with ``follow`` until the RayJob is terminal, each line once
        even when the submitter was retried (:class:`LogFollower`)."""
        if follow:
            return LogFollower(self.ctx, namespace, name,
                               pods=lambda: self.submitter_pods(namespace, name),
                               terminal=lambda: self._terminal(namespace, name)).lines()
        pods = self.submitter_pods(namespace, name)
        if not pods or (pods[-1].get("status") or {}).get("phase") == "Pending":
            return iter(())
        try:
            text = self.ctx.client.read_pod_log(namespace, pods[-1]["metadata"]["name"])
        except KubeError as exc:
            raise BackendError(f"cannot read the log of RayJob {namespace}/{name}: {exc}") from exc
        return iter(text.splitlines())

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
