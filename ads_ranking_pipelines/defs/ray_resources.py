"""The Ray provisioning resources: one class per backend behind one base.

:class:`RayClusterResource` is what the assets use: ``cluster_request`` (every pre-flight check,
before anything starts), ``session`` (the run's cluster, provisioned on first use and kept for
later steps) and teardown when the run ends, fails or is cancelled. :class:`LocalRayResource`
runs a real Ray cluster on this machine (the embedded default); :class:`KubeRayResource` runs
each job as a RayJob on KubeRay. ``definitions.py`` picks one from the settings; backends
themselves are built by :mod:`ads_ranking_pipelines.backends.factory`, as in the CLI.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from typing import Any, ClassVar, Optional

import dagster as dg
from pydantic import Field, PrivateAttr, ValidationError

from ads_ranking_pipelines.backends import factory
from ads_ranking_pipelines.backends.base import ClusterSession, RayBackend
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.errors import format_validation_error
from ads_ranking_pipelines.config.pools import PoolCatalog, load_catalog
from ads_ranking_pipelines.config.settings import Settings, SettingsError
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.config.validation import RequestError, RequestErrors, ResolvedRequest
from ads_ranking_pipelines.defs.tags import controller_tag
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.lease import DEFAULT_TIMEOUT_S, LeaseSpec, LeaseWriter


def _failure(text: str) -> dg.Failure:
    return dg.Failure(description=text, allow_retries=False)


class RayClusterResource(dg.ConfigurableResource):
    """The base of the provisioning resources (use a subclass). One cluster session serves
    every step of a run executed in one process."""

    pool_catalog: Optional[str] = Field(None, description="Pool catalog YAML; default: the shipped one.")
    job_python: Optional[str] = Field(None, description="Python of the job entrypoint.")
    controller_timeout_s: float = Field(
        DEFAULT_TIMEOUT_S, ge=5, description="A Ray job of the run stops itself when the process "
        "driving the run has not renewed its lease (under the storage root) for this long.")
    existing_cluster: Optional[str] = Field(
        None, description="Run on this existing cluster instead of creating one (local: a cluster of "
        "`ads-ranking cluster create --backend local`; kuberay: a RayCluster of ours in the namespace). "
        "Checked before any job (ready, capacity, pool, image); never deleted by the run.")

    _stack: Any = PrivateAttr(default=None)
    _session: Any = PrivateAttr(default=None)
    _request: Any = PrivateAttr(default=None)
    _run_tags: Any = PrivateAttr(default=None)
    _resolved: Any = PrivateAttr(default_factory=dict)
    _lease: Any = PrivateAttr(default=None)
    _dagster_home: Any = PrivateAttr(default=None)
    _storage_root: Any = PrivateAttr(default=None)
    _log: Any = PrivateAttr(default=None)
    _driver: Any = PrivateAttr(default=None)

    backend_name: ClassVar[str] = "?"

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        run = context.run
        self._run_tags = dict(run.tags) if run is not None else {}
        instance = context.instance
        self._dagster_home = getattr(instance, "root_directory", None) if instance is not None else None
        if run is not None and instance is not None:
            # who drives this run: the GC, the sensor and the run launcher's health check
            # recognise a run whose process died by it (defs/orphans.py)
            instance.add_run_tags(run.run_id, controller_tag())

    def catalog(self) -> PoolCatalog:
        return load_catalog(self.pool_catalog)

    def python(self) -> str:
        return self.job_python or sys.executable

    def make_backend(self, run_id: str | None = None,
                     code_location: str | None = None) -> RayBackend:
        raise NotImplementedError

    def resolve(self, request: ClusterRequest, catalog: PoolCatalog) -> ResolvedRequest:
        raise NotImplementedError

    def request_fields(self) -> dict[str, Any]:
        return {}

    def backend_request(self, resolved: ResolvedRequest) -> Any:
        """What this resource's backend's ``session`` takes."""
        return resolved

    def cluster_request(self, params: TrainingParams, run_id: str) -> ClusterRequest:
        """The run's cluster request, completed from the pool, with every pre-flight check done
        once (dg.Failure listing every problem otherwise), before any cluster starts."""
        catalog = self.catalog()
        try:
            request = factory.run_request(params, run_id, **self.request_fields())
            resolved = self.resolve(request, catalog)
        except ValidationError as exc:
            raise _failure(format_validation_error(exc, ClusterRequest, prefix="cluster.")) from None
        except RequestError as exc:
            raise _failure(str(exc)) from None
        self._check_target(resolved.request)
        self._resolved[id(resolved.request)] = resolved
        return resolved.request

    def borrowed(self) -> str | None:
        """The existing cluster the run borrows (its name or address), None: the run makes its own."""
        return self.existing_cluster

    def target_problems(self, request: ClusterRequest) -> list[RequestError]:
        """What keeps the run off its existing cluster (only called when it has one)."""
        raise NotImplementedError

    def _check_target(self, request: ClusterRequest) -> None:
        if self.borrowed() is None:
            return
        try:
            problems = self.target_problems(request)
        except RequestError as exc:
            problems = [exc]
        if problems:
            raise _failure(str(RequestErrors(problems)))

    # ---- lifecycle -------------------------------------------------------------------------
    def session(self, request: ClusterRequest, log: Any = None, run_id: str | None = None,
                code_location: str | None = None, storage_root: str | None = None) -> ClusterSession:
        """The run's cluster session for a request from :meth:`cluster_request` (not checked
        again), provisioned on first use and kept for later steps. With ``storage_root`` (and
        ``run_id``) this process renews the run's controller lease there while the session
        lasts (taken before the cluster starts, released after it is gone); :meth:`lease_env`
        hands it to the run's Ray jobs."""
        req = request
        resolved = self._resolved.get(id(request))
        if resolved is None:
            raise dg.Failure(description="session() takes a request made by cluster_request()")
        if self._session is not None:
            if req.workers > self._request.workers:
                raise dg.Failure(description=f"this run's cluster has {self._request.workers} "
                                 f"worker(s); {req.workers} were asked for")
            return self._session
        stack = contextlib.ExitStack()
        self._storage_root = storage_root
        if storage_root and run_id:
            lease = LeaseSpec(StorageLayout(storage_root).controller_lease(run_id), self.controller_timeout_s)
            self._lease = stack.enter_context(LeaseWriter(lease))
        self._log = log
        if log is not None and self.borrowed() is None:
            log.info(f"provisioning Ray cluster {req.name} on backend {self.backend_name!r}: "
                     f"{req.workers} worker(s) in pool {req.gpu_pool!r}{self.provision_note()}")
        elif log is not None:
            log.info(f"using the existing Ray cluster {self.borrowed()} on backend {self.backend_name!r} "
                     f"for {req.workers} worker(s) in pool {req.gpu_pool!r} (the run does not delete it)")
        backend = self.make_backend(run_id, code_location)
        try:
            session = stack.enter_context(self.open_session(backend, resolved))
        except BaseException:
            stack.close()
            self._lease = None
            raise
        self._stack, self._session, self._request = stack, session, req
        if log is not None:
            log.info(f"Ray cluster {session.name} ready; dashboard {session.dashboard_url}")
        return session

    def run_driver(self, run_id: str) -> Any:
        """The run's ONE Ray job driver (``defs/run_driver.py``) on the run's session: made by
        the first Ray step, kept for the later ones, told to exit before the session closes."""
        if self._session is None or not self._storage_root:
            raise dg.Failure(description="run_driver() needs the run's session, opened by session() "
                             "with the run's storage_root")
        if self._driver is None:
            from ads_ranking_pipelines.defs.run_driver import RunDriver

            self._driver = RunDriver(self._session, run_id, self._storage_root, self.python(), self.lease_env())
            self._stack.callback(self._driver.close)
        return self._driver

    def open_session(self, backend: RayBackend, resolved: ResolvedRequest) -> Any:
        """The backend's session context for the run (on the existing cluster, if any)."""
        return backend.session(self.backend_request(resolved))

    def provision_note(self) -> str:
        """What the provisioning log line adds (how the cluster outlives the run, if it does)."""
        return ""

    def lease_env(self) -> dict[str, str]:
        """What a Ray job needs to watch the run's controller lease (nothing without a lease)."""
        return self._lease.spec.to_env() if self._lease is not None else {}

    def orphan_command(self, run_id: str | None) -> list[str]:
        """What the backend runs when it finds this process dead while its cluster lives: marks
        the Dagster run failed and its unevaluated versions unattended (``defs/orphans.py``)."""
        if not run_id or not self._dagster_home:
            return []
        root = ["--storage-root", self._storage_root] if self._storage_root else []
        return [sys.executable, "-m", "ads_ranking_pipelines.defs.orphans", "--run-id", run_id,
                "--dagster-home", str(self._dagster_home), *root]

    def close(self) -> None:
        stack, self._stack, self._session, self._request = self._stack, None, None, None
        self._lease, self._driver = None, None
        if stack is not None:
            stack.close()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()


