"""Dagster Pipes over any backend's Ray job: logs and metrics stream into the run as it goes.

We evaluated dagster-ray's ``PipesRayJobClient`` first. It is tied to ``JobSubmissionClient``
(so it cannot follow a KubeRay RayJob's submitter pod), forwards plain log lines to the step's
stdout rather than the event log, and cannot parse Pipes messages from Ray worker processes
(their lines carry a ``(Worker pid=…)`` prefix). This client keeps its shape — env-var context
injection, a message reader following the job's log, job stop on interruption — on Dagster's
Pipes primitives, over our backend interface.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import dagster as dg
from dagster import PipesEnvContextInjector, PipesMessageHandler, PipesMessageReader, open_pipes_session
from dagster_pipes import PIPES_PROTOCOL_VERSION_FIELD, PipesDefaultMessageWriter, PipesParams

from ads_ranking_pipelines.backends.base import ClusterSession, JobSpec, JobState, JobStatus
from ads_ranking_pipelines.backends.ray_job_api import strip_ansi, strip_ray_prefix
from ads_ranking_pipelines.contracts.pipes_stamp import STAMP_FIELD
from ads_ranking_pipelines.defs.chatter import is_chatter
from ads_ranking_pipelines.defs.pipes_once import SeenMessages


JOB_ID_KEY = "ray_job_id"
STOP_TIMEOUT_S = 60.0
# Kinds of custom messages that are shown live in the event log as asset observations.
LIVE_METRIC_KINDS = frozenset({"epoch", "progress", "dataset", "evaluation", "inference"})


_MESSAGE_START = "{" + json.dumps(PIPES_PROTOCOL_VERSION_FIELD)
_decoder = json.JSONDecoder()


def parse_pipes_message(line: str) -> dict | None:
    """The Pipes message that is the whole line (after Ray's ``(Worker pid=…)`` prefix), or None."""
    text = strip_ray_prefix(line).strip()
    if not text.startswith("{") or PIPES_PROTOCOL_VERSION_FIELD not in text:
        return None
    try:
        msg = json.loads(text)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) and PIPES_PROTOCOL_VERSION_FIELD in msg else None


def split_pipes_messages(line: str) -> tuple[list[dict], str]:
    """The Pipes messages anywhere in ``line``, and the line's other text (stripped).

    A driver's threads can glue a message to another thread's output on one log line (see
    ``ray_jobs/whole_lines.py``, which prevents it in our own job drivers): the message is
    still whole, so it is found wherever it starts, and the text around it stays a log line.
    """
    whole = parse_pipes_message(line)
    if whole is not None:
        return [whole], ""
    text = strip_ansi(line)
    messages, rest, pos = [], [], 0
    while (start := text.find(_MESSAGE_START, pos)) >= 0:
        try:
            msg, end = _decoder.raw_decode(text, start)
        except ValueError:
            rest.append(text[pos:start + 1])
            pos = start + 1
            continue
        rest.append(text[pos:start])
        messages.append(msg)
        pos = end
    if not messages:
        return [], text.rstrip()
    rest.append(text[pos:])
    return messages, "".join(rest).strip()


