"""The toy operator's RayCluster controller, modelled on KubeRay v1.7.0
(ray-project/kuberay at tag v1.7.0, ``ray-operator/controllers/ray/raycluster_controller.go``):
a RayCluster - standalone or made for a RayJob - gets its pods and its status, and becomes
ready, as its :class:`Scenario` says.

* ``reconcilePods`` / ``createHeadPod`` / ``createWorkerPod``: head and worker pods; a pod the
  API server refuses (quota, Pod Security admission) is not created and the error is returned
  joined with ``utils.ErrFailedCreateHeadPod`` (``errors.Join``).
* ``calculateStatus``: that error becomes the condition ``ReplicaFailure`` (True, reason
  ``FailedCreateHeadPod``, message ``"FailedCreateHeadPod\\n<API error>"``); ``status.state``
  becomes ``ready`` once every pod runs and is never set to ``failed`` (deprecated in v1.7).
  KubeRay keeps requeueing: when a later ``reconcilePods`` creates the pods (the quota was
  freed), ``calculateStatus`` removes the ``ReplicaFailure`` condition.
* The scheduler (not KubeRay): a pod that fits no node stays Pending with ``PodScheduled``
  False / ``Unschedulable`` and a ``FailedScheduling`` event; with a cluster autoscaler that
  can add a node, a ``TriggeredScaleUp`` event (cluster-autoscaler); with Karpenter, a
  ``Nominated`` event "Pod should schedule on: nodeclaim/<name>" (karpenter v1
  ``pkg/controllers/provisioning/scheduling/events.go`` ``NominatePodEvent``). Once the new
  node is up the pods are scheduled and start.
* ``spec.suspend`` (Kueue's, on a standalone RayCluster): ``reconcilePods`` deletes every pod
  (``deleteAllPods``) and creates none; ``calculateStatus`` (``RayClusterStatusConditions``,
  on by default) sets ``RayClusterSuspending``, then once no pod is left ``state: suspended``
  and ``RayClusterSuspended`` (True), dropping ``RayClusterProvisioned``. Once unsuspended the
  condition goes and the cluster is reconciled as a new one.
"""

from __future__ import annotations

