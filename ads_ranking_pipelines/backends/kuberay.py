"""The production backend: KubeRay on Kubernetes, behind the same interface as the local one.

A session creates nothing by itself. Each :meth:`KubeRayClusterSession.submit` creates one
``RayJob`` from the shared template (:func:`build_rayjob`); KubeRay creates its RayCluster,
runs the submitter Job (``K8sJobMode``: a pod running ``ray job submit``, whose log *is* the
job's driver log) and deletes the cluster when the job ends. Leaving the session - normally,
on an exception, on a timeout or when the Dagster run is interrupted (``KeyboardInterrupt`` /
``DagsterExecutionInterruptedError``, both ``BaseException``) - deletes every RayJob the
session created (foreground propagation, so their clusters and submitter pods go first) and
waits, bounded, until they are gone.

Only objects this process created are ever deleted by a session: each create carries a random
token annotation (:data:`CREATION_TOKEN_ANNOTATION`) and teardown checks it before deleting.

For the CLI the backend also manages long-lived RayClusters (create / list / describe /
delete, restricted to objects carrying our ``app.kubernetes.io/managed-by`` label) and
submits RayJobs to an existing cluster through ``clusterSelector``.

Environment variables of a job (``JobSpec.env_vars``, e.g. the Dagster Pipes bootstrap) are
written into the RayJob's ``runtimeEnvYAML``: they are visible to whoever can read RayJobs, so
they must not be secrets; they are never logged or put into error messages here.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from ads_ranking_pipelines.backends.base import (
    BackendError,
    ClusterSession,
    JobSpec,
    JobState,
    JobStatus,
    RayBackend,
)
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import PoolCatalog
from ads_ranking_pipelines.config.validation import RequestError, validate_request
from ads_ranking_pipelines.kuberay import rules
from ads_ranking_pipelines.kuberay.client import (
    RAYCLUSTERS,
    RAYJOBS,
    Conflict,
    KubeError,
    KubeRayClient,
    NotFound,
    RetryPolicy,
    creation_token,
    new_creation_token,
)
from ads_ranking_pipelines.kuberay.labels import (
    MANAGED_LABEL_PREFIX,
    LABEL_DAGSTER_CODE_LOCATION,
    LABEL_DAGSTER_RUN_ID,
    LABEL_GPU_TYPE,
    LABEL_MANAGED_BY,
    LABEL_OWNER,
    LABEL_POOL,
    MANAGED_BY,
    sanitize_label_value,
)
from ads_ranking_pipelines.kuberay.pod import submitter_pod_template
from ads_ranking_pipelines.kuberay.raycluster import API_VERSION, build_raycluster
from ads_ranking_pipelines.kuberay.rayjob import SUBMISSION_MODE, build_rayjob

log = logging.getLogger(__name__)

__all__ = [
    "ClusterInfo", "KubeRayBackend", "KubeRayClusterSession", "job_status_from_rayjob",
    "rayjob_name_for",
]

# Labels and names KubeRay itself uses (ray-operator/controllers/ray/utils/constant.go).
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
ORIGINATED_FROM_CRD_LABEL = "ray.io/originated-from-crd"
ORIGINATED_FROM_NAME_LABEL = "ray.io/originated-from-cr-name"
# Pods of a Kubernetes Job carry these (job-name everywhere, the prefixed one since 1.27).
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
SUBMISSION_ID_LABEL = MANAGED_LABEL_PREFIX + "submission-id"
CLUSTER_NAME_LABEL = MANAGED_LABEL_PREFIX + "cluster"

FAILED_DEPLOYMENT = ("Failed", "ValidationFailed")
READY_DEPLOYMENT = ("Running", "Complete")
RAY_TERMINAL = {"SUCCEEDED": JobState.SUCCEEDED, "FAILED": JobState.FAILED,
                "STOPPED": JobState.STOPPED}
# A RayJob name leaves room for the "-xxxxx" KubeRay appends to its RayCluster's name.
MAX_JOB_NAME = rules.MAX_RAYJOB_NAME
GPU_IMAGE_DEFAULT = "rayproject/ray:2.60.0-py311-gpu"

StatusCallback = Callable[[str, Mapping[str, Any]], None]


# ---- pure helpers ----------------------------------------------------------------------------
def rayjob_name_for(base: str, submission_id: str) -> str:
    """A RayJob name for ``submission_id`` derived from ``base`` (a DNS-1035 label):
    deterministic, so a retried submission of the same id finds its RayJob again."""
    digest = hashlib.sha256(submission_id.encode("utf-8")).hexdigest()[:8]
    head = base[: MAX_JOB_NAME - len(digest) - 1].rstrip("-") or "job"
    if not head[0].isalpha():
        head = "j" + head[: MAX_JOB_NAME - len(digest) - 2]
    return f"{head}-{digest}"


def failure_text(kind: str, name: str, namespace: str, status: Mapping[str, Any]) -> str:
    """KubeRay's own words for a failure: ``reason`` and ``message`` verbatim."""
    reason = status.get("reason") or ""
    message = status.get("message") or ""
    text = f"{kind} {namespace}/{name} failed"
    if reason:
        text += f" with reason {reason}"
    if message:
        text += f": {message}"
    return text


