"""The toy KubeRay operator behind the fake API server.

It walks KubeRay's documented RayJob states: ``jobDeploymentStatus`` "" → Initializing →
Running → Complete / Failed, ``jobStatus`` PENDING → RUNNING → SUCCEEDED / FAILED. It creates
the RayCluster (owned by the RayJob, labelled ``ray.io/originated-from-cr-name``), head/worker
pods and the submitter pod (labelled ``job-name`` / ``batch.kubernetes.io/job-name`` like the
pods of KubeRay's submitter Job), whose log is the :class:`Scenario`'s ``log_lines``, and
deletes the cluster after the job when ``shutdownAfterJobFinishes``. What happens is chosen
per RayJob by a :class:`Scenario` (success, app failure, failed cluster, deadline exceeded,
hang).
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


def _suffix(n: int = 5) -> str:
    return "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(n))


@dataclass
class Scenario:
    """What the toy operator does with one RayJob (or standalone RayCluster).

    ``outcome``: ``succeed`` | ``app_failed`` | ``cluster_failed`` | ``deadline_exceeded`` |
    ``hang`` (the cluster never gets ready, nothing fails). Times are real seconds.
    """

    outcome: str = "succeed"
    log_lines: tuple[str, ...] = ("hello from the driver",)
    cluster_ready_after_s: float = 0.15
    pod_running_after_s: float = 0.05
    line_interval_s: float = 0.01
    hold_running_s: float = 0.0
    cluster_failure_reason: str = (
        'pods "%(cluster)s-head" is forbidden: exceeded quota: gpu-quota, requested: '
        "nvidia.com/gpu=32, used: nvidia.com/gpu=0, limited: nvidia.com/gpu=16")
    app_failure_message: str = (
        "Job entrypoint command failed with exit code 1, last available logs (truncated to "
        "20,000 chars):\nValueError: window has no _SUCCESS marker")
    deadline_after_s: float = 0.4
    cluster_cleanup_after_s: float = 0.05


class ToyOperator(ObjectStore):
    """Reconciles RayJobs, RayClusters and pods every ``tick_s`` (part of
    :class:`FakeKubeApiServer`, which holds ``scenario`` / ``scenarios``)."""

    tick_s: float
    validate: bool
    scenario: Scenario
    scenarios: dict[str, Scenario]
    rejected: list[str]
    _stop: threading.Event

    def _operator_loop(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                now = time.monotonic()
                due = [d for d in self._pending_deletes if d[0] <= now]
                self._pending_deletes = [d for d in self._pending_deletes if d[0] > now]
                for _, _, key in due:
                    self._remove(key)
                for key in list(self.objects):
                    if key in self.objects:
                        try:
                            if key[0] == "rayjobs":
                                self._reconcile_job(key, now)
                            else:
                                self._reconcile_cluster(key, now)
                        except Exception as exc:  # keep the operator alive; surface in tests
                            self.rejected.append(f"operator error on {key}: {exc!r}")
                self._reconcile_pods(now)
            time.sleep(self.tick_s)

    def _scenario(self, name: str, owner_job: str | None = None) -> Scenario:
        return self.scenarios.get(name) or (self.scenarios.get(owner_job) if owner_job else None) \
            or self.scenario

    def _reconcile_pods(self, now: float) -> None:
        for pod in self.pods.values():
            status = pod.obj["status"]
            start = pod.obj["_start"]
            if status["phase"] == "Pending" and now >= start:
                status["phase"] = "Running"
                self.changed.notify_all()

    def _new_pod(self, ns: str, name: str, labels: dict[str, str], owner: dict[str, Any],
                 container: str, start_in_s: float) -> _Pod:
        meta = {"name": name, "namespace": ns, "labels": dict(labels),
                "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                     "name": owner["metadata"]["name"],
                                     "uid": owner["metadata"]["uid"], "controller": True,
                                     "blockOwnerDeletion": True}]}
        self._stamp_new(meta)
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
               "spec": {"containers": [{"name": container, "image": "rayproject/ray"}]},
               "status": {"phase": "Pending"}, "_start": time.monotonic() + start_in_s}
        pod = _Pod(obj)
        self.pods[(ns, name)] = pod
        return pod

    def _reconcile_cluster(self, key: tuple, now: float) -> None:
        obj = self.objects[key]
        meta, spec = obj["metadata"], obj.get("spec") or {}
        if meta.get("deletionTimestamp"):
            return
        sim = self.sim.setdefault(key, {"t0": now, "phase": "new"})
        owner_job = (meta.get("labels") or {}).get("ray.io/originated-from-cr-name")
        scenario = self._scenario(key[2], owner_job)
        workers = sum(int(g.get("replicas") or 0) for g in spec.get("workerGroupSpecs") or [])
        status = obj.setdefault("status", {})
        if sim["phase"] == "new":
            head = f"{key[2]}-head-{_suffix()}"
            labels = {**(meta.get("labels") or {}), "ray.io/cluster": key[2],
                      "ray.io/node-type": "head"}
            self._new_pod(key[1], head, labels, obj, "ray-head", scenario.cluster_ready_after_s)
            for i in range(workers):
                labels = {**(meta.get("labels") or {}), "ray.io/cluster": key[2],
                          "ray.io/node-type": "worker", "ray.io/group": "workers"}
                self._new_pod(key[1], f"{key[2]}-workers-worker-{_suffix()}", labels, obj,
                              "ray-worker", scenario.cluster_ready_after_s)
            status.update({"desiredWorkerReplicas": workers, "minWorkerReplicas": workers,
                           "maxWorkerReplicas": workers, "readyWorkerReplicas": 0,
                           "availableWorkerReplicas": 0, "observedGeneration": 1,
                           "lastUpdateTime": now_rfc3339(),
                           "conditions": [{"type": "HeadPodReady", "status": "False",
                                           "reason": "HeadPodNotFound",
                                           "lastTransitionTime": now_rfc3339()}]})
            sim["phase"] = "provisioning"
            self._touch(obj)
        elif sim["phase"] == "provisioning":
            if scenario.outcome == "cluster_failed" and now - sim["t0"] >= scenario.cluster_ready_after_s:
                status.update({"state": "failed",
                               "reason": scenario.cluster_failure_reason % {"cluster": key[2]},
                               "lastUpdateTime": now_rfc3339()})
                sim["phase"] = "failed"
                self._touch(obj)
            elif scenario.outcome not in ("hang", "deadline_exceeded", "cluster_failed") and \
                    now - sim["t0"] >= scenario.cluster_ready_after_s:
                status.update({
                    "state": "ready", "readyWorkerReplicas": workers,
                    "availableWorkerReplicas": workers, "lastUpdateTime": now_rfc3339(),
                    "desiredCPU": "1", "desiredMemory": "4Gi", "desiredGPU": "0", "desiredTPU": "0",
                    "head": {"podIP": "10.0.0.10", "serviceIP": "10.96.0.10",
                             "podName": f"{key[2]}-head", "serviceName": f"{key[2]}-head-svc"},
                    "endpoints": {"client": "10001", "dashboard": "8265", "gcs-server": "6379",
                                  "metrics": "8080"},
                    "conditions": [
                        {"type": "HeadPodReady", "status": "True", "reason": "HeadPodRunningAndReady",
                         "lastTransitionTime": now_rfc3339()},
                        {"type": "RayClusterProvisioned", "status": "True",
                         "reason": "AllPodRunningAndReadyFirstTime",
                         "lastTransitionTime": now_rfc3339()}],
                    "stateTransitionTimes": {"ready": now_rfc3339()},
                })
                sim["phase"] = "ready"
                self._touch(obj)

    def _reconcile_job(self, key: tuple, now: float) -> None:
        obj = self.objects[key]
        meta, spec = obj["metadata"], obj.get("spec") or {}
        if meta.get("deletionTimestamp"):
            return
        ns, name = key[1], key[2]
        scenario = self._scenario(name)
        sim = self.sim.setdefault(key, {"t0": now, "phase": "new"})
        status = obj.setdefault("status", {})
        if sim["phase"] in ("done",):
            if sim.get("cleanup_at") and now >= sim["cleanup_at"]:
                sim["cleanup_at"] = None
                ckey = ("rayclusters", ns, status.get("rayClusterName", ""))
                if ckey in self.objects:
                    self._remove(ckey)
            return
        if sim["phase"] == "new":
            status.update({"jobDeploymentStatus": "Initializing", "jobId": spec.get("jobId") or
                           f"rayjob-{_suffix(8)}", "startTime": now_rfc3339(),
                           "observedGeneration": 1, "succeeded": 0, "failed": 0})
            selector = spec.get("clusterSelector") or {}
            if selector:
                status["rayClusterName"] = selector.get("ray.io/cluster", "")
            else:
                cname = f"{name}-{_suffix()}"
                labels = {**(meta.get("labels") or {}), "ray.io/originated-from-crd": "RayJob",
                          "ray.io/originated-from-cr-name": name}
                cmeta = {"name": cname, "namespace": ns, "labels": labels,
                         "ownerReferences": [{"apiVersion": "ray.io/v1", "kind": "RayJob",
                                              "name": name, "uid": meta["uid"], "controller": True,
                                              "blockOwnerDeletion": True}]}
                self._stamp_new(cmeta)
                cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": cmeta,
                           "spec": copy.deepcopy(spec.get("rayClusterSpec") or {})}
                if self.validate:
                    errors = crd_schema.schema_errors(cluster)
                    if errors:
                        self.rejected.append(f"operator-made RayCluster {cname}: {errors}")
                self.objects[("rayclusters", ns, cname)] = cluster
                status["rayClusterName"] = cname
            sim["phase"] = "initializing"
            self._touch(obj)
            return
        # The active deadline runs from the start, whatever the phase.
        if scenario.outcome == "deadline_exceeded" and now - sim["t0"] >= scenario.deadline_after_s:
            status.update({
                "jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded",
                "message": f"The RayJob has passed the activeDeadlineSeconds. StartTime: "
                           f"{status.get('startTime')}. ActiveDeadlineSeconds: "
                           f"{spec.get('activeDeadlineSeconds')}",
                "endTime": now_rfc3339(), "failed": 1})
            self._finish(key, obj, sim, now, scenario, succeeded=False)
            return
        cluster_key = ("rayclusters", ns, status.get("rayClusterName", ""))
        cluster = self.objects.get(cluster_key)
        if sim["phase"] == "initializing":
            if cluster is not None:
                status["rayClusterStatus"] = copy.deepcopy(cluster.get("status") or {})
            if cluster is not None and (cluster.get("status") or {}).get("state") == "ready":
                status.update({"jobDeploymentStatus": "Running", "jobStatus": "PENDING",
                               "dashboardURL": f"{cluster_key[2]}-head-svc.{ns}.svc.cluster.local:8265"})
                labels = {**((spec.get("submitterPodTemplate") or {}).get("metadata") or {})
                          .get("labels", {}), "job-name": name, "batch.kubernetes.io/job-name": name}
                pod = self._new_pod(ns, f"{name}-{_suffix()}", labels, obj, "ray-job-submitter",
                                    scenario.pod_running_after_s)
                sim.update(phase="submitted", pod=(ns, pod.obj["metadata"]["name"]), line=0,
                           next_line_at=now + scenario.pod_running_after_s)
                self._touch(obj)
            elif status.get("rayClusterStatus", {}).get("state") == "failed" and \
                    not sim.get("cluster_failure_seen"):
                sim["cluster_failure_seen"] = True
                self._touch(obj)
            return
        pod = self.pods.get(sim["pod"])
        if sim["phase"] == "submitted":
            if pod is not None and pod.obj["status"]["phase"] == "Running":
                status["jobStatus"] = "RUNNING"
                status["rayJobInfo"] = {"startTime": now_rfc3339()}
                sim["phase"] = "running"
                sim["running_at"] = now
                self._touch(obj)
            return
        if sim["phase"] == "running":
            if pod is None:
                return
            if sim["line"] < len(scenario.log_lines):
                if now >= sim["next_line_at"]:
                    pod.lines.append((time.time(), scenario.log_lines[sim["line"]]))
                    sim["line"] += 1
                    sim["next_line_at"] = now + scenario.line_interval_s
                    self.changed.notify_all()
                return
            if scenario.outcome in ("hang",) or now - sim["running_at"] < scenario.hold_running_s:
                return
            if scenario.outcome == "app_failed":
                status.update({"jobStatus": "FAILED", "jobDeploymentStatus": "Failed",
                               "reason": "AppFailed", "message": scenario.app_failure_message,
                               "endTime": now_rfc3339(), "failed": 1})
                pod.obj["status"]["phase"] = "Failed"
                self._finish(key, obj, sim, now, scenario, succeeded=False)
            else:
                status.update({"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete",
                               "message": "Job finished successfully.", "endTime": now_rfc3339(),
                               "succeeded": 1})
                pod.obj["status"]["phase"] = "Succeeded"
                self._finish(key, obj, sim, now, scenario, succeeded=True)

    def _finish(self, key: tuple, obj: dict, sim: dict, now: float, scenario: Scenario,
                succeeded: bool) -> None:
        pod = self.pods.get(sim.get("pod") or ("", ""))
        if pod is not None:
            pod.closed = True
            if pod.obj["status"]["phase"] in ("Pending", "Running"):
                pod.obj["status"]["phase"] = "Succeeded" if succeeded else "Failed"
        sim["phase"] = "done"
        if (obj.get("spec") or {}).get("shutdownAfterJobFinishes") and \
                not (obj.get("spec") or {}).get("clusterSelector"):
            sim["cleanup_at"] = now + scenario.cluster_cleanup_after_s
        self._touch(obj)
