"""A KubeRay run whose process is SIGKILLed is seen dead: its RayJob stops and is deleted.

``ads-ranking pipeline run`` on the KubeRay backend runs as a real process against the fake API
server (``Scenario(execute=True)``: each RayJob's cluster is a real local Ray cluster and its
submitter really runs the job). The storage root is a path on the "shared volume" the Ray pods
see (here: the same disk). Once training runs (a checkpoint exists), or while the cluster of the
run's RayJob is still starting, the CLI is SIGKILLed, as a lost run pod or an OOM kill would.
Then: the run's driver (one Ray job for all its steps) sees the run's controller lease go stale
(a driver that starts after the kill finds it stale) and exits (the Ray job FAILED), the RayJob
goes Failed and KubeRay's deletion rules delete its RayCluster (its Ray processes stop); ``ads-ranking cluster gc`` reports the
dead run, marks it FAILURE and deletes the RayJob of the now finished run. Nothing is left in
the fake nor on the machine, and no version of the dead run can be promoted.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS
from ads_ranking_pipelines.kuberay.labels import SUBMISSION_ID_LABEL
from ads_ranking_pipelines.defs.orphans import IN_FLIGHT
from ads_ranking_pipelines.defs.tags import GPU_POOL_TAG
from ads_ranking_pipelines.ray_jobs.lease_watch import EXIT_CONTROLLER_GONE
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines_tests.cli.helpers import RAY_IMAGE, REPO_ROOT, run_cli
from ads_ranking_pipelines_tests.processes import wait_no_processes
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    write_kubeconfig,
)

NS = "ads-ranking"
DAY = dt.date(2026, 3, 10)
TINY = ["--window-days", "2", "--workers", "1", "--batch-size", "256", "--rows-per-day", "2000",
        "--param", "hash_buckets=1000", "--param", "embedding_dim=8", "--param", "dense_arch=[16, 8]",
        "--param", "over_arch=[16]", "--epochs", "50",
        # the whole budget: early stopping ended a 2000-row run 15 epochs in, before the lease timed out
        "--param", "early_stopping_patience=0"]
TIMEOUT_S = 8.0          # ADS_RANKING_CONTROLLER_TIMEOUT_S
SLACK_S = 20.0           # the watch period, Ray ending the job, the submitter draining the log
START_S = 90.0           # provisioning: the cluster still starts and the driver imports first


def _reader(proc: subprocess.Popen, lines: list[str]) -> threading.Thread:
    def read() -> None:
        for line in proc.stdout:
            lines.append(line)

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return thread


def _until(predicate: Callable[[], object], timeout_s: float, what: str, lines: list[str]) -> float:
    """Seconds until ``predicate`` held (polled every 0.1 s); fails naming ``what``."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"{what} not within {timeout_s:.0f}s:\n" + "".join(lines[-40:]))
        time.sleep(0.1)
    return time.monotonic() - t0


def _driver_rayjob(fake: FakeKubeApiServer, states: tuple[str, ...] = ("Running",)) -> str | None:
    """The run's RayJob (its one driver, for all its steps) once its ``jobDeploymentStatus`` is
    one of ``states``."""
    for name in fake.names(RAYJOBS, NS):
        obj = fake.get(RAYJOBS, NS, name) or {}
        labels = obj.get("metadata", {}).get("labels", {})
        if labels.get(SUBMISSION_ID_LABEL, "").startswith("run-") and \
                (obj.get("status") or {}).get("jobDeploymentStatus", "") in states:
            return name
    return None


# When to kill: provisioning = the run's RayJob is created, its cluster not up yet (the
# driver starts after the controller is gone and finds the lease stale); training = a
# checkpoint is written.
PHASES = {
    "provisioning": lambda fake, ads_home: _driver_rayjob(fake, ("", "New", "Initializing")),
    "training": lambda fake, ads_home: _driver_rayjob(fake) and any(
        (ads_home / "ray_results").glob("*/checkpoint_2*")),
}


def _submitter_log(fake: FakeKubeApiServer, rayjob: str) -> str:
    """What the RayJob's submitter pod printed: the driver's log (``ray job logs --follow``)."""
    with fake.lock:
        return "\n".join(line for pod in fake.pods.values()
                         if pod.obj["metadata"]["labels"].get("job-name") == rayjob
                         for _, line in pod.lines)


def _run(instance_home: Path) -> dg.DagsterRun:
    with dg.DagsterInstance.from_config(str(instance_home)) as instance:
        (run,) = instance.get_runs(limit=1)
        return run


