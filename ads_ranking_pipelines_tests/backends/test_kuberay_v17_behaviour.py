"""KubeRay v1.7 behaviours the backend must follow (issue: KubeRay as the real operator
behaves), against the fake API server whose toy operator models v1.7.0:

* a RayCluster that cannot create its pods (``ReplicaFailure``, past its grace) or whose pods
  cannot be scheduled fails the wait, in KubeRay's / the scheduler's words
  (more in ``test_kuberay_startup_grace.py``);
* a retried submitter replays the driver log: every line is delivered once;
* ``jobStatus`` SUCCEEDED is written before ``jobDeploymentStatus`` Complete: the job is not
  done until the submitter has printed its last line.
"""

from __future__ import annotations

import threading

import pytest

from ads_ranking_pipelines.backends.base import BackendError, JobState
from ads_ranking_pipelines.backends.kuberay.logs import ReplayFilter
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines_tests.backends.kuberay_helpers import (
    JOB,
    NS,
    REQUEST,
    assert_nothing_left,
    make_backend,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import FakeKubeApiServer, Scenario

STATUS_READS = r"/rayjobs/[^/]+/status$"


def test_replica_failure_fails_once_its_grace_is_over(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="cluster_failed")
    backend = make_backend(fake_apiserver, ready_timeout_s=30.0, replica_failure_grace_s=0.0)
    with pytest.raises(BackendError) as info:
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    text = str(info.value)
    assert "cannot create its pods: FailedCreateHeadPod" in text
    assert "exceeded quota: gpu-quota, requested: nvidia.com/gpu=32" in text
    assert "did not start within" not in text
    # A handful of status reads, not a 30 s wait at 0.02 s per poll (~1500 reads).
    assert fake_apiserver.count("GET", STATUS_READS) < 100
    assert_nothing_left(fake_apiserver)


def test_unschedulable_pod_fails_with_the_schedulers_words(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="unschedulable")
    backend = make_backend(fake_apiserver, ready_timeout_s=30.0, unschedulable_grace_s=0.1)
    with pytest.raises(BackendError) as info:
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    text = str(info.value)
    assert "cannot be scheduled: 0/12 nodes are available: 12 Insufficient nvidia.com/gpu." in text
    assert "-workers-worker-" in text
    assert fake_apiserver.count("GET", STATUS_READS) < 200
    assert_nothing_left(fake_apiserver)


def test_unschedulable_pod_waits_while_a_scale_up_is_under_way(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="unschedulable", scale_up=True)
    backend = make_backend(fake_apiserver, ready_timeout_s=1.0, unschedulable_grace_s=0.1)
    with pytest.raises(BackendError) as info:
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    assert "did not start within 1s" in str(info.value)  # waited: a node is being added
    assert_nothing_left(fake_apiserver)


def test_standalone_cluster_replica_failure_fails_fast(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="cluster_failed")
    backend = make_backend(fake_apiserver, ready_timeout_s=30.0, replica_failure_grace_s=0.2)
    request = ClusterRequest(name="dev-quota", owner="alice", workers=1)
    with pytest.raises(BackendError) as info:
        backend.create_cluster(request, wait=True)
    assert "RayCluster dev-quota cannot create its pods" in str(info.value)
    assert "exceeded quota" in str(info.value)
    assert fake_apiserver.count("GET", r"/rayclusters/dev-quota/status$") < 100
    assert fake_apiserver.names("rayclusters") == []


@pytest.mark.parametrize("submitter,words", [
    ("refused", 'submitter Job {job} cannot create its pod: Error creating: pods "{job}-'),
    ("unschedulable", "cannot be scheduled: 0/3 nodes are available: 3 Insufficient cpu."),
])
def test_unstartable_submitter_fails_within_the_grace(fake_apiserver: FakeKubeApiServer,
                                                      submitter: str, words: str) -> None:
    """KubeRay keeps such a RayJob Running with an empty jobStatus until activeDeadlineSeconds
    (its cluster held); the backend fails it after unschedulable_grace_s, in the Job
    controller's / scheduler's words, and the RayJob and its RayCluster go."""
    import time

    fake_apiserver.scenario = Scenario(submitter=submitter)
    backend = make_backend(fake_apiserver, ready_timeout_s=30.0, unschedulable_grace_s=0.5)
    t0 = time.monotonic()
    with pytest.raises(BackendError) as info:
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    elapsed = time.monotonic() - t0
    job = next(k[2] for k in fake_apiserver.created if k[0] == "rayjobs")
    text = str(info.value)
    assert words.format(job=job) in text, text
    if submitter == "refused":
        assert "is forbidden: exceeded quota: compute-quota, requested: cpu=500m" in text
    assert "did not start within" not in text
    assert elapsed < 15.0, elapsed  # the grace and a few polls, not the 30 s timeout
    assert fake_apiserver.deployment_history[job][-1] == "Running"  # KubeRay never failed it
    assert fake_apiserver.names("rayclusters") == []
    assert_nothing_left(fake_apiserver)


def test_retried_submitter_delivers_each_line_once(fake_apiserver: FakeKubeApiServer) -> None:
    """The pods print what KubeRay's submitter prints (wait echoes; first pod: submit's
    cli.py lines; every pod: the timestamped banner, the driver log from line 1; the last:
    the final status): each driver line comes once, and no line of the submitter's own."""
    lines = tuple(f"line {i}" for i in range(6))
    fake_apiserver.scenario = Scenario(log_lines=lines, submitter_failures=2, crash_after_lines=3,
                                       dashboard_wait_lines=2)
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        got = list(session.logs(job_id, follow=True))
        assert session.status(job_id).state is JobState.SUCCEEDED
        pods = backend.submitter_pods(NS, job_id)
        printed = [[text for _, text in fake_apiserver.pods[(NS, p["metadata"]["name"])].lines]
                   for p in pods]
    assert len(pods) == 3  # two submitter pods died; the third finished
    assert got == list(lines)
    # What the pods printed: the real submitter's format, so the test can catch a replay.
    assert all(p[0].startswith("Waiting for Ray Dashboard GCS") for p in printed)
    assert sum(" submitted successfully" in t for p in printed for t in p) == 1  # first pod only
    # (pods made within one second are listed in name order, not in the order they ran)
    assert sorted(sum("Job submission server address" in t for t in p) for p in printed) == [1, 1, 2]
    (last,) = [p for p in printed if "line 5" in p]
    assert last[-4] == "line 5" and "Job '" in last[-2] and "' succeeded" in last[-2]
    assert all(p[p.index("line 0") - 1].endswith("\x1b[22m") for p in printed)  # the banner
    assert_nothing_left(fake_apiserver)


def test_submitter_out_of_retries_fails_the_job(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(log_lines=("a", "b"), submitter_failures=5,
                                       crash_after_lines=1)
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        assert list(session.logs(job_id, follow=True)) == ["a"]
        status = session.status(job_id)
    assert status.state is JobState.FAILED
    assert status.message.startswith("SubmissionFailed: Job submission has failed. "
                                     "Reason: BackoffLimitExceeded")
    assert_nothing_left(fake_apiserver)


def test_job_is_not_done_before_the_submitter_finishes(fake_apiserver: FakeKubeApiServer) -> None:
    drain = threading.Event()   # the submitter is still draining the log until the early check
    fake_apiserver.scenario = Scenario(log_lines=("train", "result"), tail_lines=3,
                                       tail_interval_s=0.1, drain_after=drain)
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        assert fake_apiserver.wait_for(
            lambda: (fake_apiserver.get("rayjobs", NS, job_id) or {}).get("status", {}).get(
                "jobStatus") == "SUCCEEDED", timeout_s=10)
        early = session.status(job_id)
        drain.set()
        got = list(session.logs(job_id, follow=True))
        final = session.status(job_id)
    assert early.state is JobState.RUNNING, early
    assert got == ["train", "result", "[submitter] tail line 1", "[submitter] tail line 2",
                   "[submitter] tail line 3"]
    assert final.state is JobState.SUCCEEDED
    assert_nothing_left(fake_apiserver)


@pytest.mark.parametrize("before,replay,want", [
    ([], ["a", "b"], ["a", "b"]),                            # first pod: all new
    (["a", "b", "c"], ["a", "b", "c", "d"], ["d"]),          # full replay, then new lines
    (["a", "b", "c"], ["a", "b"], []),                       # replay still catching up
    (["hdr", "a", "b"], ["a", "b", "c"], ["c"]),             # first pod had submit's header
    (["x", "x", "y"], ["x", "x", "y", "x"], ["x"]),          # repeated lines stay in order
    (["a", "b"], ["a", "z", "b"], ["z", "b"]),               # divergence: the rest is new
    (["a"], ["q", "a"], ["q", "a"]),                         # nothing replayed
])
def test_replay_filter(before: list[str], replay: list[str], want: list[str]) -> None:
    f = ReplayFilter()
    f.new_pod()
    assert [line for line in before if f.accept(line)] == before
    f.new_pod()
    assert [line for line in replay if f.accept(line)] == want


# What KubeRay v1.7.0's submitter pod printed around the driver log, verbatim (Ray 2.60's
# cli.py in record style, colours included; common/job.go's wait-loop echo).
ADDR = "rj-abc-head-svc.ads-ranking.svc.cluster.local:8265"
BANNER_1 = (f"2026-12-03 13:23:29,513\tINFO cli.py:42 -- \x1b[37mJob submission server address"
            f"\x1b[39m: \x1b[1m{ADDR}\x1b[22m")
BANNER_2 = BANNER_1.replace("13:23:29,513", "13:24:02,087")
WAIT = f"Waiting for Ray Dashboard GCS to become healthy at {ADDR} ..."
SUBMIT = [
    "2026-12-03 13:23:29,514\tSUCC cli.py:66 -- \x1b[32m-----------------------------------\x1b[39m",
    "2026-12-03 13:23:29,514\tSUCC cli.py:67 -- \x1b[32mJob 'rj-abc' submitted successfully\x1b[39m",
    "2026-12-03 13:23:29,514\tSUCC cli.py:68 -- \x1b[32m-----------------------------------\x1b[39m",
    "2026-12-03 13:23:29,514\tINFO cli.py:330 -- \x1b[36mNext steps\x1b[39m",
    "2026-12-03 13:23:29,514\tINFO cli.py:331 -- Query the logs of the job:",
    "2026-12-03 13:23:29,514\tINFO cli.py:333 -- \x1b[1mray job logs rj-abc\x1b[22m",
]
FAILED_TAIL = [
    "2026-12-03 13:24:09,301\tERR cli.py:74 -- \x1b[31m-------------------\x1b[39m",
    "2026-12-03 13:24:09,301\tERR cli.py:75 -- \x1b[31mJob 'rj-abc' failed\x1b[39m",
    "2026-12-03 13:24:09,301\tERR cli.py:76 -- \x1b[31m-------------------\x1b[39m",
    "2026-12-03 13:24:09,301\tINFO cli.py:89 -- Status message: Job entrypoint command failed "
    "with exit code 1, last available logs (truncated to 20,000 chars):",
    "ValueError: window has no _SUCCESS marker",
]
DRIVER = [
    "2026-12-03 13:23:31,002\tINFO worker.py:1832 -- Connecting to existing Ray cluster at "
    f"address: {ADDR.replace(':8265', ':6379')}...",   # the driver's own Ray line: output
    '{"__dagster_pipes_version": "0.1", "method": "opened", "params": {"extras": {}}}',
    "(RayTrainWorker pid=812, ip=10.4.2.7) [train] epoch 1/2 loss 0.52",
    "ValueError: window has no _SUCCESS marker",
]


def test_replay_filter_on_the_real_submitters_output() -> None:
    """Pod 1: wait echo, submit's lines, banner, 3 driver lines, dies. Pod 2: wait echo, its
    own banner (new timestamp), the whole driver log from line 1, the final status. Each
    driver line comes once; no line of the submitter's own."""
    f = ReplayFilter()
    f.new_pod()
    first = [WAIT, BANNER_1, *SUBMIT, BANNER_1, *DRIVER[:3]]
    assert [line for line in first if f.accept(line)] == DRIVER[:3]
    f.new_pod()
    second = [WAIT, WAIT, BANNER_2, *DRIVER, *FAILED_TAIL]
    assert [line for line in second if f.accept(line)] == DRIVER[3:]
    assert f.delivered == DRIVER


def test_non_follow_logs_drop_the_submitters_lines(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(log_lines=("train", "result"), dashboard_wait_lines=1)
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        list(session.logs(job_id, follow=True))
        assert list(session.logs(job_id, follow=False)) == ["train", "result"]
    assert_nothing_left(fake_apiserver)


def test_dev_mode_ships_the_package_zip_with_every_job(fake_apiserver: FakeKubeApiServer) -> None:
    import yaml

    zip_uri = "gs://ads-ranking/dev/py_modules/ads_ranking_pipelines-dev-0123456789abcdef.zip"
    backend = make_backend(fake_apiserver, py_modules=(zip_uri,))
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        rayjob = fake_apiserver.get("rayjobs", NS, job_id)
        list(session.logs(job_id))
    env = yaml.safe_load(rayjob["spec"]["runtimeEnvYAML"])
    assert env["py_modules"] == [zip_uri] and "DAGSTER_PIPES_CONTEXT" in env["env_vars"]
    assert_nothing_left(fake_apiserver)


def _raw_rayjob(backend, name: str, **spec) -> dict:
    from ads_ranking_pipelines.kuberay.rayjob import build_rayjob

    manifest = build_rayjob(backend.resolve(REQUEST.model_copy(update={"name": name})),
                            entrypoint="python -c pass", submission_id=name)
    manifest["spec"].update(spec)
    return manifest


def _deployment_states(fake: FakeKubeApiServer, name: str, until: set[str]) -> list[str]:
    """Every jobDeploymentStatus the operator wrote, in order, once one in ``until`` is reached
    (read from the fake's record: polling missed Retrying, which lasts one operator tick)."""

    def done() -> bool:
        return ((fake.get("rayjobs", NS, name) or {}).get("status") or {}).get("jobDeploymentStatus") in until

    assert fake.wait_for(done, timeout_s=10), fake.deployment_history.get(name)
    with fake.lock:
        return list(fake.deployment_history.get(name, []))


def test_fake_retries_a_failed_rayjob_within_its_backoff_limit(fake_apiserver: FakeKubeApiServer) -> None:
    """checkBackoffLimitAndUpdateStatusIfNeeded: Failed with retries left -> Retrying -> New."""
    fake_apiserver.scenario = Scenario(outcome="app_failed", log_lines=("boom",))
    backend = make_backend(fake_apiserver)
    backend.client.create("rayjobs", NS, _raw_rayjob(backend, "retried", backoffLimit=1))
    states = _deployment_states(fake_apiserver, "retried", {"Failed"})
    assert "Retrying" in states
    final = fake_apiserver.get("rayjobs", NS, "retried")["status"]
    assert final["failed"] == 2 and final["reason"] == "AppFailed"
    assert backend.job_status(NS, "retried").state is JobState.FAILED
    backend.stop_job(NS, "retried")
    assert_nothing_left(fake_apiserver)


def test_fake_suspends_a_suspended_rayjob(fake_apiserver: FakeKubeApiServer) -> None:
    """A RayJob created with spec.suspend (KubeRay v1.7 case New) goes Suspended and makes
    no cluster; suspend needs shutdownAfterJobFinishes (ValidateRayJobSpec). Without a Kueue
    label nothing will resume it: STOPPED."""
    from ads_ranking_pipelines.kuberay.rayjob import cleanup_fields

    backend = make_backend(fake_apiserver)
    manifest = _raw_rayjob(backend, "paused", suspend=True)
    manifest["spec"].pop("deletionStrategy")
    manifest["spec"].update(cleanup_fields("shutdown", 60))
    backend.client.create("rayjobs", NS, manifest)
    states = _deployment_states(fake_apiserver, "paused", {"Suspended"})
    assert states == ["Suspended"]
    assert fake_apiserver.names("rayclusters") == []
    assert backend.job_status(NS, "paused").state is JobState.STOPPED
    backend.stop_job(NS, "paused")
    assert_nothing_left(fake_apiserver)


def test_fake_finalizer_stops_a_running_ray_job_on_delete(fake_apiserver: FakeKubeApiServer) -> None:
    """The RayJob finalizer: deleting a RayJob whose Ray job runs stops it first."""
    fake_apiserver.scenario = Scenario(hold_running_s=60)
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        assert fake_apiserver.wait_for(lambda: session.status(job_id).state is JobState.RUNNING)
        rayjob = fake_apiserver.get("rayjobs", NS, job_id)
        assert "ray.io/rayjob-finalizer" in rayjob["metadata"]["finalizers"]
    assert fake_apiserver.stopped_jobs == [job_id]
    assert_nothing_left(fake_apiserver)