class BackendJobLogReader(PipesMessageReader):
    """Follows a job's driver log through the backend session.

    Pipes messages go to the handler, each once (a stamped message read again is dropped:
    :mod:`.pipes_once`); every other line becomes an info entry in the Dagster event log;
    metric custom messages are also recorded live as asset observations.
    """

    def __init__(self, session: ClusterSession, context: Any, drain_timeout_s: float = 60.0,
                 forward_lines: bool = True, on_message: Callable[[Any], None] | None = None):
        self._session = session
        self._on_message = on_message
        self._context = context
        self._drain_timeout_s = drain_timeout_s
        self._forward_lines = forward_lines
        self._job_id: str | None = None
        self._closed = threading.Event()
        self._launched_or_closed = threading.Event()
        # set when the job's Pipes session closed (its last message) or its log stream ended:
        # the job is about to be (or already is) terminal
        self.job_ending = threading.Event()
        self._thread: threading.Thread | None = None
        self.lines_forwarded = 0
        self.messages_received = 0
        self._seen = SeenMessages()  # each stamped message once (pipes_once)

    @property
    def expected_writer_count(self) -> int:
        """One writer: the job's driver. (Dagster's own property is a preview API that warns on
        every Pipes session; this reader answers it without the warning.)"""
        return 1

    def on_launched(self, launched_payload: Any) -> None:
        self._job_id = launched_payload["extras"][JOB_ID_KEY]
        self._launched_or_closed.set()
        super().on_launched(launched_payload)

    def messages_are_readable(self, params: PipesParams) -> bool:
        return self._job_id is not None

    @contextlib.contextmanager
    def read_messages(self, handler: PipesMessageHandler) -> Iterator[PipesParams]:
        self._thread = threading.Thread(target=self._pump, args=(handler,), daemon=True,
                                        name="pipes-ray-job-log")
        self._thread.start()
        try:
            yield {PipesDefaultMessageWriter.STDIO_KEY: PipesDefaultMessageWriter.STDOUT}
        finally:
            self._closed.set()
            self._launched_or_closed.set()
            self._thread.join(timeout=self._drain_timeout_s)

    def no_messages_debug_text(self) -> str:
        return "Read the Ray job's driver log through the backend; no Pipes messages were found in it."

    def _pump(self, handler: PipesMessageHandler) -> None:
        self._launched_or_closed.wait()
        if self._job_id is None:
            return
        try:
            self._follow(handler)
        finally:
            self.job_ending.set()

    def _follow(self, handler: PipesMessageHandler) -> None:
        try:
            for line in self._session.logs(self._job_id, follow=True):
                self._take(handler, line)
        except Exception as exc:  # a broken log stream must not fail the step by itself
            self._context.log.warning(f"[pipes] following the log of Ray job {self._job_id} failed: {exc}")

    def _take(self, handler: PipesMessageHandler, line: str) -> None:
        """One line of the driver log: its text to the event log, its Pipes messages to the handler."""
        messages, text = split_pipes_messages(line)
        if text and self._forward_lines:
            (self._context.log.debug if is_chatter(text) else self._context.log.info)(text)
            self.lines_forwarded += 1
        for msg in messages:
            self._handle(handler, msg)

    def _handle(self, handler: PipesMessageHandler, msg: dict) -> None:
        if not self._seen.first_time(msg):
            self._context.log.debug(f"[pipes] message {msg.get(STAMP_FIELD)} of Ray job "
                                    f"{self._job_id} read again (a replayed log); dropped")
            return
        self.messages_received += 1
        handler.handle_message(msg)
        self._observe(msg)
        if msg.get("method") == "closed":
            self.job_ending.set()
        self._deliver(msg)

    def _deliver(self, msg: dict) -> None:
        """Custom messages to ``on_message`` as they arrive (a range job's per-day results)."""
        if self._on_message is None or msg.get("method") != "report_custom_message":
            return
        try:
            self._on_message((msg.get("params") or {}).get("payload"))
        except Exception as exc:
            self._context.log.warning(f"[pipes] a message of Ray job {self._job_id} was not taken: {exc}")

    def _partition(self, values: dict) -> str | None:
        """The partition of a live record: the run's one, else the day a range job named."""
        if self._context.has_partition_key:
            return self._context.partition_key
        day = values.get("day")
        try:
            return day if isinstance(day, str) and day in self._context.partition_keys else None
        except Exception:           # not a partitioned run
            return None

    def _observe(self, msg: dict) -> None:
        if msg.get("method") != "report_custom_message":
            return
        payload = (msg.get("params") or {}).get("payload") or {}
        kind, values = payload.get("kind"), payload.get("values")
        if kind not in LIVE_METRIC_KINDS or not isinstance(values, dict):
            return
        metadata = {k: v for k, v in values.items() if isinstance(v, (int, float, str, bool))}
        metadata["kind"] = kind
        try:
            self._context.log_event(dg.AssetObservation(
                asset_key=self._context.asset_key, partition=self._partition(values), metadata=metadata))
        except Exception:
            self._context.log.info(f"[metrics:{kind}] {json.dumps(metadata, sort_keys=True, default=str)}")


