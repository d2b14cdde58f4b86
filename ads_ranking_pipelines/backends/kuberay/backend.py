"""The KubeRay backend: sessions of RayJobs, long-lived RayClusters, and the RayJob operations
the CLI also uses - one client, composed (no mixins): :class:`~.rayjobs.RayJobs` and
:class:`~.clusters.RayClusters` over one :class:`~.context.KubeRayContext`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ads_ranking_pipelines.backends.base import BackendError, JobSpec, JobStatus, RayBackend
from ads_ranking_pipelines.backends.kuberay.client import KubeError, KubeRayClient, RetryPolicy
from ads_ranking_pipelines.backends.kuberay.clusters import RayClusters
from ads_ranking_pipelines.backends.kuberay.context import KubeRayContext, StatusCallback
from ads_ranking_pipelines.backends.kuberay.notebooks import (
    KubeRayNotebooks,
    NotebookInfo,
    StartedNotebook,
)
from ads_ranking_pipelines.backends.kuberay.rayjobs import RayJobs
from ads_ranking_pipelines.backends.kuberay.session import KubeRayClusterSession, closing
from ads_ranking_pipelines.backends.kuberay.status import ClusterInfo
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import PoolCatalog
from ads_ranking_pipelines.config.validation import ResolvedRequest
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob

__all__ = ["KubeRayBackend", "StatusCallback"]


class KubeRayBackend(RayBackend):
    """RayJobs (a fresh cluster per job) and long-lived RayClusters through
    :class:`KubeRayClient`. Keyword arguments are :class:`KubeRayContext` fields
    (``namespace``, ``labels``, ``run_id``, ``code_location``, timeouts, ``on_status``)."""

    name = "kuberay"

    def __init__(self, client: KubeRayClient, catalog: PoolCatalog, **settings: Any) -> None:
        self.ctx = KubeRayContext(client=client, catalog=catalog, **settings)
        self.jobs = RayJobs(self.ctx)
        self.clusters = RayClusters(self.ctx, self.jobs)
        self.notebooks = KubeRayNotebooks(self.ctx)

    @classmethod
    def from_kube_config(cls, catalog: PoolCatalog, *, in_cluster: bool = False,
                         context: str | None = None, config_file: str | None = None,
                         retry: RetryPolicy | None = None, **kwargs: Any) -> "KubeRayBackend":
        """Reach the API server from a kubeconfig (``context``, ``config_file``) or, with
        ``in_cluster``, from the pod's service account. The caller chooses; no fallback."""
        try:
            client = (KubeRayClient.in_cluster(retry=retry) if in_cluster
                      else KubeRayClient.from_kubeconfig(context=context, config_file=config_file,
                                                         retry=retry))
        except KubeError as exc:
            raise BackendError(str(exc)) from exc
        return cls(client, catalog, **kwargs)

    @property
    def client(self) -> KubeRayClient:
        return self.ctx.client

    @property
    def on_status(self) -> StatusCallback | None:
        return self.ctx.on_status

    @on_status.setter
    def on_status(self, callback: StatusCallback | None) -> None:
        self.ctx.on_status = callback

    # ---- sessions: one RayJob (and its own cluster) per submitted job ------------------------
    @contextlib.contextmanager
    def session(self, request: ClusterRequest | ResolvedRequest, *, run_id: str | None = None,
                code_location: str | None = None) -> Iterator[KubeRayClusterSession]:
        ctx = self.ctx
        run_id, code_location = run_id or ctx.run_id, code_location or ctx.code_location
        # Everything that can be checked is checked once, before anything is created.
        resolved = ctx.resolve(request)
        build_rayjob(resolved, entrypoint="true", submission_id="preflight",
                     labels=ctx.labels, run_id=run_id, code_location=code_location,
                     deletion=ctx.rayjob_deletion)
        with closing(KubeRayClusterSession(ctx, self.jobs, resolved, run_id=run_id,
                                           code_location=code_location)) as session:
            yield session

    # ---- the CLI's operations ----------------------------------------------------------------
    def wait_until_running(self, namespace: str, name: str, timeout_s: float | None = None) -> dict:
        return self.jobs.wait_until_running(namespace, name, timeout_s)

    def job_status(self, namespace: str, name: str) -> JobStatus:
        return self.jobs.status(namespace, name)

    def submitter_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        return self.jobs.submitter_pods(namespace, name)

    def job_logs(self, namespace: str, name: str, follow: bool = True) -> Iterator[str]:
        return self.jobs.logs(namespace, name, follow=follow)

    def stop_job(self, namespace: str, name: str, *, require_owned: bool = True,
                 wait: bool = True) -> bool:
        return self.jobs.stop(namespace, name, require_owned=require_owned, wait=wait)

    def list_jobs(self, namespace: str) -> list[dict[str, Any]]:
        return self.jobs.list(namespace)

    def resolve(self, request: ClusterRequest | ResolvedRequest) -> ResolvedRequest:
        return self.ctx.resolve(request)

    def render_cluster(self, request: ClusterRequest | ResolvedRequest, *,
                       notebook: bool = False) -> dict[str, Any]:
        return self.clusters.render_cluster(request, notebook=notebook)

    def create_cluster(self, request: ClusterRequest | ResolvedRequest, *, wait: bool = True,
                       timeout_s: float | None = None, delete_on_failure: bool = True,
                       notebook: bool = False) -> ClusterInfo:
        return self.clusters.create_cluster(request, wait=wait, timeout_s=timeout_s,
                                            delete_on_failure=delete_on_failure, notebook=notebook)

    def wait_cluster_ready(self, namespace: str, name: str,
                           timeout_s: float | None = None) -> ClusterInfo:
        return self.clusters.wait_cluster_ready(namespace, name, timeout_s)

    def list_clusters(self, namespace: str | None) -> list[ClusterInfo]:
        return self.clusters.list_clusters(namespace)

    def get_cluster(self, namespace: str, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        return self.clusters.get_cluster(namespace, name)

    def describe_cluster(self, namespace: str, name: str
                         ) -> tuple[ClusterInfo, list[dict[str, Any]]]:
        return self.clusters.describe_cluster(namespace, name)

    def delete_cluster(self, namespace: str, name: str, *, wait: bool = True) -> bool:
        return self.clusters.delete_cluster(namespace, name, wait=wait)

    def submit_to_cluster(self, namespace: str, cluster_name: str, job: JobSpec, *,
                          owner: str = "unknown") -> str:
        return self.clusters.submit_to_cluster(namespace, cluster_name, job, owner=owner)

    # ---- notebooks on long-lived clusters (X-Ray) ---------------------------------------------
    def list_notebooks(self, namespace: str | None) -> dict[tuple[str, str], NotebookInfo]:
        return self.notebooks.list(namespace)

    def start_notebook(self, namespace: str, cluster_name: str, owner: str) -> StartedNotebook:
        return self.notebooks.start(namespace, cluster_name, owner)

    def stop_notebook(self, namespace: str, cluster_name: str) -> bool:
        return self.notebooks.stop(namespace, cluster_name)
