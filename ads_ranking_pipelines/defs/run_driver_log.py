"""The run driver's one log, split among the steps it serves (``contracts/run_driver.py``).

The run's one Ray job driver serves the steps one after another, so its log is followed once
(one thread, :class:`DriverLog`) and each line goes to the step it belongs to: the step whose
begin marker came last, else (before the first marker: the driver starting up, or failing to)
the step waiting for it; a line printed while no step waits goes to the next one. A step's reader (:class:`StepLogReader`) is Pipes'
:class:`~.pipes.BackendJobLogReader` fed from that step's queue: it forwards the step's lines
to the step's event log, hands its Pipes messages to the step's session, and ends at the step's
end marker, or when the driver's log ends (the driver is gone).
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
from typing import Any

from dagster import PipesMessageHandler

from ads_ranking_pipelines.backends.base import ClusterSession
from ads_ranking_pipelines.backends.ray_job_api import strip_ray_prefix
from ads_ranking_pipelines.contracts.pipes_stamp import STAMP_FIELD, stamp_of, writer_step
from ads_ranking_pipelines.contracts.run_driver import parse_marker
from ads_ranking_pipelines.defs.pipes import BackendJobLogReader

log = logging.getLogger(__name__)
END = object()          # a step's lines are over
PENDING_LINES = 1000    # lines printed while no step waits, kept for the next one


class DriverLog:
    """Follows the driver job's log in a daemon thread and routes each line to its step."""

    def __init__(self, session: ClusterSession, job_id: str) -> None:
        self.session, self.job_id = session, job_id
        self.ended = threading.Event()            # the log stream ended: the driver is gone
        self._lock = threading.Lock()
        self._routes: dict[str, queue.Queue] = {}
        self._current: str | None = None           # the step whose begin marker came last
        self._waiting: str | None = None           # the step Dagster waits for now
        self._pending: collections.deque[str] = collections.deque(maxlen=PENDING_LINES)  # no step waits
        self._over: set[str] = set()                # steps whose end marker came before they waited
        self._thread = threading.Thread(target=self._follow, daemon=True, name=f"run-driver-log-{job_id}")
        self._thread.start()

    def register(self, step_id: str) -> queue.Queue:
        with self._lock:
            lines = self._routes[step_id] = queue.Queue()
            self._waiting = step_id
            while self._pending:
                lines.put(self._pending.popleft())
            if self.ended.is_set() or step_id in self._over:
                lines.put(END)
        return lines

    def unregister(self, step_id: str) -> None:
        with self._lock:
            self._routes.pop(step_id, None)
            if self._waiting == step_id:
                self._waiting = None

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout=timeout_s)

    def _follow(self) -> None:
        try:
            for line in self.session.logs(self.job_id, follow=True):
                self._route(line)
        except Exception as exc:  # a broken stream must not fail a step by itself
            log.warning("following the log of the run driver %s failed: %s", self.job_id, exc)
        finally:
            with self._lock:
                self.ended.set()
                for lines in self._routes.values():
                    lines.put(END)

    def _route(self, line: str) -> None:
        marker = parse_marker(strip_ray_prefix(line).strip())
        with self._lock:
            if marker is not None and marker[0] == "begin":
                self._current = marker[1]
                return
            if marker is not None:
                if self._current == marker[1]:
                    self._current = None
                target, line = marker[1], END
            else:
                target = self._current or self._waiting
            lines = self._routes.get(target) if target else None
            if lines is None and line is not END:
                self._pending.append(line)
            elif lines is None and target:
                self._over.add(target)
        if lines is not None:
            lines.put(line)


class StepLogReader(BackendJobLogReader):
    """One step's share of the driver log (see the module docstring). Only messages stamped
    by the step's own writers (its step id, from any attempt of the driver) or not stamped at
    all are taken."""

    def __init__(self, session: ClusterSession, context: Any, lines: queue.Queue, step_id: str,
                 **kwargs: Any) -> None:
        super().__init__(session, context, **kwargs)
        self._lines, self.step_id = lines, step_id

    def _follow(self, handler: PipesMessageHandler) -> None:
        while True:
            line = self._lines.get()
            if line is END:
                return
            self._take(handler, line)

    def _handle(self, handler: PipesMessageHandler, msg: dict) -> None:
        stamp = stamp_of(msg)
        if stamp is not None and writer_step(stamp[0]) != self.step_id:
            self._context.log.debug(f"[pipes] message {msg.get(STAMP_FIELD)} of another step dropped")
            return
        super()._handle(handler, msg)
