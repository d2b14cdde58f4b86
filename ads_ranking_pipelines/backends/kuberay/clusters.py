"""Long-lived RayClusters for the CLI: create (and wait until ready), list, describe, delete,
and RayJobs submitted to such a cluster through ``clusterSelector``.

Only objects carrying our ``app.kubernetes.io/managed-by`` label are listed, deleted or
submitted to. A cluster that cannot come up fails once its grace is over, with KubeRay's or
the scheduler's words (:class:`~.health.StartupWatch`), not after the readiness timeout.
On a Kueue pool a RayCluster is created suspended and listed ``queued`` (Kueue's words,
position, time queued) until Kueue admits it; so is a queued RayJob of ours with no RayCluster
yet (a queued Dagster run).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ads_ranking_pipelines.backends.base import BackendError, JobSpec
from ads_ranking_pipelines.backends.kuberay import calls, queueing
from ads_ranking_pipelines.backends.kuberay.status import (
    ORIGINATED_FROM_CRD_LABEL,
    ORIGINATED_FROM_NAME_LABEL,
    ClusterInfo,
    cluster_info,
    owned,
    queued_without_cluster,
)
from ads_ranking_pipelines.backends.kuberay.context import KubeRayContext
from ads_ranking_pipelines.backends.kuberay.rayjobs import RayJobs
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.validation import ResolvedRequest
from ads_ranking_pipelines.backends.kuberay.client import (
    RAYCLUSTERS,
    RAYJOBS,
    NotFound,
    new_creation_token,
)
from ads_ranking_pipelines.kuberay.job_fields import rayjob_for_cluster
from ads_ranking_pipelines.kuberay.labels import CLUSTER_NAME_LABEL, LABEL_MANAGED_BY, MANAGED_BY, RAY_CLUSTER_LABEL
from ads_ranking_pipelines.kuberay.notebook import with_notebook
from ads_ranking_pipelines.kuberay.raycluster import build_raycluster



class RayClusters:
    """Long-lived RayClusters and jobs on them, over one :class:`KubeRayContext`."""

    def __init__(self, ctx: KubeRayContext, jobs: RayJobs) -> None:
        self.ctx = ctx
        self.jobs = jobs

    def render_cluster(self, request: ClusterRequest | ResolvedRequest, *,
                       notebook: bool = False) -> dict[str, Any]:
        """The RayCluster; with ``notebook``, with notebook support (``with_notebook``)."""
        ctx = self.ctx
        manifest = build_raycluster(ctx.resolve(request), labels=ctx.labels, run_id=ctx.run_id,
                                    code_location=ctx.code_location)
        return with_notebook(manifest) if notebook else manifest

    def create_cluster(self, request: ClusterRequest | ResolvedRequest, *, wait: bool = True,
                       timeout_s: float | None = None, delete_on_failure: bool = True,
                       notebook: bool = False) -> ClusterInfo:
        """Create a RayCluster for ``request``; with ``wait``, until its state is ``ready``.

        A cluster that fails (KubeRay's reason verbatim), does not get ready in time or whose
        wait is interrupted is deleted again when ``delete_on_failure``. A name taken by an
        object we did not create fails with the API server's 409 explained.
        """
        manifest = self.render_cluster(request, notebook=notebook)
        ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        token = new_creation_token()
        obj = calls.create(self.ctx.client, RAYCLUSTERS, ns, manifest, token=token,
                           what=f"RayCluster {ns}/{name}")
        if not wait:
            return cluster_info(obj)
        try:
            return self.wait_cluster_ready(ns, name, timeout_s)
        except BaseException:
            if delete_on_failure:
                calls.delete_if_token(self.ctx.client, RAYCLUSTERS, ns, name, token)
                self.ctx.client.wait_deleted(RAYCLUSTERS, ns, name, self.ctx.teardown_timeout_s,
                                             self.ctx.poll_interval_s)
            raise

    def wait_cluster_ready(self, namespace: str, name: str, timeout_s: float | None = None) -> ClusterInfo:
        """Poll until the RayCluster's state is ``ready``; fail on a lasting ``ReplicaFailure``
        condition or an unschedulable Ray pod (:class:`~.health.StartupWatch`)."""
        watch = self.jobs.startup_watch(namespace)

        def ready(obj: dict[str, Any], status: dict[str, Any]) -> ClusterInfo | None:
            if status.get("state") == "ready":
                return cluster_info(obj)
            problem = watch.check(name, status)
            if problem:
                raise BackendError(problem)
            return None

        def late(status: dict[str, Any], timeout_s: float) -> str:
            return (f"RayCluster {namespace}/{name} was not ready within {timeout_s:.0f}s "
                    f"(state {status.get('state') or 'unknown'!r})")

        return self.ctx.poll_status(RAYCLUSTERS, namespace, name, timeout_s, ready, late)

    def _info(self, obj: dict[str, Any]) -> ClusterInfo:
        """The row of a RayCluster or queued RayJob; Kueue's words while Kueue holds it."""
        queue = queueing.queue_info(self.ctx.client, obj) if queueing.is_queued(obj) else None
        return cluster_info(obj, queue)

    def _kueue_pools(self) -> bool:
        return any(pool.kueue is not None for pool in self.ctx.catalog)

    def list_clusters(self, namespace: str | None) -> list[ClusterInfo]:
        """Our RayClusters in ``namespace`` (None: every namespace, cluster-wide ``list``)
        and, with Kueue pools in the catalog, our queued RayJobs that have no RayCluster yet
        (a queued Dagster run): Kueue's words, position and time queued."""
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
        objs = self.ctx.client.list(RAYCLUSTERS, namespace, selector)
        if self._kueue_pools():
            objs += [j for j in self.ctx.client.list(RAYJOBS, namespace, selector)
                     if queued_without_cluster(j)]
        return sorted((self._info(o) for o in objs), key=lambda c: (c.namespace or "", c.name))

    def get_cluster(self, namespace: str, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The RayCluster and its pods."""
        try:
            obj = self.ctx.client.get(RAYCLUSTERS, namespace, name)
        except NotFound:
            raise BackendError(f"RayCluster {namespace}/{name} not found") from None
        pods = self.ctx.client.list_pods(namespace, f"{RAY_CLUSTER_LABEL}={name}")
        return obj, pods

    def describe_cluster(self, namespace: str, name: str
                         ) -> tuple[ClusterInfo, list[dict[str, Any]]]:
        """The row and pods of RayCluster ``name`` - or of our queued RayJob ``name`` that has
        no RayCluster yet (no pods) - with Kueue's words while Kueue holds it."""
        try:
            obj = self.ctx.client.get(RAYCLUSTERS, namespace, name)
        except NotFound:
            job = self._queued_job(namespace, name)
            if job is None:
                raise BackendError(f"RayCluster {namespace}/{name} not found (nor a queued "
                                   "RayJob of that name)") from None
            return self._info(job), []
        pods = self.ctx.client.list_pods(namespace, f"{RAY_CLUSTER_LABEL}={name}")
        return self._info(obj), pods

    def _queued_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        if not self._kueue_pools():
            return None
        try:
            job = self.ctx.client.get(RAYJOBS, namespace, name)
        except NotFound:
            return None
        return job if owned(job) and queued_without_cluster(job) else None

    def delete_cluster(self, namespace: str, name: str, *, wait: bool = True) -> bool:
        """Delete a RayCluster we manage (never one of another owner, nor a RayJob's cluster,
        which KubeRay deletes with its job), and first the RayJobs we submitted to it (their
        Ray jobs are stopped by KubeRay's finalizer). False when it was already gone."""
        try:
            obj = self.ctx.client.get(RAYCLUSTERS, namespace, name)
        except NotFound:
            return False
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if not owned(obj):
            raise BackendError(f"RayCluster {namespace}/{name} is not managed by {MANAGED_BY} "
                               f"(label {LABEL_MANAGED_BY}); not deleting it")
        if labels.get(ORIGINATED_FROM_CRD_LABEL) == "RayJob":
            raise BackendError(f"RayCluster {namespace}/{name} belongs to RayJob "
                               f"{labels.get(ORIGINATED_FROM_NAME_LABEL)}; stop that job instead")
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY},{CLUSTER_NAME_LABEL}={name}"
        jobs = [j["metadata"]["name"] for j in self.ctx.client.list(RAYJOBS, namespace, selector)]
        for job in jobs:
            self.ctx.client.delete(RAYJOBS, namespace, job)
        for job in jobs if wait else ():
            self.ctx.await_deleted(RAYJOBS, namespace, job,
                                what=f"RayJob {namespace}/{job} on cluster {name}")
        deleted = self.ctx.client.delete(RAYCLUSTERS, namespace, name)
        if wait:
            self.ctx.await_deleted(RAYCLUSTERS, namespace, name)
        return deleted

    def build_rayjob_for_cluster(self, cluster: Mapping[str, Any], job: JobSpec, *,
                                 owner: str = "unknown") -> dict[str, Any]:
        """A RayJob that runs ``job`` on the existing RayCluster ``cluster`` (``clusterSelector``):
        no cluster of its own, so nothing is shut down when it ends."""
        ctx = self.ctx
        return rayjob_for_cluster(cluster, job, owner=owner, labels=ctx.labels,
                                  run_id=ctx.run_id, code_location=ctx.code_location,
                                  deletion=ctx.rayjob_deletion)

    def submit_to_cluster(self, namespace: str, cluster_name: str, job: JobSpec, *,
                          owner: str = "unknown") -> str:
        """Create a RayJob running ``job`` on the existing cluster ``cluster_name``; returns
        the RayJob's name (its id for status/logs/stop)."""
        try:
            cluster = self.ctx.client.get(RAYCLUSTERS, namespace, cluster_name)
        except NotFound:
            raise BackendError(f"RayCluster {namespace}/{cluster_name} not found") from None
        if not owned(cluster):
            raise BackendError(f"RayCluster {namespace}/{cluster_name} is not managed by "
                               f"{MANAGED_BY}; not submitting to it")
        manifest = self.build_rayjob_for_cluster(cluster, job, owner=owner)
        obj = calls.create(self.ctx.client, RAYJOBS, namespace, manifest,
                           what=f"RayJob on {namespace}/{cluster_name}")
        return obj["metadata"]["name"]
