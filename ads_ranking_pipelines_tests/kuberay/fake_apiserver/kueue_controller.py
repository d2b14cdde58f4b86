"""A toy Kueue (kubernetes-sigs/kueue v0.x) behind the fake API server: LocalQueues pointing at
ClusterQueues with a quota, a ``Workload`` per suspended, queue-labelled RayJob or standalone
RayCluster, admission in priority order, unsuspend, Workload conditions, quota released when
the job ends or goes, and preemption of lower-priority admitted work. The pending Workloads
and their positions are served by :mod:`.kueue_visibility` (Kueue's visibility API).

Configure it on the server: ``fake.kueue_queues = {"<local queue>": KueueQueue(quota={...})}``
(one ClusterQueue per LocalQueue, one resource flavor ``default-flavor``) and
``fake.kueue_priorities = {"<WorkloadPriorityClass>": value}``. A RayJob labelled for a
LocalQueue that is not configured stays pending with Kueue's "LocalQueue ... doesn't exist".

Each behaviour names the upstream function it models (kubernetes-sigs/kueue, ``pkg/``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.operator_common import OperatorHost
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.store import now_rfc3339

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
WORKLOADS = "workloads"
JOB_KINDS = {"rayjobs": "RayJob", "rayclusters": "RayCluster"}
API_VERSION = "kueue.x-k8s.io/v1beta1"
FLAVOR = "default-flavor"
GPU = "nvidia.com/gpu"
_UNITS = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "m": 0.001}


@dataclass
class KueueQueue:
    """One LocalQueue and its ClusterQueue: ``quota`` is the nominalQuota per resource of the
    one flavor (``{"nvidia.com/gpu": 16, "cpu": 64}``); ``preemption`` is the ClusterQueue's
    ``withinClusterQueue: LowerPriority``."""

    quota: dict[str, float]
    cluster_queue: str = ""
    preemption: bool = True
    evictions: list[str] = field(default_factory=list)  # Workloads preempted, in order


def _quantity(value: Any) -> float:
    text = str(value)
    for suffix, factor in _UNITS.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * factor
    return float(text)


def _pod_requests(template: dict[str, Any]) -> dict[str, float]:
    """What one pod asks for (``pkg/workload/resources.go``: requests, else limits)."""
    total: dict[str, float] = {}
    for container in (template.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in asked.items():
            total[name] = total.get(name, 0.0) + _quantity(value)
    return total


def pod_sets(job: dict[str, Any]) -> list[dict[str, Any]]:
    """``pkg/controller/jobs/rayjob/rayjob_controller.go`` ``PodSets`` (a RayJob's
    ``spec.rayClusterSpec``) and ``pkg/controller/jobs/raycluster/raycluster_controller.go``
    ``PodSets`` (a RayCluster's ``spec``): the head, then one pod set per worker group
    (``replicas * numOfHosts`` pods)."""
    spec = (job.get("spec") or {})
    spec = spec.get("rayClusterSpec") or {} if job.get("kind") == "RayJob" else spec
    head = (spec.get("headGroupSpec") or {}).get("template") or {}
    sets = [{"name": "head", "count": 1, "requests": _pod_requests(head)}]
    for group in spec.get("workerGroupSpecs") or []:
        count = int(group.get("replicas") or 0) * int(group.get("numOfHosts") or 1)
        sets.append({"name": group.get("groupName") or "workers", "count": count,
                     "requests": _pod_requests(group.get("template") or {})})
    return sets


def _total(sets: list[dict[str, Any]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for s in sets:
        for name, value in s["requests"].items():
            total[name] = total.get(name, 0.0) + value * s["count"]
    return total


def _child_of_rayjob(obj: dict[str, Any]) -> bool:
    """``pkg/controller/jobframework/reconciler.go`` (``IsOwnerManagedByKueue``): a RayCluster
    that a queued RayJob owns is its job's, not a job of its own (KubeRay copies the RayJob's
    labels, the queue name too, onto it); Kueue makes no Workload for it."""
    return obj.get("kind") == "RayCluster" and any(
        r.get("kind") == "RayJob" for r in obj["metadata"].get("ownerReferences") or [])


def _condition(wl: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or []
                 if c["type"] == ctype), None)


def _is_true(wl: dict[str, Any], ctype: str) -> bool:
    cond = _condition(wl, ctype)
    return bool(cond and cond["status"] == "True")


def pending_in_order(workloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Workloads waiting for quota, in the order the scheduler takes them
    (``pkg/queue/cluster_queue.go``, BestEffortFIFO: priority, then creation time)."""
    pending = [w for w in workloads if not _is_true(w, "QuotaReserved")
               and not _is_true(w, "Finished")]
    return sorted(pending, key=lambda w: (-w["spec"]["priority"], w["_created"]))