class LocalRayResource(RayClusterResource):
    """A real multi-node Ray cluster on this machine (the embedded default)."""

    state_dir: str = Field(description="Where running local clusters are recorded.")
    start_timeout_s: float = 180.0
    ray_address: Optional[str] = Field(
        None, description="Run on the Ray cluster whose dashboard is here (http://HOST:8265, e.g. "
        "one of `ray start --head`, without token auth) instead of creating one; capacity is "
        "checked, its pool is not known. For a cluster of ours use existing_cluster.")
    keep_warm_s: Optional[float] = Field(
        None, gt=0, description="Keep warm: reuse a running warm cluster made for the same request "
        "(pool, workers, CPUs/GPUs/memory per worker, code version) by a run that kept it warm too, "
        "else make one; when the run ends its cluster keeps running, and the GC stops it once no "
        "run holds it and it has been idle this many seconds. None: the run's own cluster, deleted "
        "when it ends.")

    backend_name: ClassVar[str] = "local"

    def provision_note(self) -> str:
        if not self.keep_warm_s:
            return ""
        return f" (or a matching warm one; kept warm {self.keep_warm_s:g}s idle after the last run)"

    @contextlib.contextmanager
    def open_session(self, backend: RayBackend, resolved: ResolvedRequest) -> Any:
        with backend.session(self.backend_request(resolved)) as session:
            reused = getattr(backend, "reused", None)
            if reused and self._log is not None:
                self._log.info(f"reusing the warm Ray cluster {reused} (a lease of this run holds it; "
                               "the run does not delete it)")
            yield session

    def borrowed(self) -> str | None:
        return self.existing_cluster or self.ray_address

    def target(self) -> Any:
        from ads_ranking_pipelines.backends.local_borrowed import find_target

        return find_target(self.state_dir, self.existing_cluster, None if self.existing_cluster else self.ray_address)

    def target_problems(self, request: ClusterRequest) -> list[RequestError]:
        from ads_ranking_pipelines.backends.local_borrowed import target_problems

        if self.existing_cluster and self.ray_address:
            return [RequestError("ray_address", self.ray_address, "unset when existing_cluster is set",
                                 f"existing_cluster={self.existing_cluster!r} names the cluster already")]
        if self.keep_warm_s:
            return [RequestError("keep_warm_s", self.keep_warm_s, "unset on a run on an existing cluster",
                                 f"the run does not own {self.borrowed()!r}, so it cannot keep it warm")]
        return target_problems(self.target(), request)

    def make_backend(self, run_id: str | None = None,
                     code_location: str | None = None) -> RayBackend:
        if self.borrowed() is not None:
            from ads_ranking_pipelines.backends.local_borrowed import BorrowedLocalBackend

            return BorrowedLocalBackend(self.target())
        if self.keep_warm_s:
            import uuid

            from ads_ranking_pipelines.version import code_version

            return factory.warm_local_backend(self.settings(), self.keep_warm_s, run_id or str(uuid.uuid4()),
                                              code_version(os.environ), start_timeout_s=self.start_timeout_s,
                                              on_orphan=self.orphan_command(run_id))
        return factory.local_backend(self.settings(), start_timeout_s=self.start_timeout_s,
                                     run_id=run_id, on_orphan=self.orphan_command(run_id))

    def settings(self) -> Settings:
        return Settings(home="", pool_catalog=self.pool_catalog, state_dir=self.state_dir,
                        controller_timeout_s=self.controller_timeout_s)

    def resolve(self, request: ClusterRequest, catalog: PoolCatalog) -> ResolvedRequest:
        return factory.local_request(request, catalog)

    def backend_request(self, resolved: ResolvedRequest) -> Any:
        return resolved.request


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
            raise _failure(f"cannot reach Kubernetes: {exc}") from None


