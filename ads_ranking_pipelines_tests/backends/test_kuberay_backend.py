"""KubeRayBackend behind the RayBackend interface, against the fake API server.

Every test that creates something ends by asserting that the fake holds no RayJob or
RayCluster (nor pod) that the test's code made: nothing is left behind, whatever happened.
"""

from __future__ import annotations

import _thread
import logging
import threading
import time

import pytest
import yaml

from ads_ranking_pipelines.backends.base import BackendError, JobSpec, JobState
from ads_ranking_pipelines.backends.kuberay import (
    KubeRayBackend,
    job_status_from_rayjob,
    rayjob_name_for,
)
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.validation import RequestError
from ads_ranking_pipelines.kuberay.client import RAYCLUSTERS, RAYJOBS
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (  # noqa: F401 - fixture
    FakeKubeApiServer,
    Scenario,
    client_for,
    fake_apiserver,
)

NS = "ads-ranking"
CATALOG = load_catalog()
RUN_ID = "5f0c3d1e-8a2b-4c6d-9e7f-0123456789ab"
PIPES_VALUE = "eyJwYXRoIjogIi90bXAvcGlwZXMtY29udGV4dCJ9-not-secret-but-not-for-logs"
JOB = JobSpec(submission_id="train-2026-11-29", entrypoint="python -m ads_ranking_pipelines.ray_jobs.train",
              env_vars={"DAGSTER_PIPES_CONTEXT": PIPES_VALUE, "OMP_NUM_THREADS": "1"})
REQUEST = ClusterRequest(name="arp-5f0c3d1e", owner="dagster", workers=1)


def make_backend(fake: FakeKubeApiServer, **kwargs) -> KubeRayBackend:
    kwargs.setdefault("poll_interval_s", 0.02)
    kwargs.setdefault("ready_timeout_s", 10.0)
    kwargs.setdefault("teardown_timeout_s", 10.0)
    return KubeRayBackend(client_for(fake), CATALOG, **kwargs)


def assert_nothing_left(fake: FakeKubeApiServer) -> None:
    assert fake.leftovers() == []
    assert fake.pod_names() == []
    assert not fake.rejected, fake.rejected


# ---- the happy path -------------------------------------------------------------------------
def test_submit_follow_logs_and_succeed(fake_apiserver: FakeKubeApiServer,
                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="ads_ranking_pipelines")
    fake_apiserver.scenario = Scenario(log_lines=("starting", "epoch 1 auc=0.71", "done"),
                                       hold_running_s=0.1)
    backend = make_backend(fake_apiserver, run_id=RUN_ID, code_location="ads_ranking_pipelines")
    seen: list[str] = []
    backend.on_status = lambda name, status: seen.append(status.get("jobDeploymentStatus") or "")
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        assert job_id == rayjob_name_for(REQUEST.name, JOB.submission_id)
        assert session.status(job_id).state in (JobState.PENDING, JobState.RUNNING)
        assert list(session.logs(job_id, follow=True)) == ["starting", "epoch 1 auc=0.71", "done"]
        final = session.status(job_id)
        assert final.state is JobState.SUCCEEDED, final
        assert list(session.logs(job_id, follow=False)) == ["starting", "epoch 1 auc=0.71", "done"]
        rayjob = fake_apiserver.get(RAYJOBS, NS, job_id)
        cluster = fake_apiserver.names(RAYCLUSTERS)
    assert "Initializing" in seen and seen[-1] in ("Running", "Complete")
    labels = rayjob["metadata"]["labels"]
    assert labels["dagster/run-id"] == RUN_ID
    assert labels["dagster/code-location"] == "ads_ranking_pipelines"
    assert labels["ads-ranking.io/submission-id"] == JOB.submission_id
    spec = rayjob["spec"]
    assert spec["jobId"] == JOB.submission_id and spec["shutdownAfterJobFinishes"] is True
    assert yaml.safe_load(spec["runtimeEnvYAML"])["env_vars"]["DAGSTER_PIPES_CONTEXT"] == PIPES_VALUE
    crd_schema.assert_valid({k: v for k, v in rayjob.items() if k != "status"})
    assert cluster == [] or all(c.startswith(job_id) for c in cluster)
    # The env var values never reach a log line of ours.
    assert caplog.records and PIPES_VALUE not in caplog.text
    assert_nothing_left(fake_apiserver)
    assert (RAYJOBS, NS, job_id) in fake_apiserver.deleted


