"""``trained_model``'s work: ONE training step (of the run's one Ray job driver) over the run's days, one model version per day.

The job trains the days in date order, each version written complete before the next day
starts (warm-started from the version the day before wrote, when warm start is on). When it
fails or the run is cancelled on day k, the versions of the days before k stay (complete, and
recorded as materializations of their days); the half-written version of day k is discarded.
Training never touches the champion.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from typing import Any

import dagster as dg

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.config.validation import ResolvedRequest
from ads_ranking_pipelines.contracts.ranges import TrainDay, TrainRangeSpec
from ads_ranking_pipelines.defs.backfill_preview import record_actual, versus
from ads_ranking_pipelines.defs.partitions import window_days
from ads_ranking_pipelines.defs.range_jobs import DayMetadata, DayResults, numeric, run_step, span
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
from ads_ranking_pipelines.events.fingerprint import window_fingerprint
from ads_ranking_pipelines.planning.resume import ResumeDecision, components, decide
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines.storage.resume import (mark_finished, read_attempt, run_version_of, write_attempt,
                                                   write_run_versions)
from ads_ranking_pipelines.version import code_version

RESULT_FIELDS = ("final_loss", "samples_per_s", "rows", "epochs", "wall_seconds", "worker_restarts",
                 "resumed_from_epoch", "best_epoch", "train_rows", "valid_logloss", "valid_auc")


def run_version(day: dt.date, run_id: str) -> str:
    return f"{day:%Y%m%d}-{run_id[:8]}"


def version_of_run(registry: ModelRegistry, day: dt.date, run_id: str) -> str:
    """The version run ``run_id`` trained for ``day``, or took over from an earlier attempt of the
    same work (resume key), else the name it would have."""
    return run_version_of(registry.layout, run_id, day) or run_version(day, run_id)


def previous_version(registry: ModelRegistry, day: dt.date) -> str | None:
    """The newest complete version of the day before ``day`` on storage."""
    earlier = registry.versions_for_day(day - dt.timedelta(days=1))
    return earlier[-1] if earlier else None


@dataclasses.dataclass(frozen=True)
class TrainPlan:
    spec: TrainRangeSpec | None           # the days to train (None: every day is complete already)
    warm_from: dict[str, str | None]      # ISO day -> the version it starts from (None: random init)
    estimates: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)  # ISO day -> pre-flight estimate
    resume: ResumeDecision | None = None
    reused: dict[str, str] = dataclasses.field(default_factory=dict)  # ISO day -> complete version not retrained


def plan(registry: ModelRegistry, params: TrainingParams, source: Any, days: list[dt.date], run_id: str,
         warm: bool, cluster: dict[str, Any], resume: bool = True) -> TrainPlan:
    """The days to train and their version names: an earlier attempt of the same work (same
    resume key, ``planning/resume.py``) is taken over, its complete days not trained again."""
    decision = _resume(registry, params, source, days, run_id, resume)
    versions = decision.versions
    reused = {iso: v for iso, v in versions.items() if registry.is_complete(v)}
    todo = [d for d in days if d.isoformat() not in reused]
    for d in todo:           # what a killed attempt half-wrote; its checkpoints stay and are resumed from
        registry.discard_incomplete(versions[d.isoformat()])
    # warm start: from the day before's version of this range, else (its first day) the newest on storage
    warm_from = {d.isoformat(): (versions.get((d - dt.timedelta(days=1)).isoformat()) or previous_version(registry, d))
                 if warm else None for d in days}
    if not todo:
        return TrainPlan(None, warm_from, resume=decision, reused=reused)
    init = warm_from[todo[0].isoformat()]
    spec = TrainRangeSpec(
        params=params, source=source, ray_storage_uri=registry.layout.ray_storage(),
        code_version=code_version(os.environ), cluster=cluster,
        init_model_uri=registry.version_uri(init) if init else None, warm_start=warm,
        days=tuple(TrainDay(day=d, train_days=tuple(window_days(d, params.dataset_window_days)),
                            model_version=versions[d.isoformat()], model_uri=registry.version_uri(versions[d.isoformat()]),
                            run_name=f"{params.model_name}-{versions[d.isoformat()]}") for d in todo))
    return TrainPlan(spec, warm_from, resume=decision, reused=reused)


def _resume(registry: ModelRegistry, params: TrainingParams, source: Any, days: list[dt.date], run_id: str,
            allowed: bool) -> ResumeDecision:
    """Resume or start fresh; records this attempt and the run's versions."""
    isos = [d.isoformat() for d in days]
    window = {w for d in days for w in window_days(d, params.dataset_window_days)}
    parts = components(params.model_name, isos, params.model_dump(mode="json"), code_version(os.environ),
                       window_fingerprint(source, window))
    decision = decide(read_attempt(registry.layout, registry.model_name, isos), parts, isos,
                      {d.isoformat(): run_version(d, run_id) for d in days}, run_id, allowed)
    write_attempt(registry.layout, registry.model_name, isos, key=decision.key, parts=parts,
                  versions=decision.versions, run_id=run_id, resumed_from=decision.resumed_from)
    write_run_versions(registry.layout, run_id, decision.versions)
    return decision


