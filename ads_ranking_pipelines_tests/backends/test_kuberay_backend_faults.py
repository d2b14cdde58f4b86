"""KubeRayBackend when things go wrong: KubeRay's failures surface verbatim, and the API
server's errors are retried or reported, with nothing left behind."""

from __future__ import annotations

import time

import pytest

from ads_ranking_pipelines.backends.base import BackendError, JobSpec, JobState
from ads_ranking_pipelines.kuberay.rayjob import rayjob_name_for
from ads_ranking_pipelines.backends.kuberay.client import RAYJOBS
from ads_ranking_pipelines.config.validation import resolve_request
from ads_ranking_pipelines.kuberay.rayjob import build_rayjob
from ads_ranking_pipelines_tests.backends.kuberay_helpers import (
    CATALOG,
    JOB,
    NS,
    PIPES_VALUE,
    REQUEST,
    assert_nothing_left,
    make_backend,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    client_for,
)


# ---- KubeRay failures surface verbatim --------------------------------------------------------
def test_failed_cluster_reason_is_surfaced_verbatim(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="cluster_failed")
    backend = make_backend(fake_apiserver, replica_failure_grace_s=0.2)
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
    # The job runs a while (1 s after its log), so the submit sees it Running even on a loaded
    # machine (a job that fails before that is the test below).
    fake_apiserver.scenario = Scenario(outcome="app_failed", log_lines=("Traceback", "ValueError"),
                                       pod_running_after_s=0.3, hold_running_s=1.0)
    backend = make_backend(fake_apiserver)
    with backend.session(REQUEST) as session:
        job_id = session.submit(JOB)
        assert list(session.logs(job_id)) == ["Traceback", "ValueError"]
        status = session.status(job_id)
    assert status.state is JobState.FAILED
    assert status.message.startswith("AppFailed: Job entrypoint command failed with exit code 1")
    assert_nothing_left(fake_apiserver)


def test_job_that_fails_before_it_is_seen_running_keeps_its_log(fake_apiserver: FakeKubeApiServer) -> None:
    """The first poll already finds the RayJob Failed: the error carries the driver log's end."""
    fake_apiserver.scenario = Scenario(outcome="app_failed", log_lines=("Traceback", "KeyError: 'clicked'"))
    backend = make_backend(fake_apiserver, poll_interval_s=1.0)
    with pytest.raises(BackendError) as info:
        with backend.session(REQUEST) as session:
            session.submit(JOB)
    text = str(info.value)
    assert "AppFailed" in text
    assert text.endswith("last lines of the job's log:\nTraceback\nKeyError: 'clicked'")
    assert PIPES_VALUE not in text
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
    foreign = build_rayjob(resolve_request(REQUEST.model_copy(update={"name": name, "owner": "someone-else"}),
                                           CATALOG), entrypoint="python theirs.py", submission_id="theirs")
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
    backend.ctx.ready_timeout_s = 5
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
