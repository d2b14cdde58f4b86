"""The toy KubeRay operator behind the fake API server, modelled on KubeRay v1.7.0.

Each behaviour names the upstream function it models (ray-project/kuberay at tag v1.7.0,
``ray-operator/controllers/ray/``). What happens to one RayJob or RayCluster is chosen by a
:class:`Scenario`. Times are compressed: a spec field in seconds (``ttlSecondsAfterFinished``,
deletion-rule ``ttlSeconds``, ``preRunningDeadlineSeconds``) lasts ``time_scale`` real seconds
per second.

RayCluster (raycluster_controller.go):

* ``reconcilePods`` / ``createHeadPod`` / ``createWorkerPod``: head and worker pods; a pod the
  API server refuses (quota, Pod Security admission) is not created and the error is returned
  joined with ``utils.ErrFailedCreateHeadPod`` (``errors.Join``).
* ``calculateStatus``: that error becomes the condition ``ReplicaFailure`` (True, reason
  ``FailedCreateHeadPod``, message ``"FailedCreateHeadPod\\n<API error>"``); ``status.state``
  becomes ``ready`` once every pod runs and is never set to ``failed`` (deprecated in v1.7).
* The scheduler (not KubeRay): a pod that fits no node stays Pending with ``PodScheduled``
  False / ``Unschedulable`` and a ``FailedScheduling`` event; with a cluster autoscaler that
  can add a node, a ``TriggeredScaleUp`` event.

RayJob (rayjob_controller.go ``Reconcile``):

* case New: add the finalizer ``ray.io/rayjob-finalizer``; ``initRayJobStatusIfNeed``
  (Initializing, ``jobId``, ``rayClusterName``, ``startTime``).
* case Initializing: ``checkActiveDeadlineAndUpdateStatusIfNeeded``,
  ``checkPreRunningDeadlineAndUpdateStatusIfNeeded``, ``getOrCreateRayClusterInstance`` (the
  RayCluster, owned by the RayJob); while the cluster is not ready its status is copied into
  ``status.rayClusterStatus``; then ``createK8sJobIfNeed`` (the submitter) and Running -
  or Waiting in InteractiveMode until ``spec.jobId`` is set (case Waiting).
* case Running: ``checkSubmitterAndUpdateStatusIfNeeded`` (a submitter Job whose retries are
  used up fails the RayJob, reason ``SubmissionFailed``), then the Ray job's status: a terminal
  ``jobStatus`` is written at once but ``jobDeploymentStatus`` becomes Complete / Failed
  (``AppFailed``) only once the submitter has finished (``isJobTerminal && finishedAt != nil``).
* The submitter Job (``createNewK8sJob``, backoffLimit 2 by default) runs the command of
  common/job.go ``BuildJobSubmitCommand``: a retried pod prints the driver log again from its
  first line (``ray job logs --follow``).
* ``checkBackoffLimitAndUpdateStatusIfNeeded``: a Failed RayJob with ``spec.backoffLimit`` left
  goes Retrying; case Retrying / Suspending deletes the cluster and submitter, then New /
  Suspended.
* case Complete/Failed: nothing is deleted for a ``clusterSelector`` job; with the
  ``RayJobDeletionPolicy`` gate and ``deletionStrategy.deletionRules``,
  ``handleDeletionRules`` (most impactful overdue rule: DeleteCluster, DeleteSelf…, TTL from
  ``status.endTime``); else with ``shutdownAfterJobFinishes``, ``handleShutdownAfterJobFinishes``
  - after ``ttlSecondsAfterFinished`` it deletes **only the RayCluster** (the RayJob and its
  submitter stay) unless the operator runs with ``DELETE_RAYJOB_CR_AFTER_JOB_FINISHES=true``.
* ``validateRayJob`` (utils/validation.go ``validateDeletionConfiguration``): a deletion
  strategy with the gate off, or deletion rules with ``shutdownAfterJobFinishes``, makes the
  RayJob ValidationFailed.
* Deletion (top of ``Reconcile``): a RayJob with a deletion timestamp whose Ray job is not
  terminal gets ``StopJob``; the finalizer is removed either way, then the object goes.
"""

from __future__ import annotations

import copy
import random
import string
import threading
import time
from dataclasses import dataclass
from typing import Any

from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.store import ObjectStore, _Pod, now_rfc3339

