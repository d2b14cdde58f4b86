"""Submit, watch, follow and stop Ray jobs through Ray's job submission API (the dashboard).

Used by the local backend; the same API is what KubeRay's submitter talks to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from ads_ranking_pipelines.backends.base import BackendError, ClusterSession, JobSpec, JobState, JobStatus

log = logging.getLogger(__name__)
# How many times a follower opens a job's log stream again after it dropped mid-job.
MAX_RECONNECTS = 5
# The dashboard's answer when the head's job agent is not ready yet (ray dashboard job_head.py).
AGENT_NOT_READY = "No available agent to submit job"
# aiohttp's answer when the dashboard's handler raised (seen on a loaded head while it forwarded
# the submission to its job agent): nothing was decided, so the submission is tried again.
HANDLER_CRASHED = "500 Internal Server Error"
TRANSIENT = (AGENT_NOT_READY, HANDLER_CRASHED)
AGENT_WAIT_S = 120.0
AGENT_RETRY_S = 2.0

# Lines from Ray worker processes arrive prefixed like "(RayTrainWorker pid=123, ip=1.2.3.4) ".
RAY_LINE_PREFIX = re.compile(r"^\((?P<who>[^()]*?pid=\d+[^()]*)\)\s?")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(line: str) -> str:
    return ANSI_ESCAPE.sub("", line)


def strip_ray_prefix(line: str) -> str:
    return RAY_LINE_PREFIX.sub("", strip_ansi(line), count=1)


class RayJobApi:
    """``client``: a ``JobSubmissionClient`` already made for ``address`` (one is made if None)."""

    def __init__(self, address: str, headers: dict[str, str] | None = None, poll_interval_s: float = 0.5,
                 client: Any = None):
        self.address = address
        self._headers = dict(headers or {})
        self._poll = poll_interval_s
        if client is None:
            from ray.job_submission import JobSubmissionClient

            client = JobSubmissionClient(address=address, headers=self._headers)
        self._client = client
        self._lock = threading.Lock()
        self._followers: dict[str, set[JobLogFollower]] = {}

    def submit(self, job: JobSpec) -> str:
        """Submit ``job``. The dashboard answers 500 "No available agent to submit job, please
        try again later" when the head's job agent did not answer within its 10 s (a loaded or
        just-started head: ``job_head.submit_job``), and a bare "500 Internal Server Error" when
        its handler raised; both are retried for ``AGENT_WAIT_S``. A retry that finds the
        submission id taken means an earlier attempt got through."""
        runtime_env: dict = {"env_vars": dict(job.env_vars)}
        if job.working_dir:
            runtime_env["working_dir"] = job.working_dir
        deadline, retried = time.monotonic() + AGENT_WAIT_S, False
        while True:
            try:
                return self._client.submit_job(
                    entrypoint=job.entrypoint, submission_id=job.submission_id, runtime_env=runtime_env,
                    metadata=dict(job.metadata), entrypoint_num_cpus=job.entrypoint_num_cpus)
            except Exception as exc:  # the SDK raises RuntimeError with the HTTP body
                text = str(exc)
                if retried and job.submission_id and "already exists" in text:
                    return job.submission_id
                if not any(t in text for t in TRANSIENT) or time.monotonic() >= deadline:
                    raise BackendError(f"could not submit Ray job {job.submission_id!r} to "
                                       f"{self.address}: {exc}") from exc
                log.warning("Ray job %s: the head did not take the submission (%s); submitting again",
                            job.submission_id, text[-120:])
                retried = True
                time.sleep(AGENT_RETRY_S)

    def status(self, job_id: str) -> JobStatus:
        info = self._client.get_job_info(job_id)
        return JobStatus(JobState(str(info.status.value if hasattr(info.status, "value") else info.status)),
                         info.message or "")

    def stop(self, job_id: str) -> None:
        try:
            self._client.stop_job(job_id)
        except Exception:
            pass

    def list_jobs(self) -> list[dict]:
        return [
            {"job_id": j.submission_id or j.job_id, "status": str(j.status.value), "entrypoint": j.entrypoint,
             "message": j.message or ""}
            for j in self._client.list_jobs()
        ]

    def logs(self, job_id: str, follow: bool = True) -> Iterator[str]:
        """Whole log lines; with ``follow`` until the job is terminal and its log drained.

        A follower ends when the dashboard closes the log stream, or as soon as
        :meth:`job_finished` says the job is terminal (it then reads the rest of the log at once
        instead of waiting for the dashboard's tail to notice, which takes 1-2 s).
        """
        if not follow:
            return iter(self._client.get_job_logs(job_id).splitlines())
        follower = JobLogFollower(self, job_id)
        with self._lock:
            self._followers.setdefault(job_id, set()).add(follower)
        return follower

    def job_finished(self, job_id: str) -> None:
        """The job is terminal: every follower of its log drains what is left and ends."""
        with self._lock:
            followers = list(self._followers.get(job_id, ()))
        for f in followers:
            f.finish()

    def _forget(self, follower: "JobLogFollower") -> None:
        with self._lock:
            mine = self._followers.get(follower.job_id)
            if mine is not None:
                mine.discard(follower)
                if not mine:
                    del self._followers[follower.job_id]


class JobLogFollower(Iterator[str]):
    """One job's log, followed over the dashboard's websocket (``tail_job_logs``).

    :meth:`finish` (any thread) wakes the follower at once: it stops reading the websocket and
    yields the part of the log it has not seen yet from one ``get_job_logs`` call. Without it
    the follower ends when the dashboard closes the stream, then waits (event-driven, with a
    ``poll_interval_s`` status check as the fallback) until the job's status is terminal.
    """

    def __init__(self, api: RayJobApi, job_id: str):
        self.job_id = job_id
        self._api = api
        self._requested = threading.Event()
        self._loop = asyncio.new_event_loop()
        self._wake = asyncio.Event()
        self._lines = self._generate()

    def __next__(self) -> str:
        return next(self._lines)

    def finish(self) -> None:
        self._requested.set()
        with contextlib.suppress(RuntimeError):      # the follower already ended
            self._loop.call_soon_threadsafe(self._wake.set)

    def _generate(self) -> Iterator[str]:
        try:
            consumed, pending, finished = 0, "", self._requested.is_set()
            streams, terminal = 0, False
            while not finished and not terminal and streams <= MAX_RECONNECTS:
                for chunk in self._chunks(skip=consumed):
                    consumed += len(chunk)
                    pending += chunk
                    *lines, pending = pending.split("\n")
                    yield from lines
                streams += 1
                finished = self._requested.is_set()
                terminal = finished or self._stream_ended_with_the_job()
            if finished:     # the rest of the log in one read
                pending += self._api._client.get_job_logs(self.job_id)[consumed:]
                *lines, pending = pending.split("\n")
                yield from lines
            if pending:
                yield pending
            if not terminal:
                self._await_terminal()
        finally:
            self._api._forget(self)
            self._loop.close()

    def _stream_ended_with_the_job(self) -> bool:
        """The websocket closed: normally because the job ended. If the job still runs, the
        connection dropped (seen under load: close code 1006 mid-training) and the log is
        opened again; the dashboard sends it from the start, and what was read is skipped."""
        if self._api.status(self.job_id).state.terminal:
            return True
        log.warning("the log stream of Ray job %s closed while the job runs; reconnecting", self.job_id)
        return False

    def _chunks(self, skip: int = 0) -> Iterator[str]:
        """Websocket chunks until the stream closes or :meth:`finish` is called; the first
        ``skip`` characters of the stream (already read from an earlier one) are dropped."""
        loop = self._loop
        tailer = self._api._client.tail_job_logs(self.job_id)
        woken = loop.create_task(self._wake.wait())
        try:
            while not self._requested.is_set():
                nxt = loop.create_task(tailer.__anext__())
                done, _ = loop.run_until_complete(asyncio.wait({nxt, woken}, return_when=asyncio.FIRST_COMPLETED))
                if nxt not in done:
                    nxt.cancel()
                    with contextlib.suppress(BaseException):
                        loop.run_until_complete(nxt)
                    break
                try:
                    chunk = nxt.result()
                except StopAsyncIteration:
                    break
                if skip:
                    chunk, skip = chunk[skip:], max(0, skip - len(chunk))
                if chunk:
                    yield chunk
        finally:
            woken.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(woken)
            with contextlib.suppress(BaseException):
                loop.run_until_complete(tailer.aclose())

    def _await_terminal(self, timeout_s: float = 30.0) -> None:
        """The stream closed by itself: make sure the status agrees (woken early by :meth:`finish`)."""
        waited = 0.0
        while waited < timeout_s and not self._api.status(self.job_id).state.terminal:
            if self._requested.wait(self._api._poll):
                return
            waited += self._api._poll


class ApiSession(ClusterSession):
    """A cluster session whose jobs all go through one :class:`RayJobApi` (a local cluster,
    made by this run or borrowed)."""

    _api: RayJobApi

    def submit(self, job: JobSpec) -> str:
        return self._api.submit(job)

    def status(self, job_id: str) -> JobStatus:
        return self._api.status(job_id)

    def logs(self, job_id: str, follow: bool = True) -> Iterator[str]:
        return self._api.logs(job_id, follow=follow)

    def stop(self, job_id: str) -> None:
        self._api.stop(job_id)

    def job_finished(self, job_id: str) -> None:
        self._api.job_finished(job_id)
