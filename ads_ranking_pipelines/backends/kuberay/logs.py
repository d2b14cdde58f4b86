"""Following a RayJob's driver log: the log of its submitter pod (``K8sJobMode``), each line
delivered once.

Two ways a line could come twice, and what is done about each:

* **A broken stream** of the same pod: the stream is opened with ``timestamps=true``; when it
  breaks it is reopened with ``sinceSeconds`` and lines already yielded (by timestamp, and
  count at that timestamp) are skipped.
* **A retried submitter.** KubeRay's submitter Job (backoffLimit 2 by default,
  rayjob_controller.go ``createNewK8sJob``) runs ``if ! ray job status …; then ray job submit
  --no-wait …; fi; ray job logs --follow …`` (common/job.go ``BuildJobSubmitCommand``): a
  retried pod finds the job already submitted and prints the whole driver log again from its
  first line. :class:`ReplayFilter` drops the replayed prefix and delivers what is new.

The submitter's own lines around the driver log (the dashboard wait loop's echo, the Ray CLI's
timestamped ``cli.py`` records: ``submit``'s, the ``ray job logs`` banner, the final status;
:mod:`.submitter_lines`) are not driver output: they are logged at DEBUG, never delivered, and
never part of the replay matching - a retried pod's banner has a new timestamp. Pipes messages
are also deduplicated by the reader (``defs/pipes_once.py``), whatever a pod prints.

A pod of a *new* submitter Job (another ``controller-uid``) is not a replay: KubeRay deletes
the Job with the cluster when the RayJob is suspended (Kueue evicted it) or retried, and the
new Job submits the job again on a new cluster - a new log, from its first line, which starts
with a fresh :class:`ReplayFilter`.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.kuberay.client import KubeError
from ads_ranking_pipelines.backends.kuberay.context import KubeRayContext
from ads_ranking_pipelines.backends.kuberay.submitter_lines import (
    is_cli_record,
    is_dashboard_wait,
    opens_status_message,
)
from ads_ranking_pipelines.backends.ray_job_api import strip_ansi

log = logging.getLogger(__name__)

# The Job controller's label with the uid of the Job a pod belongs to (the prefixed one since 1.27).
JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def _stamp_key(stamp: str) -> str:
    """A string that sorts like the RFC 3339 time (Go trims trailing zeros of the fraction)."""
    match = _STAMP.match(stamp)
    if not match:
        return stamp
    return f"{match[1]}.{(match[2] or '').ljust(9, '0')}{match[3]}"


class ReplayFilter:
    """Drops the submitter's own lines, and the lines a new submitter pod replays from the
    driver log already delivered.

    ``delivered`` holds every driver line delivered so far, in order. When a new pod starts,
    its driver lines (the submitter's own skipped) are matched against ``delivered`` from the
    first occurrence of its first line on, one by one; the matched run is dropped. The first
    line that does not continue the run (or any line once the run has reached the end of
    ``delivered``) is new, and so is everything after it.
    """

    def __init__(self) -> None:
        self.delivered: list[str] = []
        self._cursor: int | None = None
        self._replaying = False
        self._in_status_message = False

    def new_pod(self) -> None:
        self._cursor = None
        self._replaying = bool(self.delivered)
        self._in_status_message = False

    def _submitters(self, line: str) -> bool:
        """Whether ``line`` is the submitter's own (not driver output)."""
        if self._in_status_message or is_dashboard_wait(line):
            return True
        if is_cli_record(line):
            self._in_status_message = opens_status_message(line)
            return True
        return False

    def accept(self, line: str) -> bool:
        """Whether ``line`` is new driver output (and record it as delivered)."""
        if self._submitters(line):
            log.debug("submitter: %s", strip_ansi(line))
            return False
        if self._replaying:
            if self._cursor is None:
                try:
                    self._cursor = self.delivered.index(line) + 1
                    return False
                except ValueError:
                    self._replaying = False
            elif self._cursor < len(self.delivered) and self.delivered[self._cursor] == line:
                self._cursor += 1
                return False
            else:
                self._replaying = False
        self.delivered.append(line)
        return True


class LogFollower:
    """Follow the newest submitter pod until the RayJob is terminal.

    ``pods()`` lists the submitter Job's pods oldest first; ``terminal()`` says whether the
    RayJob is done (True once it is gone).
    """

    MAX_BROKEN_STREAMS = 20

    def __init__(self, ctx: KubeRayContext, namespace: str, name: str, *,
                 pods: Callable[[], list[dict[str, Any]]], terminal: Callable[[], bool]) -> None:
        self.ctx = ctx
        self.namespace = namespace
        self.name = name
        self._pods = pods
        self._terminal = terminal
        self.replay = ReplayFilter()

    def _next_pod(self, finished: set[str]) -> tuple[str | None, str | None]:
        """The submitter pod to read next and its phase. A Job runs one pod at a time, so the
        active one (Pending / Running) is it; pods that ended before we read them are then
        skipped (the active pod prints the whole driver log again). With no active pod, an
        ended pod not read yet. Creation times have one-second resolution, so they do not
        order pods made within the same second; phases do."""
        unread = [p for p in self._pods() if p["metadata"]["name"] not in finished]
        active = [p for p in unread if (p.get("status") or {}).get("phase") in
                  ("Pending", "Running", None)]
        if active:
            finished.update(p["metadata"]["name"] for p in unread if p not in active)
        pod = (active or unread or [None])[-1]
        if pod is None:
            return None, None
        return pod["metadata"]["name"], (pod.get("status") or {}).get("phase")

    def _job_uid(self, pod_name: str) -> str | None:
        """The uid of the submitter Job that ``pod_name`` belongs to (None: not labelled)."""
        for pod in self._pods():
            if pod["metadata"]["name"] == pod_name:
                labels = pod["metadata"].get("labels") or {}
                return next((labels[k] for k in JOB_UID_LABELS if labels.get(k)), None)
        return None

    def _phase(self, pod_name: str) -> str | None:
        for pod in self._pods():
            if pod["metadata"]["name"] == pod_name:
                return (pod.get("status") or {}).get("phase")
        return None

    def lines(self) -> Iterator[str]:
        import urllib3

        finished: set[str] = set()
        position: dict[str, tuple[str, int]] = {}  # pod -> (last stamp key, lines at it)
        last_line_at: dict[str, float] = {}
        broken = 0
        current: str | None = None
        current_job: str | None = None
        while True:
            terminal = self._terminal()
            pod_name, phase = self._next_pod(finished)
            if pod_name is None or phase == "Pending":
                if terminal:
                    return
                self.ctx.sleep(self.ctx.poll_interval_s)
                continue
            if pod_name != current:
                current = pod_name
                job_uid = self._job_uid(pod_name)
                if job_uid and current_job and job_uid != current_job:
                    self.replay = ReplayFilter()  # a new submitter Job: a new log
                else:
                    self.replay.new_pod()
                current_job = job_uid or current_job
            since = None
            if pod_name in position:
                since = int(time.time() - last_line_at.get(pod_name, time.time())) + 5
            try:
                for text in self._stream(pod_name, since, position, last_line_at):
                    if self.replay.accept(text):
                        yield text
            except KubeError as exc:
                if exc.status in (400, 404):  # not started yet, or already gone
                    if terminal:
                        return
                    self.ctx.sleep(self.ctx.poll_interval_s)
                    continue
                raise BackendError(f"cannot follow the log of RayJob {self.namespace}/{self.name}: "
                                   f"{exc}") from exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                broken += 1
                if broken > self.MAX_BROKEN_STREAMS:
                    raise BackendError(f"the log stream of RayJob {self.namespace}/{self.name} "
                                       f"broke {broken} times; last: {exc}") from exc
                log.warning("log stream of pod %s broke (%s); reattaching", pod_name,
                            type(exc).__name__)
                position.setdefault(pod_name, ("", 0))
                last_line_at.setdefault(pod_name, time.time())
                self.ctx.sleep(min(self.ctx.poll_interval_s, 1.0))
                continue
            # The server ended the stream: the container has exited (or the stream was cut).
            position.setdefault(pod_name, ("", 0))
            last_line_at.setdefault(pod_name, time.time())
            if self._phase(pod_name) in ("Succeeded", "Failed", None):
                finished.add(pod_name)
            else:
                self.ctx.sleep(min(self.ctx.poll_interval_s, 1.0))

    def _stream(self, pod_name: str, since: int | None, position: dict[str, tuple[str, int]],
                last_line_at: dict[str, float]) -> Iterator[str]:
        """The pod's lines after ``position[pod_name]`` (timestamp key, lines at it)."""
        last_key, skip = position.get(pod_name, ("", 0))
        for raw in self.ctx.client.stream_pod_log(self.namespace, pod_name, timestamps=True,
                                                  since_seconds=since):
            stamp, _, text = raw.partition(" ")
            key = _stamp_key(stamp)
            if key < last_key:
                continue
            if key == last_key and skip > 0:
                skip -= 1
                continue
            prev_key, prev_count = position.get(pod_name, ("", 0))
            position[pod_name] = (key, prev_count + 1 if key == prev_key else 1)
            last_key, skip = key, 0
            last_line_at[pod_name] = time.time()
            yield text