RAYJOB_FINALIZER = "ray.io/rayjob-finalizer"


def _suffix(n: int = 5) -> str:
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(n))


@dataclass
class Scenario:
    """What the toy operator does with one RayJob (or standalone RayCluster).

    ``outcome``: ``succeed`` | ``app_failed`` | ``cluster_failed`` (the API server refuses the
    head pod: ReplicaFailure) | ``unschedulable`` (pods Pending, FailedScheduling) |
    ``deadline_exceeded`` | ``hang`` (the cluster never gets ready, nothing fails).
    ``execute``: the cluster is a real local Ray cluster and the submitter really runs the
    RayJob's entrypoint (:mod:`.ray_runtime`); ``log_lines`` and ``outcome`` are then the job's.
    ``submitter_failures``: how many submitter pods die after ``crash_after_lines`` lines (each
    retry replays the log). ``tail_lines``: lines the submitter still prints after the Ray job
    is terminal (``jobStatus`` ahead of ``jobDeploymentStatus``). Times are real seconds.
    """

    outcome: str = "succeed"
    log_lines: tuple[str, ...] = ("hello from the driver",)
    cluster_ready_after_s: float = 0.15
    pod_running_after_s: float = 0.05
    line_interval_s: float = 0.01
    hold_running_s: float = 0.0
    tail_lines: int = 0
    tail_interval_s: float = 0.05
    submitter_failures: int = 0
    crash_after_lines: int = 1
    scale_up: bool = False
    cluster_failure_reason: str = (
        'pods "%(cluster)s-head" is forbidden: exceeded quota: gpu-quota, requested: '
        "nvidia.com/gpu=32, used: nvidia.com/gpu=0, limited: nvidia.com/gpu=16")
    unschedulable_message: str = (
        "0/12 nodes are available: 12 Insufficient nvidia.com/gpu. preemption: 0/12 nodes are "
        "available: 12 No preemption victims found for incoming pod.")
    app_failure_message: str = (
        "Job entrypoint command failed with exit code 1, last available logs (truncated to "
        "20,000 chars):\nValueError: window has no _SUCCESS marker")
    deadline_after_s: float = 0.4
    execute: bool = False  # real Ray: pods are a local Ray cluster, the submitter runs the job


