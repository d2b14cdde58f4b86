"""ONE Ray job driver per Dagster run: the run's Ray steps (train, evaluate, score) are steps
of one job, which imports once and starts once (``ray_jobs/run_driver.py``).

The first Ray step of the run submits the driver (lazily) through the run's cluster session
and the run's :class:`~.ray_resources.RayClusterResource` keeps it for the later steps (the run
uses the in-process executor). Each step hands its spec and its own Pipes bootstrap to the
driver through the mailbox (``contracts/run_driver.py``), follows its share of the driver's
log (``run_driver_log``) and waits for its result: its logs, metrics and failure stay its own
in Dagster, as with a job per step. A failed step fails that step only; the driver stays for
the run's next steps. Should the driver be gone (stopped, crashed), the next step starts a new
one. A cancelled step stops the driver's job (the run is ending). When the run's cluster
session closes, the driver is told to exit (or stopped, if it does not).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import dagster as dg
from dagster import PipesEnvContextInjector, open_pipes_session

from ads_ranking_pipelines.backends.base import ClusterSession, JobSpec, JobState, JobStatus
from ads_ranking_pipelines.contracts import run_driver as mailbox
from ads_ranking_pipelines.defs.pipes import JOB_ID_KEY, RayJobOutcome, stop_and_wait
from ads_ranking_pipelines.defs.run_driver_log import DriverLog, StepLogReader
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout

EXIT_WAIT_S = 30.0
ENTRYPOINT = "ads_ranking_pipelines.ray_jobs.run_driver"


class RunDriver:
    """The run's driver job on ``session`` (submitted by the first :meth:`run_step`)."""

    def __init__(self, session: ClusterSession, run_id: str, storage_root: str, python: str,
                 env: dict[str, str], poll_s: float = 1.0, wait_for_exit: bool = True) -> None:
        self.session, self.run_id, self.python = session, run_id, python
        self.wait_for_exit = wait_for_exit        # False: the cluster is torn down right after close()
        self.layout, self.env, self.poll_s = StorageLayout(storage_root), env, poll_s
        self.submitted: list[str] = []            # every driver job of the run, in order
        self.job_id: str | None = None
        self.box = ""
        self._log: DriverLog | None = None
        self._n = 0

    def _job(self) -> JobSpec:
        submission_id = f"run-{self.run_id[:8]}-{uuid.uuid4().hex[:6]}"
        self.box = self.layout.run_driver_mailbox(self.run_id, submission_id)
        return JobSpec(submission_id=submission_id, entrypoint=f"{self.python} -m {ENTRYPOINT}",
                       env_vars={mailbox.MAILBOX_ENV: self.box, **self.env},
                       metadata={"dagster_run_id": self.run_id, "dagster_asset": "run driver"})

    def alive(self) -> bool:
        return self.job_id is not None and not self.session.status(self.job_id).state.terminal

    def start(self, context: Any) -> str:
        """The driver's job id; submits a driver if the run has none running."""
        if self.alive():
            return self.job_id  # type: ignore[return-value]
        job = self._job()
        fs.makedirs(self.box)
        self.job_id, self._n = self.session.submit(job), 0
        self.submitted.append(self.job_id)
        self._log = DriverLog(self.session, self.job_id)
        context.log.info(f"[pipes] Ray job {self.job_id} submitted to {self.session.name} "
                         f"({self.session.dashboard_url or 'no dashboard'}): the run's driver, for its Ray steps")
        return self.job_id

    def run_step(self, context: Any, kind: str, spec: Any, on_message: Any = None) -> RayJobOutcome:
        """Step ``kind`` with ``spec`` on the driver, streamed into ``context``; raises ``dg.Failure``
        (the step's error, or the driver job's end) when it does not succeed."""
        job_id = self.start(context)
        assert self._log is not None
        self._n += 1
        n, step_id = self._n, f"{kind}-{uuid.uuid4().hex[:8]}"
        reader = StepLogReader(self.session, context, self._log.register(step_id), step_id,
                               on_message=on_message, drain_timeout_s=30.0)
        try:
            with open_pipes_session(context=context, message_reader=reader,
                                    context_injector=PipesEnvContextInjector()) as pipes:
                fs.write_json_atomic(fs.join(self.box, mailbox.request_name(n)), {
                    "kind": kind, "step_id": step_id, "spec": spec.model_dump_json(),
                    "pipes": pipes.get_bootstrap_env_vars()})
                context.log.info(f"[pipes] step {step_id} handed to Ray job {job_id}")
                pipes.report_launched({"extras": {JOB_ID_KEY: job_id}})
                ended = self._await(context, n, reader)
        finally:
            self._log.unregister(step_id)
        return _outcome(job_id, kind, ended, pipes.get_custom_messages(), reader.lines_forwarded)

    def _await(self, context: Any, n: int, reader: StepLogReader) -> dict[str, Any] | JobStatus:
        """Step ``n``'s result, or the driver's terminal status if it ended first."""
        uri = fs.join(self.box, mailbox.result_name(n))
        try:
            while True:
                if fs.exists(uri):
                    return fs.read_json(uri)
                status = self.session.status(self.job_id)  # type: ignore[arg-type]
                if status.state.terminal:
                    return fs.read_json(uri) if fs.exists(uri) else status
                reader.job_ending.wait(self.poll_s)
                if reader.job_ending.is_set():
                    time.sleep(0.05)
        except (dg.DagsterExecutionInterruptedError, KeyboardInterrupt):
            context.log.warning(f"[pipes] run interrupted: stopping Ray job {self.job_id}")
            stop_and_wait(self.session, self.job_id)  # type: ignore[arg-type]
            raise

    def close(self) -> None:
        """The run's session is closing: tell the driver to exit. On a cluster that outlives
        the run (``wait_for_exit``) wait until it has, and stop it if it does not; on the run's
        own cluster do not wait (seconds of the driver's shutdown): the teardown that follows
        ends it with the cluster."""
        if self.job_id is None or self._log is None:
            return
        try:
            if self.alive():
                fs.write_json_atomic(fs.join(self.box, mailbox.request_name(self._n + 1)),
                                     {"kind": mailbox.EXIT_KIND})
            if self.wait_for_exit and self.alive():
                deadline = time.monotonic() + EXIT_WAIT_S
                while time.monotonic() < deadline and self.alive():
                    time.sleep(0.1)
                if self.alive():
                    stop_and_wait(self.session, self.job_id)
        finally:
            self.session.job_finished(self.job_id)
            self._log.join(5.0)


def _outcome(job_id: str, kind: str, ended: dict[str, Any] | JobStatus, custom: list[Any],
             lines: int) -> RayJobOutcome:
    if isinstance(ended, JobStatus):
        raise dg.Failure(description=f"Ray job {job_id} ended {ended.state.value}: {ended.message}",
                         metadata={"ray_job_id": job_id, "state": ended.state.value})
    if not ended.get("ok"):
        raise dg.Failure(description=f"Ray job {job_id}: its {kind} step ended FAILED: {ended.get('error')}\n"
                         f"{ended.get('traceback', '')}".rstrip(),
                         metadata={"ray_job_id": job_id, "state": JobState.FAILED.value})
    result = next((m["values"] for m in reversed(custom)
                   if isinstance(m, dict) and m.get("kind") == "result"), {})
    if not result:
        raise dg.Failure(description=f"Ray job {job_id}: its {kind} step reported no result over Pipes")
    return RayJobOutcome(job_id, JobState.SUCCEEDED, "", result, custom, lines)