def ray_resource(settings: Settings, target: Mapping[str, str] | None = None) -> RayClusterResource:
    """The provisioning resource for ``settings.backend``; ``target``: fields naming an existing
    cluster to run on (``existing_cluster``, local also ``ray_address``), checked by name."""
    resource = _ray_resource(settings)
    if not target:
        return resource
    unknown = sorted(set(target) - set(type(resource).model_fields))
    if unknown:
        valid = "existing_cluster" + (", ray_address, keep_warm_s" if settings.backend == "local" else "")
        raise SettingsError(unknown[0], target[unknown[0]], f"{valid} (the fields of backend {settings.backend!r})")
    # a new instance: Dagster keeps a resource's config apart from its pydantic fields
    return type(resource)(**{**resource.model_dump(), **target})


def _ray_resource(settings: Settings) -> RayClusterResource:
    if settings.backend == "kuberay":
        return KubeRayResource(
            pool_catalog=settings.pool_catalog, storage_home=settings.home,
            namespace=settings.namespace, ray_image=settings.ray_image,
            service_account=settings.ray_service_account, auth_secret=settings.ray_auth_secret,
            shared_volume_claim=settings.shared_volume_claim,
            rayjob_deletion=settings.rayjob_deletion,
            replica_failure_grace_s=settings.replica_failure_grace_s,
            kube_context=settings.kube_context,
            kube_config_file=settings.kube_config_file, in_cluster=settings.kube_in_cluster,
            dev_working_tree=settings.dev_working_tree, controller_timeout_s=settings.controller_timeout_s)
    return LocalRayResource(pool_catalog=settings.pool_catalog, state_dir=settings.state_dir,
                            controller_timeout_s=settings.controller_timeout_s)