from dataclasses import replace

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.operator_common import (
    OperatorHost,
    Scenario,
    new_pod,
    scenario_for,
    suffix,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.store import now_rfc3339


class RayClusterController:
    """Reconciles the RayClusters of ``host`` (the fake API server), one at a time."""

    def __init__(self, host: OperatorHost) -> None:
        self.host = host

    def reconcile(self, key: tuple, now: float) -> None:
        host = self.host
        obj = host.objects[key]
        meta = obj["metadata"]
        if meta.get("deletionTimestamp"):
            return
        sim = host.sim.setdefault(key, {"t0": now, "phase": "new"})
        if (obj.get("spec") or {}).get("suspend"):
            if sim["phase"] != "suspended" and self._suspend(key, obj):
                sim["phase"] = "suspended"
            return
        if sim["phase"] == "suspended":  # unsuspended (Kueue admitted it): start afresh
            self._resume(obj)
            sim.update(phase="new", t0=now)
        owner_job = (meta.get("labels") or {}).get("ray.io/originated-from-cr-name")
        scenario = scenario_for(host, key[2], owner_job)
        if sim["phase"] == "new":
            self._reconcile_cluster_pods(key, obj, scenario)
            sim["phase"] = "provisioning"
            host._touch(obj)
        elif sim["phase"] == "provisioning" and scenario.execute:
            workers = obj["status"]["desiredWorkerReplicas"]
            state = host.runtime().ensure_cluster(key, workers)
            if state == "ready":
                self._cluster_ready(key, obj)
                sim["phase"] = "ready"
                host._touch(obj)
            elif state != "starting" and not sim.get("failed"):
                obj["status"]["conditions"].append({
                    "type": "ReplicaFailure", "status": "True", "reason": "FailedCreateHeadPod",
                    "message": f"FailedCreateHeadPod\n{state}", "lastTransitionTime": now_rfc3339()})
                sim["failed"] = True
                host._touch(obj)
        elif sim["phase"] == "provisioning" and self._recovered(key, obj, scenario, sim, now):
            host._touch(obj)
        elif sim["phase"] == "provisioning" and sim.get("outcome", scenario.outcome) not in (
                "hang", "deadline_exceeded", "cluster_failed", "unschedulable") and \
                now - sim["t0"] >= scenario.cluster_ready_after_s:
            self._cluster_ready(key, obj)
            sim["phase"] = "ready"
            host._touch(obj)

    def _suspend(self, key: tuple, obj: dict) -> bool:
        """``deleteAllPods`` while ``RayClusterSuspending``; True once no pod is left and the
        status says ``suspended``."""
        status = obj.setdefault("status", {})
        conditions = [c for c in status.get("conditions") or []
                      if c.get("type") not in ("RayClusterProvisioned", "HeadPodReady")]
        pods = [k for k, p in self.host.pods.items()
                if (p.obj["metadata"].get("labels") or {}).get("ray.io/cluster") == key[2]
                and k[0] == key[1]]
        if pods:
            for ns, name in pods:
                self.host._remove(("pods", ns, name))
            if not any(c.get("type") == "RayClusterSuspending" for c in conditions):
                conditions.append({"type": "RayClusterSuspending", "status": "True",
                                   "reason": "RayClusterSuspending",
                                   "lastTransitionTime": now_rfc3339()})
            status["conditions"] = conditions
            self.host._touch(obj)
            return False
        status.update({"state": "suspended", "readyWorkerReplicas": 0,
                       "availableWorkerReplicas": 0, "lastUpdateTime": now_rfc3339(),
                       "stateTransitionTimes": {"suspended": now_rfc3339()},
                       "conditions": [c for c in conditions
                                      if c.get("type") != "RayClusterSuspending"] + [
                           {"type": "RayClusterSuspended", "status": "True",
                            "reason": "RayClusterSuspended",
                            "lastTransitionTime": now_rfc3339()}]})
        status.pop("head", None)
        self.host._touch(obj)
        return True

    def _resume(self, obj: dict) -> None:
        """``calculateStatus`` once ``spec.suspend`` is false: ``RayClusterSuspended`` goes."""
        status = obj.setdefault("status", {})
        status["conditions"] = [c for c in status.get("conditions") or []
                                if c.get("type") != "RayClusterSuspended"]
        status.pop("state", None)
        self.host._touch(obj)

    def _recovered(self, key: tuple, obj: dict, scenario: Scenario, sim: dict,
                   now: float) -> bool:
        """What clears a stuck start: a retried ``reconcilePods`` that creates the pods
        (``calculateStatus`` drops ``ReplicaFailure``), or - the scheduler, not KubeRay - the
        new node coming up, so the pending pods are scheduled. The cluster is then ready
        ``cluster_ready_after_s`` later."""
        outcome = sim.get("outcome", scenario.outcome)
        if outcome == "cluster_failed" and scenario.replica_failure_clears_after_s is not None \
                and now - sim["t0"] >= scenario.replica_failure_clears_after_s:
            self._reconcile_cluster_pods(key, obj, replace(scenario, outcome="succeed"))
        elif outcome == "unschedulable" and scenario.schedulable_after_s is not None \
                and now - sim["t0"] >= scenario.schedulable_after_s:
            self._schedule_stuck_pods(key, now)
        else:
            return False
        sim.update(outcome="succeed", t0=now)
        return True

    def _schedule_stuck_pods(self, key: tuple, now: float) -> None:
        """The scheduler binds the cluster's pending pods to the new node; the kubelet starts
        them (:func:`.operator_common.start_due_pods`)."""
        for pod in self.host.pods.values():
            labels = pod.obj["metadata"].get("labels") or {}
            if labels.get("ray.io/cluster") == key[2] and pod.obj.get("_unschedulable"):
                pod.obj["_unschedulable"] = False
                pod.obj["_start"] = now
                pod.obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                                    "lastTransitionTime": now_rfc3339()}]

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
        head = f"{key[2]}-head-{suffix()}"
        new_pod(self.host, key[1], head, {**base, "ray.io/node-type": "head"}, obj, "ray-head",
                scenario.cluster_ready_after_s)
        for _ in range(workers):
            name = f"{key[2]}-workers-worker-{suffix()}"
            new_pod(self.host, key[1], name, {**base, "ray.io/node-type": "worker",
                                              "ray.io/group": "workers"}, obj, "ray-worker",
                    scenario.cluster_ready_after_s, unschedulable=stuck)
            if stuck:
                self._event(key[1], name, "FailedScheduling", stuck)
                if scenario.scale_up:
                    self._event(key[1], name, "TriggeredScaleUp",
                                "pod triggered scale-up: [{gpu-pool 2->3 (max: 8)}]")
                if scenario.karpenter:
                    self._event(key[1], name, "Nominated",
                                f"Pod should schedule on: nodeclaim/default-{suffix()}",
                                source="karpenter")

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

    def _event(self, ns: str, pod_name: str, reason: str, message: str,
               source: str | None = None) -> None:
        """An event about a pod of the scheduler (``FailedScheduling``), the cluster
        autoscaler, or ``source`` (``karpenter``)."""
        host = self.host
        host._resource_version += 1
        host.events.append({
            "apiVersion": "v1", "kind": "Event", "type": "Warning" if reason == "FailedScheduling"
            else "Normal", "reason": reason, "message": message,
            "metadata": {"name": f"{pod_name}.{suffix(8)}", "namespace": ns,
                         "resourceVersion": str(host._resource_version)},
            "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": ns},
            "lastTimestamp": now_rfc3339(), "count": 1,
            "source": {"component": source or ("default-scheduler" if reason == "FailedScheduling"
                                                 else "cluster-autoscaler")}})