def cluster_queue_of(queue: KueueQueue, local_queue: str) -> str:
    """The ClusterQueue a LocalQueue points at (``spec.clusterQueue``)."""
    return queue.cluster_queue or f"cq-{local_queue}"


def set_condition(wl: dict[str, Any], ctype: str, status: str, reason: str, message: str) -> bool:
    """``pkg/workload/workload.go`` ``SetConditionAndUpdate`` / ``apimeta.SetStatusCondition``:
    True when the condition changed."""
    conditions = wl.setdefault("status", {}).setdefault("conditions", [])
    for cond in conditions:
        if cond["type"] == ctype:
            if (cond["status"], cond["reason"], cond["message"]) == (status, reason, message):
                return False
            if cond["status"] != status:
                cond["lastTransitionTime"] = now_rfc3339()
            cond.update(status=status, reason=reason, message=message)
            return True
    conditions.append({"type": ctype, "status": status, "reason": reason, "message": message,
                       "lastTransitionTime": now_rfc3339()})
    return True


class KueueController:
    """The jobframework reconciler, the workload controller and the scheduler, one pass per
    operator tick (call with the host's lock held)."""

    def __init__(self, host: OperatorHost) -> None:
        self.host = host

    @property
    def queues(self) -> dict[str, KueueQueue]:
        return getattr(self.host, "kueue_queues", {})

    def reconcile(self, now: float) -> None:
        for key in [k for k in self.host.objects if k[0] in JOB_KINDS]:
            obj = self.host.objects[key]
            if (obj["metadata"].get("labels") or {}).get(QUEUE_NAME_LABEL) \
                    and not _child_of_rayjob(obj):
                self._reconcile_job(key, obj)
        self._schedule()

    # ---- pkg/controller/jobframework/reconciler.go -----------------------------------------
    def _reconcile_job(self, key: tuple, job: dict[str, Any]) -> None:
        """``ReconcileGenericJob``: ensure the job's Workload; a finished job's Workload gets
        ``Finished`` (its quota is released); an evicted job is handled as
        :meth:`_handle_eviction` says."""
        if job["metadata"].get("deletionTimestamp"):
            return
        wl = self._workload_of(job) or self._construct_workload(key, job)
        status = job.get("status") or {}
        if status.get("jobDeploymentStatus") in ("Complete", "Failed") and \
                not _is_true(wl, "Finished"):
            reason = "Succeeded" if status.get("jobStatus") == "SUCCEEDED" else "Failed"
            set_condition(wl, "Finished", "True", reason, f"Job finished: {reason}")
            self.host._touch(wl)
        if _is_true(wl, "Evicted") and not _is_true(wl, "Finished"):
            self._handle_eviction(job, wl)

    def _handle_eviction(self, job: dict[str, Any], wl: dict[str, Any]) -> None:
        """``ReconcileGenericJob``, "handle eviction": ``stopJob`` (rayjob ``Suspend``:
        ``spec.suspend`` true; KubeRay then deletes the cluster). The Workload keeps its quota
        until the job is no longer active (rayjob ``IsActive``: ``jobDeploymentStatus`` neither
        Suspended nor New); then ``SetRequeuedCondition`` (True for an eviction by preemption)
        and ``UnsetQuotaReservationWithCondition`` (QuotaReserved False, reason Pending, the
        eviction's message; the admission cleared; ``SyncAdmittedCondition``: Admitted False,
        NoReservation) - the Workload is pending again, with the Evicted condition kept."""
        if not job["spec"].get("suspend"):
            job["spec"]["suspend"] = True
            self.host._touch(job)
        deployment = (job.get("status") or {}).get("jobDeploymentStatus") or ""
        if not _is_true(wl, "QuotaReserved") or deployment not in ("Suspended", ""):
            return
        evicted = _condition(wl, "Evicted") or {}
        reason, message = evicted.get("reason", ""), evicted.get("message", "")
        set_condition(wl, "Requeued", "True" if reason == "Preempted" else "False", reason, message)
        set_condition(wl, "QuotaReserved", "False", "Pending", message)
        wl["status"].pop("admission", None)
        set_condition(wl, "Admitted", "False", "NoReservation", "The workload has no reservation")
        self.host._touch(wl)

    def _workload_of(self, job: dict[str, Any]) -> dict[str, Any] | None:
        uid = job["metadata"]["uid"]
        return next((o for (p, _, _), o in self.host.objects.items() if p == WORKLOADS and any(
            r.get("uid") == uid for r in o["metadata"].get("ownerReferences") or [])), None)

    def _construct_workload(self, key: tuple, job: dict[str, Any]) -> dict[str, Any]:
        """``constructWorkload`` / ``GetWorkloadNameForOwnerWithGVK``: ``rayjob-<name>-<hash>``
        (``raycluster-<name>-<hash>``) owned by the job, labelled with its uid, priority from
        its WorkloadPriorityClass."""
        meta, labels = job["metadata"], job["metadata"].get("labels") or {}
        kind = JOB_KINDS[key[0]]
        digest = hashlib.sha256(f"{meta['name']}/{kind}/{meta['uid']}".encode()).hexdigest()[:5]
        name = f"{kind.lower()}-{meta['name']}-{digest}"
        priority_class = labels.get(PRIORITY_CLASS_LABEL) or ""
        priorities = getattr(self.host, "kueue_priorities", {})
        wmeta = {"name": name, "namespace": key[1], "labels": {JOB_UID_LABEL: meta["uid"]},
                 "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": kind,
                                      "name": meta["name"], "uid": meta["uid"],
                                      "controller": True, "blockOwnerDeletion": True}]}
        self.host._stamp_new(wmeta)
        sets = pod_sets(job)
        wl = {"apiVersion": API_VERSION, "kind": "Workload", "metadata": wmeta,
              "spec": {"queueName": labels[QUEUE_NAME_LABEL],
                       "priorityClassName": priority_class,
                       "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass"
                       if priority_class else "",
                       "priority": int(priorities.get(priority_class, 0)),
                       "podSets": [{"name": s["name"], "count": s["count"]} for s in sets]},
              "status": {"conditions": []}, "_requests": _total(sets),
              "_created": int(wmeta["resourceVersion"]), "_admitted": 0}
        self.host.objects[(WORKLOADS, key[1], name)] = wl
        return wl

    # ---- pkg/scheduler/scheduler.go ---------------------------------------------------------
    def _schedule(self) -> None:
        """``Scheduler.schedule``: pending Workloads by priority, then creation time
        (``queue.Manager`` heads, BestEffortFIFO); one that fits the ClusterQueue's unused
        quota is admitted (QuotaReserved, then Admitted: ``workload.SetQuotaReservation``,
        ``SyncAdmittedCondition``), else it stays pending with the flavor assigner's words -
        or, when ``LowerPriority`` preemption can make room, evicts the lower-priority
        admitted Workloads (``preemption.Preemptor``)."""
        workloads = [w for (p, _, _), w in self.host.objects.items() if p == WORKLOADS]
        for wl in pending_in_order(workloads):
            queue = self.queues.get(wl["spec"]["queueName"])
            if queue is None:
                if set_condition(wl, "QuotaReserved", "False", "Inadmissible",
                                 f"LocalQueue {wl['spec']['queueName']} doesn't exist"):
                    self.host._touch(wl)
                continue
            short = self._shortfall(queue, wl, workloads)
            if short is None:
                self._admit(wl, queue)
                continue
            resource, missing = short
            victims = self._preempt(queue, wl, workloads) if queue.preemption else 0
            if victims:
                message = (f"couldn't assign flavors to pod set workers: insufficient unused "
                           f"quota for {resource} in flavor {FLAVOR}, {_fmt(missing)} more "
                           f"needed. Pending the preemption of {victims} workload(s)")
            else:
                message = (f"couldn't assign flavors to pod set workers: insufficient unused "
                           f"quota for {resource} in flavor {FLAVOR}, {_fmt(missing)} more needed")
            if set_condition(wl, "QuotaReserved", "False", "Pending", message):
                self.host._touch(wl)

    def _in_use(self, queue_name: str, workloads: list[dict[str, Any]],
                exclude: tuple = ()) -> dict[str, float]:
        used: dict[str, float] = {}
        for w in workloads:
            if w["spec"]["queueName"] != queue_name or not _is_true(w, "QuotaReserved") \
                    or _is_true(w, "Finished") or w["metadata"]["name"] in exclude:
                continue
            for name, value in w["_requests"].items():
                used[name] = used.get(name, 0.0) + value
        return used

    def _shortfall(self, queue: KueueQueue, wl: dict[str, Any], workloads: list[dict[str, Any]],
                   exclude: tuple = ()) -> tuple[str, float] | None:
        """``flavorassigner.assignFlavors``: the first quota'd resource that does not fit."""
        used = self._in_use(wl["spec"]["queueName"], workloads, exclude)
        for resource, nominal in sorted(queue.quota.items()):
            need = wl["_requests"].get(resource, 0.0)
            if need and used.get(resource, 0.0) + need > nominal:
                return resource, used.get(resource, 0.0) + need - nominal
        return None

    def _admit(self, wl: dict[str, Any], queue: KueueQueue) -> None:
        """Admission, then ``RunWithPodSetsInfo`` (``jobs/rayjob/rayjob_controller.go``,
        ``jobs/raycluster/raycluster_controller.go``): the job is unsuspended."""
        wl["status"]["admission"] = {
            "clusterQueue": cluster_queue_of(queue, wl["spec"]["queueName"]),
            "podSetAssignments": [{"name": s["name"], "count": s["count"],
                                   "flavors": {r: FLAVOR for r in queue.quota}}
                                  for s in wl["spec"]["podSets"]]}
        wl["_admitted"] = self.host._resource_version
        set_condition(wl, "QuotaReserved", "True", "QuotaReserved",
                      f"Quota reserved in ClusterQueue {wl['status']['admission']['clusterQueue']}")
        set_condition(wl, "Admitted", "True", "Admitted",
                      "The workload is admitted")
        for ctype in ("Evicted", "Preempted"):
            if _condition(wl, ctype):
                set_condition(wl, ctype, "False", "QuotaReserved", "Previously: "
                              + _condition(wl, ctype)["message"])
        self.host._touch(wl)
        job = self._job_of(wl)
        if job is not None and job["spec"].get("suspend"):
            job["spec"]["suspend"] = False
            self.host._touch(job)

    def _job_of(self, wl: dict[str, Any]) -> dict[str, Any] | None:
        owner = (wl["metadata"].get("ownerReferences") or [{}])[0]
        plural = next((p for p, k in JOB_KINDS.items() if k == owner.get("kind")), "rayjobs")
        return self.host.objects.get((plural, wl["metadata"]["namespace"], owner.get("name")))

    # ---- pkg/scheduler/preemption/preemption.go ---------------------------------------------
    def _preempt(self, queue: KueueQueue, wl: dict[str, Any],
                 workloads: list[dict[str, Any]]) -> int:
        """``Preemptor.GetTargets`` (``withinClusterQueue: LowerPriority``): the lowest-priority,
        most recently admitted Workloads until ``wl`` fits; ``IssuePreemptions``
        (``applyPreemptionWithSSA``) gives each target not evicted yet ``Evicted`` (reason
        Preempted: ``SetEvictedCondition``) and ``Preempted`` (reason InClusterQueue,
        ``SetPreemptedCondition``) with ``preemptionMessage``'s words. The target keeps its
        quota reservation until its job is suspended (:meth:`_handle_eviction`), so ``wl``
        waits "Pending the preemption". The number of targets; 0 when no set makes room."""
        candidates = [w for w in workloads if w["spec"]["queueName"] == wl["spec"]["queueName"]
                      and _is_true(w, "QuotaReserved") and not _is_true(w, "Finished")
                      and w["spec"]["priority"] < wl["spec"]["priority"]]
        candidates.sort(key=lambda w: (w["spec"]["priority"], -w["_admitted"]))
        targets: list[dict[str, Any]] = []
        for victim in candidates:
            targets.append(victim)
            if self._shortfall(queue, wl, workloads,
                               exclude=tuple(t["metadata"]["name"] for t in targets)) is None:
                break
        else:
            return 0
        message = (f"Preempted to accommodate a workload (UID: {wl['metadata']['uid']}, "
                   f"JobUID: {wl['metadata']['labels'][JOB_UID_LABEL]}) due to "
                   "prioritization in the ClusterQueue")
        for victim in targets:
            if _is_true(victim, "Evicted"):
                continue  # already being preempted: its job is still stopping
            set_condition(victim, "Evicted", "True", "Preempted", message)
            set_condition(victim, "Preempted", "True", "InClusterQueue", message)
            queue.evictions.append(victim["metadata"]["name"])
            self.host._touch(victim)
        return len(targets)


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
