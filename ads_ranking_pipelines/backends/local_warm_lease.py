"""The leases on a warm local cluster: one file per run using it, renewed by that run's process.

A run that uses a warm cluster (``local_warm.py``) holds ``<state_dir>/<cluster>.leases/<run
id>.json`` for as long as its session lasts: its run id, the process (PID and start time, as in
the controller tag) and a renewal stamp written every ``timeout_s / 6``. When the session ends
the file is marked released (``released_at``). A lease is *live* while it is not released, its
process runs (same PID and start time) and its last renewal is younger than ``timeout_s``; a
holder that died (SIGKILL, OOM) leaves a lease that is not live, so it keeps nothing.

Leases are taken, and warm clusters judged and stopped by the GC, under one ``flock`` on
``<state_dir>/.warm.lock``: no run takes a lease on a cluster the GC has decided to stop.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.processes import process_alive, process_start

LOCK_FILE = ".warm.lock"


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class WarmLease:
    """One run's lease on a warm cluster, as its file holds it."""

    run_id: str
    pid: int
    start: str
    renewed_at: str
    timeout_s: float
    released_at: str = ""


def holder_alive(lease: WarmLease) -> bool:
    """The lease's process still runs (the same PID and start time)."""
    return process_alive(lease.pid, lease.start)


@contextlib.contextmanager
def warm_lock(state_dir: str | Path) -> Iterator[None]:
    """The state directory's warm lock (exclusive, released with the block or the process)."""
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    with open(Path(state_dir) / LOCK_FILE, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_leases(state_dir: str | Path, name: str) -> list[WarmLease]:
    """The leases recorded for cluster ``name`` (an unreadable file is skipped)."""
    found = []
    for path in sorted(LocalRayCluster.lease_dir(Path(state_dir), name).glob("*.json")):
        try:
            found.append(WarmLease(**json.loads(path.read_text())))
        except (OSError, ValueError, TypeError):
            continue
    return found


def _write(path: Path, lease: WarmLease) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(asdict(lease)))
    tmp.replace(path)


class LeaseHolder:
    """This process's lease on one cluster: taken by :meth:`take` (under the warm lock), renewed
    from a daemon thread, marked released by :meth:`release`."""

    def __init__(self, state_dir: str | Path, cluster: str, run_id: str, timeout_s: float) -> None:
        self.state_dir, self.cluster = Path(state_dir), cluster
        self.path = LocalRayCluster.lease_dir(self.state_dir, cluster) / f"{run_id}.json"
        pid = os.getpid()
        self.lease = WarmLease(run_id, pid, process_start(pid), _now(), timeout_s)
        self._stop = threading.Event()
        self._write_lock = threading.Lock()     # the renewing thread and the caller share a temp file
        self._thread: threading.Thread | None = None

    def take(self) -> "LeaseHolder":
        """Write the lease and start renewing it; other runs' leases that are over are dropped."""
        self.renew()
        for other in read_leases(self.state_dir, self.cluster):
            if other.run_id != self.lease.run_id and (other.released_at or not holder_alive(other)):
                with contextlib.suppress(OSError):
                    (self.path.parent / f"{other.run_id}.json").unlink()
        self._thread = threading.Thread(target=self._loop, name=f"warm-lease-{self.cluster}", daemon=True)
        self._thread.start()
        return self

    def renew(self) -> None:
        with self._write_lock:
            self.lease = replace(self.lease, renewed_at=_now())
            _write(self.path, self.lease)

    def _loop(self) -> None:
        while not self._stop.wait(max(0.5, self.lease.timeout_s / 6)):
            with contextlib.suppress(OSError):     # a hiccup: the next renewal may get through
                self.renew()

    def release(self) -> None:
        """Stop renewing; mark the lease released (its stamp starts the cluster's idle time), or
        drop the cluster's lease folder when the cluster is gone (a start that failed)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with warm_lock(self.state_dir):
            if LocalRayCluster.state_file(self.state_dir, self.cluster).exists():
                now = _now()
                with self._write_lock:
                    self.lease = replace(self.lease, renewed_at=now, released_at=now)
                    _write(self.path, self.lease)
            else:
                shutil.rmtree(self.path.parent, ignore_errors=True)
