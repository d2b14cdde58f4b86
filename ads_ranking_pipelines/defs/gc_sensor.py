"""A sensor that collects Ray clusters and RayJobs left behind by runs (backends/gc.py).

Every ``interval_s`` it asks the Dagster instance about the runs our objects belong to and
deletes what belongs to a finished or unknown run past the grace period, finished RayJobs the
operator left behind, and local session clusters whose process died. A run whose local
cluster lost its process while the run still says STARTED is reported failed, so it does not
stay STARTED forever.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from ads_ranking_pipelines.backends import factory, gc
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.settings import Settings

GRACE_S = 600.0
# The RayJob TTL (ClusterRequest.ttl_seconds_after_finished, 600 s) plus the grace period: the
# operator's own deletion rules go first.
TTL_S = 1200.0
FINISHED = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


def dagster_run_status(instance: Any) -> gc.RunStatus:
    """``run_status`` for :mod:`backends.gc` over a Dagster instance."""

    def status(run_id: str) -> str:
        run = instance.get_run_by_id(run_id)
        if run is None:
            return "unknown"
        return "finished" if run.status in FINISHED else "running"

    return status


def collect(settings: Settings, instance: Any, *, dry_run: bool = False,
            grace_s: float = GRACE_S, ttl_s: float = TTL_S) -> list[gc.Garbage]:
    """One collection over the settings' backend(s); marks orphaned runs failed."""
    status = dagster_run_status(instance)
    found = gc.collect_local(settings.state_dir, status, grace_s=grace_s, dry_run=dry_run)
    if settings.backend == "kuberay":
        backend = factory.kuberay_backend(settings, load_catalog(settings.pool_catalog))
        found += gc.collect_kuberay(backend, settings.namespace, status, grace_s=grace_s,
                                    ttl_s=ttl_s, dry_run=dry_run)
    for item in found if not dry_run else ():
        run = instance.get_run_by_id(item.run_id) if item.run_id else None
        if run is not None and run.status not in FINISHED:
            instance.report_run_failed(run, f"its Ray cluster was orphaned: {item.reason}")
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
