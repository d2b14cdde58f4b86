"""``model_evaluation``'s work: ONE evaluation job over the run's days, then the promotions in date order.

The champion before the run is read once and passed to the job, which walks the chain (day d
is compared with the champion after day d-1's verdict; ``contracts.gates.gate_step``). Back
here the same decision is taken again from the returned metrics, each day's evaluation is
recorded and the passing versions are promoted through the registry (its only writer), in date
order. A failed gate changes nothing. If the run is cancelled, nothing is promoted.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.gates import GateStep, Verdict, gate_step
from ads_ranking_pipelines.contracts.ranges import EvalDay, EvalRangeSpec
from ads_ranking_pipelines.defs.config import EvaluationConfig
from ads_ranking_pipelines.defs.preflight import check_events
from ads_ranking_pipelines.defs.range_jobs import (
    DayMetadata, DayResults, job_spec, numeric, run_days, session, span, widest,
)
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
from ads_ranking_pipelines.defs.train_step import run_version
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.registry import ModelRegistry


def version_to_evaluate(registry: ModelRegistry, day: dt.date, run_id: str) -> str:
    mine = run_version(day, run_id)
    if registry.is_complete(mine):
        return mine
    done = registry.versions_for_day(day)
    if not done:
        raise dg.Failure(description=f"no trained {registry.model_name} version for {day}: materialize "
                         f"trained_model for {day} first", allow_retries=False)
    return done[-1]


def eval_day(registry: ModelRegistry, source: Any, day: dt.date, run_id: str, log: Any) -> EvalDay:
    version = version_to_evaluate(registry, day, run_id)
    manifest = registry.manifest(version)
    params = TrainingParams.model_validate(fs.read_json(fs.join(registry.version_uri(version), "model.json"))["params"])
    check_events(source, [day], log)
    return EvalDay(eval_day=day, model_version=version, model_uri=registry.version_uri(version), params=params,
                   train_days=tuple(dt.date.fromisoformat(d) for d in manifest["train_days"]))


def evaluate_days(context: dg.AssetExecutionContext, config: EvaluationConfig, registry: ModelRegistry,
                  source: Any, ray_cluster: RayClusterResource, days: list[dt.date]) -> list[Verdict]:
    """Evaluate every day in one job, then record and promote in date order; the verdicts."""
    plan = [eval_day(registry, source, d, context.run.run_id, context.log) for d in days]
    champion = registry.champion_version()
    spec = EvalRangeSpec(source=source, gates=config.gates(), champion_version=champion,
                         champion_uri=registry.version_uri(champion) if champion else None, days=tuple(plan))
    request = ray_cluster.cluster_request(widest([d.params for d in plan]), context.run.run_id)
    results, metadata = DayResults(), DayMetadata(context)
    try:
        run_days(context, session(context, ray_cluster, request),
                 job_spec("evaluate", context, days, ray_cluster.python(), spec), days, results)
    except (DagsterExecutionInterruptedError, KeyboardInterrupt):
        context.log.warning(f"the run was cancelled while evaluating {span(days)}: nothing promoted; "
                            f"the champion is unchanged ({champion or 'none'})")
        raise
    except BaseException:
        apply_chain(context, registry, spec, results, metadata)     # the days that finished still count
        metadata.record_finished()
        raise
    verdicts = apply_chain(context, registry, spec, results, metadata)
    metadata.attach()
    return verdicts


def apply_chain(context: dg.AssetExecutionContext, registry: ModelRegistry, spec: EvalRangeSpec,
                results: DayResults, metadata: DayMetadata) -> list[Verdict]:
    """Record each finished day's evaluation and make its promotion, in date order."""
    champion, verdicts = spec.champion_version, []
    for d in spec.days:
        r = results.days.get(d.eval_day.isoformat())
        if r is None:
            break
        m = r["metrics"]
        step = gate_step(d.eval_day.isoformat(), d.model_version, m, spec.gates, champion)
        _same_as_job(step, r.get("step") or {})
        if not step.passed:
            context.log.warning(f"{d.model_version} stays a candidate: " + "; ".join(
                v.text for v in step.verdicts if not v.passed) + f"; champion unchanged ({champion or 'none'})")
        promoted = step.promotes and _promote(context, registry, step, m)
        registry.record_evaluation(d.model_version, d.eval_day, numeric(m), passed=step.passed, promoted=promoted,
                                   champion_before=champion, champion_after=registry.champion_version(),
                                   gates={v.check: v.passed for v in step.verdicts}, run_id=context.run.run_id)
        metadata.add(d.eval_day.isoformat(), _day_metadata(m, step, promoted))
        verdicts += step.verdicts
        champion = step.champion_after
    return verdicts


def _same_as_job(step: GateStep, reported: dict[str, Any]) -> None:
    """The job walked the same chain (same champion, same verdict): else its numbers compare other things."""
    theirs = (reported.get("champion_before"), reported.get("passed"))
    if theirs != (step.champion_before, step.passed):
        raise dg.Failure(description=f"{step.day}: the evaluation job compared {step.version} with champion "
                         f"{theirs[0] or 'none'} (gates passed: {theirs[1]}), but the chain here has "
                         f"{step.champion_before or 'none'} (gates passed: {step.passed}); nothing promoted",
                         allow_retries=False)


def _promote(context: dg.AssetExecutionContext, registry: ModelRegistry, step: GateStep, m: dict[str, Any]) -> bool:
    current = registry.champion_version()
    if current != step.champion_before:       # someone promoted or rolled back while this run evaluated
        raise dg.Failure(description=f"the champion of {registry.model_name} changed during this run "
                         f"({step.champion_before or 'none'} -> {current or 'none'}); {step.version} was compared "
                         f"with {step.champion_before or 'none'} on {step.day} and is not promoted: "
                         "evaluate the day again", allow_retries=False)
    reason = f"passed gates on {step.day}: " + "; ".join(v.text for v in step.verdicts)
    registry.promote(step.version, reason=reason, by=f"dagster run {context.run.run_id}", metrics=numeric(m))
    context.log.info(f"promoted {step.version} to champion of {registry.model_name}")
    return True


def _day_metadata(m: dict[str, Any], step: GateStep, promoted: bool) -> dict[str, Any]:
    lift = {"lift_vs_baseline": float(m["auc"]) - float(m["baseline_auc"])}
    if "champion_auc" in m:
        lift["lift_vs_champion"] = float(m["auc"]) - float(m["champion_auc"])
    return {**numeric(m), **lift, "model_version": step.version, "eval_day": step.day,
            "champion_version": m.get("champion_version", "none"), "promoted": promoted,
            "gates_passed": step.passed, "champion_after": step.champion_after or "none"}
