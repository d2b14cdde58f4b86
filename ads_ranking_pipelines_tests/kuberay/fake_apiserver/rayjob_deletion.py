"""What the toy operator's RayJob controller does once a RayJob is Complete or Failed, modelled
on KubeRay v1.7.0 (``ray-operator/controllers/ray/rayjob_controller.go``): nothing for a
``clusterSelector`` job; with the ``RayJobDeletionPolicy`` gate and
``deletionStrategy.deletionRules``, ``handleDeletionRules``; else, with
``shutdownAfterJobFinishes``, ``handleShutdownAfterJobFinishes`` (see
:mod:`.rayjob_controller`'s docstring for the rules' conditions)."""

from __future__ import annotations

from typing import Any

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.operator_common import OperatorHost


def scaled_seconds(host: OperatorHost, spec_seconds: Any) -> float:
    """A spec field in seconds, in real seconds (``host.time_scale`` per second)."""
    return float(spec_seconds or 0) * host.time_scale


class RayJobDeletion:
    """The deletion mechanisms of finished RayJobs of ``host`` (the fake API server)."""

    def __init__(self, host: OperatorHost) -> None:
        self.host = host

    def job_finished(self, key: tuple, obj: dict, ended: float, now: float) -> None:
        """case Complete/Failed of a RayJob that ended at ``ended``: the deletion mechanisms."""
        spec = obj.get("spec") or {}
        if spec.get("clusterSelector"):
            return
        strategy = spec.get("deletionStrategy")
        if self.host.feature_gates.get("RayJobDeletionPolicy", True) and strategy:
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
            if matched and now - ended >= scaled_seconds(self.host, cond.get("ttlSeconds")) and \
                    not self._deletion_done(key, obj, rule["policy"]):
                overdue.append(rule["policy"])
        if overdue:
            self._execute_deletion_policy(key, obj, max(overdue, key=lambda p: order.get(p, 0)))

    def _deletion_done(self, key: tuple, obj: dict, policy: str) -> bool:
        """``isDeletionActionCompleted``."""
        if policy == "DeleteSelf":
            return bool(obj["metadata"].get("deletionTimestamp"))
        if policy == "DeleteCluster":
            ckey = ("rayclusters", key[1], obj["status"].get("rayClusterName", ""))
            return ckey not in self.host.objects
        return True

    def _execute_deletion_policy(self, key: tuple, obj: dict, policy: str) -> None:
        """``executeDeletionPolicy``."""
        if policy == "DeleteCluster":
            self.host._remove(("rayclusters", key[1], obj["status"].get("rayClusterName", "")))
        elif policy == "DeleteSelf":
            self.host._schedule_delete(key, "Background")

    def _handle_shutdown_after_job_finishes(self, key: tuple, obj: dict, ended: float,
                                            now: float) -> None:
        """``handleShutdownAfterJobFinishes``: after the TTL, only the RayCluster is deleted
        (``deleteClusterResources``) - the RayJob and its submitter stay - unless the operator
        runs with ``DELETE_RAYJOB_CR_AFTER_JOB_FINISHES=true``."""
        if now - ended < scaled_seconds(self.host, (obj.get("spec") or {}).get("ttlSecondsAfterFinished")):
            return
        if self.host.delete_rayjob_cr_after_job_finishes:
            if not obj["metadata"].get("deletionTimestamp"):
                self.host._schedule_delete(key, "Background")
            return
        self.host._remove(("rayclusters", key[1], obj["status"].get("rayClusterName", "")))
