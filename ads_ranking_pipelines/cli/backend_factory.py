"""What the ``cluster`` and ``job`` commands share: settings read once per invocation, the
pool catalog, building a validated :class:`ClusterRequest` from options, and the two
backends as the CLI uses them (local clusters found through their state files, KubeRay
through a kubeconfig or the pod's service account).

Nothing reads the environment at import: :func:`cli_env` is called from the command groups'
callbacks with ``os.environ``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import typer
from pydantic import ValidationError

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.cli.common import EXIT_INVALID, EXIT_RUNTIME, fail
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import CatalogError, PoolCatalog, load_catalog
from ads_ranking_pipelines.config.images import image_problems
from ads_ranking_pipelines.config.messages import (  # noqa: F401 - the CLI's wording, shared
    FIELD_OPTIONS,
    dns_name,
    option_for,
    request_error,
    validation_error,
)
from ads_ranking_pipelines.config.settings import Settings, SettingsError, account_name
from ads_ranking_pipelines.config.validation import (
    RequestError,
    ResolvedRequest,
    resolve_request,
)

if TYPE_CHECKING:
    from ads_ranking_pipelines.backends.kuberay import ClusterInfo, KubeRayBackend
    from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
    from ads_ranking_pipelines.backends.ray_job_api import RayJobApi

BACKENDS = ("local", "kuberay")



@dataclass
class CliEnv:
    environ: dict[str, str]
    settings: Settings
    _catalog: PoolCatalog | None = field(default=None, repr=False)

    @property
    def catalog(self) -> PoolCatalog:
        if self._catalog is None:
            try:
                self._catalog = load_catalog(self.settings.pool_catalog)
            except CatalogError as exc:
                fail(str(exc), EXIT_INVALID)
        return self._catalog

    @property
    def default_backend(self) -> str:
        return self.settings.backend

    @property
    def default_owner(self) -> str:
        return self.settings.owner or account_name(os.environ)


def cli_env(ctx: typer.Context) -> CliEnv:
    """The invocation's settings: made by the group callback, or now (a direct call)."""
    obj = ctx.find_object(CliEnv)
    if obj is None:
        obj = make_env(os.environ)
        ctx.obj = obj
    return obj


def make_env(environ: Mapping[str, str]) -> CliEnv:
    try:
        return CliEnv(dict(environ), Settings.from_environ(environ))
    except SettingsError as exc:
        fail(str(exc), EXIT_INVALID)


def backend_choice(env: CliEnv, backend: str | None) -> str:
    value = backend or env.default_backend
    if value not in BACKENDS:
        fail(f"invalid --backend={value!r}; valid: {', '.join(BACKENDS)}", EXIT_INVALID)
    return value


# ---- requests ---------------------------------------------------------------------------------
def parse_labels(values: list[str] | None) -> dict[str, str]:
    labels = {}
    for item in values or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"invalid --label {item!r}; valid: KEY=VALUE", EXIT_INVALID)
        labels[key] = value
    return labels


def build_request(env: CliEnv, *, name: str | None, owner: str | None, gpu_pool: str | None,
                  workers: int, gpus_per_worker: int, cpus_per_worker: float | None, memory: str | None,
                  head_cpus: float, head_memory: str, image: str | None, namespace: str | None,
                  labels: list[str] | None, autoscaling: bool,
                  kuberay: bool = True, run_kind: str = "interactive",
                  priority_class: str | None = None) -> ResolvedRequest:
    """A ClusterRequest from CLI options, resolved against the catalog once (exit 2 with
    every problem otherwise). For KubeRay (``kuberay``) the image - ``--image``, else
    ``ADS_RANKING_RAY_IMAGE`` - must be one built from this repository's Dockerfile.
    ``run_kind``/``priority_class``: the Kueue priority on a Kueue pool (a CLI cluster is
    interactive, a CLI-launched job manual)."""
    catalog = env.catalog
    pool_name = gpu_pool or env.settings.default_pool or catalog.default_pool
    owner = owner or env.default_owner
    fields: dict[str, Any] = {
        "name": name or dns_name(f"{owner}-{pool_name}"), "owner": owner, "gpu_pool": pool_name,
        "workers": workers, "gpus_per_worker": gpus_per_worker,
        "cpus_per_worker": cpus_per_worker, "memory_per_worker": memory,
        "head_cpus": head_cpus, "head_memory": head_memory, "labels": parse_labels(labels),
        "autoscaling": autoscaling, "run_kind": run_kind, "priority_class": priority_class,
    }
    fields["namespace"] = namespace or env.settings.namespace
    image = image or env.settings.ray_image
    problems = image_problems(image, field="image") if kuberay else []
    if kuberay:
        fields["image"] = image or ""
        if env.settings.ray_service_account:
            fields["service_account"] = env.settings.ray_service_account
        if env.settings.ray_auth_secret:
            fields["auth_secret_name"] = env.settings.ray_auth_secret
    try:
        return resolve_request(ClusterRequest(**fields), catalog, extra_problems=problems)
    except ValidationError as exc:
        fail(validation_error(exc), EXIT_INVALID)
    except RequestError as exc:
        fail(request_error(exc), EXIT_INVALID)


