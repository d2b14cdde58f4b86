"""The toy operator's submitter Job (scripted mode): its pods and what they print, as KubeRay
v1.7.0's do.

* ``createNewK8sJob`` (rayjob_controller.go): one pod at a time, ``backoffLimit`` 2 by default;
  a pod the API server refuses (quota) is not created - the Job controller records
  ``FailedCreate`` - and a pod that fits no node stays Pending, Unschedulable.
* The pod runs common/job.go ``BuildJobSubmitCommand``: the dashboard wait loop's echoes, then
  ``ray job submit --no-wait`` only if ``ray job status`` does not find the job (the first pod of
  a Ray job), then ``ray job logs --follow``: its banner, the whole driver log from the first
  line, and ``_log_job_status``'s lines once the job is terminal (Ray's
  ``dashboard/modules/job/cli.py``; the text is :mod:`.submitter_output`'s). A retried pod
  therefore prints the driver log again from its first line, behind lines of its own.

With ``Scenario(execute=True)`` the pod's output comes from real Ray instead
(:mod:`.ray_runtime`), with the same lines around it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from ads_ranking_pipelines_tests.kuberay.fake_apiserver import submitter_output
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.operator_common import (
    OperatorHost,
    Scenario,
    emit_event,
    new_pod,
    scenario_for,
    suffix,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.store import _Pod, now_rfc3339

# Ray's message for a job stopped through the Job API (dashboard/modules/job/common.py).
STOPPED_MESSAGE = "Job was intentionally stopped."

Terminal = Callable[[tuple, dict, dict, float], None]


def dashboard_address(obj: dict) -> str:
    """The ``--address`` of the submitter's commands: ``status.dashboardURL`` with the scheme
    ``BuildJobSubmitCommand`` adds."""
    url = (obj.get("status") or {}).get("dashboardURL", "")
    return url if "://" in url else f"http://{url}"


class SubmitterJob:
    """The submitter Job of each RayJob; ``terminal`` is the controller's
    ``checkBackoffLimitAndUpdateStatusIfNeeded`` step after a terminal transition."""

    def __init__(self, host: OperatorHost, terminal: Terminal) -> None:
        self.host = host
        self._terminal = terminal

    def new_pod(self, key: tuple, obj: dict, sim: dict, now: float) -> None:
        """A pod of the submitter Job (``createNewK8sJob``). Refused or unschedulable, the Job
        gets no ``JobFailed`` condition, so ``checkSubmitterAndUpdateStatusIfNeeded`` finds
        nothing and the RayJob stays Running with an empty ``jobStatus``
        (rayjob_controller.go ~301-319) until ``activeDeadlineSeconds``."""
        spec = obj.get("spec") or {}
        scenario = scenario_for(self.host, key[2])
        # The Job controller labels a Job's pods with the Job's name and uid; the submitter Job
        # made after a Suspending / Retrying (which delete it) is a new Job: a new uid.
        job_uid = sim.setdefault("submitter_job_uid", str(uuid.uuid4()))
        labels = {**((spec.get("submitterPodTemplate") or {}).get("metadata") or {})
                  .get("labels", {}), "job-name": key[2], "batch.kubernetes.io/job-name": key[2],
                  "controller-uid": job_uid, "batch.kubernetes.io/controller-uid": job_uid}
        pod_name = f"{key[2]}-{suffix()}"
        sim.update(attempts=sim.get("attempts", 0) + 1, pod=None)
        sim.setdefault("running_at", None)
        if scenario.submitter == "refused":
            emit_event(self.host, key[1], "Job", key[2], "FailedCreate", "Error creating: "
                       + scenario.submitter_quota_message % {"pod": pod_name}, "job-controller")
            return
        stuck = scenario.submitter_unschedulable_message \
            if scenario.submitter == "unschedulable" else None
        new_pod(self.host, key[1], pod_name, labels, obj, "ray-job-submitter",
                scenario.pod_running_after_s, unschedulable=stuck)
        if stuck:
            emit_event(self.host, key[1], "Pod", pod_name, "FailedScheduling", stuck,
                       "default-scheduler")
        sim.update(pod=(key[1], pod_name), line=0, opened=False,
                   next_line_at=now + scenario.pod_running_after_s)

    def print_next(self, key: tuple, obj: dict, pod: _Pod, sim: dict, now: float) -> bool:
        """Print what is due; False once the whole driver log is printed. First the pod's
        opening lines (``ray job submit`` only if this Ray job was not submitted yet)."""
        scenario = scenario_for(self.host, key[2])
        if not sim.get("opened"):
            job_id = obj["status"].get("jobId", "")
            first = sim.get("submitted") != job_id
            sim.update(opened=True, submitted=job_id)
            self._print(pod, submitter_output.opening_lines(dashboard_address(obj), job_id, first,
                                           scenario.dashboard_wait_lines))
            return True
        lines = scenario.log_lines
        if sim["line"] >= len(lines):
            return False
        if now >= sim["next_line_at"]:
            self._print_line(key, obj, pod, sim, scenario, now)
        return True

    def _print(self, pod: _Pod, lines: list[str]) -> None:
        pod.lines.extend((time.time(), line) for line in lines)
        self.host.changed.notify_all()

    def _print_line(self, key: tuple, obj: dict, pod: _Pod, sim: dict, scenario: Scenario,
                    now: float) -> None:
        lines = scenario.log_lines
        pod.lines.append((time.time(), lines[sim["line"]]))
        sim["line"] += 1
        sim["next_line_at"] = now + scenario.line_interval_s
        attempts_left = scenario.submitter_failures - (sim["attempts"] - 1)
        if attempts_left > 0 and sim["line"] >= min(scenario.crash_after_lines, len(lines)):
            # The submitter pod dies (node lost, OOM…): the Job controller starts another.
            pod.obj["status"]["phase"] = "Failed"
            pod.closed = True
            limit = ((obj.get("spec") or {}).get("submitterConfig") or {}).get("backoffLimit", 2)
            if sim["attempts"] > int(limit):
                # checkSubmitterAndUpdateStatusIfNeeded: the Job's retries are used up.
                obj["status"].update({
                    "jobDeploymentStatus": "Failed", "reason": "SubmissionFailed",
                    "message": "Job submission has failed. Reason: BackoffLimitExceeded. "
                               "Message: Job has reached the specified backoff limit"})
                self._terminal(key, obj, sim, now)
            else:
                self.new_pod(key, obj, sim, now)
        self.host.changed.notify_all()

    def finish(self, key: tuple, obj: dict, pod: _Pod, sim: dict, now: float) -> None:
        """case Running, once the log is printed: the Ray job's terminal ``jobStatus``
        (``GetJobInfo``), the rest of the log (``tail_lines``), ``_log_job_status``'s lines,
        then ``jobDeploymentStatus`` Complete - Failed (``AppFailed``) only for FAILED."""
        status, scenario = obj["status"], scenario_for(self.host, key[2])
        failed = scenario.outcome == "app_failed"
        if status.get("jobStatus") == "RUNNING":
            ray_status, message = (("FAILED", scenario.app_failure_message) if failed else
                                   ("STOPPED", STOPPED_MESSAGE) if scenario.outcome == "stopped"
                                   else ("SUCCEEDED", "Job finished successfully."))
            status.update({"jobStatus": ray_status, "message": message,
                           "rayJobInfo": {**status.get("rayJobInfo", {}), "endTime": now_rfc3339()}})
            sim["tail"] = scenario.tail_lines
            sim["next_tail_at"] = now + scenario.tail_interval_s
            self.host._touch(obj)
            return
        if scenario.drain_after is not None and not scenario.drain_after.is_set():
            return
        if sim.get("tail", 0) > 0:
            if now >= sim["next_tail_at"]:
                sim["tail"] -= 1
                self._print(pod, [f"[submitter] tail line {scenario.tail_lines - sim['tail']}"])
                sim["next_tail_at"] = now + scenario.tail_interval_s
            return
        self._print(pod, submitter_output.final_status_lines(
            status.get("jobId", ""), status["jobStatus"], status.get("message")))
        pod.obj["status"]["phase"] = "Failed" if failed else "Succeeded"
        pod.closed = True
        status.update({"jobDeploymentStatus": "Failed" if failed else "Complete",
                       "reason": "AppFailed" if failed else "", "endTime": now_rfc3339()})
        self._terminal(key, obj, sim, now)
