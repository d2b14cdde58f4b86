"""The KubeRay backend: sessions of RayJobs, and the RayJob operations the CLI also uses."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ads_ranking_pipelines.backends.base import BackendError, JobStatus, RayBackend
from ads_ranking_pipelines.backends.kuberay import calls
from ads_ranking_pipelines.backends.kuberay.clusters import LongLivedClusters
from ads_ranking_pipelines.backends.kuberay.logs import LogFollower
from ads_ranking_pipelines.backends.kuberay.session import KubeRayClusterSession
from ads_ranking_pipelines.backends.kuberay.status import (
    FAILED_DEPLOYMENT,
    JOB_NAME_LABELS,
    READY_DEPLOYMENT,
    failure_text,
    job_status_from_rayjob,
    owned,
)
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import PoolCatalog
from ads_ranking_pipelines.config.validation import ResolvedRequest, resolve_request
from ads_ranking_pipelines.backends.kuberay.client import (
    RAYJOBS,
    KubeError,
    KubeRayClient,
    NotFound,
    RetryPolicy,
)
from ads_ranking_pipelines.kuberay.labels import LABEL_MANAGED_BY, MANAGED_BY
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob

StatusCallback = Callable[[str, Mapping[str, Any]], None]
T = TypeVar("T")


class KubeRayBackend(LongLivedClusters, RayBackend):
    """RayJobs (a fresh cluster per job) and long-lived RayClusters through :class:`KubeRayClient`.

    ``namespace`` overrides ``request.namespace``; ``labels``/``run_id``/``code_location`` go on
    every object created (Dagster's run id and code location become ``dagster/run-id`` and
    ``dagster/code-location``). ``on_status(name, status)`` is called on every poll while
    waiting (progress display; an exception raised there aborts the wait and the session
    cleans up).
    """

    name = "kuberay"

    def __init__(self, client: KubeRayClient, catalog: PoolCatalog, *, namespace: str | None = None,
                 ready_timeout_s: float = 900.0, poll_interval_s: float = 2.0,
                 teardown_timeout_s: float = 300.0, labels: Mapping[str, str] | None = None,
                 run_id: str | None = None, code_location: str | None = None,
                 on_status: StatusCallback | None = None) -> None:
        self.client = client
        self.catalog = catalog
        self.namespace = namespace
        self.ready_timeout_s = ready_timeout_s
        self.poll_interval_s = poll_interval_s
        self.teardown_timeout_s = teardown_timeout_s
        self.labels = dict(labels or {})
        self.run_id = run_id
        self.code_location = code_location
        self.on_status = on_status

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

    # ---- plumbing ----------------------------------------------------------------------------
    def _ns(self, request: ClusterRequest) -> ClusterRequest:
        if self.namespace and self.namespace != request.namespace:
            return request.model_copy(update={"namespace": self.namespace})
        return request

    def resolve(self, request: ClusterRequest | ResolvedRequest) -> ResolvedRequest:
        """``request`` in this backend's namespace, completed and checked against the catalog
        once (an already resolved request is not checked again)."""
        if isinstance(request, ResolvedRequest):
            return request.in_namespace(self.namespace) if self.namespace else request
        return resolve_request(self._ns(request), self.catalog)

    def _notify(self, name: str, status: Mapping[str, Any]) -> None:
        if self.on_status is not None:
            self.on_status(name, status)

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def _poll_status(self, plural: str, namespace: str, name: str, timeout_s: float | None,
                     ready: Callable[[dict[str, Any], dict[str, Any]], T | None],
                     late: Callable[[dict[str, Any], float], str]) -> T:
        """Read the object's status every ``poll_interval_s`` (telling ``on_status``) until
        ``ready(obj, status)`` returns a value (it raises on a failure); BackendError with
        ``late(status, timeout_s)`` once ``timeout_s`` (default ``ready_timeout_s``) is over."""
        timeout_s = self.ready_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while True:
            obj = calls.read_status(self.client, plural, namespace, name,
                                    missing="disappeared while starting")
            status = obj.get("status") or {}
            self._notify(name, status)
            done = ready(obj, status)
            if done is not None:
                return done
            if time.monotonic() >= deadline:
                raise BackendError(late(status, timeout_s))
            self._sleep(self.poll_interval_s)

    # ---- sessions: one RayJob (and its own cluster) per submitted job ------------------------
    @contextlib.contextmanager
    def session(self, request: ClusterRequest | ResolvedRequest, *, run_id: str | None = None,
                code_location: str | None = None) -> Iterator[KubeRayClusterSession]:
        # Everything that can be checked is checked before anything is created.
        resolved = self.resolve(request)
        build_rayjob(resolved, entrypoint="true", submission_id="preflight",
                     labels=self.labels, run_id=run_id or self.run_id,
                     code_location=code_location or self.code_location)
        session = KubeRayClusterSession(self, resolved, run_id=run_id or self.run_id,
                                        code_location=code_location or self.code_location)
        try:
            yield session
        except BaseException:
            session.close(raise_errors=False)
            raise
        session.close(raise_errors=True)

    # ---- RayJob operations (also used by the CLI without a session) --------------------------
    def wait_until_running(self, namespace: str, name: str, timeout_s: float | None = None) -> dict:
        """Poll the RayJob until KubeRay reports its cluster up (``jobDeploymentStatus``
        Running or Complete). Raises BackendError with KubeRay's reason verbatim when the
        deployment fails or the RayCluster fails, and on timeout."""
        def ready(obj: dict[str, Any], status: dict[str, Any]) -> dict | None:
            deployment = status.get("jobDeploymentStatus") or ""
            if deployment in FAILED_DEPLOYMENT:
                raise BackendError(failure_text("RayJob", name, namespace, status))
            cluster = status.get("rayClusterStatus") or {}
            if cluster.get("state") == "failed":
                raise BackendError(failure_text(
                    f"RayCluster {status.get('rayClusterName') or '?'} of RayJob", name, namespace,
                    {"reason": cluster.get("reason"), "message": cluster.get("message")}))
            return status if deployment in READY_DEPLOYMENT else None

        def late(status: dict[str, Any], timeout_s: float) -> str:
            cluster = status.get("rayClusterStatus") or {}
            return (f"RayJob {namespace}/{name} did not start within {timeout_s:.0f}s "
                    f"(jobDeploymentStatus {status.get('jobDeploymentStatus') or 'New'!r}, "
                    f"RayCluster state {cluster.get('state') or 'unknown'!r})")

        return self._poll_status(RAYJOBS, namespace, name, timeout_s, ready, late)

    def job_status(self, namespace: str, name: str) -> JobStatus:
        obj = calls.read_status(self.client, RAYJOBS, namespace, name,
                                missing="not found (deleted, or never created)")
        return job_status_from_rayjob(obj.get("status"))

    def submitter_pods(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The submitter Job's pods of RayJob ``name`` (KubeRay names the Job after the RayJob;
        Kubernetes labels a Job's pods with its name), oldest first."""
        for key in JOB_NAME_LABELS:
            pods = self.client.list_pods(namespace, f"{key}={name}")
            if pods:
                return sorted(pods, key=lambda p: (p["metadata"].get("creationTimestamp") or "",
                                                   p["metadata"].get("name", "")))
        return []

    def job_logs(self, namespace: str, name: str, follow: bool = True) -> Iterator[str]:
        """The submitter pod's log lines; with ``follow`` until the RayJob is terminal."""
        if not follow:
            pods = self.submitter_pods(namespace, name)
            if not pods or (pods[-1].get("status") or {}).get("phase") == "Pending":
                return iter(())
            try:
                text = self.client.read_pod_log(namespace, pods[-1]["metadata"]["name"])
            except KubeError as exc:
                raise BackendError(f"cannot read the log of RayJob {namespace}/{name}: {exc}") from exc
            return iter(text.splitlines())
        return LogFollower(self, namespace, name).lines()

    def stop_job(self, namespace: str, name: str, *, require_owned: bool = True,
                 wait: bool = True) -> bool:
        """Delete the RayJob; KubeRay's finalizer stops the Ray job, and the RayJob's own
        cluster goes with it. False when it was already gone."""
        try:
            obj = self.client.get(RAYJOBS, namespace, name)
        except NotFound:
            return False
        if require_owned and not owned(obj):
            raise BackendError(f"RayJob {namespace}/{name} is not managed by {MANAGED_BY}; "
                               "not touching it")
        deleted = self.client.delete(RAYJOBS, namespace, name)
        if wait:
            self._await_deleted(RAYJOBS, namespace, name)
        return deleted

    def list_jobs(self, namespace: str) -> list[dict[str, Any]]:
        return self.client.list(RAYJOBS, namespace, f"{LABEL_MANAGED_BY}={MANAGED_BY}")