def job_status_from_rayjob(status: Mapping[str, Any] | None) -> JobStatus:
    """Map a RayJob's ``status`` (``jobDeploymentStatus`` + ``jobStatus``) to a JobStatus.

    Failure reasons come back verbatim as ``"<reason>: <message>"``.
    """
    status = status or {}
    deployment = status.get("jobDeploymentStatus") or ""
    ray_status = status.get("jobStatus") or ""
    reason = status.get("reason") or ""
    message = status.get("message") or ""
    verbatim = ": ".join(p for p in (reason, message) if p)
    if deployment in FAILED_DEPLOYMENT:
        return JobStatus(JobState.FAILED, verbatim or f"jobDeploymentStatus {deployment}")
    if deployment in ("Suspending", "Suspended"):
        return JobStatus(JobState.STOPPED, verbatim or f"RayJob {deployment.lower()}")
    if ray_status in RAY_TERMINAL:
        return JobStatus(RAY_TERMINAL[ray_status], verbatim)
    if deployment == "Complete":
        # The submitter ended without a terminal Ray job status.
        return JobStatus(JobState.FAILED, verbatim or "RayJob complete without a Ray job status")
    if ray_status == "RUNNING":
        return JobStatus(JobState.RUNNING, verbatim)
    cluster = status.get("rayClusterStatus") or {}
    detail = f"jobDeploymentStatus {deployment or 'New'}"
    if cluster.get("state"):
        detail += f", RayCluster {cluster['state']}"
        if cluster.get("reason"):
            detail += f" ({cluster['reason']})"
    if verbatim:
        detail += f": {verbatim}"
    return JobStatus(JobState.PENDING, detail)


def _parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    with contextlib.suppress(ValueError):
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return None


@dataclass(frozen=True)
class ClusterInfo:
    """One row of ``cluster list``, for either backend."""

    name: str
    backend: str
    owner: str
    pool: str
    gpu_type: str
    workers_ready: int | None
    workers_desired: int
    status: str
    created_at: dt.datetime | None
    dashboard: str | None = None
    namespace: str | None = None
    detail: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def cluster_info(obj: Mapping[str, Any]) -> ClusterInfo:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    desired = status.get("desiredWorkerReplicas")
    if desired is None:
        desired = sum(int(g.get("replicas") or 0) for g in spec.get("workerGroupSpecs") or [])
    ready = status.get("readyWorkerReplicas", status.get("availableWorkerReplicas"))
    state = status.get("state") or ("suspended" if spec.get("suspend") else "provisioning")
    if meta.get("deletionTimestamp"):
        state = "deleting"
    head = status.get("head") or {}
    endpoints = status.get("endpoints") or {}
    dashboard = None
    if head.get("serviceName") or head.get("serviceIP"):
        host = head.get("serviceName") or head.get("serviceIP")
        dashboard = f"http://{host}:{endpoints.get('dashboard', '8265')}"
    return ClusterInfo(
        name=meta.get("name", "?"), backend="kuberay", owner=labels.get(LABEL_OWNER, "?"),
        pool=labels.get(LABEL_POOL, "?"), gpu_type=labels.get(LABEL_GPU_TYPE, "?"),
        workers_ready=ready, workers_desired=int(desired), status=state,
        created_at=_parse_time(meta.get("creationTimestamp")), dashboard=dashboard,
        namespace=meta.get("namespace"), detail=dict(obj),
    )


