"""The base of the Ray provisioning resources (one class per backend behind it, as dagster-ray
has them: ``local_ray_resource.py``, ``kuberay_resource.py``; ``definitions.py`` picks one).

:class:`RayClusterResource` is what the assets use: ``cluster_request`` (every pre-flight check,
before anything starts), ``session`` (the run's cluster, provisioned on first use and kept for
later steps) and teardown when the run ends, fails or is cancelled. :class:`LocalRayResource`
runs a real Ray cluster on this machine (the embedded default); :class:`KubeRayResource` runs
each job as a RayJob on KubeRay. ``definitions.py`` picks one from the settings; backends
themselves are built by :mod:`ads_ranking_pipelines.backends.factory`, as in the CLI.
"""

from __future__ import annotations

import abc
import contextlib
import sys
from typing import Any, ClassVar, Optional

import dagster as dg
from pydantic import Field, PrivateAttr, ValidationError

from ads_ranking_pipelines.backends import factory
from ads_ranking_pipelines.backends.base import ClusterSession, RayBackend
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.errors import format_validation_error
from ads_ranking_pipelines.config.pools import PoolCatalog, load_catalog
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.config.validation import RequestError, RequestErrors, ResolvedRequest
from ads_ranking_pipelines.defs.tags import controller_tag
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.lease import DEFAULT_TIMEOUT_S, LeaseSpec, LeaseWriter


def failure(text: str) -> dg.Failure:
    """A failure of the run's request or cluster: not retried (the same request fails the same way)."""
    return dg.Failure(description=text, allow_retries=False)


class RayClusterResource(dg.ConfigurableResource, abc.ABC):
    """The base of the provisioning resources (a backend's subclass implements the abstract
    methods). One cluster session serves every step of a run executed in one process."""

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

    @abc.abstractmethod
    def make_backend(self, run_id: str | None = None,
                     code_location: str | None = None) -> RayBackend:
        """The backend this run's session is opened on."""

    @abc.abstractmethod
    def resolve(self, request: ClusterRequest, catalog: PoolCatalog) -> ResolvedRequest:
        """The request completed and checked against the catalog for this backend."""

    def request_fields(self) -> dict[str, Any]:
        return {}

    def backend_request(self, resolved: ResolvedRequest) -> Any:
        """What this resource's backend's ``session`` takes."""
        return resolved

    def cluster_request(self, params: TrainingParams, run_id: str) -> ResolvedRequest:
        """The run's cluster request, completed from the pool, with every pre-flight check done
        once (dg.Failure listing every problem otherwise), before any cluster starts: what
        :meth:`session` takes."""
        catalog = self.catalog()
        try:
            request = factory.run_request(params, run_id, **self.request_fields())
            resolved = self.resolve(request, catalog)
        except ValidationError as exc:
            raise failure(format_validation_error(exc, ClusterRequest, prefix="cluster.")) from None
        except RequestError as exc:
            raise failure(str(exc)) from None
        self._check_target(resolved.request)
        return resolved

    def borrowed(self) -> str | None:
        """The existing cluster the run borrows (its name or address), None: the run makes its own."""
        return self.existing_cluster

    def awaits_driver_exit(self) -> bool:
        """Whether the run waits for its driver job to end before closing its session. Yes by
        default: a job on a borrowed cluster must not outlive the run, and on KubeRay the run's
        RayJob completes (its status, its Kueue workload) before the session deletes it. Only
        a backend whose session teardown ends the job with the cluster at once may say no."""
        return True

    @abc.abstractmethod
    def target_problems(self, request: ClusterRequest) -> list[RequestError]:
        """What keeps the run off its existing cluster (only called when it has one)."""

    def _check_target(self, request: ClusterRequest) -> None:
        if self.borrowed() is None:
            return
        try:
            problems = self.target_problems(request)
        except RequestError as exc:
            problems = [exc]
        if problems:
            raise failure(str(RequestErrors(problems)))

    # ---- lifecycle -------------------------------------------------------------------------
    def session(self, resolved: ResolvedRequest, log: Any = None, run_id: str | None = None,
                code_location: str | None = None, storage_root: str | None = None) -> ClusterSession:
        """The run's cluster session for the request :meth:`cluster_request` resolved (not checked
        again), provisioned on first use and kept for later steps. With ``storage_root`` (and
        ``run_id``) this process renews the run's controller lease there while the session
        lasts (taken before the cluster starts, released after it is gone); :meth:`lease_env`
        hands it to the run's Ray jobs."""
        if not isinstance(resolved, ResolvedRequest):
            raise dg.Failure(description=f"session() takes what cluster_request() returns, not "
                             f"{type(resolved).__name__}")
        req = resolved.request
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

            self._driver = RunDriver(self._session, run_id, self._storage_root, self.python(), self.lease_env(),
                                     wait_for_exit=self.awaits_driver_exit())
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