@pytest.mark.ray
@pytest.mark.integration
@pytest.mark.parametrize("phase", list(PHASES))
def test_sigkill_of_a_kuberay_run_stops_and_deletes_its_rayjob(phase, fake_apiserver: FakeKubeApiServer,
                                                               ads_home, tmp_path) -> None:
    fake = fake_apiserver
    fake.scenario = Scenario(execute=True)
    fake.time_scale = 1.0            # DeleteSelf after the real 600 s: only gc deletes the RayJob
    env = {**os.environ, "ADS_RANKING_BACKEND": "kuberay", "ADS_RANKING_KUBE_CONTEXT": "fake",
           "KUBECONFIG": write_kubeconfig(tmp_path / "kubeconfig", fake, context="fake"),
           "ADS_RANKING_SHARED_VOLUME_CLAIM": "ads-ranking-data", "ADS_RANKING_RAY_IMAGE": RAY_IMAGE,
           "ADS_RANKING_CONTROLLER_TIMEOUT_S": f"{TIMEOUT_S:g}", "ADS_RANKING_OWNER": "tester",
           "PYTHONUNBUFFERED": "1"}
    dagster_home = Path(env["DAGSTER_HOME"])
    proc = subprocess.Popen(
        [sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run", "--verbose",
         "--date", DAY.isoformat(), *TINY],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO_ROOT)
    lines: list[str] = []
    _reader(proc, lines)
    try:
        _until(lambda: proc.poll() is not None or PHASES[phase](fake, ads_home), 400, phase, lines)
        assert proc.poll() is None, f"the run ended before {phase}:\n" + "".join(lines[-40:])
        name = _driver_rayjob(fake, ("", "New", "Initializing", "Running"))
        assert _run(dagster_home).status == dg.DagsterRunStatus.STARTED
        proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        limit_s = TIMEOUT_S + SLACK_S + (START_S if phase == "provisioning" else 0.0)
        proc.wait(timeout=10)

        def rayjob_status() -> dict:
            return (fake.get(RAYJOBS, NS, name) or {}).get("status", {})

        try:
            to_driver_exit = _until(lambda: rayjob_status().get("jobStatus") == "FAILED",
                                    limit_s, "the Ray job FAILED", lines)
        except AssertionError as exc:
            raise AssertionError(f"RayJob status {rayjob_status()}; the driver's log ends:\n"
                                 + _submitter_log(fake, name)[-3000:]) from exc
        cluster = rayjob_status()["rayClusterName"]
        to_cluster_gone = _until(lambda: cluster not in fake.names(RAYCLUSTERS, NS), 30,
                                 "the RayCluster deleted", lines) + to_driver_exit
        failed_rayjob, driver_log = rayjob_status(), _submitter_log(fake, name)
        temp_dirs = list(fake.runtime().temp_dirs)
        left = [wait_no_processes(d, timeout_s=60) for d in temp_dirs]
        to_no_processes = time.monotonic() - killed

        gc = run_cli("cluster", "gc", "--context", "fake", env=env, timeout=180)
        to_failure = time.monotonic() - killed
        assert gc.returncode == 0, gc.stdout + gc.stderr
        to_store_empty = _until(lambda: fake.leftovers() == [] and fake.pod_names() == [], 30,
                                "the fake's store empty", lines) + to_failure
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"kuberay, {phase}: kill -> Ray job FAILED (driver exited) {to_driver_exit:.1f}s, "
          f"-> RayCluster deleted {to_cluster_gone:.1f}s, -> 0 Ray processes {to_no_processes:.1f}s, "
          f"-> run FAILURE (gc) {to_failure:.1f}s, -> RayJob deleted {to_store_empty:.1f}s")

    # the driver stopped itself on the stale lease, within the timeout and some slack
    assert to_driver_exit <= limit_s
    assert f"exit code {EXIT_CONTROLLER_GONE}" in failed_rayjob.get("message", ""), failed_rayjob
    assert "the run's controller is gone" in driver_log, driver_log[-2000:]
    assert failed_rayjob["jobDeploymentStatus"] == "Failed" and failed_rayjob["reason"] == "AppFailed"
    assert "Failed" in fake.deployment_history[name]
    assert left == [[] for _ in temp_dirs], f"Ray processes of the dead run's cluster left: {left}"
    # gc: the dead run (kind "run"), then the RayJob of the now finished run
    rows = [json.loads(line) for line in gc.stdout.splitlines() if line.startswith("{")]
    run = _run(dagster_home)
    assert {(r["kind"], r["name"]) for r in rows} >= {("run", run.run_id), ("RayJob", name)}, gc.stdout
    assert run.status == dg.DagsterRunStatus.FAILURE
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        pool = run.tags[GPU_POOL_TAG]
        assert not instance.get_runs(dg.RunsFilter(statuses=IN_FLIGHT, tags={GPU_POOL_TAG: pool}))
        failure = [e for e in instance.all_logs(run.run_id)
                   if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.RUN_FAILURE]
    assert failure and f"(pid {proc.pid} on" in failure[-1].message, failure
    assert fake.names(RAYJOBS, NS) == [] and fake.names(RAYCLUSTERS, NS) == []
    # no version of the dead run is a candidate
    registry = ModelRegistry(StorageLayout(str(ads_home)), "quest_ranker")
    assert registry.champion() is None
    assert registry.versions_for_day(DAY) == []
    for version in registry.versions():
        assert registry.unattended(version) is not None, f"{version} is not marked unattended"
