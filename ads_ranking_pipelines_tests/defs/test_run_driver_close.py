"""Closing the run's driver: the run waits until its driver job has ended (on a borrowed or warm
cluster the job must not outlive the run; on KubeRay the RayJob completes before it is deleted),
except a local run on its own cluster: it tells the driver to exit and does not wait, since the
cluster's teardown right after ends it (P4: seconds of every run)."""

from __future__ import annotations

import json

from ads_ranking_pipelines.backends.base import JobState, JobStatus
from ads_ranking_pipelines.contracts import run_driver as mailbox
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.defs.local_ray_resource import LocalRayResource
from ads_ranking_pipelines.defs.run_driver import RunDriver

JOB = "run-0123abcd-ef0123"


class ExitingSession:
    """The driver job runs until it has been asked for its status ``running_reads`` times."""

    name, dashboard_url = "arp-0123abcd", None

    def __init__(self, running_reads: int) -> None:
        self.running_reads, self.reads, self.finished = running_reads, 0, []

    def status(self, job_id: str) -> JobStatus:
        self.reads += 1
        return JobStatus(JobState.RUNNING if self.reads <= self.running_reads else JobState.SUCCEEDED)

    def job_finished(self, job_id: str) -> None:
        self.finished.append(job_id)


class JoinedLog:
    def __init__(self) -> None:
        self.joined = False

    def join(self, timeout_s: float) -> None:
        self.joined = True


def _driver(tmp_path, session: ExitingSession, wait_for_exit: bool) -> RunDriver:
    driver = RunDriver(session, "0123abcd-run", str(tmp_path), "python", {}, wait_for_exit=wait_for_exit)
    driver.job_id, driver.box, driver._log, driver._n = JOB, str(tmp_path / "box"), JoinedLog(), 3
    (tmp_path / "box").mkdir()
    return driver


def _exit_request(tmp_path) -> dict:
    return json.loads((tmp_path / "box" / mailbox.request_name(4)).read_text())


def test_on_its_own_cluster_the_run_tells_the_driver_to_exit_and_does_not_wait(tmp_path):
    session = ExitingSession(running_reads=50)
    driver = _driver(tmp_path, session, wait_for_exit=False)
    driver.close()
    assert _exit_request(tmp_path) == {"kind": mailbox.EXIT_KIND}
    assert session.reads == 1 and session.finished == [JOB] and driver._log.joined


def test_on_a_cluster_that_outlives_the_run_the_run_waits_for_its_driver_to_end(tmp_path):
    session = ExitingSession(running_reads=5)
    driver = _driver(tmp_path, session, wait_for_exit=True)
    driver.close()
    assert _exit_request(tmp_path) == {"kind": mailbox.EXIT_KIND}
    assert session.reads == 7 and session.finished == [JOB]     # read until it ended


def test_only_a_local_run_on_its_own_cluster_does_not_wait_for_its_driver(tmp_path):
    assert not LocalRayResource(state_dir=str(tmp_path)).awaits_driver_exit()
    assert LocalRayResource(state_dir=str(tmp_path), keep_warm_s=60).awaits_driver_exit()
    assert LocalRayResource(state_dir=str(tmp_path), existing_cluster="shared").awaits_driver_exit()
    assert LocalRayResource(state_dir=str(tmp_path), ray_address="http://127.0.0.1:8265").awaits_driver_exit()
    # KubeRay: the run's RayJob completes before the session deletes it (its status, Kueue's workload)
    assert KubeRayResource(storage_home="gs://b/ads").awaits_driver_exit()
    assert KubeRayResource(storage_home="gs://b/ads", existing_cluster="shared").awaits_driver_exit()