def _owned(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_MANAGED_BY) == MANAGED_BY


def _runtime_env(job: JobSpec) -> dict[str, Any]:
    env: dict[str, Any] = {"env_vars": {str(k): str(v) for k, v in job.env_vars.items()}}
    if job.working_dir:
        if "://" not in job.working_dir:
            raise RequestError(
                "working_dir", job.working_dir,
                "a remote URI the cluster can fetch (s3://, gs://, https://…/x.zip)",
                "a local directory is not visible to a KubeRay cluster; use the local backend",
            )
        env["working_dir"] = job.working_dir
    return env


def _redacted(exc: RequestError) -> RequestError:
    """Never let env var values (Pipes bootstrap data) reach an error message."""
    if "runtime" in exc.field.lower() or "env" in exc.field.lower():
        return type(exc)(exc.field, "<redacted>", exc.valid, exc.reason)
    return exc


def _add_job_fields(spec: dict[str, Any], job: JobSpec) -> None:
    if job.entrypoint_num_cpus:
        spec["entrypointNumCpus"] = float(job.entrypoint_num_cpus)
    if job.metadata:
        spec["metadata"] = {str(k): str(v) for k, v in job.metadata.items()}


# ---- the backend ----------------------------------------------------------------------------
class KubeRayBackend(RayBackend):
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

    def _notify(self, name: str, status: Mapping[str, Any]) -> None:
        if self.on_status is not None:
            self.on_status(name, status)

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    # ---- sessions: one RayJob (and its own cluster) per submitted job ------------------------
    @contextlib.contextmanager
    def session(self, request: ClusterRequest, *, run_id: str | None = None,
                code_location: str | None = None) -> Iterator["KubeRayClusterSession"]:
        request = self._ns(request)
        # Everything that can be checked is checked before anything is created.
        validate_request(request, self.catalog)
        build_rayjob(request, self.catalog, entrypoint="true", submission_id="preflight",
                     labels=self.labels, run_id=run_id or self.run_id,
                     code_location=code_location or self.code_location)
        session = KubeRayClusterSession(self, request, run_id=run_id or self.run_id,
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
        timeout_s = self.ready_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        status: dict[str, Any] = {}
        while True:
            try:
                obj = self.client.get_status(RAYJOBS, namespace, name)
            except NotFound:
                raise BackendError(f"RayJob {namespace}/{name} disappeared while starting") from None
            except KubeError as exc:
                raise BackendError(f"cannot read RayJob {namespace}/{name}: {exc}") from exc
            status = obj.get("status") or {}
            self._notify(name, status)
            deployment = status.get("jobDeploymentStatus") or ""
            if deployment in FAILED_DEPLOYMENT:
                raise BackendError(failure_text("RayJob", name, namespace, status))
            cluster = status.get("rayClusterStatus") or {}
            if cluster.get("state") == "failed":
                raise BackendError(failure_text(
                    f"RayCluster {status.get('rayClusterName') or '?'} of RayJob", name, namespace,
                    {"reason": cluster.get("reason"), "message": cluster.get("message")}))
            if deployment in READY_DEPLOYMENT:
                return status
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"RayJob {namespace}/{name} did not start within {timeout_s:.0f}s "
                    f"(jobDeploymentStatus {deployment or 'New'!r}, RayCluster state "
                    f"{cluster.get('state') or 'unknown'!r})")
            self._sleep(self.poll_interval_s)

    def job_status(self, namespace: str, name: str) -> JobStatus:
        try:
            obj = self.client.get_status(RAYJOBS, namespace, name)
        except NotFound:
            raise BackendError(f"RayJob {namespace}/{name} not found (deleted, or never created)") \
                from None
        except KubeError as exc:
            raise BackendError(f"cannot read RayJob {namespace}/{name}: {exc}") from exc
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
        return _LogFollower(self, namespace, name).lines()

    def stop_job(self, namespace: str, name: str, *, require_owned: bool = True,
                 wait: bool = True) -> bool:
        """Delete the RayJob; KubeRay's finalizer stops the Ray job, and the RayJob's own
        cluster goes with it. False when it was already gone."""
        try:
            obj = self.client.get(RAYJOBS, namespace, name)
        except NotFound:
            return False
        if require_owned and not _owned(obj):
            raise BackendError(f"RayJob {namespace}/{name} is not managed by {MANAGED_BY}; "
                               "not touching it")
        deleted = self.client.delete(RAYJOBS, namespace, name)
        if wait and not self.client.wait_deleted(RAYJOBS, namespace, name,
                                                 self.teardown_timeout_s, self.poll_interval_s):
            raise BackendError(f"RayJob {namespace}/{name} still exists "
                               f"{self.teardown_timeout_s:.0f}s after deleting it")
        return deleted

    def list_jobs(self, namespace: str) -> list[dict[str, Any]]:
        return self.client.list(RAYJOBS, namespace, f"{LABEL_MANAGED_BY}={MANAGED_BY}")

    # ---- long-lived clusters (CLI) -----------------------------------------------------------
    def render_cluster(self, request: ClusterRequest) -> dict[str, Any]:
        return build_raycluster(self._ns(request), self.catalog, labels=self.labels,
                                run_id=self.run_id, code_location=self.code_location)

    def create_cluster(self, request: ClusterRequest, *, wait: bool = True,
                       timeout_s: float | None = None, delete_on_failure: bool = True) -> ClusterInfo:
        """Create a RayCluster for ``request``; with ``wait``, until its state is ``ready``.

        A cluster that fails (KubeRay's reason verbatim), does not get ready in time or whose
        wait is interrupted is deleted again when ``delete_on_failure``. A name taken by an
        object we did not create fails with the API server's 409 explained.
        """
        manifest = self.render_cluster(request)
        ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        token = new_creation_token()
        try:
            obj = self.client.create(RAYCLUSTERS, ns, manifest, token=token)
        except Conflict as exc:
            raise BackendError(str(exc)) from None
        except KubeError as exc:
            raise BackendError(f"could not create RayCluster {ns}/{name}: {exc}") from exc
        if not wait:
            return cluster_info(obj)
        try:
            return self.wait_cluster_ready(ns, name, timeout_s)
        except BaseException:
            if delete_on_failure:
                self._delete_if_token(RAYCLUSTERS, ns, name, token)
                self.client.wait_deleted(RAYCLUSTERS, ns, name, self.teardown_timeout_s,
                                         self.poll_interval_s)
            raise

    def wait_cluster_ready(self, namespace: str, name: str, timeout_s: float | None = None) -> ClusterInfo:
        timeout_s = self.ready_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                obj = self.client.get_status(RAYCLUSTERS, namespace, name)
            except NotFound:
                raise BackendError(f"RayCluster {namespace}/{name} disappeared while starting") \
                    from None
            except KubeError as exc:
                raise BackendError(f"cannot read RayCluster {namespace}/{name}: {exc}") from exc
            status = obj.get("status") or {}
            self._notify(name, status)
            if status.get("state") == "failed":
                raise BackendError(failure_text("RayCluster", name, namespace, status))
            if status.get("state") == "ready":
                return cluster_info(obj)
            if time.monotonic() >= deadline:
                raise BackendError(f"RayCluster {namespace}/{name} was not ready within "
                                   f"{timeout_s:.0f}s (state {status.get('state') or 'unknown'!r})")
            self._sleep(self.poll_interval_s)

    def list_clusters(self, namespace: str) -> list[ClusterInfo]:
        objs = self.client.list(RAYCLUSTERS, namespace, f"{LABEL_MANAGED_BY}={MANAGED_BY}")
        return sorted((cluster_info(o) for o in objs), key=lambda c: c.name)

    def get_cluster(self, namespace: str, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The RayCluster and its pods."""
        try:
            obj = self.client.get(RAYCLUSTERS, namespace, name)
        except NotFound:
            raise BackendError(f"RayCluster {namespace}/{name} not found") from None
        pods = self.client.list_pods(namespace, f"{RAY_CLUSTER_LABEL}={name}")
        return obj, pods

    def delete_cluster(self, namespace: str, name: str, *, wait: bool = True) -> bool:
        """Delete a RayCluster we manage (never one of another owner, nor a RayJob's cluster,
        which KubeRay deletes with its job), and first the RayJobs we submitted to it (their
        Ray jobs are stopped by KubeRay's finalizer). False when it was already gone."""
        try:
            obj = self.client.get(RAYCLUSTERS, namespace, name)
        except NotFound:
            return False
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if not _owned(obj):
            raise BackendError(f"RayCluster {namespace}/{name} is not managed by {MANAGED_BY} "
                               f"(label {LABEL_MANAGED_BY}); not deleting it")
        if labels.get(ORIGINATED_FROM_CRD_LABEL) == "RayJob":
            raise BackendError(f"RayCluster {namespace}/{name} belongs to RayJob "
                               f"{labels.get(ORIGINATED_FROM_NAME_LABEL)}; stop that job instead")
        selector = f"{LABEL_MANAGED_BY}={MANAGED_BY},{CLUSTER_NAME_LABEL}={name}"
        jobs = [j["metadata"]["name"] for j in self.client.list(RAYJOBS, namespace, selector)]
        for job in jobs:
            self.client.delete(RAYJOBS, namespace, job)
        for job in jobs if wait else ():
            if not self.client.wait_deleted(RAYJOBS, namespace, job, self.teardown_timeout_s,
                                            self.poll_interval_s):
                raise BackendError(f"RayJob {namespace}/{job} on cluster {name} still exists "
                                   f"{self.teardown_timeout_s:.0f}s after deleting it")
        deleted = self.client.delete(RAYCLUSTERS, namespace, name)
        if wait and not self.client.wait_deleted(RAYCLUSTERS, namespace, name,
                                                 self.teardown_timeout_s, self.poll_interval_s):
            raise BackendError(f"RayCluster {namespace}/{name} still exists "
                               f"{self.teardown_timeout_s:.0f}s after deleting it")
        return deleted

    def build_rayjob_for_cluster(self, cluster: Mapping[str, Any], job: JobSpec, *,
                                 owner: str = "unknown") -> dict[str, Any]:
        """A RayJob that runs ``job`` on the existing RayCluster ``cluster`` (``clusterSelector``):
        no cluster of its own, so nothing is shut down when it ends."""
        meta = cluster.get("metadata") or {}
        cluster_name, namespace = meta["name"], meta.get("namespace") or "default"
        head = ((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("template") or {}
        head_spec = head.get("spec") or {}
        containers = head_spec.get("containers") or [{}]
        job_name = rayjob_name_for(cluster_name, job.submission_id)
        labels = {k: v for k, v in (meta.get("labels") or {}).items()
                  if not k.startswith("ray.io/")}
        labels.update(self.labels)
        labels.update({LABEL_OWNER: owner, CLUSTER_NAME_LABEL: cluster_name})
        if self.run_id:
            labels[LABEL_DAGSTER_RUN_ID] = self.run_id
        if self.code_location:
            labels[LABEL_DAGSTER_CODE_LOCATION] = self.code_location
        labels[SUBMISSION_ID_LABEL] = job.submission_id
        labels = {k: sanitize_label_value(str(v)) for k, v in sorted(labels.items())}
        submitter_request = ClusterRequest(
            name=job_name, owner=owner, namespace=namespace,
            image=containers[0].get("image") or ClusterRequest.model_fields["image"].default,
            service_account=head_spec.get("serviceAccountName")
            or ClusterRequest.model_fields["service_account"].default,
        )
        try:
            runtime_env = _runtime_env(job)
            spec: dict[str, Any] = {
                "entrypoint": job.entrypoint,
                "jobId": job.submission_id,
                "submissionMode": SUBMISSION_MODE,
                "clusterSelector": {RAY_CLUSTER_LABEL: cluster_name},
                "shutdownAfterJobFinishes": False,
                "backoffLimit": 0,
            }
            spec["runtimeEnvYAML"] = yaml.safe_dump(runtime_env, sort_keys=True,
                                                    default_flow_style=False)
            _add_job_fields(spec, job)
            spec["submitterPodTemplate"] = submitter_pod_template(submitter_request, labels)
            manifest = {"apiVersion": API_VERSION, "kind": "RayJob",
                        "metadata": {"name": job_name, "namespace": namespace, "labels": labels},
                        "spec": spec}
            rules.check_name(job_name, kind="RayJob")
            rules.check_rayjob(manifest)
        except RequestError as exc:
            raise _redacted(exc) from None
        return manifest

    def submit_to_cluster(self, namespace: str, cluster_name: str, job: JobSpec, *,
                          owner: str = "unknown") -> str:
        """Create a RayJob running ``job`` on the existing cluster ``cluster_name``; returns
        the RayJob's name (its id for status/logs/stop)."""
        try:
            cluster = self.client.get(RAYCLUSTERS, namespace, cluster_name)
        except NotFound:
            raise BackendError(f"RayCluster {namespace}/{cluster_name} not found") from None
        if not _owned(cluster):
            raise BackendError(f"RayCluster {namespace}/{cluster_name} is not managed by "
                               f"{MANAGED_BY}; not submitting to it")
        manifest = self.build_rayjob_for_cluster(cluster, job, owner=owner)
        try:
            obj = self.client.create(RAYJOBS, namespace, manifest)
        except Conflict as exc:
            raise BackendError(str(exc)) from None
        except KubeError as exc:
            raise BackendError(f"could not create RayJob on {namespace}/{cluster_name}: {exc}") \
                from exc
        return obj["metadata"]["name"]

    # ---- deletion of what we created ---------------------------------------------------------
    def _delete_if_token(self, plural: str, namespace: str, name: str, token: str | None) -> bool:
        """Delete ``name`` only if it carries our creation ``token``."""
        try:
            obj = self.client.get(plural, namespace, name)
        except NotFound:
            return False
        if token is None or creation_token(obj) != token:
            log.warning("%s %s/%s was not created by this session; leaving it", plural, namespace,
                        name)
            return False
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            return True
        return self.client.delete(plural, namespace, name)


@dataclass
class _Created:
    name: str
    token: str
    stopped: bool = False


class KubeRayClusterSession(ClusterSession):
    """Jobs of one :class:`ClusterRequest`: each ``submit`` is a RayJob with its own cluster.

    Job ids are RayJob names (``kubectl get rayjob <id>``). Thread-safe: Dagster follows logs
    in one thread while it polls the status in another.
    """

    def __init__(self, backend: KubeRayBackend, request: ClusterRequest, *,
                 run_id: str | None = None, code_location: str | None = None) -> None:
        self.backend = backend
        self.request = request
        self.name = request.name
        self.namespace = request.namespace
        self.dashboard_url = None  # per-job clusters; dashboards are inside the cluster
        self.run_id = run_id
        self.code_location = code_location
        self._lock = threading.Lock()
        self._created: dict[str, _Created] = {}
        self._closed = False

    @property
    def created(self) -> list[str]:
        """Names of the RayJobs this session created (and will delete)."""
        with self._lock:
            return list(self._created)

    def render(self, job: JobSpec) -> dict[str, Any]:
        """The RayJob manifest ``submit`` would create for ``job`` (no API calls)."""
        job_request = self.request.model_copy(
            update={"name": rayjob_name_for(self.request.name, job.submission_id)})
        labels = {**self.backend.labels, SUBMISSION_ID_LABEL: job.submission_id}
        try:
            manifest = build_rayjob(
                job_request, self.backend.catalog, entrypoint=job.entrypoint,
                submission_id=job.submission_id, runtime_env=_runtime_env(job), labels=labels,
                run_id=self.run_id, code_location=self.code_location)
            _add_job_fields(manifest["spec"], job)
            rules.check_rayjob(manifest)
        except RequestError as exc:
            raise _redacted(exc) from None
        return manifest

    def submit(self, job: JobSpec) -> str:
        """Create the job's RayJob and wait until KubeRay reports its cluster up and the job
        submitted (``jobDeploymentStatus`` Running). Returns the RayJob's name."""
        if self._closed:
            raise BackendError(f"session {self.name} is closed")
        manifest = self.render(job)
        name, ns = manifest["metadata"]["name"], self.namespace
        with self._lock:
            if name in self._created:
                raise BackendError(f"submission id {job.submission_id!r} was already submitted "
                                   f"in this session (RayJob {ns}/{name})")
            # Recorded before the call: an interrupted create may still have reached the server.
            record = self._created[name] = _Created(name, new_creation_token())
        try:
            self.backend.client.create(RAYJOBS, ns, manifest, token=record.token)
        except Conflict as exc:
            with self._lock:  # someone else's object: never delete it
                self._created.pop(name, None)
            raise BackendError(str(exc)) from None
        except KubeError as exc:
            raise BackendError(f"could not create RayJob {ns}/{name}: {exc}") from exc
        log.info("RayJob %s/%s created for submission %s; waiting for its cluster", ns, name,
                 job.submission_id)
        try:
            self.backend.wait_until_running(ns, name)
        except BackendError:
            # The caller gets no job id to stop: release the cluster now (teardown waits).
            with contextlib.suppress(KubeError):
                self.backend._delete_if_token(RAYJOBS, ns, name, record.token)
            raise
        return name

    def status(self, job_id: str) -> JobStatus:
        with self._lock:
            record = self._created.get(job_id)
        try:
            return self.backend.job_status(self.namespace, job_id)
        except BackendError:
            if record is not None and record.stopped:
                return JobStatus(JobState.STOPPED, "stopped; RayJob deleted")
            raise

    def logs(self, job_id: str, follow: bool = True) -> Iterator[str]:
        return self.backend.job_logs(self.namespace, job_id, follow=follow)

    def stop(self, job_id: str) -> None:
        """Delete the RayJob: KubeRay stops the Ray job and its cluster is deleted with it."""
        with self._lock:
            record = self._created.get(job_id)
        if record is None:
            raise BackendError(f"RayJob {job_id} was not submitted in this session")
        record.stopped = True
        try:
            self.backend._delete_if_token(RAYJOBS, self.namespace, job_id, record.token)
        except KubeError as exc:
            raise BackendError(f"could not stop RayJob {self.namespace}/{job_id}: {exc}") from exc

    # ---- teardown ----------------------------------------------------------------------------
    def close(self, raise_errors: bool = True) -> None:
        """Delete every RayJob this session created and wait (bounded by the backend's
        ``teardown_timeout_s``) until they and their RayClusters are gone."""
        self._closed = True
        with self._lock:
            records = list(self._created.values())
        if not records:
            return
        client, ns = self.backend.client, self.namespace
        errors: list[str] = []
        for record in records:
            try:
                self.backend._delete_if_token(RAYJOBS, ns, record.name, record.token)
            except KubeError as exc:
                errors.append(f"delete RayJob {ns}/{record.name}: {exc}")
        deadline = time.monotonic() + self.backend.teardown_timeout_s
        leftovers: list[str] = []

        def remaining() -> float:
            return max(0.0, deadline - time.monotonic())

        for record in records:
            try:
                if not client.wait_deleted(RAYJOBS, ns, record.name, remaining(),
                                           self.backend.poll_interval_s):
                    leftovers.append(f"rayjobs/{record.name}")
                    continue
                # Its RayCluster is owned by the RayJob; make sure the GC got it too.
                for cluster in client.list(RAYCLUSTERS, ns,
                                           f"{ORIGINATED_FROM_NAME_LABEL}={record.name}"):
                    cname = cluster["metadata"]["name"]
                    if not cluster["metadata"].get("deletionTimestamp"):
                        client.delete(RAYCLUSTERS, ns, cname)
                    if not client.wait_deleted(RAYCLUSTERS, ns, cname, remaining(),
                                               self.backend.poll_interval_s):
                        leftovers.append(f"rayclusters/{cname}")
            except KubeError as exc:
                errors.append(f"wait for RayJob {ns}/{record.name} to go: {exc}")
        if leftovers:
            errors.append(f"still present after {self.backend.teardown_timeout_s:.0f}s: "
                          + ", ".join(leftovers))
        if errors:
            text = f"teardown of session {self.name} in {ns} incomplete: " + "; ".join(errors)
            if raise_errors:
                raise BackendError(text)
            log.error(text)


# ---- following the submitter pod's log -------------------------------------------------------
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def _stamp_key(stamp: str) -> str:
    """A string that sorts like the RFC 3339 time (Go trims trailing zeros of the fraction)."""
    match = _STAMP.match(stamp)
    if not match:
        return stamp
    return f"{match[1]}.{(match[2] or '').ljust(9, '0')}{match[3]}"


class _LogFollower:
    """Follow the newest submitter pod until the RayJob is terminal.

    The stream is opened with ``timestamps=true``; if it breaks, it is reopened with
    ``sinceSeconds`` and lines already yielded (by timestamp) are skipped. A retried submitter
    (a new pod of the Job) is followed from its start.
    """

    MAX_BROKEN_STREAMS = 20

    def __init__(self, backend: KubeRayBackend, namespace: str, name: str) -> None:
        self.backend = backend
        self.namespace = namespace
        self.name = name

    def _terminal(self) -> bool:
        try:
            return self.backend.job_status(self.namespace, self.name).state.terminal
        except BackendError:
            return True  # deleted: nothing more will come

    def _phase(self, pod_name: str) -> str | None:
        for pod in self.backend.submitter_pods(self.namespace, self.name):
            if pod["metadata"]["name"] == pod_name:
                return (pod.get("status") or {}).get("phase")
        return None

    def lines(self) -> Iterator[str]:
        import urllib3

        backend, client = self.backend, self.backend.client
        finished: set[str] = set()
        position: dict[str, tuple[str, int]] = {}  # pod -> (last stamp key, lines at it)
        last_line_at: dict[str, float] = {}
        broken = 0
        while True:
            terminal = self._terminal()
            pods = backend.submitter_pods(self.namespace, self.name)
            pod = pods[-1] if pods else None
            pod_name = pod["metadata"]["name"] if pod else None
            phase = (pod.get("status") or {}).get("phase") if pod else None
            if pod_name is None or phase == "Pending" or pod_name in finished:
                if terminal:
                    return
                backend._sleep(backend.poll_interval_s)
                continue
            since = None
            if pod_name in position:
                since = int(time.time() - last_line_at.get(pod_name, time.time())) + 5
            last_key, skip = position.get(pod_name, ("", 0))
            try:
                for raw in client.stream_pod_log(self.namespace, pod_name, timestamps=True,
                                                 since_seconds=since):
                    stamp, _, text = raw.partition(" ")
                    key = _stamp_key(stamp)
                    if key < last_key:
                        continue
                    if key == last_key and skip > 0:
                        skip -= 1
                        continue
                    prev_key, prev_count = position.get(pod_name, ("", 0))
                    position[pod_name] = (key, prev_count + 1 if key == prev_key else 1)
                    last_key, skip = key, 0
                    last_line_at[pod_name] = time.time()
                    yield text
            except KubeError as exc:
                if exc.status in (400, 404):  # not started yet, or already gone
                    if terminal:
                        return
                    backend._sleep(backend.poll_interval_s)
                    continue
                raise BackendError(f"cannot follow the log of RayJob {self.namespace}/{self.name}: "
                                   f"{exc}") from exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                broken += 1
                if broken > self.MAX_BROKEN_STREAMS:
                    raise BackendError(f"the log stream of RayJob {self.namespace}/{self.name} "
                                       f"broke {broken} times; last: {exc}") from exc
                log.warning("log stream of pod %s broke (%s); reattaching", pod_name,
                            type(exc).__name__)
                position.setdefault(pod_name, ("", 0))
                last_line_at.setdefault(pod_name, time.time())
                backend._sleep(min(backend.poll_interval_s, 1.0))
                continue
            # The server ended the stream: the container has exited (or the stream was cut).
            position.setdefault(pod_name, ("", 0))
            last_line_at.setdefault(pod_name, time.time())
            if self._phase(pod_name) in ("Succeeded", "Failed", None):
                finished.add(pod_name)
            else:
                backend._sleep(min(backend.poll_interval_s, 1.0))
