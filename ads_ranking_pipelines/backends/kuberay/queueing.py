"""RayJobs and RayClusters queued by Kueue: QUEUED with Kueue's own words, the position Kueue
gives (:mod:`.queue_position`), the wait for admission, its limit.

A RayJob labelled ``kueue.x-k8s.io/queue-name`` is created suspended; KubeRay reports it
``jobDeploymentStatus: Suspended`` (no cluster) until Kueue admits its ``Workload`` and
unsuspends it (kueue ``pkg/controller/jobs/rayjob``, ``RunWithPodSetsInfo``). An admitted job
that Kueue preempts is suspended again (Suspending -> Suspended) and requeued. Neither is an
end: the job is QUEUED, described by the Workload's conditions (QuotaReserved, Admitted,
Evicted, Preempted) and message - e.g. "couldn't assign flavors to pod set workers:
insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 8 more needed".

A RayCluster of the CLI / X-Ray on a Kueue pool is created suspended the same way (kueue
``pkg/controller/jobs/raycluster``): KubeRay keeps it without pods (``state: suspended``) until
Kueue unsuspends it.

The Workload is found by Kueue's ``kueue.x-k8s.io/job-uid`` label and its ownerReference to
the RayJob / RayCluster (jobframework ``constructWorkload``); deleting the object deletes it.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ads_ranking_pipelines.backends.base import BackendError, JobState, JobStatus
from ads_ranking_pipelines.backends.kuberay.client import KubeError, KubeRayClient, NotFound
from ads_ranking_pipelines.backends.kuberay.queue_position import QueuePosition, queue_position
from ads_ranking_pipelines.kuberay.kueue import QUEUE_NAME_LABEL, is_kueue_managed

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
QUEUED_DEPLOYMENT = ("", "Suspended", "Suspending")
CONDITION_ORDER = ("Evicted", "Preempted", "QuotaReserved", "Admitted")


@dataclass(frozen=True)
class QueueInfo:
    """Where a queued RayJob / RayCluster stands, in Kueue's words."""

    local_queue: str
    workload: str | None
    words: str
    evicted: str | None = None  # the eviction reason and message, when it was evicted
    since: dt.datetime | None = None  # when it was (last) queued, from the Workload
    position: QueuePosition | None = None  # while it waits for quota (visibility API)

    @property
    def text(self) -> str:
        """Kueue's words and, while it waits for quota, its position."""
        return self.words + (f"; {self.position.text()}" if self.position else "")

    def seconds_queued(self, now: dt.datetime | None = None) -> float | None:
        if self.since is None:
            return None
        return ((now or dt.datetime.now(dt.timezone.utc)) - self.since).total_seconds()

    def to_json(self, now: dt.datetime | None = None) -> dict[str, Any]:
        """What ``cluster describe -o json`` and X-Ray show of it."""
        waited = self.seconds_queued(now)
        return {"local_queue": self.local_queue, "workload": self.workload, "words": self.words,
                "evicted": self.evicted, "since": self.since.isoformat() if self.since else None,
                "seconds_queued": None if waited is None else round(waited),
                "position": self.position.to_json() if self.position else None,
                "position_text": self.position.text() if self.position else None}

    def summary(self, now: dt.datetime | None = None) -> str:
        """One line: Kueue's words, position, time queued."""
        waited = self.seconds_queued(now)
        return self.text + (f" (queued {waited:.0f}s)" if waited is not None else "")


