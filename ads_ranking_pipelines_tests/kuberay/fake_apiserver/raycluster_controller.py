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
* The scheduler (not KubeRay): a pod that fits no node stays Pending with ``PodScheduled``
  False / ``Unschedulable`` and a ``FailedScheduling`` event; with a cluster autoscaler that
  can add a node, a ``TriggeredScaleUp`` event.
"""

from __future__ import annotations

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.operator_common import (
    OperatorHost,
    Scenario,
    emit_event,
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
        elif sim["phase"] == "provisioning" and scenario.outcome not in (
                "hang", "deadline_exceeded", "cluster_failed", "unschedulable") and \
                now - sim["t0"] >= scenario.cluster_ready_after_s:
            self._cluster_ready(key, obj)
            sim["phase"] = "ready"
            host._touch(obj)

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

    def _event(self, ns: str, pod_name: str, reason: str, message: str) -> None:
        """An event of the scheduler (``FailedScheduling``) or the cluster autoscaler about a
        pod."""
        scheduler = reason == "FailedScheduling"
        emit_event(self.host, ns, "Pod", pod_name, reason, message,
                   "default-scheduler" if scheduler else "cluster-autoscaler", warning=scheduler)