@pytest.mark.parametrize("status,state,message", [
    ({}, JobState.PENDING, "jobDeploymentStatus New"),
    ({"jobDeploymentStatus": "Initializing", "rayClusterStatus": {"state": "failed", "reason": "quota"}},
     JobState.PENDING, "RayCluster failed (quota)"),
    ({"jobDeploymentStatus": "Running", "jobStatus": "PENDING"}, JobState.PENDING, "Running"),
    ({"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, JobState.RUNNING, ""),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED", "message": "ok"},
     JobState.SUCCEEDED, "ok"),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "FAILED", "message": "exit 1"},
     JobState.FAILED, "exit 1"),
    ({"jobDeploymentStatus": "Complete", "jobStatus": "STOPPED"}, JobState.STOPPED, ""),
    ({"jobDeploymentStatus": "Failed", "jobStatus": "FAILED", "reason": "AppFailed",
      "message": "Job entrypoint command failed"}, JobState.FAILED,
     "AppFailed: Job entrypoint command failed"),
    ({"jobDeploymentStatus": "Failed", "reason": "DeadlineExceeded", "message": "passed"},
     JobState.FAILED, "DeadlineExceeded: passed"),
    ({"jobDeploymentStatus": "ValidationFailed", "message": "bad spec"}, JobState.FAILED, "bad spec"),
    ({"jobDeploymentStatus": "Suspended"}, JobState.STOPPED, "suspended"),
    ({"jobDeploymentStatus": "Retrying"}, JobState.PENDING, "Retrying"),
])
def test_status_mapping(status: dict, state: JobState, message: str) -> None:
    got = job_status_from_rayjob(status)
    assert got.state is state
    assert message in got.message


def test_rayjob_names_fit_kuberay_and_are_deterministic() -> None:
    long = "a" * 47
    for base in ("arp-5f0c3d1e", long, "x"):
        name = rayjob_name_for(base, "sub-1")
        assert len(name) <= 47 and name[0].isalpha() and name == rayjob_name_for(base, "sub-1")
    assert rayjob_name_for("arp", "a") != rayjob_name_for("arp", "b")


# ---- nothing is created on bad input --------------------------------------------------------
def test_invalid_request_is_refused_before_any_api_call(fake_apiserver: FakeKubeApiServer) -> None:
    backend = make_backend(fake_apiserver)
    bad = ClusterRequest(name="arp-x", gpu_pool="h100-80gb", workers=2, gpus_per_worker=9,
                         image="rayproject/ray:2.60.0-py311-gpu")
    with pytest.raises(RequestError) as info:
        with backend.session(bad):
            pytest.fail("the session must not open")
    assert info.value.field == "gpus_per_worker" and info.value.valid == "1..8"
    assert fake_apiserver.requests == []


def test_invalid_job_is_refused_before_any_api_call(fake_apiserver: FakeKubeApiServer) -> None:
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        with pytest.raises(RequestError, match="working_dir"):
            session.submit(JobSpec("s1", "python x.py", working_dir="/home/me/code"))
        with pytest.raises(RequestError) as info:
            session.submit(JobSpec("s2", "python x.py", env_vars={"HF_TOKEN": "hf_abcdef"}))
        assert "hf_abcdef" not in str(info.value)
        with pytest.raises(RequestError, match="submission_id"):
            session.submit(JobSpec("bad id with spaces", "python x.py"))
    assert fake_apiserver.requests == []


# ---- KubeRay failures surface verbatim --------------------------------------------------------
def test_failed_cluster_reason_is_surfaced_verbatim(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="cluster_failed")
    backend = make_backend(fake_apiserver)
    with pytest.raises(BackendError) as info:
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    text = str(info.value)
    assert "exceeded quota: gpu-quota, requested: nvidia.com/gpu=32" in text
    assert "RayCluster" in text and rayjob_name_for(REQUEST.name, JOB.submission_id) in text
    assert_nothing_left(fake_apiserver)


