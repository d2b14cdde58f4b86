"""The controller lease: how the Ray side of a run knows that the process driving it still lives.

The process that drives a Dagster run (the run worker, ``ads-ranking pipeline run``, a run pod)
renews a small JSON document under the storage root every ``interval_s``
(:class:`LeaseWriter`). Every Ray job of the run watches it (``ray_jobs/lease_watch.py``): a
lease not renewed for ``timeout_s`` means the controller is gone (SIGKILL, OOM kill, a lost
pod, a reboot), and the job stops itself instead of training, evaluating or scoring for nobody.
The storage root is the one place both sides already reach (a local path locally; object
storage or the shared volume on KubeRay), so no Kubernetes access is needed from the Ray pods.

A lease that is *released* (deleted) on purpose also ends the watch: the run is over.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from ads_ranking_pipelines.storage import fs

LEASE_ENV = "ADS_RANKING_CONTROLLER_LEASE"
DEFAULT_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LeaseSpec:
    """Where a run's lease is and how stale it may get: what the Ray jobs receive."""

    uri: str
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def interval_s(self) -> float:
        """How often the controller renews it: six renewals fit in one timeout."""
        return max(0.5, self.timeout_s / 6)

    def to_env(self) -> dict[str, str]:
        return {LEASE_ENV: json.dumps({"uri": self.uri, "timeout_s": self.timeout_s})}

    @classmethod
    def from_env(cls, environ: dict[str, str] | os._Environ) -> "LeaseSpec | None":
        raw = environ.get(LEASE_ENV)
        if not raw:
            return None
        doc = json.loads(raw)
        return cls(uri=str(doc["uri"]), timeout_s=float(doc["timeout_s"]))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def read_renewal(uri: str) -> str | None:
    """The lease's last renewal stamp, or None when there is none (released, never taken, or
    unreadable: reading it is never fatal)."""
    try:
        return str(fs.read_json(uri)["renewed_at"])
    except (FileNotFoundError, OSError, ValueError, KeyError, TypeError):
        return None


class LeaseWatch:
    """Decides, from successive reads, whether the lease is still being renewed.

    Staleness is measured on the watcher's own monotonic clock (how long the stamp has not
    changed), never by comparing the stamp with this machine's clock: the controller's and
    the Ray pods' clocks need not agree.
    """

    def __init__(self, spec: LeaseSpec, clock: Callable[[], float]) -> None:
        self.spec, self._clock = spec, clock
        self._stamp: str | None = None
        self._since = clock()

    def observe(self, stamp: str | None) -> float | None:
        """Record one read; the seconds without renewal when that exceeds the timeout, else None."""
        now = self._clock()
        if stamp is not None and stamp != self._stamp:
            self._stamp, self._since = stamp, now
            return None
        idle = now - self._since
        return idle if idle > self.spec.timeout_s else None


class LeaseWriter:
    """Takes the lease and renews it from a daemon thread until :meth:`release`.

    A context manager: leaving the block releases the lease (deletes the document). The
    first renewal is written before ``__enter__`` returns, so no job ever starts before it.
    """

    def __init__(self, spec: LeaseSpec, holder: str | None = None) -> None:
        self.spec = spec
        self.holder = holder or f"{socket.gethostname()}/{os.getpid()}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def renew(self) -> None:
        fs.write_json_atomic(self.spec.uri, {"holder": self.holder, "renewed_at": _now().isoformat(),
                                             "timeout_s": self.spec.timeout_s})

    def _loop(self) -> None:
        while not self._stop.wait(self.spec.interval_s):
            try:
                self.renew()
            except OSError:      # a storage hiccup: the next renewal may get through
                continue

    def __enter__(self) -> "LeaseWriter":
        self.renew()
        self._thread = threading.Thread(target=self._loop, name="controller-lease", daemon=True)
        self._thread.start()
        return self

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            fs_, path = fs.filesystem(self.spec.uri)
            fs_.delete_file(path)
        except (FileNotFoundError, OSError):
            pass

    def __exit__(self, *exc: object) -> None:
        self.release()
