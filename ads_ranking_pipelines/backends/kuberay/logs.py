"""Following a RayJob's driver log: the log of its submitter pod (``K8sJobMode``)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.kuberay.client import KubeError

if TYPE_CHECKING:
    from ads_ranking_pipelines.backends.kuberay.backend import KubeRayBackend

log = logging.getLogger(__name__)

_STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")


def _stamp_key(stamp: str) -> str:
    """A string that sorts like the RFC 3339 time (Go trims trailing zeros of the fraction)."""
    match = _STAMP.match(stamp)
    if not match:
        return stamp
    return f"{match[1]}.{(match[2] or '').ljust(9, '0')}{match[3]}"


class LogFollower:
    """Follow the newest submitter pod until the RayJob is terminal.

    The stream is opened with ``timestamps=true``; if it breaks, it is reopened with
    ``sinceSeconds`` and lines already yielded (by timestamp) are skipped. A retried submitter
    (a new pod of the Job) is followed from its start.
    """

    MAX_BROKEN_STREAMS = 20

    def __init__(self, backend: "KubeRayBackend", namespace: str, name: str) -> None:
        self.backend = backend
        self.namespace = namespace
        self.name = name

    def _terminal(self) -> bool:
        try:
            return self.backend.job_status(self.namespace, self.name).state.terminal
        except BackendError:
            return True  # deleted: nothing more will come

    def _phase(self, pod_name: str) -> str | None:
        for pod in self.backend.submitter_pods(self.namespace, self.name):
            if pod["metadata"]["name"] == pod_name:
                return (pod.get("status") or {}).get("phase")
        return None

    def lines(self) -> Iterator[str]:
        import urllib3

        backend, client = self.backend, self.backend.client
        finished: set[str] = set()
        position: dict[str, tuple[str, int]] = {}  # pod -> (last stamp key, lines at it)
        last_line_at: dict[str, float] = {}
        broken = 0
        while True:
            terminal = self._terminal()
            pods = backend.submitter_pods(self.namespace, self.name)
            pod = pods[-1] if pods else None
            pod_name = pod["metadata"]["name"] if pod else None
            phase = (pod.get("status") or {}).get("phase") if pod else None
            if pod_name is None or phase == "Pending" or pod_name in finished:
                if terminal:
                    return
                backend._sleep(backend.poll_interval_s)
                continue
            since = None
            if pod_name in position:
                since = int(time.time() - last_line_at.get(pod_name, time.time())) + 5
            last_key, skip = position.get(pod_name, ("", 0))
            try:
                for raw in client.stream_pod_log(self.namespace, pod_name, timestamps=True,
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
            except KubeError as exc:
                if exc.status in (400, 404):  # not started yet, or already gone
                    if terminal:
                        return
                    backend._sleep(backend.poll_interval_s)
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
                backend._sleep(min(backend.poll_interval_s, 1.0))
                continue
            # The server ended the stream: the container has exited (or the stream was cut).
            position.setdefault(pod_name, ("", 0))
            last_line_at.setdefault(pod_name, time.time())
            if self._phase(pod_name) in ("Succeeded", "Failed", None):
                finished.add(pod_name)
            else:
                backend._sleep(min(backend.poll_interval_s, 1.0))