def test_deadline_exceeded_is_surfaced_verbatim(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="deadline_exceeded", deadline_after_s=0.2)
    backend = make_backend(fake_apiserver)
    with pytest.raises(BackendError) as info:
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    assert "with reason DeadlineExceeded" in str(info.value)
    assert "The RayJob has passed the activeDeadlineSeconds" in str(info.value)
    assert f"ActiveDeadlineSeconds: {REQUEST.active_deadline_seconds}" in str(info.value)
    assert_nothing_left(fake_apiserver)


def test_app_failure_is_reported_with_kuberays_message(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="app_failed", log_lines=("Traceback", "ValueError"))
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        assert list(session.logs(job_id)) == ["Traceback", "ValueError"]
        status = session.status(job_id)
    assert status.state is JobState.FAILED
    assert status.message.startswith("AppFailed: Job entrypoint command failed with exit code 1")
    assert_nothing_left(fake_apiserver)


def test_readiness_timeout_fails_and_cleans_up(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang")
    backend = make_backend(fake_apiserver, ready_timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(BackendError, match=r"did not start within 0s .*Initializing"):
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    assert time.monotonic() - started < 5
    assert_nothing_left(fake_apiserver)


# ---- the API server misbehaves ------------------------------------------------------------------
def test_409_on_create_leaves_the_other_object_alone(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang")
    name = rayjob_name_for(REQUEST.name, JOB.submission_id)
    foreign = build_rayjob(REQUEST.model_copy(update={"name": name, "owner": "someone-else"}),
                           CATALOG, entrypoint="python theirs.py", submission_id="theirs")
    fake_apiserver.seed(RAYJOBS, foreign)
    backend = make_backend(fake_apiserver)
    with pytest.raises(BackendError) as info:
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    assert "already exists" in str(info.value) and "someone-else" in str(info.value)
    assert fake_apiserver.names(RAYJOBS) == [name]
    assert fake_apiserver.get(RAYJOBS, NS, name)["spec"]["entrypoint"] == "python theirs.py"
    assert fake_apiserver.deleted == []
    assert fake_apiserver.leftovers() == []  # the seeded object (and its pods) are not ours
    fake_apiserver.objects.clear()
    fake_apiserver.pods.clear()


def test_transient_500s_and_429s_are_retried(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.inject("POST", r"/rayjobs$", 500, times=2)
    fake_apiserver.inject("POST", r"/rayjobs$", 429, times=1, headers={"Retry-After": "0"})
    fake_apiserver.inject("GET", r"/rayjobs/[^/]+/status$", 503, times=3)
    fake_apiserver.inject("GET", r"/pods$", 500, times=2)
    fake_apiserver.inject("DELETE", r"/rayjobs/", 500, times=1)
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        assert list(session.logs(job_id)) == ["hello from the driver"]
        assert session.status(job_id).state is JobState.SUCCEEDED
    assert fake_apiserver.count("POST", r"/rayjobs$") == 4
    assert fake_apiserver.created.count((RAYJOBS, NS, job_id)) == 1
    assert all(f.times == 0 for f in fake_apiserver.faults)
    assert_nothing_left(fake_apiserver)


def test_lost_create_answer_is_not_a_second_job(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.inject("POST", r"/rayjobs$", 500, times=1, after_effect=True)
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        list(session.logs(job_id))
    assert fake_apiserver.created.count((RAYJOBS, NS, job_id)) == 1
    assert_nothing_left(fake_apiserver)


def test_persistent_500_fails_clearly_and_leaves_nothing(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.inject("POST", r"/rayjobs$", 500, times=None, message="etcdserver: leader changed")
    backend = make_backend(fake_apiserver)
    with pytest.raises(BackendError) as info:
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    text = str(info.value)
    assert "could not create RayJob" in text and "HTTP 500" in text
    assert "etcdserver: leader changed" in text and "after 5 attempts" in text
    assert PIPES_VALUE not in text
    assert fake_apiserver.names(RAYJOBS) == []
    assert_nothing_left(fake_apiserver)


def test_teardown_that_cannot_delete_says_so(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang")
    backend = make_backend(fake_apiserver, ready_timeout_s=0.1, teardown_timeout_s=0.3)
    session_cm = backend.session(REQUEST)
    session = session_cm.__enter__()
    name = rayjob_name_for(REQUEST.name, JOB.submission_id)
    with pytest.raises(BackendError):
        session.submit(JOB)  # times out; its delete is sent (and succeeds) right away
    fake_apiserver.wait_for(lambda: fake_apiserver.names(RAYJOBS) == [])
    # Now a second job whose delete keeps failing.
    other = JobSpec("second", "python y.py")
    fake_apiserver.scenario = Scenario(log_lines=())
    backend.ready_timeout_s = 5
    session.submit(other)
    fake_apiserver.inject("DELETE", r"/rayjobs/", 500, times=None, message="webhook unavailable")
    with pytest.raises(BackendError) as info:
        session_cm.__exit__(None, None, None)
    assert "teardown of session" in str(info.value) and "webhook unavailable" in str(info.value)
    fake_apiserver.clear_faults()
    client_for(fake_apiserver).delete(RAYJOBS, NS, rayjob_name_for(REQUEST.name, "second"))
    assert fake_apiserver.wait_for(lambda: fake_apiserver.leftovers() == [])
    assert name not in fake_apiserver.names(RAYJOBS)
    assert_nothing_left(fake_apiserver)


# ---- cancellation: the Dagster run is terminated mid-way ------------------------------------
class DagsterLikeInterrupt(BaseException):
    """What SIGTERM of a Dagster run raises (DagsterExecutionInterruptedError is a BaseException)."""


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, DagsterLikeInterrupt])
def test_interrupt_while_waiting_for_the_cluster(fake_apiserver: FakeKubeApiServer,
                                                 exc_type: type[BaseException]) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang")
    polls = []

    def on_status(name: str, status: dict) -> None:
        polls.append(status)
        if len(polls) == 3:
            raise exc_type()

    backend = make_backend(fake_apiserver, on_status=on_status)
    with pytest.raises(exc_type):
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    assert fake_apiserver.created  # it had been created…
    assert_nothing_left(fake_apiserver)  # …and is gone


def test_interrupt_from_another_thread(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang")
    backend = make_backend(fake_apiserver)
    created = threading.Event()

    def interrupter() -> None:
        fake_apiserver.wait_for(lambda: bool(fake_apiserver.created), timeout_s=5)
        time.sleep(0.1)
        created.set()
        _thread.interrupt_main()  # what SIGINT/SIGTERM handlers do to the main thread

    t = threading.Thread(target=interrupter)
    t.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            with backend.session(REQUEST) as session:
                session.submit(JOB)
    finally:
        t.join()
    assert created.is_set()
    assert_nothing_left(fake_apiserver)


def test_interrupt_while_following_the_log(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(log_lines=tuple(f"step {i}" for i in range(50)),
                                       line_interval_s=0.02)
    backend = make_backend(fake_apiserver)
    got = []
    with pytest.raises(KeyboardInterrupt):
        with backend.session(REQUEST) as session:
            job_id = session.submit(JOB)
            for line in session.logs(job_id):
                got.append(line)
                if len(got) == 5:
                    raise KeyboardInterrupt
    assert got == [f"step {i}" for i in range(5)]
    assert_nothing_left(fake_apiserver)


def test_stop_deletes_the_rayjob_and_reports_stopped(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang", cluster_ready_after_s=0.0)
    fake_apiserver.scenario.outcome = "succeed"
    fake_apiserver.scenario.hold_running_s = 60
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        session.stop(job_id)
        assert fake_apiserver.wait_for(lambda: job_id not in fake_apiserver.names(RAYJOBS))
        assert session.status(job_id).state is JobState.STOPPED
    assert_nothing_left(fake_apiserver)


def test_broken_log_stream_is_reattached_without_gaps_or_repeats(
        fake_apiserver: FakeKubeApiServer) -> None:
    lines = tuple(f"line {i}" for i in range(30))
    fake_apiserver.scenario = Scenario(log_lines=lines, line_interval_s=0.01)
    fake_apiserver.break_log_stream_after = 7
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        assert list(session.logs(job_id)) == list(lines)
    assert fake_apiserver.count("GET", r"/log$") >= 2
    assert_nothing_left(fake_apiserver)


def test_two_jobs_in_one_session_are_both_torn_down(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(hold_running_s=60)
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        a = session.submit(JOB)
        b = session.submit(JobSpec("eval-2026-11-29", "python -m ads_ranking_pipelines.ray_jobs.evaluate"))
        assert a != b and sorted(session.created) == sorted([a, b])
        assert len(fake_apiserver.names(RAYCLUSTERS)) == 2
        with pytest.raises(BackendError, match="already submitted"):
            session.submit(JOB)
    assert_nothing_left(fake_apiserver)


# ---- long-lived clusters and jobs on them (the CLI's operations) ------------------------------
def test_cluster_lifecycle_and_a_job_on_it(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(log_lines=("hello",))
    backend = make_backend(fake_apiserver)
    request = ClusterRequest(name="alice-h100", owner="alice", gpu_pool="h100-80gb", workers=2,
                             gpus_per_worker=8, image="rayproject/ray:2.60.0-py311-gpu")
    info = backend.create_cluster(request, wait=True, timeout_s=5)
    assert info.status == "ready" and info.workers_ready == 2 and info.workers_desired == 2
    assert info.gpu_type == "nvidia-h100-80gb" and info.owner == "alice"
    assert info.dashboard == "http://alice-h100-head-svc:8265"
    assert [c.name for c in backend.list_clusters(NS)] == ["alice-h100"]
    obj, pods = backend.get_cluster(NS, "alice-h100")
    assert len(pods) == 3
    job_id = backend.submit_to_cluster(NS, "alice-h100", JobSpec("adhoc-1", "python -c 'print(1)'"),
                                       owner="alice")
    rayjob = fake_apiserver.get(RAYJOBS, NS, job_id)
    assert rayjob["spec"]["clusterSelector"] == {"ray.io/cluster": "alice-h100"}
    assert "rayClusterSpec" not in rayjob["spec"]
    assert rayjob["metadata"]["labels"]["ads-ranking.io/cluster"] == "alice-h100"
    backend.wait_until_running(NS, job_id, timeout_s=5)
    assert list(backend.job_logs(NS, job_id)) == ["hello"]
    assert backend.job_status(NS, job_id).state is JobState.SUCCEEDED
    assert backend.stop_job(NS, job_id) is True
    # The cluster outlives its jobs…
    assert fake_apiserver.names(RAYCLUSTERS) == ["alice-h100"]
    # …and deleting the cluster deletes the jobs still recorded on it.
    second = backend.submit_to_cluster(NS, "alice-h100", JobSpec("adhoc-2", "python -c 'print(2)'"))
    assert fake_apiserver.names(RAYJOBS) == [second]
    assert backend.delete_cluster(NS, "alice-h100") is True
    assert backend.delete_cluster(NS, "alice-h100") is False
    assert_nothing_left(fake_apiserver)


def test_cluster_that_fails_is_deleted_with_its_reason(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="cluster_failed")
    backend = make_backend(fake_apiserver)
    with pytest.raises(BackendError, match="exceeded quota: gpu-quota"):
        backend.create_cluster(ClusterRequest(name="doomed", owner="bob", workers=1), timeout_s=5)
    assert_nothing_left(fake_apiserver)


def test_clusters_we_do_not_manage_are_not_touched(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang")
    foreign = {"apiVersion": "ray.io/v1", "kind": "RayCluster",
               "metadata": {"name": "theirs", "namespace": NS, "labels": {"team": "search"}},
               "spec": {}}
    fake_apiserver.seed(RAYCLUSTERS, foreign)
    backend = make_backend(fake_apiserver)
    assert backend.list_clusters(NS) == []
    with pytest.raises(BackendError, match="not managed by"):
        backend.delete_cluster(NS, "theirs")
    with pytest.raises(BackendError, match="not managed by"):
        backend.submit_to_cluster(NS, "theirs", JobSpec("x", "python x.py"))
    assert fake_apiserver.names(RAYCLUSTERS) == ["theirs"] and fake_apiserver.deleted == []
    fake_apiserver.objects.clear()
    fake_apiserver.pods.clear()
