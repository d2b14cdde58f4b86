"""The production provisioning resource: each run's Ray job a RayJob on KubeRay (or a RayJob on
an existing RayCluster, by ``clusterSelector``)."""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from pydantic import Field

from ads_ranking_pipelines.backends import factory
from ads_ranking_pipelines.backends.base import RayBackend
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import PoolCatalog
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.config.validation import RequestError, ResolvedRequest
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource, failure


class KubeRayResource(RayClusterResource):
    """Each Ray job a RayJob on KubeRay (KubeRay creates and deletes its cluster).

    The Ray image is ``image``, else the run's ``dagster/image`` tag, else ``ray_image`` (from
    ``ADS_RANKING_RAY_IMAGE``); it must be built from this repository's Dockerfile. The
    storage root must be object storage or a path on ``shared_volume_claim``.
    """

    storage_home: str = Field(description="The storage root the Ray pods read and write (ADS_RANKING_HOME).")
    namespace: str = "ads-ranking"
    image: Optional[str] = Field(None, description="Ray image built from this repository's Dockerfile.")
    ray_image: Optional[str] = Field(None, description="Fallback image (ADS_RANKING_RAY_IMAGE).")
    service_account: Optional[str] = Field(None, description="ServiceAccount of the Ray pods.")
    auth_secret: Optional[str] = Field(None, description="Secret (key auth_token) for Ray token auth.")
    shared_volume_claim: Optional[str] = Field(None, description="PVC holding a path storage root.")
    rayjob_deletion: str = Field("rules", description="rules (KubeRay deletion rules) or shutdown.")
    kube_context: Optional[str] = None
    kube_config_file: Optional[str] = Field(None, description="kubeconfig path; default: $KUBECONFIG or ~/.kube/config.")
    in_cluster: bool = False
    ready_timeout_s: float = 900.0
    replica_failure_grace_s: float = Field(
        120.0, description="Seconds a Ray cluster's pod-creation failure (ReplicaFailure: quota, "
        "admission) may last while KubeRay retries, before the run fails with its words.")
    dev_working_tree: Optional[str] = Field(
        None, description="Development mode: ship this working tree's package to the Ray pods "
        "(zipped under the storage root, Ray runtime_env py_modules) on top of the image.")
    priority_class: Optional[str] = Field(
        None, description="Kueue WorkloadPriorityClass for this run (a Kueue pool only); "
        "default: the pool's for a scheduled run, a backfill or a manual launch.")
    queue_wait_limit_s: Optional[float] = Field(
        12 * 3600.0, gt=0, description="On a Kueue pool: how long a job may wait for "
        "admission before the run fails with Kueue's words (None: no limit).")

    backend_name: ClassVar[str] = "kuberay"

    def python(self) -> str:
        return self.job_python or "python"

    def settings(self) -> Settings:
        return Settings(
            home=self.storage_home, pool_catalog=self.pool_catalog, state_dir="",
            backend="kuberay", namespace=self.namespace, ray_image=self.ray_image,
            ray_service_account=self.service_account, ray_auth_secret=self.auth_secret,
            shared_volume_claim=self.shared_volume_claim, rayjob_deletion=self.rayjob_deletion,
            replica_failure_grace_s=self.replica_failure_grace_s,
            kube_in_cluster=self.in_cluster, kube_context=self.kube_context,
            kube_config_file=self.kube_config_file)

    def request_fields(self) -> dict[str, Any]:
        settings = self.settings()
        image = factory.ray_image(settings, self.image, self._run_tags)
        return {**factory.kuberay_fields(settings, image),
                "run_kind": factory.run_kind(self._run_tags), "priority_class": self.priority_class}

    def resolve(self, request: ClusterRequest, catalog: PoolCatalog) -> ResolvedRequest:
        problems = factory.dev_mode_problems(self.settings()) if self.dev_working_tree else []
        return factory.kuberay_request(request, self.settings(), catalog, extra=problems)

    def target_problems(self, request: ClusterRequest) -> list[RequestError]:
        from ads_ranking_pipelines.backends.kuberay.borrowed import cluster_problems, existing_cluster

        cluster = existing_cluster(self.make_backend(), request.namespace, self.existing_cluster)
        return cluster_problems(cluster, request)

    def open_session(self, backend: RayBackend, resolved: ResolvedRequest) -> Any:
        if self.existing_cluster is None:
            return super().open_session(backend, resolved)
        from ads_ranking_pipelines.backends.kuberay.borrowed import selector_session

        return selector_session(backend, resolved.request.namespace, self.existing_cluster)

    def dev_py_modules(self) -> tuple[str, ...]:
        """Development mode: the working tree's package zipped under the storage root."""
        if not self.dev_working_tree:
            return ()
        return (factory.upload_dev_package(self.settings(), self.dev_working_tree),)

    def make_backend(self, run_id: str | None = None,
                     code_location: str | None = None) -> RayBackend:
        from ads_ranking_pipelines.backends.base import BackendError

        try:
            log = self._log
            return factory.kuberay_backend(self.settings(), self.catalog(),
                                           ready_timeout_s=self.ready_timeout_s,
                                           queue_wait_limit_s=self.queue_wait_limit_s,
                                           on_queue=(lambda text: log.info(f"[kueue] {text}"))
                                           if log is not None else None,
                                           run_id=run_id, code_location=code_location,
                                           py_modules=self.dev_py_modules())
        except BackendError as exc:
            raise failure(f"cannot reach Kubernetes: {exc}") from None
