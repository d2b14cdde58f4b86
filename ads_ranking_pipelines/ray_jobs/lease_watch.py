"""A Ray job stops itself when the process driving its Dagster run is gone.

The controller renews its lease under the storage root (``storage/lease.py``); the job's
driver reads it every few seconds from a daemon thread. When the lease has not been renewed
for its timeout (the controller was SIGKILLed, OOM-killed, its pod lost), the driver says so on
its log and exits at once: Ray ends the job (FAILED) and the job's actors and tasks with it, so
no worker keeps training, evaluating or scoring for nobody, and no model version is written
after that. On KubeRay the RayJob then fails and KubeRay's deletion rules remove its cluster.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

from ads_ranking_pipelines.storage.lease import LeaseSpec, LeaseWatch, read_renewal

EXIT_CONTROLLER_GONE = 75


def _stop(spec: LeaseSpec, idle_s: float) -> None:
    print(f"the run's controller is gone: its lease {spec.uri} was not renewed for {idle_s:.0f}s "
          f"(timeout {spec.timeout_s:.0f}s); stopping this Ray job", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(EXIT_CONTROLLER_GONE)


def watch(spec: LeaseSpec, on_lost: Callable[[LeaseSpec, float], None] = _stop,
          read: Callable[[str], str | None] = read_renewal) -> threading.Thread:
    """Start the watching thread (a daemon); ``on_lost`` runs once when the lease goes stale."""
    state = LeaseWatch(spec, time.monotonic)
    period = min(5.0, spec.interval_s)

    def loop() -> None:
        while True:
            idle = state.observe(read(spec.uri))
            if idle is not None:
                on_lost(spec, idle)
                return
            time.sleep(period)

    thread = threading.Thread(target=loop, name="controller-lease-watch", daemon=True)
    thread.start()
    return thread


def watch_from_env(environ: dict[str, str] | os._Environ | None = None) -> threading.Thread | None:
    """Watch the lease the job was given (``ADS_RANKING_CONTROLLER_LEASE``), if any: a job run by
    hand has none and is not watched."""
    spec = LeaseSpec.from_env(os.environ if environ is None else environ)
    return watch(spec) if spec is not None else None
