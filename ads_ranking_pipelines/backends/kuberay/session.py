"""One cluster session on KubeRay: each submitted job is a RayJob with its own cluster, and
leaving the session deletes every RayJob it created (and waits, bounded, until they and their
RayClusters are gone).

Only objects this session created are ever deleted: each create carries a random token
annotation and teardown checks it before deleting.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ads_ranking_pipelines.backends.base import (
    BackendError,
    ClusterSession,
    JobSpec,
    JobState,
    JobStatus,
)
from ads_ranking_pipelines.backends.kuberay import calls, queueing
from ads_ranking_pipelines.backends.kuberay.context import KubeRayContext
from ads_ranking_pipelines.backends.kuberay.rayjobs import RayJobs
from ads_ranking_pipelines.backends.kuberay.status import ORIGINATED_FROM_NAME_LABEL
from ads_ranking_pipelines.config.validation import RequestError, ResolvedRequest
from ads_ranking_pipelines.kuberay import rules
from ads_ranking_pipelines.kuberay.job_fields import add_job_fields, redacted, runtime_env
from ads_ranking_pipelines.kuberay.labels import SUBMISSION_ID_LABEL
from ads_ranking_pipelines.backends.kuberay.client import (
    RAYCLUSTERS,
    RAYJOBS,
    KubeError,
    new_creation_token,
)
from ads_ranking_pipelines.kuberay.kueue import is_kueue_managed
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob, rayjob_name_for

log = logging.getLogger(__name__)


@dataclass
class _Created:
    name: str
    token: str
    stopped: bool = False
    queue: queueing.QueueWatch | None = None  # a RayJob on a Kueue pool


class KubeRayClusterSession(ClusterSession):
    """Jobs of one :class:`ClusterRequest`: each ``submit`` is a RayJob with its own cluster.

    Job ids are RayJob names (``kubectl get rayjob <id>``). Thread-safe: Dagster follows logs
    in one thread while it polls the status in another.
    """

    def __init__(self, ctx: KubeRayContext, jobs: RayJobs, resolved: ResolvedRequest, *,
                 run_id: str | None = None, code_location: str | None = None) -> None:
        request = resolved.request
        self.ctx = ctx
        self.jobs = jobs
        self.resolved = resolved
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
        labels = {**self.ctx.labels, SUBMISSION_ID_LABEL: job.submission_id}
        try:
            job_request = self.resolved.renamed(rayjob_name_for(self.request.name,
                                                                job.submission_id))
            manifest = build_rayjob(
                job_request, entrypoint=job.entrypoint,
                submission_id=job.submission_id, runtime_env=self._runtime_env(job), labels=labels,
                run_id=self.run_id, code_location=self.code_location,
                deletion=self.ctx.rayjob_deletion)
            add_job_fields(manifest["spec"], job)
            rules.check_rayjob(manifest)
        except RequestError as exc:
            raise redacted(exc) from None
        return manifest

    def _runtime_env(self, job: JobSpec) -> dict[str, Any]:
        env = runtime_env(job)
        if self.ctx.py_modules:
            env["py_modules"] = list(self.ctx.py_modules)
        return env

    def submit(self, job: JobSpec) -> str:
        """Create the job's RayJob and wait until KubeRay reports its cluster up and the job
        submitted (``jobDeploymentStatus`` Running). Returns the RayJob's name."""
        if self._closed:
            raise BackendError(f"session {self.name} is closed")
        manifest = self.render(job)
        name, ns = manifest["metadata"]["name"], self.namespace
        client = self.ctx.client
        with self._lock:
            if name in self._created:
                raise BackendError(f"submission id {job.submission_id!r} was already submitted "
                                   f"in this session (RayJob {ns}/{name})")
            # Recorded before the call: an interrupted create may still have reached the server.
            record = self._created[name] = _Created(name, new_creation_token())

        def forget() -> None:
            with self._lock:  # someone else's object: never delete it
                self._created.pop(name, None)

        calls.create(client, RAYJOBS, ns, manifest, what=f"RayJob {ns}/{name}",
                     token=record.token, on_conflict=forget)
        log.info("RayJob %s/%s created for submission %s; waiting for its cluster", ns, name,
                 job.submission_id)
        if is_kueue_managed(manifest):
            record.queue = queueing.QueueWatch(f"RayJob {ns}/{name}", self.ctx.queue_wait_limit_s,
                                               self._tell_queue)
        try:
            if record.queue is not None:  # not counted against the cluster's ready timeout
                self.jobs.wait_until_admitted(ns, name, record.queue)
            self.jobs.wait_until_running(ns, name)
        except BackendError as exc:
            # A job that failed before it was seen running never gets followed: keep the end
            # of its driver log in the error. The caller gets no job id to stop, so release
            # the cluster now (teardown waits).
            tail = self._log_tail(name)
            with contextlib.suppress(KubeError):
                calls.delete_if_token(client, RAYJOBS, ns, name, record.token)
            if tail:
                raise BackendError(f"{exc}\nlast lines of the job's log:\n{tail}") from exc
            raise
        return name

    def _log_tail(self, name: str, lines: int = 20) -> str:
        try:
            return "\n".join(list(self.jobs.logs(self.namespace, name, follow=False))[-lines:])
        except Exception:  # the log is a courtesy here; the failure reason is what matters
            return ""

    def _tell_queue(self, text: str) -> None:
        log.info("%s", text)
        if self.ctx.on_queue is not None:
            self.ctx.on_queue(text)

    def status(self, job_id: str) -> JobStatus:
        """The job's status; a job Kueue preempted is QUEUED again, its words told as they
        change (the queue-wait limit counts again, and failing it here stops the job)."""
        with self._lock:
            record = self._created.get(job_id)
        try:
            status, info = self.jobs.status_and_queue(self.namespace, job_id)
            if record is not None and record.queue is not None:
                with self._lock:  # read by the log follower and the status poller alike
                    if info is not None:
                        record.queue.observe(info)
                    elif status.state is not JobState.PENDING and record.queue.started is not None:
                        record.queue.admitted()
            return status
        except BackendError:
            if record is not None and record.stopped:
                return JobStatus(JobState.STOPPED, "stopped; RayJob deleted")
            raise

    def logs(self, job_id: str, follow: bool = True) -> Iterator[str]:
        """The driver log; followed until the job ends - through an eviction by Kueue, which
        is told as it happens (:meth:`status`), to the log of the readmitted job."""
        return self.jobs.logs(self.namespace, job_id, follow=follow,
                              terminal=lambda: self._terminal(job_id))

    def _terminal(self, job_id: str) -> bool:
        try:
            return self.status(job_id).state.terminal
        except BackendError:
            return True  # deleted, or past the queue-wait limit: nothing more will come

    def stop(self, job_id: str) -> None:
        """Delete the RayJob: KubeRay stops the Ray job and its cluster is deleted with it."""
        with self._lock:
            record = self._created.get(job_id)
        if record is None:
            raise BackendError(f"RayJob {job_id} was not submitted in this session")
        record.stopped = True
        try:
            calls.delete_if_token(self.ctx.client, RAYJOBS, self.namespace, job_id,
                                  record.token)
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
        client, ns = self.ctx.client, self.namespace
        errors: list[str] = []
        for record in records:
            try:
                calls.delete_if_token(client, RAYJOBS, ns, record.name, record.token)
            except KubeError as exc:
                errors.append(f"delete RayJob {ns}/{record.name}: {exc}")
        deadline = time.monotonic() + self.ctx.teardown_timeout_s
        leftovers: list[str] = []

        def remaining() -> float:
            return max(0.0, deadline - time.monotonic())

        for record in records:
            try:
                if not client.wait_deleted(RAYJOBS, ns, record.name, remaining(),
                                           self.ctx.poll_interval_s):
                    leftovers.append(f"rayjobs/{record.name}")
                    continue
                # Its RayCluster is owned by the RayJob; make sure the GC got it too.
                for cluster in client.list(RAYCLUSTERS, ns,
                                           f"{ORIGINATED_FROM_NAME_LABEL}={record.name}"):
                    cname = cluster["metadata"]["name"]
                    if not cluster["metadata"].get("deletionTimestamp"):
                        client.delete(RAYCLUSTERS, ns, cname)
                    if not client.wait_deleted(RAYCLUSTERS, ns, cname, remaining(),
                                               self.ctx.poll_interval_s):
                        leftovers.append(f"rayclusters/{cname}")
            except KubeError as exc:
                errors.append(f"wait for RayJob {ns}/{record.name} to go: {exc}")
        if leftovers:
            errors.append(f"still present after {self.ctx.teardown_timeout_s:.0f}s: "
                          + ", ".join(leftovers))
        if errors:
            text = f"teardown of session {self.name} in {ns} incomplete: " + "; ".join(errors)
            if raise_errors:
                raise BackendError(text)
            log.error(text)


@contextlib.contextmanager
def closing(session: Any) -> Iterator[Any]:
    """Yield ``session``; close it after the ``with`` body: raising what the close finds when
    the body succeeded, quietly (the body's error wins) when it failed."""
    try:
        yield session
    except BaseException:
        session.close(raise_errors=False)
        raise
    session.close(raise_errors=True)