def train_days(context: dg.AssetExecutionContext, ray_cluster: RayClusterResource, registry: ModelRegistry,
               the_plan: TrainPlan, resolved: ResolvedRequest) -> list[str]:
    """Run the training job over the plan's days; per-day metadata on the step; the versions."""
    results = DayResults()
    metadata = DayMetadata(context, results)
    _tell_resume(context, registry, the_plan, metadata)
    spec = the_plan.spec
    if spec is None:
        metadata.attach()
        _finished(registry, the_plan)
        return sorted(the_plan.reused.values())
    days = [d.day for d in spec.days]
    first = spec.days[0]
    context.log.info(f"training {first.model_version} on {first.train_days[0]}..{first.train_days[-1]}"
                     + (f", warm start from {the_plan.warm_from[first.day.isoformat()]}"
                        if the_plan.warm_from[first.day.isoformat()] else "")
                     + (f", then {len(days) - 1} more day(s) to {days[-1]} in the same Ray step" if len(days) > 1 else ""))
    try:
        outcome = run_step(context, ray_cluster, resolved, "train", spec, days, results, registry.layout.root)
    except BaseException as exc:
        _keep_finished(context, registry, the_plan, results, metadata, exc)
        raise
    for d in spec.days:
        _add_day(registry, the_plan, metadata, d, results.days[d.day.isoformat()], outcome.job_id)
    metadata.attach()
    _finished(registry, the_plan)
    return sorted([*the_plan.reused.values(), *(d.model_version for d in spec.days)])


def _finished(registry: ModelRegistry, the_plan: TrainPlan) -> None:
    if the_plan.resume is not None:
        mark_finished(registry.layout, registry.model_name, sorted(the_plan.resume.versions), the_plan.resume.key)


def _tell_resume(context: dg.AssetExecutionContext, registry: ModelRegistry, the_plan: TrainPlan,
                 metadata: DayMetadata) -> None:
    """Say whether this attempt resumes an earlier one and why; the days it does not train again
    get their version (taken over: no longer unattended) as metadata."""
    decision = the_plan.resume
    if decision is None:
        return
    if decision.resumed_from is None:
        context.log.info(f"[resume] key {decision.key}: starting fresh: {decision.reason}")
        return
    todo = [d.day.isoformat() for d in the_plan.spec.days] if the_plan.spec else []
    context.log.info(f"[resume] key {decision.key}: resuming run {decision.resumed_from} ({decision.reason}): "
                     f"{len(the_plan.reused)} day(s) complete, not trained again"
                     + (f" ({', '.join(sorted(the_plan.reused))})" if the_plan.reused else "")
                     + (f"; training {', '.join(todo)} (a day with checkpoints resumes from its last one)" if todo else ""))
    for iso, version in sorted(the_plan.reused.items()):
        marker = registry.adopt(version)
        if marker is not None:
            context.log.info(f"[resume] {version} was marked unattended ({marker.get('reason')}): this run judges it")
        manifest = registry.manifest(version)          # checked file by file: an intact version
        metadata.add(iso, {"model_version": version, "model_uri": dg.MetadataValue.path(registry.version_uri(version)),
                           "resumed": f"trained complete by run {decision.resumed_from}: not trained again",
                           "resume_key": decision.key, **numeric({k: manifest.get(k) for k in RESULT_FIELDS})})


