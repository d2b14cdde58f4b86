"""KubeRayBackend when the Dagster run is terminated mid-way, or a job is stopped: what the
session created is deleted."""

from __future__ import annotations

import _thread
import signal
import threading
import time

import pytest

from ads_ranking_pipelines.backends.base import JobState
from ads_ranking_pipelines.backends.kuberay.client import RAYJOBS
from ads_ranking_pipelines_tests.backends.kuberay_helpers import (
    JOB,
    REQUEST,
    assert_nothing_left,
    make_backend,
)
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import FakeKubeApiServer, Scenario


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
    # interrupt_main() does nothing unless Python handles SIGINT: never depend on what an
    # earlier test in this process left installed
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)

    def interrupter() -> None:
        fake_apiserver.wait_for(lambda: bool(fake_apiserver.created), timeout_s=120)
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
        signal.signal(signal.SIGINT, previous)
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
