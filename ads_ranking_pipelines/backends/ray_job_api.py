"""Submit, watch, follow and stop Ray jobs through Ray's job submission API (the dashboard).

Used by the local backend; the same API is what KubeRay's submitter talks to.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Iterator

from ads_ranking_pipelines.backends.base import BackendError, JobSpec, JobState, JobStatus

# Lines from Ray worker processes arrive prefixed like "(RayTrainWorker pid=123, ip=1.2.3.4) ".
RAY_LINE_PREFIX = re.compile(r"^\((?P<who>[^()]*?pid=\d+[^()]*)\)\s?")
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(line: str) -> str:
    return ANSI_ESCAPE.sub("", line)


def strip_ray_prefix(line: str) -> str:
    return RAY_LINE_PREFIX.sub("", strip_ansi(line), count=1)


class RayJobApi:
    def __init__(self, address: str, headers: dict[str, str] | None = None, poll_interval_s: float = 0.5):
        from ray.job_submission import JobSubmissionClient

        self.address = address
        self._headers = dict(headers or {})
        self._poll = poll_interval_s
        self._client = JobSubmissionClient(address=address, headers=self._headers)

    def submit(self, job: JobSpec) -> str:
        runtime_env: dict = {"env_vars": dict(job.env_vars)}
        if job.working_dir:
            runtime_env["working_dir"] = job.working_dir
        try:
            return self._client.submit_job(
                entrypoint=job.entrypoint,
                submission_id=job.submission_id,
                runtime_env=runtime_env,
                metadata=dict(job.metadata),
                entrypoint_num_cpus=job.entrypoint_num_cpus,
            )
        except Exception as exc:  # the SDK raises RuntimeError with the HTTP body
            raise BackendError(f"could not submit Ray job {job.submission_id!r} to {self.address}: {exc}") from exc

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
        """Yield whole log lines; with ``follow`` until the job is terminal and its log drained."""
        if not follow:
            yield from self._client.get_job_logs(job_id).splitlines()
            return
        yield from self._follow(job_id)

    def _follow(self, job_id: str) -> Iterator[str]:
        loop = asyncio.new_event_loop()
        try:
            tailer = self._client.tail_job_logs(job_id)
            pending = ""
            while True:
                try:
                    chunk = loop.run_until_complete(tailer.__anext__())
                except StopAsyncIteration:
                    break
                pending += chunk
                *lines, pending = pending.split("\n")
                yield from lines
            if pending:
                yield pending
        finally:
            loop.close()
        # The websocket closes when the job ends; make sure status agrees before returning.
        deadline = time.monotonic() + 30
        while not self.status(job_id).state.terminal and time.monotonic() < deadline:
            time.sleep(self._poll)
