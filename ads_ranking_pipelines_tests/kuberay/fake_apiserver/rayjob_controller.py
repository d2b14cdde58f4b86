"""The toy operator's RayJob controller, modelled on KubeRay v1.7.0 (ray-project/kuberay at tag
v1.7.0, ``ray-operator/controllers/ray/rayjob_controller.go`` ``Reconcile``): the RayJob state
machine, as its :class:`Scenario` says. Times are compressed: a spec field in seconds
(``ttlSecondsAfterFinished``, deletion-rule ``ttlSeconds``, ``preRunningDeadlineSeconds``)
lasts ``time_scale`` real seconds per second.

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
  Only ``jobStatus`` FAILED makes the deployment Failed: a Ray job STOPPED (``ray job stop``,
  the dashboard) ends Complete, like SUCCEEDED.
* The submitter Job (``createNewK8sJob``, backoffLimit 2 by default) runs the command of
  common/job.go ``BuildJobSubmitCommand`` and prints what it prints (:mod:`.submitter`): a
  retried pod prints the driver log again from its first line (``ray job logs --follow``),
  behind its own dashboard-wait echoes and ``cli.py`` banner.
* ``spec.suspend`` (Kueue): a new RayJob goes Suspended with no cluster; case Suspended goes
  back to New once unsuspended; case Initializing / Running with ``suspend`` go Suspending
  (``updateStatusToSuspendingIfNeeded``): case Suspending deletes the cluster (the Ray job ends
  with it; KubeRay does not stop it first) and the submitter Job, resets ``jobId``,
  ``rayClusterName``, ``jobStatus`` and goes Suspended; once unsuspended, New again: a new
  cluster, a new submitter Job that submits ``spec.jobId`` again. ``ValidateRayJobSpec``
  refuses suspend without ``shutdownAfterJobFinishes``.
* ``checkBackoffLimitAndUpdateStatusIfNeeded``: a Failed RayJob with ``spec.backoffLimit`` left
  goes Retrying; case Retrying / Suspending deletes the cluster and submitter, then New /
  Suspended.
* case Complete/Failed: nothing is deleted for a ``clusterSelector`` job; with the
  ``RayJobDeletionPolicy`` gate and ``deletionStrategy.deletionRules``,
  ``handleDeletionRules`` (most impactful overdue rule: DeleteCluster, DeleteSelf…, TTL from
  ``status.endTime``; a rule's condition is a ``jobStatus`` SUCCEEDED/FAILED or a
  ``jobDeploymentStatus`` Failed - the CRD's enums cannot name STOPPED, so a Complete +
  STOPPED job matches no rule and keeps its cluster, kuberay #5184); else with ``shutdownAfterJobFinishes``, ``handleShutdownAfterJobFinishes``
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
import time
from typing import Any

from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.operator_common import (
    OperatorHost,
    scenario_for,
    suffix,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.rayjob_deletion import RayJobDeletion, scaled_seconds
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.store import _Pod, now_rfc3339
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.submitter import SubmitterJob, dashboard_address

RAYJOB_FINALIZER = "ray.io/rayjob-finalizer"


class RayJobController:
    """Reconciles the RayJobs of ``host`` (the fake API server), one at a time; the RayClusters
    it makes are reconciled by :class:`.RayClusterController`."""

    def __init__(self, host: OperatorHost) -> None:
        self.host = host
        self.submitter = SubmitterJob(host, self._job_terminal)
        self.deletion = RayJobDeletion(host)

    def reconcile(self, key: tuple, now: float) -> None:
        obj = self.host.objects[key]
        meta, spec = obj["metadata"], obj.get("spec") or {}
        status = obj.setdefault("status", {})
        if meta.get("deletionTimestamp"):
            self._finalize_job(key, obj)
            return
        sim = self.host.sim.setdefault(key, {"t0": now, "phase": "new"})
        if sim["phase"] == "new" and not status.get("jobDeploymentStatus"):
            problem = self._validate_rayjob(spec)
            if problem:
                status.update({"jobDeploymentStatus": "ValidationFailed",
                               "reason": "ValidationFailed", "message": problem})
                sim["phase"] = "invalid"
                self.host._touch(obj)
                return
        deployment = status.get("jobDeploymentStatus") or ""
        handler = {"": self._job_new, "Initializing": self._job_initializing,
                   "Waiting": self._job_waiting, "Running": self._job_running,
                   "Retrying": self._job_retrying, "Suspending": self._job_retrying,
                   "Suspended": self._job_suspended,
                   "Complete": self._job_finished, "Failed": self._job_finished}.get(deployment)
        if handler is not None:
            handler(key, obj, sim, now)

    def _validate_rayjob(self, spec: dict) -> str | None:
        """utils/validation.go ``validateDeletionConfiguration`` (the parts we can hit)."""
        strategy = spec.get("deletionStrategy")
        if spec.get("suspend") and not spec.get("shutdownAfterJobFinishes"):
            # ValidateRayJobSpec: suspend requires shutdownAfterJobFinishes (kueue #3994)
            return ("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to "
                    "false is not allowed to be suspended")
        if not spec.get("shutdownAfterJobFinishes") and int(spec.get("ttlSecondsAfterFinished") or 0) > 0:
            return ("The RayJob spec is invalid: a RayJob with shutdownAfterJobFinishes set to "
                    "false cannot have TTLSecondsAfterFinished")
        if strategy is None:
            return None
        if not self.host.feature_gates.get("RayJobDeletionPolicy", True):
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
            self.host.stopped_jobs.append(key[2])
        meta["finalizers"] = [f for f in meta["finalizers"] if f != RAYJOB_FINALIZER]
        self.host._touch(obj)

    def _job_new(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case New: add the finalizer, ``initRayJobStatusIfNeed``; a RayJob created with
        ``spec.suspend`` (Kueue's) goes Suspended with no cluster (case New,
        ``isSuspendFlagSet``)."""
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj["status"]
        if RAYJOB_FINALIZER not in (meta.get("finalizers") or []):
            meta["finalizers"] = [*(meta.get("finalizers") or []), RAYJOB_FINALIZER]
        if spec.get("suspend"):
            status.update({"jobDeploymentStatus": "Suspended", "jobStatus": ""})
            sim.update(phase="suspended")
            self.host._touch(obj)
            return
        selector = spec.get("clusterSelector") or {}
        status.update({"jobDeploymentStatus": "Initializing",
                       "jobId": spec.get("jobId") or f"rayjob-{suffix(8)}",
                       "startTime": now_rfc3339(), "observedGeneration": 1,
                       "rayClusterName": selector.get("ray.io/cluster", "")
                       or f"{key[2]}-{suffix()}"})
        status.setdefault("succeeded", 0)
        status.setdefault("failed", 0)
        sim.update(phase="initializing", t0=now)
        self.host._touch(obj)

    def _seconds(self, spec_seconds: Any) -> float:
        return scaled_seconds(self.host, spec_seconds)

    def _deadline_passed(self, obj: dict, sim: dict, now: float) -> bool:
        """``checkActiveDeadlineAndUpdateStatusIfNeeded`` and
        ``checkPreRunningDeadlineAndUpdateStatusIfNeeded``."""
        spec, status = obj.get("spec") or {}, obj["status"]
        scenario = scenario_for(self.host, obj["metadata"]["name"])
        if scenario.outcome == "deadline_exceeded" and now - sim["t0"] >= scenario.deadline_after_s:
            _deadline_failed(status, "DeadlineExceeded", "activeDeadlineSeconds", spec.get("activeDeadlineSeconds"))
            return True
        pre = spec.get("preRunningDeadlineSeconds")
        if pre and status.get("jobDeploymentStatus") in ("Initializing", "Waiting") and \
                now - sim["t0"] >= self._seconds(pre):
            _deadline_failed(status, "PreRunningDeadlineExceeded", "preRunningDeadlineSeconds", pre)
            return True
        return False

    def _job_initializing(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Initializing: deadlines, ``getOrCreateRayClusterInstance``, cluster status
        copied while not ready, then the submitter (``createK8sJobIfNeed``) and Running."""
        status = obj["status"]
        if (obj.get("spec") or {}).get("suspend"):  # updateStatusToSuspendingIfNeeded
            status["jobDeploymentStatus"] = "Suspending"
            self.host._touch(obj)
            return
        if self._deadline_passed(obj, sim, now):
            self._job_terminal(key, obj, sim, now)
            return
        ckey = ("rayclusters", key[1], status["rayClusterName"])
        cluster = self.host.objects.get(ckey)
        if cluster is None and not (obj.get("spec") or {}).get("clusterSelector"):
            cluster = self._create_job_cluster(key, obj, ckey)
        if cluster is None:
            return
        cstatus = cluster.get("status") or {}
        if cstatus.get("state") != "ready":
            if status.get("rayClusterStatus") != cstatus:
                status["rayClusterStatus"] = copy.deepcopy(cstatus)
                self.host._touch(obj)
            return
        status["dashboardURL"] = f"{ckey[2]}-head-svc.{key[1]}.svc.cluster.local:8265"
        status["rayClusterStatus"] = copy.deepcopy(cstatus)
        if (obj.get("spec") or {}).get("submissionMode") == "InteractiveMode":
            status["jobDeploymentStatus"] = "Waiting"
        else:
            self.submitter.new_pod(key, obj, sim, now)
            status["jobDeploymentStatus"] = "Running"
        self.host._touch(obj)

    def _create_job_cluster(self, key: tuple, obj: dict, ckey: tuple) -> dict:
        """``getOrCreateRayClusterInstance`` / ``constructRayClusterForRayJob``."""
        meta, spec = obj["metadata"], obj.get("spec") or {}
        labels = {**(meta.get("labels") or {}), "ray.io/originated-from-crd": "RayJob",
                  "ray.io/originated-from-cr-name": key[2]}
        cmeta = {"name": ckey[2], "namespace": key[1], "labels": labels,
                 "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob",
                                      "name": key[2], "uid": meta["uid"], "controller": True,
                                      "blockOwnerDeletion": True}]}
        self.host._stamp_new(cmeta)
        cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": cmeta,
                   "spec": copy.deepcopy(spec.get("rayClusterSpec") or {})}
        if self.host.validate:
            errors = crd_schema.schema_errors(cluster)
            if errors:
                self.host.rejected.append(f"operator-made RayCluster {ckey[2]}: {errors}")
        self.host.objects[ckey] = cluster
        self.host.operator_made.append(copy.deepcopy(cluster))
        return cluster

    def _job_suspended(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Suspended: nothing runs; once ``spec.suspend`` is false (Kueue admitted it:
        ``RunWithPodSetsInfo``) the status goes back to New, then Initializing."""
        if not (obj.get("spec") or {}).get("suspend"):
            obj["status"]["jobDeploymentStatus"] = ""
            sim.update(phase="new", line=0)
            sim.pop("running_at", None)
            self.host._touch(obj)

    def _job_waiting(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Waiting (InteractiveMode): Running once ``spec.jobId`` is set."""
        if self._deadline_passed(obj, sim, now):
            self._job_terminal(key, obj, sim, now)
        elif (obj.get("spec") or {}).get("jobId"):
            obj["status"].update({"jobId": obj["spec"]["jobId"], "jobDeploymentStatus": "Running"})
            self.host._touch(obj)

    def _job_running(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Running: the Ray job runs while the submitter prints its log; a terminal
        ``jobStatus`` first, ``jobDeploymentStatus`` once the submitter has finished."""
        status, scenario = obj["status"], scenario_for(self.host, key[2])
        if (obj.get("spec") or {}).get("suspend"):  # updateStatusToSuspendingIfNeeded
            status["jobDeploymentStatus"] = "Suspending"
            self._stop_real_job(sim)
            self.host._touch(obj)
            return
        if self._deadline_passed(obj, sim, now):
            self._job_terminal(key, obj, sim, now)
            return
        pod = self.host.pods.get(sim.get("pod") or ("", ""))
        if pod is None or pod.obj["status"]["phase"] != "Running":
            return
        if scenario.execute:
            self._job_running_for_real(key, obj, pod, sim, now)
            return
        if status.get("jobStatus") in (None, "", "PENDING"):
            status.update({"jobStatus": "RUNNING", "rayJobInfo": {"startTime": now_rfc3339()}})
            sim["running_at"] = sim["running_at"] or now
            self.host._touch(obj)
        if self.submitter.print_next(key, obj, pod, sim, now):
            return
        if scenario.outcome == "hang" or now - sim["running_at"] < scenario.hold_running_s:
            return
        if scenario.hold_until is not None and not scenario.hold_until.is_set():
            return
        self.submitter.finish(key, obj, pod, sim, now)

    def _stop_real_job(self, sim: dict) -> None:
        """A suspended job's Ray job ends with its cluster (``deleteClusterResources``)."""
        sim.pop("ray", None)

    def _job_running_for_real(self, key: tuple, obj: dict, pod: _Pod, sim: dict,
                              now: float) -> None:
        """case Running with a real Ray job: ``GetJobInfo`` gives ``jobStatus``; the deployment
        ends only once the submitter has drained the log (``isJobTerminal && finishedAt``)."""
        status = obj["status"]
        running = sim.get("ray")
        if running is None:
            def emit(line: str) -> None:
                with self.host.lock:
                    pod.lines.append((time.time(), line))
                    self.host.changed.notify_all()

            ckey = ("rayclusters", key[1], status["rayClusterName"])
            sim["ray"] = self.host.runtime().submit(
                key, ckey, obj.get("spec") or {}, emit, address=dashboard_address(obj),
                waits=scenario_for(self.host, key[2]).dashboard_wait_lines)
            return
        if running.status != status.get("jobStatus"):
            status["jobStatus"] = running.status
            if running.status in ("SUCCEEDED", "FAILED", "STOPPED"):
                status["message"] = running.message
            self.host._touch(obj)
        if running.drained and running.status in ("SUCCEEDED", "FAILED", "STOPPED"):
            failed = running.status == "FAILED"
            pod.obj["status"]["phase"] = "Failed" if failed else "Succeeded"
            pod.closed = True
            status.update({"jobDeploymentStatus": "Failed" if failed else "Complete",
                           "reason": "AppFailed" if failed else "", "endTime": now_rfc3339()})
            self._job_terminal(key, obj, sim, now)

    def _job_terminal(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """``checkBackoffLimitAndUpdateStatusIfNeeded`` after a terminal transition."""
        status, spec = obj["status"], obj.get("spec") or {}
        pod = self.host.pods.get(sim.get("pod") or ("", ""))
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
        self.host._touch(obj)

    def _job_retrying(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Suspending / Retrying: delete the cluster and the submitter, reset, then
        Suspended / New."""
        status = obj["status"]
        self.host._remove(("rayclusters", key[1], status.get("rayClusterName", "")))
        for pod_key in [k for k, p in self.host.pods.items() if any(
                o.get("uid") == obj["metadata"]["uid"] for o in p.obj["metadata"].get(
                    "ownerReferences") or [])]:
            self.host._remove(("pods", *pod_key))
        nxt = "Suspended" if status["jobDeploymentStatus"] == "Suspending" else ""
        for field_ in ("rayClusterStatus", "rayClusterName", "dashboardURL", "jobId", "message",
                       "reason", "rayJobInfo", "endTime"):
            status.pop(field_, None)
        status.update({"jobStatus": "", "jobDeploymentStatus": nxt})
        sim.update(phase="new", line=0)
        sim.pop("submitter_job_uid", None)  # deleteSubmitterJob
        self.host._touch(obj)

    def _job_finished(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """case Complete/Failed: the deletion mechanisms (:class:`.RayJobDeletion`)."""
        self.deletion.job_finished(key, obj, sim.get("ended_at", now), now)

def _deadline_failed(status: dict, reason: str, field: str, seconds: object) -> None:
    """The RayJob's status once a deadline has passed (the v1.7.0 controller's message)."""
    status.update({"jobDeploymentStatus": "Failed", "reason": reason,
                   "message": f"The RayJob has passed the {field}. StartTime: {status.get('startTime')}. "
                              f"{field[0].upper()}{field[1:]}: {seconds}",
                   "endTime": now_rfc3339()})