def stop_and_wait(session: ClusterSession, job_id: str, timeout_s: float = STOP_TIMEOUT_S) -> JobState | None:
    """Stop the job and wait until it has ended: a stopped driver must not write after we clean up."""
    session.stop(job_id)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = session.status(job_id).state
        except Exception:           # the cluster is going away: nothing runs there any more
            return None
        if state.terminal:
            return state
        time.sleep(0.2)
    return None


@dataclasses.dataclass
class RayJobOutcome:
    job_id: str
    state: JobState
    message: str
    result: dict[str, Any]
    custom_messages: list[Any]
    lines_forwarded: int


def wait_until_terminal(session: ClusterSession, job_id: str, ending: threading.Event, *,
                        idle_poll_s: float = 1.0, soon_poll_s: float = 0.05, max_soon_poll_s: float = 0.5,
                        sleep: Callable[[float], Any] = time.sleep) -> JobStatus:
    """The job's status once it is terminal.

    While the job runs, its status is read every ``idle_poll_s``, or at once when ``ending``
    is set (its Pipes session closed or its log stream ended: it is exiting). From then on
    the status is read every ``soon_poll_s``, doubling up to ``max_soon_poll_s``, so the
    step goes on within a fraction of a second of the job's exit instead of up to a whole
    ``idle_poll_s`` later.
    """
    soon = soon_poll_s
    while True:
        status = session.status(job_id)
        if status.state.terminal:
            return status
        if ending.is_set():
            sleep(soon)
            soon = min(max_soon_poll_s, soon * 2)
        else:
            ending.wait(idle_poll_s)


def run_ray_job(context: Any, session: ClusterSession, job: JobSpec, poll_interval_s: float = 1.0,
                extras: dict[str, Any] | None = None,
                on_message: Callable[[Any], None] | None = None) -> RayJobOutcome:
    """Submit ``job`` with the Pipes bootstrap, stream it into ``context``, wait, return its result.

    ``on_message`` receives each custom message payload as it arrives, so what a job reported
    before it failed or was stopped is still there. Raises ``dg.Failure`` (with KubeRay's /
    Ray's reason verbatim) when the job does not succeed; if the Dagster run is interrupted,
    stops the job and waits (bounded) until it has ended before re-raising.
    """
    reader = BackendJobLogReader(session, context, on_message=on_message)
    with open_pipes_session(context=context, message_reader=reader,
                            context_injector=PipesEnvContextInjector(), extras=extras) as pipes:
        job = dataclasses.replace(job, env_vars={**job.env_vars, **pipes.get_bootstrap_env_vars()})
        job_id = session.submit(job)
        context.log.info(f"[pipes] Ray job {job_id} submitted to {session.name} "
                         f"({session.dashboard_url or 'no dashboard'})")
        pipes.report_launched({"extras": {JOB_ID_KEY: job_id}})
        try:
            status = wait_until_terminal(session, job_id, reader.job_ending, idle_poll_s=poll_interval_s)
        except (dg.DagsterExecutionInterruptedError, KeyboardInterrupt):
            context.log.warning(f"[pipes] run interrupted: stopping Ray job {job_id}")
            stop_and_wait(session, job_id)
            raise
        context.log.info(f"[pipes] Ray job {job_id} {status.state.value}")
        # the log follower reads what is left at once instead of waiting for the stream to close
        session.job_finished(job_id)
    custom = pipes.get_custom_messages()
    result = next((m["values"] for m in reversed(custom)
                   if isinstance(m, dict) and m.get("kind") == "result"), {})
    outcome = RayJobOutcome(job_id, status.state, status.message, result, custom, reader.lines_forwarded)
    if status.state != JobState.SUCCEEDED:
        raise dg.Failure(
            description=f"Ray job {job_id} ended {status.state.value}: {status.message}",
            metadata={"ray_job_id": job_id, "state": status.state.value},
        )
    if not result:
        raise dg.Failure(description=f"Ray job {job_id} succeeded but reported no result over Pipes")
    return outcome
