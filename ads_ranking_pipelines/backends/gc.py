"""Garbage collection of Ray clusters and RayJobs we made that nobody will clean up.

What the operator and our own teardown cannot cover:

* KubeRay with ``shutdownAfterJobFinishes`` (operators without the ``RayJobDeletionPolicy``
  gate) deletes only a finished RayJob's cluster: the RayJob CR and its submitter Job stay.
  RayJobs on a long-lived cluster (``clusterSelector``) are deleted by nothing in ``shutdown``
  mode. A run whose process died (OOM-killed pod, SIGKILL) never tears down what it made.
* The local backend: a run killed with SIGKILL leaves its cluster's Ray processes running.

The collector lists only objects carrying our ``app.kubernetes.io/managed-by`` label (and
local state files), decides per object with the pure :func:`kuberay_garbage` /
:func:`local_garbage`, and deletes what they return. Long-lived clusters made by ``cluster
create`` are never collected, nor is anything whose Dagster run is still going.

``run_status(run_id)`` answers ``"finished"`` (SUCCESS, FAILURE, CANCELED), ``"running"`` (any
other status), ``"unknown"`` (the instance has no such run) or ``None`` (no Dagster instance to
ask: run-based rules are then skipped).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ads_ranking_pipelines.kuberay.labels import LABEL_DAGSTER_RUN_ID

if TYPE_CHECKING:
    from ads_ranking_pipelines.backends.kuberay import KubeRayBackend

log = logging.getLogger(__name__)

RunStatus = Callable[[str], "str | None"]
WARM_KIND = "warm local cluster"
TERMINAL_DEPLOYMENT = ("Complete", "Failed", "ValidationFailed")


@dataclass(frozen=True)
class Garbage:
    """One object to delete and why."""

    backend: str
    kind: str            # RayJob | RayCluster | local cluster
    name: str
    namespace: str | None
    reason: str
    run_id: str | None = None


def _age_s(stamp: str | None, now: dt.datetime) -> float | None:
    if not stamp:
        return None
    try:
        when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return (now - when).total_seconds()


def _run_reason(run_id: str | None, run_status: RunStatus, age: float | None,
                grace_s: float) -> str | None:
    """Why an object of run ``run_id`` is garbage as far as the run goes, or None."""
    if not run_id:
        return None
    status = run_status(run_id)
    if status == "finished":
        return f"its Dagster run {run_id} has finished"
    if status == "unknown" and age is not None and age >= grace_s:
        return f"its Dagster run {run_id} is unknown to the instance ({age:.0f}s old)"
    return None


def kuberay_garbage(rayjobs: list[Mapping[str, Any]], run_status: RunStatus, *,
                    now: dt.datetime, grace_s: float, ttl_s: float) -> list[Garbage]:
    """The RayJobs to delete: finished longer than ``ttl_s`` ago (the operator left them),
    or belonging to a finished or unknown Dagster run. A RayJob's cluster and submitter go
    with it (owner references)."""
    found = []
    for obj in rayjobs:
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        if meta.get("deletionTimestamp"):
            continue
        run_id = (meta.get("labels") or {}).get(LABEL_DAGSTER_RUN_ID)
        reason = None
        ended = _age_s(status.get("endTime"), now)
        if status.get("jobDeploymentStatus") in TERMINAL_DEPLOYMENT and ended is not None \
                and ended >= ttl_s:
            reason = f"finished {ended:.0f}s ago ({status['jobDeploymentStatus']}) and left behind"
        reason = reason or _run_reason(run_id, run_status, _age_s(meta.get("creationTimestamp"), now),
                                       grace_s)
        if reason:
            found.append(Garbage("kuberay", "RayJob", meta.get("name", "?"), meta.get("namespace"),
                                 reason, run_id))
    return found


def warm_reason(state: Any, leases: list[Any], holder_alive: Callable[[Any], bool], *,
                now: dt.datetime) -> str | None:
    """Reap or keep a warm cluster (``state.keep_warm_s`` > 0): why to stop it, or None to keep it.

    Kept while one lease is live: not released, its process running (``holder_alive``) and
    renewed within its ``timeout_s``. Otherwise it is idle since the newest of its creation and
    its leases' last stamps (released or last renewed, for a holder that died), and stopped once
    that is ``keep_warm_s`` ago. Neither the run that made it nor its Dagster run status count."""
    stamps = [state.created_at]
    for lease in leases:
        renewed = _age_s(lease.renewed_at, now)
        live = not lease.released_at and holder_alive(lease) and renewed is not None \
            and renewed < lease.timeout_s
        if live:
            return None
        stamps.append(lease.released_at or lease.renewed_at)
    ages = [age for age in (_age_s(s, now) for s in stamps) if age is not None]
    idle = min(ages) if ages else None
    if idle is None or idle < state.keep_warm_s:
        return None
    return (f"warm cluster idle for {idle:.0f}s (keep_warm_s {state.keep_warm_s:g}) "
            f"and no live lease ({len(leases)} over)")


def local_garbage(states: list[Any], run_status: RunStatus, controller_alive: Callable[[Any], bool],
                  *, now: dt.datetime, grace_s: float,
                  leases: Callable[[Any], list[Any]] = lambda state: [],
                  holder_alive: Callable[[Any], bool] = lambda lease: False) -> list[Garbage]:
    """The local clusters to stop: a run's session cluster whose controlling process died, or
    whose Dagster run finished or is unknown; a warm cluster by :func:`warm_reason` over its
    ``leases(state)``. ``cluster create`` clusters are kept."""
    found = []
    for state in states:
        if getattr(state, "keep_warm_s", 0):
            why = warm_reason(state, leases(state), holder_alive, now=now)
            if why:     # no run to report: the runs that used it are over
                found.append(Garbage("local", WARM_KIND, state.name, None, why))
            continue
        if not getattr(state, "session", False):
            continue
        reason = None
        if not controller_alive(state):
            reason = f"the process that started it (pid {state.controller_pid}) is gone"
        reason = reason or _run_reason(state.run_id or None, run_status,
                                       _age_s(state.created_at, now), grace_s)
        if reason:
            found.append(Garbage("local", "local cluster", state.name, None, reason,
                                 state.run_id or None))
    return found


def collect_kuberay(backend: "KubeRayBackend", namespace: str, run_status: RunStatus, *,
                    grace_s: float, ttl_s: float, dry_run: bool = False,
                    now: dt.datetime | None = None) -> list[Garbage]:
    """Find (and unless ``dry_run`` delete) our garbage RayJobs in ``namespace``."""
    now = now or dt.datetime.now(dt.timezone.utc)
    garbage = kuberay_garbage(backend.list_jobs(namespace), run_status, now=now,
                              grace_s=grace_s, ttl_s=ttl_s)
    for item in garbage if not dry_run else ():
        log.info("deleting RayJob %s/%s: %s", namespace, item.name, item.reason)
        backend.stop_job(namespace, item.name, wait=False)
    return garbage


def collect_local(state_dir: str | Path, run_status: RunStatus, *, grace_s: float,
                  dry_run: bool = False, now: dt.datetime | None = None) -> list[Garbage]:
    """Find (and unless ``dry_run`` stop) orphaned local session clusters and idle warm ones.
    Warm clusters are judged and stopped under the warm lock, so no run takes a lease on one
    being stopped (``local_warm_lease.py``)."""
    from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
    from ads_ranking_pipelines.backends.local_warm_lease import holder_alive, read_leases, warm_lock
    from ads_ranking_pipelines.backends.processes import process_alive

    if not str(state_dir) or not Path(state_dir).is_dir():
        return []
    with warm_lock(state_dir):
        now = now or dt.datetime.now(dt.timezone.utc)
        clusters = {c.name: c for c in LocalRayCluster.list(state_dir)}
        garbage = local_garbage([c.state for c in clusters.values()], run_status,
                                lambda s: process_alive(s.controller_pid, s.controller_start),
                                now=now, grace_s=grace_s, holder_alive=holder_alive,
                                leases=lambda s: read_leases(state_dir, s.name))
        for item in garbage if not dry_run else ():
            if item.kind == WARM_KIND:
                log.info("stopping local cluster %s: %s", item.name, item.reason)
                clusters[item.name].stop(force=True)
    for item in garbage if not dry_run else ():
        if item.kind != WARM_KIND:
            log.info("stopping local cluster %s: %s", item.name, item.reason)
            clusters[item.name].stop()
    return garbage
