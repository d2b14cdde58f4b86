"""A run on an existing RayCluster (``existing_cluster``): each job a RayJob with
``clusterSelector``; the RayCluster is never changed nor deleted.

Pre-flight (:func:`cluster_problems`), before any RayJob: the RayCluster exists, is ours
(``app.kubernetes.io/managed-by``) and not a RayJob's own, is ``ready``, carries the run's pool
label and the run's image (code version), and its worker groups hold the run's workers.

A ``clusterSelector`` RayJob is not deleted by KubeRay's deletion rules in v1.7
(rayjob_controller.go returns before them, case Complete/Failed), so the session deletes every
RayJob it created when it ends (checking its creation token), and waits until they are gone;
deleting one whose Ray job still runs stops that job (KubeRay's RayJob finalizer). The garbage
collector covers a run whose process died (its RayJobs carry the run id).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from ads_ranking_pipelines.backends.base import BackendError, ClusterSession, JobSpec, JobState, JobStatus
from ads_ranking_pipelines.backends.capacity import NodeSize, capacity_problem
from ads_ranking_pipelines.backends.kuberay import calls
from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS, KubeError, NotFound, new_creation_token
from ads_ranking_pipelines.backends.kuberay.session import closing
from ads_ranking_pipelines.backends.kuberay.status import ORIGINATED_FROM_CRD_LABEL, owned
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.validation import RequestError
from ads_ranking_pipelines.kuberay.labels import LABEL_MANAGED_BY, LABEL_POOL, MANAGED_BY
from ads_ranking_pipelines.kuberay.pod import GPU_RESOURCE

if TYPE_CHECKING:
    from ads_ranking_pipelines.backends.kuberay.backend import KubeRayBackend

log = logging.getLogger(__name__)


def _container(template: Mapping[str, Any]) -> Mapping[str, Any]:
    return (((template or {}).get("spec") or {}).get("containers") or [{}])[0]


def _cpus(quantity: str) -> float:
    """A Kubernetes CPU quantity (``"2"``, ``"1500m"``) in cores."""
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def _amount(container: Mapping[str, Any], key: str) -> float:
    resources = container.get("resources") or {}
    value = (resources.get("limits") or {}).get(key, (resources.get("requests") or {}).get(key))
    if value is None:
        return 0.0
    return _cpus(str(value)) if key == "cpu" else float(value)


def worker_nodes(cluster: Mapping[str, Any]) -> list[NodeSize]:
    """The worker pods a RayCluster can have: per group, its CPUs/GPUs per pod and its replicas
    (``maxReplicas`` when the autoscaler may add them)."""
    spec = cluster.get("spec") or {}
    autoscaling = bool(spec.get("enableInTreeAutoscaling"))
    nodes = []
    for group in spec.get("workerGroupSpecs") or []:
        container = _container(group.get("template") or {})
        count = int(group.get("maxReplicas" if autoscaling else "replicas") or 0)
        nodes.append(NodeSize(_amount(container, "cpu"), _amount(container, GPU_RESOURCE), count))
    return nodes


def cluster_problems(cluster: Mapping[str, Any], request: ClusterRequest) -> list[RequestError]:
    """Everything that keeps ``request``'s run off the RayCluster ``cluster`` (empty: it fits)."""
    meta = cluster.get("metadata") or {}
    name, labels = meta.get("name", "?"), meta.get("labels") or {}
    where = f"RayCluster {meta.get('namespace')}/{name}"
    if not owned(cluster) or labels.get(ORIGINATED_FROM_CRD_LABEL) == "RayJob":
        why = (f"not managed by {MANAGED_BY} (label {LABEL_MANAGED_BY})" if not owned(cluster)
               else "it is a RayJob's own cluster")
        return [RequestError("existing_cluster", name, "a RayCluster made by `ads-ranking cluster create`", why)]
    problems = []
    state = (cluster.get("status") or {}).get("state") or "provisioning"
    if meta.get("deletionTimestamp") or state != "ready":
        problems.append(RequestError("existing_cluster", name, "a ready RayCluster",
                                     f"{where} is {'deleting' if meta.get('deletionTimestamp') else state!r}"))
    pool = labels.get(LABEL_POOL)
    if pool != request.gpu_pool:
        problems.append(RequestError("gpu_pool", request.gpu_pool, pool or "?",
                                     f"{where} runs pool {pool!r} (label {LABEL_POOL})"))
    image = _container(((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("template") or {}).get("image")
    if request.image and image != request.image:
        problems.append(RequestError("image", request.image, image or "?",
                                     f"{where} runs image {image!r}: another code version"))
    problem = capacity_problem(where, worker_nodes(cluster), request)
    if problem is not None:
        problems.append(problem)
    return problems


def existing_cluster(backend: "KubeRayBackend", namespace: str, name: str) -> dict[str, Any]:
    """The RayCluster ``namespace/name``; ``RequestError`` naming ours there when it is missing."""
    try:
        return backend.client.get(RAYCLUSTERS, namespace, name)
    except NotFound:
        known = [c.name for c in backend.clusters.list_clusters(namespace)
                 if not (c.detail.get("metadata", {}).get("labels") or {}).get(ORIGINATED_FROM_CRD_LABEL)]
        raise RequestError("existing_cluster", name, f"a RayCluster in {namespace} "
                           f"({', '.join(known) or 'none'})", "no such RayCluster") from None


class SelectorSession(ClusterSession):
    """The run's jobs as ``clusterSelector`` RayJobs on one RayCluster; :meth:`close` deletes them."""

    def __init__(self, backend: "KubeRayBackend", cluster: Mapping[str, Any], owner: str = "dagster"):
        meta = cluster.get("metadata") or {}
        self.backend, self.cluster, self.owner = backend, cluster, owner
        self.name, self.namespace = meta["name"], meta.get("namespace") or "default"
        self.dashboard_url = None
        self._lock = threading.Lock()
        self._created: dict[str, str] = {}      # RayJob name -> creation token
        self._stopped: set[str] = set()

    @property
    def created(self) -> list[str]:
        with self._lock:
            return list(self._created)

    def render(self, job: JobSpec) -> dict[str, Any]:
        manifest = self.backend.clusters.build_rayjob_for_cluster(self.cluster, job, owner=self.owner)
        modules = self.backend.ctx.py_modules
        if modules:     # development mode: the working tree's package first on the path
            env = yaml.safe_load(manifest["spec"]["runtimeEnvYAML"]) or {}
            env["py_modules"] = list(modules)
            manifest["spec"]["runtimeEnvYAML"] = yaml.safe_dump(env, sort_keys=True, default_flow_style=False)
        return manifest

    def submit(self, job: JobSpec) -> str:
        manifest = self.render(job)
        name, ns, client = manifest["metadata"]["name"], self.namespace, self.backend.client
        token = new_creation_token()
        with self._lock:
            if name in self._created:
                raise BackendError(f"submission id {job.submission_id!r} was already submitted (RayJob {ns}/{name})")
            self._created[name] = token

        def forget() -> None:
            with self._lock:
                self._created.pop(name, None)

        calls.create(client, RAYJOBS, ns, manifest, what=f"RayJob {ns}/{name} on {self.name}",
                     token=token, on_conflict=forget)
        try:
            self.backend.jobs.wait_until_running(ns, name)
        except BackendError:
            with contextlib.suppress(KubeError):
                calls.delete_if_token(client, RAYJOBS, ns, name, token)
            raise
        return name

    def status(self, job_id: str) -> JobStatus:
        try:
            return self.backend.jobs.status(self.namespace, job_id)
        except BackendError:
            with self._lock:
                stopped = job_id in self._stopped
            if stopped:
                return JobStatus(JobState.STOPPED, "stopped; RayJob deleted")
            raise

    def logs(self, job_id: str, follow: bool = True) -> Iterator[str]:
        return self.backend.jobs.logs(self.namespace, job_id, follow=follow)

    def stop(self, job_id: str) -> None:
        """Delete the RayJob: KubeRay's finalizer stops its Ray job; the cluster stays."""
        with self._lock:
            token = self._created.get(job_id)
            if token is not None:
                self._stopped.add(job_id)
        if token is None:
            raise BackendError(f"RayJob {job_id} was not submitted in this session")
        try:
            calls.delete_if_token(self.backend.client, RAYJOBS, self.namespace, job_id, token)
        except KubeError as exc:
            raise BackendError(f"could not stop RayJob {self.namespace}/{job_id}: {exc}") from exc

    def close(self, raise_errors: bool = True) -> None:
        """Delete this session's RayJobs and wait (``teardown_timeout_s``) until they are gone."""
        with self._lock:
            records = dict(self._created)
        ctx, ns, errors = self.backend.ctx, self.namespace, []
        for name, token in records.items():
            try:
                calls.delete_if_token(ctx.client, RAYJOBS, ns, name, token)
            except KubeError as exc:
                errors.append(f"delete RayJob {ns}/{name}: {exc}")
        deadline = time.monotonic() + ctx.teardown_timeout_s
        for name in records:
            try:
                if not ctx.client.wait_deleted(RAYJOBS, ns, name, max(0.0, deadline - time.monotonic()),
                                               ctx.poll_interval_s):
                    errors.append(f"RayJob {ns}/{name} still present after {ctx.teardown_timeout_s:.0f}s")
            except KubeError as exc:
                errors.append(f"wait for RayJob {ns}/{name} to go: {exc}")
        if errors:
            text = f"teardown of the run's RayJobs on {ns}/{self.name} incomplete: " + "; ".join(errors)
            if raise_errors:
                raise BackendError(text)
            log.error(text)


@contextlib.contextmanager
def selector_session(backend: "KubeRayBackend", namespace: str, name: str) -> Iterator[SelectorSession]:
    """A session on the existing RayCluster ``namespace/name`` (read again now)."""
    try:
        cluster = backend.client.get(RAYCLUSTERS, namespace, name)
    except NotFound:
        raise BackendError(f"RayCluster {namespace}/{name} not found") from None
    with closing(SelectorSession(backend, cluster)) as session:
        yield session
