"""``batch_scores``' work: ONE inference step (of the run's Ray job driver) scores every day with that day's champion.

A day's champion is the one as of the end of that day's evaluation in this run (known before
the job starts), else the current one; each day records the version it used.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import dagster as dg

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.ranges import InferDay, InferRangeSpec
from ads_ranking_pipelines.defs.preflight import check_events, check_features, run_assets
from ads_ranking_pipelines.defs.range_jobs import DayMetadata, DayResults, numeric, run_step, widest
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
from ads_ranking_pipelines.defs.train_step import version_of_run
from ads_ranking_pipelines.storage.registry import ModelRegistry, RegistryError


def champion_for_day(registry: ModelRegistry, day: dt.date, run_id: str) -> str:
    """The champion as of the end of ``day``'s evaluation in this run, else the current one."""
    record = registry.evaluation(version_of_run(registry, day, run_id), day)
    version = (record or {}).get("champion_after") or registry.champion_version()
    if not version:
        raise dg.Failure(description=f"{registry.model_name} has no champion to score {day} with: no version "
                         "has passed the gates yet (promote one with `ads-ranking model promote VERSION --reason ...`)",
                         allow_retries=False)
    return version


def scoring_model(registry: ModelRegistry, day: dt.date, version: str) -> dict[str, Any]:
    """The intact champion ``version``'s ``model.json`` (params and feature spec)."""
    try:
        registry.manifest(version)
        return registry.description(version)
    except RegistryError as exc:
        raise dg.Failure(description=f"cannot score {day} with champion {version}: {exc}", allow_retries=False) from None


def check_scoring_day(registry: ModelRegistry, source: Any, day: dt.date, version: str) -> dict[str, Any]:
    """Day ``day`` has every column champion ``version`` reads (before any cluster); its ``model.json``."""
    description = scoring_model(registry, day, version)
    check_features(source, [day], description["feature_spec"], f"champion {version}, which scores {day}")
    return description


def infer_day(registry: ModelRegistry, source: Any, day: dt.date, run_id: str, log: Any) -> tuple[InferDay, TrainingParams]:
    version = champion_for_day(registry, day, run_id)
    check_events(source, [day], log)
    params = TrainingParams.model_validate(check_scoring_day(registry, source, day, version)["params"])
    return InferDay(day=day, model_uri=registry.version_uri(version), model_version=version,
                    hash_buckets=params.hash_buckets,
                    output_uri=registry.layout.scores(registry.model_name, day, version)), params


def check_scoring_ahead(context: dg.AssetExecutionContext, registry: ModelRegistry, source: Any,
                        days: list[dt.date], settled: bool) -> None:
    """An earlier step's pre-flight of this run's scoring, before the run's cluster starts: each day
    against the champion now. ``settled`` (no evaluation before the scoring): a mismatch fails here;
    else an evaluation of this run may still promote a version that fits, so it is a warning (the
    scoring step checks again, against the champion it then has, before its job)."""
    current = registry.champion_version()
    if not current or "batch_scores" not in run_assets(context):
        return
    for day in days:
        try:
            check_scoring_day(registry, source, day, champion_for_day(registry, day, context.run.run_id))
        except dg.Failure as exc:
            if settled:
                raise
            context.log.warning(f"batch_scores will fail unless this run promotes a new champion: {exc.description}")


def scoring_concurrency(request: ClusterRequest) -> int:
    """Scoring tasks at a time: one per worker CPU the cluster was asked for (the head runs none).
    From the request, not from what Ray sees when the job starts: an autoscaling KubeRay cluster
    starts with 0 workers and grows only for work that is asked for."""
    return max(1, int(request.workers * request.worker_cpus()))


def score_days(context: dg.AssetExecutionContext, registry: ModelRegistry, source: Any,
               ray_cluster: RayClusterResource, days: list[dt.date]) -> None:
    planned = [infer_day(registry, source, d, context.run.run_id, context.log) for d in days]
    resolved = ray_cluster.cluster_request(widest([p for _, p in planned]), context.run.run_id)
    spec = InferRangeSpec(source=source, id_columns=("impression_id",) if source.kind == "synthetic" else (),
                          days=tuple(d for d, _ in planned), concurrency=scoring_concurrency(resolved.request))
    results = DayResults()
    metadata = DayMetadata(context, results)
    try:
        run_step(context, ray_cluster, resolved, "infer", spec, days, results, registry.layout.root)
    except BaseException:
        _collect(spec, results, metadata)
        metadata.record_finished()          # the days scored before the failure
        raise
    _collect(spec, results, metadata)
    metadata.attach()


def _collect(spec: InferRangeSpec, results: DayResults, metadata: DayMetadata) -> None:
    for d in spec.days:
        r = results.days.get(d.day.isoformat())
        if r is not None:
            metadata.add(d.day.isoformat(), {
                **numeric(r), "scores_uri": dg.MetadataValue.path(d.output_uri), "model_version": d.model_version,
                "job_wall_seconds": round(float(r.get("day_seconds", 0.0)), 2)})