@contextlib.contextmanager
def sigterm_as_interrupt():
    """While creating something, SIGTERM unwinds like Ctrl-C so the cleanup code runs (the
    default action would kill the process and orphan what it started)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def errors_to_exit_codes():
    """Backend and API failures exit 1 with their message; invalid requests exit 2."""
    from ads_ranking_pipelines.backends.kuberay.client import KubeError

    try:
        yield
    except RequestError as exc:
        fail(request_error(exc), EXIT_INVALID)
    except (BackendError, KubeError) as exc:
        fail(str(exc), EXIT_RUNTIME)


# ---- KubeRay ------------------------------------------------------------------------------------
@dataclass
class KubeOptions:
    context: str | None = None
    in_cluster: bool = False
    namespace: str | None = None


def kuberay_backend(env: CliEnv, kube: KubeOptions, **kwargs: Any) -> "KubeRayBackend":
    """KubeRay as an interactive command wants it: a few quick retries, frequent polls."""
    from ads_ranking_pipelines.backends import factory
    from ads_ranking_pipelines.backends.kuberay.client import RetryPolicy

    kwargs.setdefault("poll_interval_s", 0.5)
    try:
        return factory.kuberay_backend(
            env.settings, env.catalog, namespace=kube.namespace, context=kube.context,
            in_cluster=kube.in_cluster or None,
            retry=RetryPolicy(max_attempts=3, initial_delay_s=0.5, max_delay_s=4.0), **kwargs)
    except BackendError as exc:
        fail(f"cannot reach Kubernetes: {exc}", EXIT_RUNTIME)


def kube_namespace(kube: KubeOptions, env: CliEnv | None = None) -> str:
    return kube.namespace or (env.settings.namespace if env is not None else
                              ClusterRequest.model_fields["namespace"].default)


# ---- local clusters -----------------------------------------------------------------------------
def local_clusters(env: CliEnv) -> list["LocalRayCluster"]:
    from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster

    return LocalRayCluster.list(env.settings.state_dir)


def find_local(env: CliEnv, name: str) -> "LocalRayCluster":
    from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster

    cluster = LocalRayCluster.find(name, env.settings.state_dir)
    if cluster is None:
        known = ", ".join(c.name for c in local_clusters(env)) or "none"
        fail(f"no local Ray cluster named {name!r} (known: {known}; state dir "
             f"{env.settings.state_dir})", EXIT_RUNTIME)
    return cluster


def local_info(cluster: "LocalRayCluster", probe: bool = True) -> "ClusterInfo":
    from ads_ranking_pipelines.backends.kuberay import ClusterInfo
    from ads_ranking_pipelines.backends.local_summary import summarize

    s = summarize(cluster, probe)
    return ClusterInfo(
        name=cluster.name, backend="local", owner=cluster.state.owner, pool=s.request.gpu_pool,
        gpu_type="none", workers_ready=s.workers_ready, workers_desired=s.request.workers,
        status=s.status, created_at=s.created_at, dashboard=cluster.state.dashboard_url,
        detail={"temp_dir": cluster.state.temp_dir, "gcs_address": cluster.state.gcs_address,
                "head_pid": cluster.state.head_pid, "worker_pids": cluster.state.worker_pids,
                "request": cluster.state.request},
    )


def job_api(cluster: "LocalRayCluster") -> "RayJobApi":
    from ads_ranking_pipelines.backends.ray_job_api import RayJobApi

    return RayJobApi(cluster.state.dashboard_url, headers=cluster.auth_headers())


def local_cluster_for_job(env: CliEnv, cluster_name: str | None, job_id: str | None = None
                          ) -> "LocalRayCluster":
    """The cluster named, else the only running one, else the one that knows ``job_id``."""
    if cluster_name:
        cluster = find_local(env, cluster_name)
        if not cluster.alive():
            fail(f"local Ray cluster {cluster_name!r} is not running (stale state file); "
                 f"delete it with `ads-ranking cluster delete {cluster_name} --yes`", EXIT_RUNTIME)
        return cluster
    running = [c for c in local_clusters(env) if c.alive()]
    if not running:
        fail("no local Ray cluster is running; start one with "
             "`ads-ranking cluster create --backend local`", EXIT_RUNTIME)
    if len(running) == 1:
        return running[0]
    if job_id:
        for cluster in running:
            with contextlib.suppress(Exception):
                job_api(cluster).status(job_id)
                return cluster
        fail(f"no running local cluster knows job {job_id!r}", EXIT_RUNTIME)
    fail("several local clusters are running; pass --cluster (one of: "
         + ", ".join(c.name for c in running) + ")", EXIT_INVALID)