def _add_day(registry: ModelRegistry, the_plan: TrainPlan, metadata: DayMetadata, d: TrainDay, r: dict[str, Any],
             job_id: str | None) -> None:
    """The day's metadata on the step, and its actual time beside the estimate in the history."""
    meta = _day_metadata(the_plan, d, r, job_id)
    metadata.add(d.day.isoformat(), meta)
    record_actual(registry.layout, the_plan.spec.params, d.day, meta, the_plan.estimates.get(d.day.isoformat()))


def _day_metadata(the_plan: TrainPlan, d: TrainDay, r: dict[str, Any], job_id: str | None) -> dict[str, Any]:
    params = the_plan.spec.params
    seconds = float(r.get("day_seconds") or r.get("wall_seconds") or 0.0)
    hours = seconds / 3600.0
    return {
        "model_version": d.model_version, "model_uri": dg.MetadataValue.path(d.model_uri),
        **({"ray_job_id": job_id} if job_id else {}),
        "train_window": f"{d.train_days[0]}..{d.train_days[-1]}",
        "warm_start_from": the_plan.warm_from[d.day.isoformat()] or "none", "num_workers": params.num_workers,
        "gpu_pool": params.gpu_pool, "job_wall_seconds": round(seconds, 2),
        "worker_hours": params.num_workers * hours, "gpu_hours": params.num_workers * params.gpus_per_worker * hours,
        **numeric({k: r.get(k) for k in RESULT_FIELDS}),
        **versus(the_plan.estimates.get(d.day.isoformat()), seconds),
        "sharding_plan": dg.MetadataValue.json(r.get("sharding_plan") or {}),
    }


def _keep_finished(context: dg.AssetExecutionContext, registry: ModelRegistry, the_plan: TrainPlan,
                   results: DayResults, metadata: DayMetadata, exc: BaseException) -> None:
    """The job failed or the run was cancelled: discard the half-written version, keep the finished days."""
    spec = the_plan.spec
    discarded = [d.model_version for d in spec.days if registry.discard_incomplete(d.model_version)]
    kept = [d for d in spec.days if d.day.isoformat() in results.days and registry.is_complete(d.model_version)]
    for d in kept:
        _add_day(registry, the_plan, metadata, d, results.days[d.day.isoformat()], None)
    metadata.record_finished()
    stopped = next((d for d in spec.days if d.day.isoformat() not in results.days), None)
    why = "the run was cancelled" if isinstance(exc, (dg.DagsterExecutionInterruptedError, KeyboardInterrupt)) \
        else "the training job failed"
    where = (f"{stopped.day} ({stopped.model_version} not kept"
             + ("; its half-written files were removed)" if stopped.model_version in discarded else ")")
             if stopped else span([d.day for d in spec.days]))
    context.log.warning(
        f"{why} while training {where}: kept {len(kept)} complete version(s) of the days before "
        f"({', '.join(d.model_version for d in kept) or 'none'}); not trained: "
        f"{', '.join(str(d.day) for d in spec.days[len(kept) + 1:]) or 'none'}; "
        f"the champion is unchanged ({registry.champion_version() or 'none'})")