class ToyOperator(ObjectStore):
    """Reconciles RayJobs, RayClusters and pods every ``tick_s`` (part of
    :class:`FakeKubeApiServer`, which holds the settings below)."""

    tick_s: float
    validate: bool
    scenario: Scenario
    scenarios: dict[str, Scenario]
    rejected: list[str]
    time_scale: float
    feature_gates: dict[str, bool]
    delete_rayjob_cr_after_job_finishes: bool
    stopped_jobs: list[str]
    operator_made: list[dict[str, Any]]
    events: list[dict[str, Any]]
    _stop: threading.Event

    def _operator_loop(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                now = time.monotonic()
                self._run_due_deletes(now)
                for key in list(self.objects):
                    if key in self.objects:
                        try:
                            if key[0] == "rayjobs":
                                self._reconcile_job(key, now)
                            elif key[0] == "rayclusters":  # not Services/Secrets
                                self._reconcile_cluster(key, now)
                        except Exception as exc:  # keep the operator alive; surface in tests
                            self.rejected.append(f"operator error on {key}: {exc!r}")
                self._reconcile_pods(now)
            time.sleep(self.tick_s)

    def _run_due_deletes(self, now: float) -> None:
        """The garbage collector: an object goes once its deletion is due and no finalizer
        other than ``foregroundDeletion`` holds it."""
        keep = []
        for entry in self._pending_deletes:
            obj = self.objects.get(entry[2])
            held = obj is not None and any(f != "foregroundDeletion" for f in
                                           obj["metadata"].get("finalizers") or [])
            if entry[0] <= now and not held:
                self._remove(entry[2])
            else:
                keep.append(entry)
        self._pending_deletes = keep

    def _scenario(self, name: str, owner_job: str | None = None) -> Scenario:
        return self.scenarios.get(name) or (self.scenarios.get(owner_job) if owner_job else None) \
            or self.scenario

    def _seconds(self, spec_seconds: Any) -> float:
        return float(spec_seconds or 0) * self.time_scale

    # ---- pods and events ---------------------------------------------------------------------
    def _reconcile_pods(self, now: float) -> None:
        for pod in self.pods.values():
            status = pod.obj["status"]
            if status["phase"] == "Pending" and not pod.obj.get("_unschedulable") \
                    and now >= pod.obj["_start"]:
                status["phase"] = "Running"
                status["conditions"] = [{"type": "PodScheduled", "status": "True"},
                                        {"type": "Ready", "status": "True"}]
                self.changed.notify_all()

    def _event(self, ns: str, pod_name: str, reason: str, message: str) -> None:
        self._resource_version += 1
        self.events.append({
            "apiVersion": "v1", "kind": "Event", "type": "Warning" if reason == "FailedScheduling"
            else "Normal", "reason": reason, "message": message,
            "metadata": {"name": f"{pod_name}.{_suffix(8)}", "namespace": ns,
                         "resourceVersion": str(self._resource_version)},
            "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": ns},
            "lastTimestamp": now_rfc3339(), "count": 1,
            "source": {"component": "default-scheduler" if reason == "FailedScheduling"
                       else "cluster-autoscaler"}})

    def _new_pod(self, ns: str, name: str, labels: dict[str, str], owner: dict[str, Any],
                 container: str, start_in_s: float, unschedulable: str | None = None) -> _Pod:
        meta = {"name": name, "namespace": ns, "labels": dict(labels),
                "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                     "name": owner["metadata"]["name"],
                                     "uid": owner["metadata"]["uid"], "controller": True,
                                     "blockOwnerDeletion": True}]}
        self._stamp_new(meta)
        status: dict[str, Any] = {"phase": "Pending"}
        if unschedulable:
            status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                     "reason": "Unschedulable", "message": unschedulable,
                                     "lastTransitionTime": now_rfc3339()}]
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
               "spec": {"containers": [{"name": container, "image": "ads-ranking-pipelines"}]},
               "status": status, "_start": time.monotonic() + start_in_s,
               "_unschedulable": bool(unschedulable)}
        pod = _Pod(obj)
        self.pods[(ns, name)] = pod
        return pod

    # ---- RayCluster --------------------------------------------------------------------------
    def _reconcile_cluster(self, key: tuple, now: float) -> None:
        obj = self.objects[key]
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return
        sim = self.sim.setdefault(key, {"t0": now, "phase": "new"})
        owner_job = (meta.get("labels") or {}).get("ray.io/originated-from-cr-name")
        scenario = self._scenario(key[2], owner_job)
        if sim["phase"] == "new":
            self._reconcile_cluster_pods(key, obj, scenario)
            sim["phase"] = "provisioning"
            self._touch(obj)
        elif sim["phase"] == "provisioning" and scenario.execute:
            workers = obj["status"]["desiredWorkerReplicas"]
            state = self.runtime().ensure_cluster(key, workers)
            if state == "ready":
                self._cluster_ready(key, obj)
                sim["phase"] = "ready"
                self._touch(obj)
            elif state != "starting" and not sim.get("failed"):
                obj["status"]["conditions"].append({
                    "type": "ReplicaFailure", "status": "True", "reason": "FailedCreateHeadPod",
                    "message": f"FailedCreateHeadPod\n{state}", "lastTransitionTime": now_rfc3339()})
                sim["failed"] = True
                self._touch(obj)
        elif sim["phase"] == "provisioning" and scenario.outcome not in (
                "hang", "deadline_exceeded", "cluster_failed", "unschedulable") and \
                now - sim["t0"] >= scenario.cluster_ready_after_s:
            self._cluster_ready(key, obj)
            sim["phase"] = "ready"
            self._touch(obj)

    def _reconcile_cluster_pods(self, key: tuple, obj: dict, scenario: Scenario) -> None:
        """raycluster_controller.go ``reconcilePods`` + ``calculateStatus``."""
        meta, spec = obj["metadata"], obj.get("spec") or {}
        workers = sum(int(g.get("replicas") or 0) for g in spec.get("workerGroupSpecs") or [])
        status = obj.setdefault("status", {})
        status.update({"desiredWorkerReplicas": workers, "minWorkerReplicas": workers,
                       "maxWorkerReplicas": workers, "readyWorkerReplicas": 0,
                       "availableWorkerReplicas": 0, "observedGeneration": 1,
                       "lastUpdateTime": now_rfc3339(),
                       "conditions": [{"type": "HeadPodReady", "status": "False",
                                       "reason": "HeadPodNotFound",
                                       "lastTransitionTime": now_rfc3339()}]})
        if scenario.outcome == "cluster_failed":
            message = "FailedCreateHeadPod\n" + scenario.cluster_failure_reason % {"cluster": key[2]}
            status["conditions"].append({"type": "ReplicaFailure", "status": "True",
                                         "reason": "FailedCreateHeadPod", "message": message,
                                         "lastTransitionTime": now_rfc3339()})
            return
        stuck = scenario.unschedulable_message if scenario.outcome == "unschedulable" else None
        base = {**(meta.get("labels") or {}), "ray.io/cluster": key[2]}
        head = f"{key[2]}-head-{_suffix()}"
        self._new_pod(key[1], head, {**base, "ray.io/node-type": "head"}, obj, "ray-head",
                      scenario.cluster_ready_after_s)
        for _ in range(workers):
            name = f"{key[2]}-workers-worker-{_suffix()}"
            self._new_pod(key[1], name, {**base, "ray.io/node-type": "worker",
                                         "ray.io/group": "workers"}, obj, "ray-worker",
                          scenario.cluster_ready_after_s, unschedulable=stuck)
            if stuck:
                self._event(key[1], name, "FailedScheduling", stuck)
                if scenario.scale_up:
                    self._event(key[1], name, "TriggeredScaleUp",
                                "pod triggered scale-up: [{gpu-pool 2->3 (max: 8)}]")

    def _cluster_ready(self, key: tuple, obj: dict) -> None:
        """``calculateStatus``: every pod runs → state ready, head service and endpoints."""
        workers = obj["status"]["desiredWorkerReplicas"]
        obj["status"].update({
            "state": "ready", "readyWorkerReplicas": workers, "availableWorkerReplicas": workers,
            "lastUpdateTime": now_rfc3339(), "desiredCPU": "1", "desiredMemory": "4Gi",
            "desiredGPU": "0", "desiredTPU": "0",
            "head": {"podIP": "10.0.0.10", "serviceIP": "10.96.0.10",
                     "podName": f"{key[2]}-head", "serviceName": f"{key[2]}-head-svc"},
            "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379",
                          "metrics": "8080"},
            "conditions": [
                {"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
                 "lastTransitionTime": now_rfc3339()},
                {"type": "RayClusterProvisioned", "status": "True",
                 "reason": "AllPodRunningAndReadyFirstTime", "lastTransitionTime": now_rfc3339()}],
            "stateTransitionTimes": {"ready": now_rfc3339()},
        })

    # ---- RayJob ------------------------------------------------------------------------------
    def _reconcile_job(self, key: tuple, now: float) -> None:
        obj = self.objects[key]
        meta, spec = obj["metadata"], obj.get("spec") or {}
        status = obj.setdefault("status", {})
        if meta.get("deletionTimestamp"):
            self._finalize_job(key, obj)
            return
        sim = self.sim.setdefault(key, {"t0": now, "phase": "new"})
        if sim["phase"] == "new" and not status.get("jobDeploymentStatus"):
            problem = self._validate_rayjob(spec)
            if problem:
                status.update({"jobDeploymentStatus": "ValidationFailed",
                               "reason": "ValidationFailed", "message": problem})
                sim["phase"] = "invalid"
                self._touch(obj)
                return
        deployment = status.get("jobDeploymentStatus") or ""
        handler = {"": self._job_new, "Initializing": self._job_initializing,
                   "Waiting": self._job_waiting, "Running": self._job_running,
                   "Retrying": self._job_retrying, "Suspending": self._job_retrying,
                   "Complete": self._job_finished, "Failed": self._job_finished}.get(deployment)
        if handler is not None:
            handler(key, obj, sim, now)

    def _validate_rayjob(self, spec: dict) -> str | None:
        """utils/validation.go ``validateDeletionConfiguration`` (the parts we can hit)."""
        strategy = spec.get("deletionStrategy")
        if not spec.get("shutdownAfterJobFinishes") and int(spec.get("ttlSecondsAfterFinished") or 0) > 0:
            return ("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to "
                    "false cannot have TTLSecondsAfterFinished")
        if strategy is None:
            return None
        if not self.feature_gates.get("RayJobDeletionPolicy", True):
            return "RayJobDeletionPolicy feature gate must be enabled to use DeletionStrategy"
        if strategy.get("deletionRules") and spec.get("shutdownAfterJobFinishes"):
            return ("The RayJob spec is invalid: spec.shutdownAfterJobFinishes and "
                    "spec.deletionStrategy.deletionRules are mutually exclusive")
        return None

    def _finalize_job(self, key: tuple, obj: dict) -> None:
        """Top of ``Reconcile``: StopJob when the Ray job is not terminal, then remove the
        finalizer."""
        meta, status = obj["metadata"], obj.get("status") or {}
        if RAYJOB_FINALIZER not in (meta.get("finalizers") or []):
            return
        if status.get("jobStatus") not in ("SUCCEEDED", "FAILED", "STOPPED") and status.get("jobId"):
            self.stopped_jobs.append(key[2])
        meta["finalizers"] = [f for f in meta["finalizers"] if f != RAYJOB_FINALIZER]
        self._touch(obj)

    def _job_new(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case New: add the finalizer, ``initRayJobStatusIfNeed``."""
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj["status"]
        meta["finalizers"] = [*(meta.get("finalizers") or []), RAYJOB_FINALIZER]
        selector = spec.get("clusterSelector") or {}
        status.update({"jobDeploymentStatus": "Initializing",
                       "jobId": spec.get("jobId") or f"rayjob-{_suffix(8)}",
                       "startTime": now_rfc3339(), "observedGeneration": 1,
                       "rayClusterName": selector.get("ray.io/cluster", "")
                       or f"{key[2]}-{_suffix()}"})
        status.setdefault("succeeded", 0)
        status.setdefault("failed", 0)
        sim.update(phase="initializing", t0=now)
        self._touch(obj)

    def _deadline_passed(self, obj: dict, sim: dict, now: float) -> bool:
        """``checkActiveDeadlineAndUpdateStatusIfNeeded`` and
        ``checkPreRunningDeadlineAndUpdateStatusIfNeeded``."""
        spec, status = obj.get("spec") or {}, obj["status"]
        scenario = self._scenario(obj["metadata"]["name"])
        if scenario.outcome == "deadline_exceeded" and now - sim["t0"] >= scenario.deadline_after_s:
            status.update({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded",
                           "message": f"The RayJob has passed the activeDeadlineSeconds. "
                                      f"StartTime: {status.get('startTime')}. "
                                      f"ActiveDeadlineSeconds: {spec.get('activeDeadlineSeconds')}",
                           "endTime": now_rfc3339()})
            return True
        pre = spec.get("preRunningDeadlineSeconds")
        if pre and status.get("jobDeploymentStatus") in ("Initializing", "Waiting") and \
                now - sim["t0"] >= self._seconds(pre):
            status.update({"jobDeploymentStatus": "Failed", "reason": "PreRunningDeadlineExceeded",
                           "message": f"The RayJob has passed the preRunningDeadlineSeconds. "
                                      f"StartTime: {status.get('startTime')}. "
                                      f"PreRunningDeadlineSeconds: {pre}",
                           "endTime": now_rfc3339()})
            return True
        return False

    def _job_initializing(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Initializing: deadlines, ``getOrCreateRayClusterInstance``, cluster status
        copied while not ready, then the submitter (``createK8sJobIfNeed``) and Running."""
        status = obj["status"]
        if (obj.get("spec") or {}).get("suspend"):  # updateStatusToSuspendingIfNeeded
            status["jobDeploymentStatus"] = "Suspending"
            self._touch(obj)
            return
        if self._deadline_passed(obj, sim, now):
            self._job_terminal(key, obj, sim, now)
            return
        ckey = ("rayclusters", key[1], status["rayClusterName"])
        cluster = self.objects.get(ckey)
        if cluster is None and not (obj.get("spec") or {}).get("clusterSelector"):
            cluster = self._create_job_cluster(key, obj, ckey)
        if cluster is None:
            return
        cstatus = cluster.get("status") or {}
        if cstatus.get("state") != "ready":
            if status.get("rayClusterStatus") != cstatus:
                status["rayClusterStatus"] = copy.deepcopy(cstatus)
                self._touch(obj)
            return
        status["dashboardURL"] = f"{ckey[2]}-head-svc.{key[1]}.svc.cluster.local:8265"
        status["rayClusterStatus"] = copy.deepcopy(cstatus)
        if (obj.get("spec") or {}).get("submissionMode") == "InteractiveMode":
            status["jobDeploymentStatus"] = "Waiting"
        else:
            self._new_submitter(key, obj, sim, now)
            status["jobDeploymentStatus"] = "Running"
        self._touch(obj)

    def _create_job_cluster(self, key: tuple, obj: dict, ckey: tuple) -> dict:
        """``getOrCreateRayClusterInstance`` / ``constructRayClusterForRayJob``."""
        meta, spec = obj["metadata"], obj.get("spec") or {}
        labels = {**(meta.get("labels") or {}), "ray.io/originated-from-crd": "RayJob",
                  "ray.io/originated-from-cr-name": key[2]}
        cmeta = {"name": ckey[2], "namespace": key[1], "labels": labels,
                 "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob",
                                      "name": key[2], "uid": meta["uid"], "controller": True,
                                      "blockOwnerDeletion": True}]}
        self._stamp_new(cmeta)
        cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": cmeta,
                   "spec": copy.deepcopy(spec.get("rayClusterSpec") or {})}
        if self.validate:
            errors = crd_schema.schema_errors(cluster)
            if errors:
                self.rejected.append(f"operator-made RayCluster {ckey[2]}: {errors}")
        self.objects[ckey] = cluster
        self.operator_made.append(copy.deepcopy(cluster))
        return cluster

    def _new_submitter(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """A pod of the submitter Job (``createNewK8sJob``): its log is the driver log from the
        first line (``ray job logs --follow``)."""
        spec = obj.get("spec") or {}
        scenario = self._scenario(key[2])
        labels = {**((spec.get("submitterPodTemplate") or {}).get("metadata") or {})
                  .get("labels", {}), "job-name": key[2], "batch.kubernetes.io/job-name": key[2]}
        pod = self._new_pod(key[1], f"{key[2]}-{_suffix()}", labels, obj, "ray-job-submitter",
                            scenario.pod_running_after_s)
        sim.update(pod=(key[1], pod.obj["metadata"]["name"]), line=0,
                   next_line_at=now + scenario.pod_running_after_s,
                   attempts=sim.get("attempts", 0) + 1)
        sim.setdefault("running_at", None)

    def _job_waiting(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Waiting (InteractiveMode): Running once ``spec.jobId`` is set."""
        if self._deadline_passed(obj, sim, now):
            self._job_terminal(key, obj, sim, now)
        elif (obj.get("spec") or {}).get("jobId"):
            obj["status"].update({"jobId": obj["spec"]["jobId"], "jobDeploymentStatus": "Running"})
            self._touch(obj)

    def _job_running(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Running: the Ray job runs while the submitter prints its log; a terminal
        ``jobStatus`` first, ``jobDeploymentStatus`` once the submitter has finished."""
        status, scenario = obj["status"], self._scenario(key[2])
        if self._deadline_passed(obj, sim, now):
            self._job_terminal(key, obj, sim, now)
            return
        pod = self.pods.get(sim.get("pod") or ("", ""))
        if pod is None or pod.obj["status"]["phase"] != "Running":
            return
        if scenario.execute:
            self._job_running_for_real(key, obj, pod, sim, now)
            return
        if status.get("jobStatus") in (None, "", "PENDING"):
            status.update({"jobStatus": "RUNNING", "rayJobInfo": {"startTime": now_rfc3339()}})
            sim["running_at"] = sim["running_at"] or now
            self._touch(obj)
        lines = scenario.log_lines
        if sim["line"] < len(lines):
            if now >= sim["next_line_at"]:
                self._print_line(pod, sim, lines, scenario, now)
            return
        if scenario.outcome == "hang" or now - sim["running_at"] < scenario.hold_running_s:
            return
        self._finish_submitter(key, obj, pod, sim, scenario, now)

    def _job_running_for_real(self, key: tuple, obj: dict, pod: _Pod, sim: dict,
                              now: float) -> None:
        """case Running with a real Ray job: ``GetJobInfo`` gives ``jobStatus``; the deployment
        ends only once the submitter has drained the log (``isJobTerminal && finishedAt``)."""
        status = obj["status"]
        running = sim.get("ray")
        if running is None:
            def emit(line: str) -> None:
                with self.lock:
                    pod.lines.append((time.time(), line))
                    self.changed.notify_all()

            ckey = ("rayclusters", key[1], status["rayClusterName"])
            sim["ray"] = self.runtime().submit(key, ckey, obj.get("spec") or {}, emit)
            return
        if running.status != status.get("jobStatus"):
            status["jobStatus"] = running.status
            if running.status in ("SUCCEEDED", "FAILED", "STOPPED"):
                status["message"] = running.message
            self._touch(obj)
        if running.drained and running.status in ("SUCCEEDED", "FAILED", "STOPPED"):
            failed = running.status != "SUCCEEDED"
            pod.obj["status"]["phase"] = "Failed" if failed else "Succeeded"
            pod.closed = True
            status.update({"jobDeploymentStatus": "Failed" if failed else "Complete",
                           "reason": "AppFailed" if failed else "", "endTime": now_rfc3339()})
            self._job_terminal(key, obj, sim, now)

    def _print_line(self, pod: _Pod, sim: dict, lines: tuple, scenario: Scenario,
                    now: float) -> None:
        pod.lines.append((time.time(), lines[sim["line"]]))
        sim["line"] += 1
        sim["next_line_at"] = now + scenario.line_interval_s
        attempts_left = scenario.submitter_failures - (sim["attempts"] - 1)
        if attempts_left > 0 and sim["line"] >= min(scenario.crash_after_lines, len(lines)):
            # The submitter pod dies (node lost, OOM…): the Job controller starts another.
            pod.obj["status"]["phase"] = "Failed"
            pod.closed = True
            key = ("rayjobs", pod.obj["metadata"]["namespace"],
                   pod.obj["metadata"]["ownerReferences"][0]["name"])
            obj = self.objects[key]
            limit = ((obj.get("spec") or {}).get("submitterConfig") or {}).get("backoffLimit", 2)
            if sim["attempts"] > int(limit):
                # checkSubmitterAndUpdateStatusIfNeeded: the Job's retries are used up.
                obj["status"].update({
                    "jobDeploymentStatus": "Failed", "reason": "SubmissionFailed",
                    "message": "Job submission has failed. Reason: BackoffLimitExceeded. "
                               "Message: Job has reached the specified backoff limit"})
                self._job_terminal(key, obj, sim, now)
            else:
                self._new_submitter(key, obj, sim, now)
        self.changed.notify_all()

    def _finish_submitter(self, key: tuple, obj: dict, pod: _Pod, sim: dict,
                          scenario: Scenario, now: float) -> None:
        status = obj["status"]
        failed = scenario.outcome == "app_failed"
        if status.get("jobStatus") == "RUNNING":
            status.update({"jobStatus": "FAILED" if failed else "SUCCEEDED",
                           "message": scenario.app_failure_message if failed
                           else "Job finished successfully.",
                           "rayJobInfo": {**status.get("rayJobInfo", {}), "endTime": now_rfc3339()}})
            sim["tail"] = scenario.tail_lines
            sim["next_tail_at"] = now + scenario.tail_interval_s
            self._touch(obj)
            return
        if sim.get("tail", 0) > 0:
            if now >= sim["next_tail_at"]:
                sim["tail"] -= 1
                pod.lines.append((time.time(), f"[submitter] tail line {scenario.tail_lines - sim['tail']}"))
                sim["next_tail_at"] = now + scenario.tail_interval_s
                self.changed.notify_all()
            return
        pod.obj["status"]["phase"] = "Failed" if failed else "Succeeded"
        pod.closed = True
        status.update({"jobDeploymentStatus": "Failed" if failed else "Complete",
                       "reason": "AppFailed" if failed else "", "endTime": now_rfc3339()})
        self._job_terminal(key, obj, sim, now)

    def _job_terminal(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """``checkBackoffLimitAndUpdateStatusIfNeeded`` after a terminal transition."""
        status, spec = obj["status"], obj.get("spec") or {}
        pod = self.pods.get(sim.get("pod") or ("", ""))
        if pod is not None and pod.obj["status"]["phase"] in ("Pending", "Running"):
            pod.obj["status"]["phase"] = "Failed"
            pod.closed = True
        status.setdefault("endTime", now_rfc3339())
        if status["jobDeploymentStatus"] == "Failed":
            status["failed"] = int(status.get("failed") or 0) + 1
            limit = spec.get("backoffLimit")
            if limit is not None and status["failed"] < int(limit) + 1 and \
                    status.get("reason") not in ("DeadlineExceeded",):
                status["jobDeploymentStatus"] = "Retrying"
        else:
            status["succeeded"] = int(status.get("succeeded") or 0) + 1
        sim["ended_at"] = now
        self._touch(obj)

    def _job_retrying(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Suspending / Retrying: delete the cluster and the submitter, reset, then
        Suspended / New."""
        status = obj["status"]
        self._remove(("rayclusters", key[1], status.get("rayClusterName", "")))
        for pod_key in [k for k, p in self.pods.items() if any(
                o.get("uid") == obj["metadata"]["uid"] for o in p.obj["metadata"].get(
                    "ownerReferences") or [])]:
            self._remove(("pods", *pod_key))
        nxt = "Suspended" if status["jobDeploymentStatus"] == "Suspending" else ""
        for field_ in ("rayClusterStatus", "rayClusterName", "dashboardURL", "jobId", "message",
                       "reason", "rayJobInfo", "endTime"):
            status.pop(field_, None)
        status.update({"jobStatus": "", "jobDeploymentStatus": nxt})
        sim.update(phase="new", line=0)
        self._touch(obj)

    def _job_finished(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Complete/Failed: the deletion mechanisms."""
        spec, status = obj.get("spec") or {}, obj["status"]
        if spec.get("clusterSelector"):
            return
        ended = sim.get("ended_at", now)
        strategy = spec.get("deletionStrategy")
        if self.feature_gates.get("RayJobDeletionPolicy", True) and strategy:
            self._handle_deletion_rules(key, obj, strategy.get("deletionRules") or [], ended, now)
        elif spec.get("shutdownAfterJobFinishes"):
            self._handle_shutdown_after_job_finishes(key, obj, ended, now)

    def _handle_deletion_rules(self, key: tuple, obj: dict, rules: list, ended: float,
                               now: float) -> None:
        """``handleDeletionRules``: the most impactful overdue matching rule, one per pass."""
        status = obj["status"]
        order = {"DeleteNone": 0, "DeleteWorkers": 1, "DeleteCluster": 2, "DeleteSelf": 3}
        overdue = []
        for rule in rules:
            cond = rule.get("condition") or {}
            matched = (cond.get("jobStatus") == status.get("jobStatus") if "jobStatus" in cond
                       else cond.get("jobDeploymentStatus") == status.get("jobDeploymentStatus"))
            if matched and now - ended >= self._seconds(cond.get("ttlSeconds")) and \
                    not self._deletion_done(key, obj, rule["policy"]):
                overdue.append(rule["policy"])
        if overdue:
            self._execute_deletion_policy(key, obj, max(overdue, key=lambda p: order.get(p, 0)))

    def _deletion_done(self, key: tuple, obj: dict, policy: str) -> bool:
        """``isDeletionActionCompleted``."""
        if policy == "DeleteSelf":
            return bool(obj["metadata"].get("deletionTimestamp"))
        if policy == "DeleteCluster":
            return ("rayclusters", key[1], obj["status"].get("rayClusterName", "")) not in self.objects
        return True

    def _execute_deletion_policy(self, key: tuple, obj: dict, policy: str) -> None:
        """``executeDeletionPolicy``."""
        if policy == "DeleteCluster":
            self._remove(("rayclusters", key[1], obj["status"].get("rayClusterName", "")))
        elif policy == "DeleteSelf":
            self._schedule_delete(key, "Background")

    def _handle_shutdown_after_job_finishes(self, key: tuple, obj: dict, ended: float,
                                            now: float) -> None:
        """``handleShutdownAfterJobFinishes``: after the TTL, only the RayCluster is deleted
        (``deleteClusterResources``) - the RayJob and its submitter stay - unless the operator
        runs with ``DELETE_RAYJOB_CR_AFTER_JOB_FINISHES=true``."""
        if now - ended < self._seconds((obj.get("spec") or {}).get("ttlSecondsAfterFinished")):
            return
        if self.delete_rayjob_cr_after_job_finishes:
            if not obj["metadata"].get("deletionTimestamp"):
                self._schedule_delete(key, "Background")
            return
        self._remove(("rayclusters", key[1], obj["status"].get("rayClusterName", "")))
