"""The provisioning interface every backend implements: provision → submit → logs → teardown.

A backend opens a *session* for one cluster request. Leaving the session (normally, on an
exception, or on cancellation) tears down everything the session created. Inside it, Ray jobs
are submitted, watched and their driver logs followed line by line.
"""

from __future__ import annotations

import abc
import contextlib
import enum
from collections.abc import Iterator
from dataclasses import dataclass

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.job import JobSpec  # noqa: F401 - what a session's submit takes


class JobState(str, enum.Enum):
    PENDING = "PENDING"
    QUEUED = "QUEUED"  # waiting for admission (Kueue: suspended, quota not reserved); not an end
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def terminal(self) -> bool:
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.STOPPED)


@dataclass(frozen=True)
class JobStatus:
    state: JobState
    message: str = ""


class BackendError(RuntimeError):
    """A backend failed (cluster did not start, job could not be submitted…)."""


class ClusterSession(abc.ABC):
    """A Ray cluster (or the means to create one per job) bound to one caller."""

    name: str
    dashboard_url: str | None = None

    @abc.abstractmethod
    def submit(self, job: JobSpec) -> str:
        """Submit a job; returns its id."""

    @abc.abstractmethod
    def status(self, job_id: str) -> JobStatus: ...

    @abc.abstractmethod
    def logs(self, job_id: str, follow: bool = True) -> Iterator[str]:
        """Driver log lines; with ``follow`` keeps yielding until the job is terminal."""

    @abc.abstractmethod
    def stop(self, job_id: str) -> None: ...

    def job_finished(self, job_id: str) -> None:
        """The caller saw ``job_id`` terminal: followers of its log may drain and end now
        rather than wait for the log stream to notice (nothing to do by default)."""


class RayBackend(abc.ABC):
    name: str

    @abc.abstractmethod
    def session(self, request: ClusterRequest) -> contextlib.AbstractContextManager[ClusterSession]:
        """Provision for ``request``; tear down whatever was created when the block exits."""