def _parse(text: str | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def is_queued(obj: Mapping[str, Any]) -> bool:
    """A Kueue-managed RayJob / RayCluster that is suspended (a RayJob: or not yet started):
    waiting for admission."""
    if not is_kueue_managed(dict(obj)):
        return False
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    return bool(spec.get("suspend")) or (status.get("jobDeploymentStatus") or "") in (
        "Suspended", "Suspending")


def workload_words(workload: Mapping[str, Any] | None, local_queue: str) -> QueueInfo:
    """Kueue's words for a Workload: its conditions (``Type=Status (Reason): message``),
    evicted first; the time of the last QuotaReserved transition is when it was queued."""
    if workload is None:
        return QueueInfo(local_queue, None, f"waiting for Kueue to create its Workload in "
                         f"LocalQueue {local_queue}")
    name = (workload.get("metadata") or {}).get("name")
    conditions = {c.get("type"): c for c in (workload.get("status") or {}).get("conditions") or []}
    parts, evicted = [], None
    for ctype in CONDITION_ORDER:
        cond = conditions.get(ctype)
        if cond is None or (ctype in ("Evicted", "Preempted") and cond.get("status") != "True"):
            continue
        text = f"{ctype}={cond.get('status')}"
        if cond.get("reason"):
            text += f" ({cond['reason']})"
        if cond.get("message"):
            text += f": {cond['message']}"
        parts.append(text)
        if ctype == "Evicted":
            evicted = f"{cond.get('reason') or 'Evicted'}: {cond.get('message') or ''}".rstrip(": ")
    reserved = conditions.get("QuotaReserved") or {}
    since = _parse(reserved.get("lastTransitionTime")) or _parse(
        (workload.get("metadata") or {}).get("creationTimestamp"))
    words = "; ".join(parts) or "no conditions yet (Kueue has not looked at it)"
    return QueueInfo(local_queue, name, f"Workload {name} in LocalQueue {local_queue}: {words}",
                     evicted, since)


def find_workload(client: KubeRayClient, obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The object's Workload (Kueue's job-uid label and ownerReference), or None."""
    meta = obj.get("metadata") or {}
    uid, namespace = meta.get("uid"), meta.get("namespace")
    if not uid or not namespace:
        return None
    try:
        items = client.list_workloads(namespace, f"{JOB_UID_LABEL}={uid}")
    except NotFound:  # Kueue's CRDs are not installed
        return None
    owned = [w for w in items if any(r.get("uid") == uid for r in
                                     (w.get("metadata") or {}).get("ownerReferences") or [])]
    return owned[0] if owned else None


def _waits_for_quota(workload: Mapping[str, Any]) -> bool:
    conditions = (workload.get("status") or {}).get("conditions") or []
    return not any(c.get("type") in ("QuotaReserved", "Finished") and c.get("status") == "True"
                   for c in conditions)


def queue_info(client: KubeRayClient, obj: Mapping[str, Any]) -> QueueInfo:
    """Kueue's words for a queued object and, while its Workload waits for quota, its
    position (:func:`.queue_position.queue_position`)."""
    meta = obj.get("metadata") or {}
    local_queue = (meta.get("labels") or {}).get(QUEUE_NAME_LABEL, "?")
    try:
        workload = find_workload(client, obj)
    except KubeError as exc:
        return QueueInfo(local_queue, None, f"queued in LocalQueue {local_queue} (cannot read "
                         f"its Workload: {exc})")
    info = workload_words(workload, local_queue)
    if workload is not None and info.workload and _waits_for_quota(workload):
        info = replace(info, position=queue_position(
            client, meta.get("namespace") or "", local_queue, info.workload))
    return info


def queued_status(info: QueueInfo) -> JobStatus:
    return JobStatus(JobState.QUEUED, info.summary())


class QueueWatch:
    """Tells ``on_change`` Kueue's words each time they change, and fails once the job has
    waited ``limit_s`` (measured by this process: a clock on our side, not the API's)."""

    def __init__(self, what: str, limit_s: float | None,
                 on_change: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.limit_s = limit_s
        self.on_change = on_change
        self.clock = clock
        self.started: float | None = None
        self.last: str | None = None
        self.evicted: str | None = None  # why Kueue evicted the job, until it is readmitted

    def observe(self, info: QueueInfo) -> None:
        now = self.clock()
        if self.started is None:
            self.started = now
        if info.evicted:
            self.evicted = info.evicted
        if info.text != self.last:
            self.last = info.text
            text = (f"{self.what} evicted by Kueue: {info.evicted}; waiting to be readmitted "
                    f"(QUEUED: {info.text})") if info.evicted else f"{self.what} QUEUED: {info.text}"
            if self.on_change is not None:
                self.on_change(text)
        if self.limit_s is not None and now - self.started >= self.limit_s:
            raise BackendError(f"{self.what} was not admitted by Kueue within the queue-wait "
                               f"limit of {self.limit_s:.0f}s: {info.text}")

    def admitted(self) -> None:
        if self.started is not None and self.on_change is not None:
            waited = f"admitted by Kueue after {self.clock() - self.started:.0f}s in the queue"
            if self.evicted:  # KubeRay makes a new cluster and submits the same job id again
                waited = (f"re{waited} (it was evicted by Kueue: {self.evicted}); its job runs "
                          "again on a new cluster - a training job resumes from its last "
                          "checkpoint")
            self.on_change(f"{self.what} {waited}")
        self.started = self.last = self.evicted = None
