"""Building backends and run cluster requests from :class:`Settings`: the one place the
Dagster resources and the CLI both use.

:func:`run_request` turns a run's training parameters into the cluster request; for KubeRay
:func:`kuberay_request` runs every pre-flight check at once - pool and sizes against the
catalog, the Ray image (``config.images``), the storage root the pods must see
(``config.storage_root``) - and raises one ``RequestErrors`` listing every problem, each
naming its setting, before anything is created.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.images import DAGSTER_IMAGE_TAG, image_problems
from ads_ranking_pipelines.config.pools import PoolCatalog
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.config.storage_root import shared_volume_path, storage_problems
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.config.validation import RequestError, ResolvedRequest, resolve_request

if TYPE_CHECKING:
    from ads_ranking_pipelines.backends.kuberay import KubeRayBackend
    from ads_ranking_pipelines.backends.kuberay.client import RetryPolicy
    from ads_ranking_pipelines.backends.local import LocalRayBackend
    from ads_ranking_pipelines.backends.local_warm import WarmLocalBackend


def local_backend(settings: Settings, *, start_timeout_s: float = 180.0,
                  run_id: str | None = None, on_orphan: list[str] | None = None) -> "LocalRayBackend":
    from ads_ranking_pipelines.backends.local import LocalRayBackend

    return LocalRayBackend(settings.state_dir, start_timeout_s=start_timeout_s, run_id=run_id,
                           single_node=settings.local_single_node, on_orphan=on_orphan)


def kuberay_backend(settings: Settings, catalog: PoolCatalog, *, namespace: str | None = None,
                    context: str | None = None, in_cluster: bool | None = None,
                    retry: "RetryPolicy | None" = None, **ctx: Any) -> "KubeRayBackend":
    """KubeRay through the kubeconfig (``context`` or ``ADS_RANKING_KUBE_CONTEXT``, file
    ``KUBECONFIG``) or, with ``ADS_RANKING_KUBE_IN_CLUSTER``, the pod's service account.
    ``ctx`` are :class:`~.kuberay.context.KubeRayContext` fields (timeouts, labels, run id…)."""
    from ads_ranking_pipelines.backends.kuberay import KubeRayBackend

    ctx.setdefault("rayjob_deletion", settings.rayjob_deletion)
    ctx.setdefault("replica_failure_grace_s", settings.replica_failure_grace_s)
    return KubeRayBackend.from_kube_config(
        catalog, in_cluster=settings.kube_in_cluster if in_cluster is None else in_cluster,
        context=context or settings.kube_context, config_file=settings.kube_config_file,
        namespace=namespace or settings.namespace, retry=retry, **ctx)


def warm_local_backend(settings: Settings, keep_warm_s: float, run_id: str, code_version: str, *,
                       start_timeout_s: float = 180.0,
                       on_orphan: list[str] | None = None) -> "WarmLocalBackend":
    """A keep-warm run's backend: a matching warm cluster, else a new one kept ``keep_warm_s``
    idle after the run (``backends/local_warm.py``)."""
    from ads_ranking_pipelines.backends.local_warm import WarmLocalBackend

    return WarmLocalBackend(settings.state_dir, keep_warm_s, run_id, code_version,
                            lease_timeout_s=settings.controller_timeout_s, start_timeout_s=start_timeout_s,
                            single_node=settings.local_single_node, on_orphan=on_orphan)


def run_request(params: TrainingParams, run_id: str, **fields: Any) -> ClusterRequest:
    """The cluster request of a run: its pool and workers; ``fields`` add backend settings."""
    return ClusterRequest(
        name=f"arp-{run_id[:8]}", owner="dagster", gpu_pool=params.gpu_pool,
        workers=params.num_workers, gpus_per_worker=params.gpus_per_worker,
        cpus_per_worker=params.cpus_per_worker, **fields)


SCHEDULE_TAG = "dagster/schedule_name"
BACKFILL_TAG = "dagster/backfill"


def run_kind(run_tags: Mapping[str, str] | None) -> str:
    """What a Dagster run is, for its Kueue priority: a schedule's run, a backfill's, else a
    manual launch (Dagster's own ``dagster/schedule_name`` / ``dagster/backfill`` tags)."""
    tags = run_tags or {}
    if tags.get(SCHEDULE_TAG):
        return "scheduled"
    if tags.get(BACKFILL_TAG):
        return "backfill"
    return "manual"


def ray_image(settings: Settings, configured: str | None = None,
              run_tags: Mapping[str, str] | None = None) -> str | None:
    """The Ray pods' image: the resource's ``image``, else the run's ``dagster/image`` tag
    (what dagster-k8s sets for the run's own image), else ``ADS_RANKING_RAY_IMAGE``."""
    return configured or (run_tags or {}).get(DAGSTER_IMAGE_TAG) or settings.ray_image


def kuberay_fields(settings: Settings, image: str | None) -> dict[str, Any]:
    """ClusterRequest fields that come from the KubeRay deployment's settings."""
    fields: dict[str, Any] = {"namespace": settings.namespace, "image": image or ""}
    if settings.ray_service_account:
        fields["service_account"] = settings.ray_service_account
    if settings.ray_auth_secret:
        fields["auth_secret_name"] = settings.ray_auth_secret
    if settings.shared_volume_claim and shared_volume_path(settings.home).startswith("/"):
        fields["shared_volume_claim"] = settings.shared_volume_claim
        fields["shared_volume_path"] = shared_volume_path(settings.home)
    return fields


def kuberay_request(request: ClusterRequest, settings: Settings, catalog: PoolCatalog,
                    extra: list[RequestError] | None = None) -> ResolvedRequest:
    """Every pre-flight check for a KubeRay run at once; ``RequestErrors`` lists all."""
    problems: list[RequestError] = [*image_problems(request.image or None, field="image"),
                                    *storage_problems(settings.home, settings.shared_volume_claim),
                                    *(extra or [])]
    return resolve_request(request, catalog, extra_problems=problems)


def local_request(request: ClusterRequest, catalog: PoolCatalog) -> ResolvedRequest:
    """The local backend runs CPU pools only; otherwise as :func:`resolve_request`. It runs this
    machine's Python, not an image, so no image rule applies (the request carries none)."""
    request = request.model_copy(update={"image": ""})
    problems: list[RequestError] = []
    if request.gpus_per_worker or (request.gpu_pool in catalog
                                   and catalog.get(request.gpu_pool).has_gpus):
        cpu_pools = [p.name for p in catalog if not p.has_gpus]
        problems.append(RequestError(
            "gpu_pool", request.gpu_pool, f"a CPU pool ({', '.join(cpu_pools)}) with "
            "gpus_per_worker=0, or the kuberay backend", "the local backend has no GPUs"))
    return resolve_request(request, catalog, extra_problems=problems)


def dev_mode_problems(settings: Settings) -> list[RequestError]:
    """Development mode uploads the package where every Ray node can download it."""
    if settings.home.startswith(("s3://", "gs://")):
        return []
    return [RequestError("ADS_RANKING_DEV_WORKING_TREE", settings.dev_working_tree,
                         "unset, or with ADS_RANKING_HOME on s3:// or gs://",
                         "Ray downloads py_modules zips from object storage only")]


def upload_dev_package(settings: Settings, working_tree: str) -> str:
    """Zip ``working_tree``'s package (content-addressed name) under the storage root; its
    URI for ``runtime_env.py_modules``."""
    from ads_ranking_pipelines import devmode
    from ads_ranking_pipelines.storage import fs

    name, data = devmode.package_zip(working_tree)
    uri = fs.join(settings.home, "dev", "py_modules", name)
    if not fs.exists(uri):
        fs.write_bytes(uri, data)
    return devmode.dev_runtime_env_for_uri(uri)["py_modules"][0]
