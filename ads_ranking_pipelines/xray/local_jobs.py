"""Ray jobs of a local cluster, through Ray's job submission API (the cluster's dashboard,
with its auth token as a header - never shown).

``RayJobApi`` (backends) drops start/end times and follows logs synchronously; here the same
``JobSubmissionClient`` gives the times, and its async ``tail_job_logs`` lets a log stream end
as soon as the browser goes away.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.ray_job_api import strip_ansi


@dataclass
class JobRow:
    job_id: str
    status: str
    entrypoint: str
    start_time: float | None  # epoch seconds
    end_time: float | None
    message: str = ""

    @property
    def duration_s(self) -> float | None:
        if self.start_time is None:
            return None
        return max(0.0, (self.end_time or time.time()) - self.start_time)

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "status": self.status, "entrypoint": self.entrypoint,
                "start_time": self.start_time, "end_time": self.end_time,
                "duration_s": None if self.duration_s is None else round(self.duration_s, 1),
                "message": self.message}


def _client(cluster: LocalRayCluster) -> Any:
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(address=cluster.state.dashboard_url, headers=cluster.auth_headers())


def _seconds(ms: int | None) -> float | None:
    return None if not ms else ms / 1000.0


def list_jobs(cluster: LocalRayCluster) -> list[JobRow]:
    """Submitted jobs, newest first (drivers of interactive sessions have no submission id)."""
    rows = []
    for j in _client(cluster).list_jobs():
        if not j.submission_id:
            continue
        status = j.status.value if hasattr(j.status, "value") else str(j.status)
        rows.append(JobRow(j.submission_id, status, j.entrypoint or "", _seconds(j.start_time),
                           _seconds(j.end_time), j.message or ""))
    return sorted(rows, key=lambda r: r.start_time or 0, reverse=True)


def job_exists(cluster: LocalRayCluster, job_id: str) -> bool:
    try:
        return _client(cluster).get_job_info(job_id) is not None
    except Exception:  # the SDK raises RuntimeError with the HTTP body on 404
        return False


async def follow_log(cluster: LocalRayCluster, job_id: str) -> AsyncIterator[str]:
    """The job's whole driver log, then new lines until the job ends, line by line."""
    from starlette.concurrency import run_in_threadpool

    client = await run_in_threadpool(_client, cluster)
    pending = ""
    async for chunk in client.tail_job_logs(job_id):
        pending += chunk
        *lines, pending = pending.split("\n")
        for line in lines:
            yield strip_ansi(line)
    if pending:
        yield strip_ansi(pending)
