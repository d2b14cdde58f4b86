"""A sensor that collects Ray clusters and RayJobs left behind by runs (backends/gc.py).

Every ``interval_s`` it first reports failed the in-flight runs whose process on this host is
gone (their controller tag, ``defs/orphans.py``), also when nothing of theirs is left to
collect, so no run stays STARTED forever holding its pool's slot. Then it asks the Dagster
instance about the runs our objects belong to and deletes what belongs to a finished or
unknown run past the grace period, finished RayJobs the operator left behind, and local
session clusters whose process died; their runs are reported failed too. ``ads-ranking
cluster gc`` does the same through :func:`mark_dead_runs` and :func:`mark_collected`.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from ads_ranking_pipelines.backends import factory, gc
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.defs import orphans

GRACE_S = 600.0
# The RayJob TTL (ClusterRequest.ttl_seconds_after_finished, 600 s) plus the grace period: the
# operator's own deletion rules go first.
TTL_S = 1200.0
FINISHED = orphans.FINISHED


def dagster_run_status(instance: Any) -> gc.RunStatus:
    """``run_status`` for :mod:`backends.gc` over a Dagster instance."""

    def status(run_id: str) -> str:
        run = instance.get_run_by_id(run_id)
        if run is None:
            return "unknown"
        return "finished" if run.status in FINISHED else "running"

    return status


def mark_dead_runs(instance: Any, storage_root: str | None, *, dry_run: bool = False) -> list[gc.Garbage]:
    """Report failed the in-flight runs whose process died (see :func:`orphans.dead_runs`)."""
    found = [gc.Garbage("dagster", "run", run_id, None, why, run_id) for run_id, why in orphans.dead_runs(instance)]
    for item in found if not dry_run else ():
        orphans.mark_orphaned(instance, item.name, item.reason, storage_root)
    return found


def mark_collected(instance: Any, found: list[gc.Garbage], storage_root: str | None) -> None:
    """Report failed the runs whose cluster or RayJob was collected while they said running."""
    for item in found:
        if item.run_id and item.kind != "run":
            orphans.mark_orphaned(instance, item.run_id, f"its Ray cluster was orphaned: {item.reason}",
                                  storage_root)


def collect(settings: Settings, instance: Any, *, dry_run: bool = False,
            grace_s: float = GRACE_S, ttl_s: float = TTL_S) -> list[gc.Garbage]:
    """One collection over the settings' backend(s); marks dead and orphaned runs failed."""
    found = mark_dead_runs(instance, settings.home, dry_run=dry_run)
    status = dagster_run_status(instance)
    found += gc.collect_local(settings.state_dir, status, grace_s=grace_s, dry_run=dry_run)
    if settings.backend == "kuberay":
        backend = factory.kuberay_backend(settings, load_catalog(settings.pool_catalog))
        found += gc.collect_kuberay(backend, settings.namespace, status, grace_s=grace_s,
                                    ttl_s=ttl_s, dry_run=dry_run)
    if not dry_run:
        mark_collected(instance, found, settings.home)
    return found


def make_gc_sensor(settings: Settings, interval_s: int = 300) -> dg.SensorDefinition:
    @dg.sensor(name="orphaned_ray_clusters", minimum_interval_seconds=interval_s,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description="Deletes Ray clusters and RayJobs left behind by finished or dead runs.")
    def orphaned_ray_clusters(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        found = collect(settings, context.instance)
        for item in found:
            context.log.info(f"collected {item.kind} {item.name}: {item.reason}")
        return dg.SkipReason(f"collected {len(found)} orphaned object(s)" if found
                             else "nothing orphaned")

    return orphaned_ray_clusters
