"""Submitting to a head whose job agent is not ready yet (a loaded or just-started head).

Ray's dashboard waits 10 s for the head node's job agent, then answers 500 "No available agent
to submit job, please try again later" (``job_head.submit_job``); a loaded CI machine got it
and the run failed its training step. The client below answers as the dashboard does (the
SDK raises RuntimeError with the body)."""

from __future__ import annotations

import pytest

from ads_ranking_pipelines.backends import ray_job_api
from ads_ranking_pipelines.backends.base import BackendError, JobSpec
from ads_ranking_pipelines.backends.ray_job_api import RayJobApi

JOB = JobSpec(submission_id="train-1", entrypoint="python -m x")
NOT_READY = RuntimeError("Request failed with status code 500: No available agent to submit job, "
                         "please try again later..")


class Dashboard:
    """``submit_job`` answers the given outcomes in turn (an exception is raised)."""

    def __init__(self, *outcomes):
        self.outcomes, self.calls = list(outcomes), 0

    def submit_job(self, **kwargs):
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    monkeypatch.setattr(ray_job_api, "AGENT_RETRY_S", 0.01)


def test_an_agent_that_is_not_ready_yet_is_waited_for() -> None:
    client = Dashboard(NOT_READY, NOT_READY, "train-1")
    assert RayJobApi("http://head:8265", client=client).submit(JOB) == "train-1"
    assert client.calls == 3


def test_a_dashboard_handler_that_crashed_is_tried_again() -> None:
    """CI: a loaded head answered a bare aiohttp 500 to the evaluate job's submission."""
    crashed = RuntimeError("Request failed with status code 500: 500 Internal Server Error\n\n"
                           "Server got itself in trouble")
    client = Dashboard(crashed, "train-1")
    assert RayJobApi("http://head:8265", client=client).submit(JOB) == "train-1"
    assert client.calls == 2


def test_a_retry_that_finds_the_job_submitted_takes_it() -> None:
    taken = RuntimeError("Request failed with status code 500: Job with submission_id train-1 already exists.")
    client = Dashboard(NOT_READY, taken)
    assert RayJobApi("http://head:8265", client=client).submit(JOB) == "train-1"


def test_other_errors_and_a_duplicate_on_the_first_try_fail_at_once() -> None:
    for error in (RuntimeError("Request failed with status code 400: bad runtime_env"),
                  RuntimeError("Job with submission_id train-1 already exists.")):
        client = Dashboard(error)
        with pytest.raises(BackendError, match="could not submit Ray job 'train-1'"):
            RayJobApi("http://head:8265", client=client).submit(JOB)
        assert client.calls == 1


def test_the_wait_is_bounded(monkeypatch) -> None:
    monkeypatch.setattr(ray_job_api, "AGENT_WAIT_S", 0.05)
    client = Dashboard(*([NOT_READY] * 1000))
    with pytest.raises(BackendError, match="No available agent"):
        RayJobApi("http://head:8265", client=client).submit(JOB)
