"""Each Ray step over the run's partition range, its per-day results kept as they arrive.

A step (train, evaluate, score) runs once for all of the run's days, one day or a backfill's
range alike, as a step of the run's ONE Ray job driver (:func:`run_step`, ``run_driver``): the
cluster, the job's start and the driver's imports are paid for once per run. (:func:`run_days`
runs a range job of its own.) The step reports each finished day at once (``DAY_RESULT``); :class:`DayResults`
keeps them, so when the job fails (or the run is cancelled) on day k the days before k are still
known and recorded: their partitions show as materialized, with their metadata.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import dagster as dg

from ads_ranking_pipelines.backends.base import ClusterSession, JobSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.config.validation import ResolvedRequest
from ads_ranking_pipelines.contracts.ranges import DAY_RESULT
from ads_ranking_pipelines.defs.pipes import RayJobOutcome, run_ray_job
from ads_ranking_pipelines.defs.progress import DASHBOARD_TAG, StepProgress, plain_links, ray_links
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
from ads_ranking_pipelines.defs.tags import MODEL_TAG
from ads_ranking_pipelines.storage.layout import StorageLayout


def numeric(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def span(days: list[dt.date]) -> str:
    return days[0].isoformat() if len(days) == 1 else f"{days[0]}..{days[-1]}"


def session(context: dg.AssetExecutionContext, ray_cluster: RayClusterResource, resolved: ResolvedRequest,
            storage_root: str | None = None) -> ClusterSession:
    """The run's cluster (``storage_root``: where the run's controller lease is kept)."""
    origin = context.dagster_run.remote_job_origin
    location = origin.location_name if origin is not None else None
    return ray_cluster.session(resolved, context.log, run_id=context.run.run_id, code_location=location,
                               storage_root=storage_root)


def widest(params: list[TrainingParams]) -> TrainingParams:
    """Of the versions a step serves, the one whose cluster is the largest (sizes the run's cluster)."""
    return max(params, key=lambda p: (p.num_workers, p.gpus_per_worker))


@dataclasses.dataclass
class DayResults:
    """What a range job reported per finished day, by ISO day, in the order they came."""

    days: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    links: dict[str, Any] = dataclasses.field(default_factory=dict)     # to the job (``progress.ray_links``)

    def add(self, payload: Any) -> None:
        if isinstance(payload, dict) and payload.get("kind") == DAY_RESULT:
            values = payload.get("values") or {}
            self.days[str(values.get("day"))] = values

    def missing(self, days: list[dt.date]) -> list[dt.date]:
        return [d for d in days if d.isoformat() not in self.days]


def run_days(context: dg.AssetExecutionContext, cluster: ClusterSession, job: JobSpec, days: list[dt.date],
             results: DayResults) -> RayJobOutcome:
    """Run the range job on its own; ``results`` fills as days finish (also when this raises)."""
    return _all_days(run_ray_job(context, cluster, job, on_message=results.add), days, results)


def run_step(context: dg.AssetExecutionContext, ray_cluster: RayClusterResource, resolved: ResolvedRequest,
             kind: str, spec: Any, days: list[dt.date], results: DayResults, storage_root: str) -> RayJobOutcome:
    """Step ``kind`` (``ray_jobs.<kind>``'s body) over ``days`` on the run's ONE driver job
    (``run_driver``), on the run's cluster; ``results`` fills as days finish (also when this
    raises), its progress is told as the job reports (``defs/progress.py``) and ``results.links``
    leads to the job."""
    cluster = session(context, ray_cluster, resolved, storage_root)
    driver = ray_cluster.run_driver(context.run.run_id)
    progress = StepProgress(context, context.asset_key.to_user_string(), days, StorageLayout(storage_root),
                            context.run.tags.get(MODEL_TAG, ""))
    job_id = driver.start(context)
    results.links = ray_links(cluster.dashboard_url, job_id, context.run.run_id, cluster.name)
    progress.links(plain_links(results.links))
    if cluster.dashboard_url:
        context.instance.add_run_tags(context.run.run_id, {DASHBOARD_TAG: cluster.dashboard_url})

    def on_message(payload: Any) -> None:
        results.add(payload)
        progress(payload)

    try:
        outcome = _all_days(driver.run_step(context, kind, spec, on_message=on_message), days, results)
    except BaseException:
        progress.finish(ok=False)
        raise
    progress.finish(ok=True)
    return outcome


def _all_days(outcome: RayJobOutcome, days: list[dt.date], results: DayResults) -> RayJobOutcome:
    missing = results.missing(days)
    if missing:
        raise dg.Failure(description=f"Ray job {outcome.job_id} succeeded but reported no result for "
                         f"{', '.join(d.isoformat() for d in missing)}", allow_retries=False)
    return outcome


class DayMetadata:
    """Per-partition metadata of a range step: attached to the step's materialization when it
    succeeds; when it fails, the finished days are recorded as materializations of their own."""

    def __init__(self, context: dg.AssetExecutionContext, results: DayResults | None = None) -> None:
        self.context, self.results = context, results
        self.by_day: dict[str, dict[str, Any]] = {}

    def add(self, day: str, metadata: dict[str, Any]) -> None:
        """The day's metadata, with the links to the step's Ray job (when the step got that far)."""
        self.by_day[day] = {**(self.results.links if self.results is not None else {}), **metadata}

    def attach(self) -> None:
        for day, metadata in self.by_day.items():
            self.context.add_asset_metadata(metadata, partition_key=day)

    def record_finished(self) -> None:
        """The step is failing: keep what the finished days did (a failure here must not hide the cause)."""
        for day, metadata in self.by_day.items():
            try:
                self.context.log_event(dg.AssetMaterialization(
                    asset_key=self.context.asset_key, partition=day, metadata=metadata))
            except Exception as exc:
                self.context.log.warning(f"could not record the finished day {day}: {exc}")
