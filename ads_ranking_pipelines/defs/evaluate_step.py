"""``model_evaluation``'s work: ONE evaluation step (of the run's Ray job driver) over the run's days, then the promotions in date order.

The champion before the run is read once and passed to the job, which walks the chain (day d
is compared with the champion after day d-1's verdict, or with an earlier champion where that
one trained on day d; ``contracts.gates``). Back
here the same decision is taken again from the returned metrics, each day's evaluation is
recorded and the passing versions are promoted through the registry (its only writer), in date
order. A failed gate changes nothing. If the run is cancelled, nothing is promoted.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import dagster as dg

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.gates import ChampionRef, GateStep, Verdict, gate_step
from ads_ranking_pipelines.contracts.ranges import EvalDay, EvalRangeSpec
from ads_ranking_pipelines.defs.champion_asset import champion_changed
from ads_ranking_pipelines.defs.config import EvaluationConfig
from ads_ranking_pipelines.defs.preflight import check_events, check_features, check_schemas
from ads_ranking_pipelines.defs.range_jobs import (
    DayMetadata, DayResults, numeric, run_step, span, widest,
)
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
from ads_ranking_pipelines.defs.score_step import check_scoring_ahead
from ads_ranking_pipelines.defs.train_step import version_of_run
from ads_ranking_pipelines.storage.registry import ModelRegistry, RegistryError


def version_to_evaluate(registry: ModelRegistry, day: dt.date, run_id: str) -> str:
    mine = version_of_run(registry, day, run_id)
    if registry.is_complete(mine):
        return mine
    done = registry.versions_for_day(day)
    if not done:
        raise dg.Failure(description=f"no trained {registry.model_name} version for {day}: materialize "
                         f"trained_model for {day} first", allow_retries=False)
    return done[-1]


def eval_day(registry: ModelRegistry, source: Any, day: dt.date, run_id: str, log: Any) -> EvalDay:
    """Day ``day``'s plan, after its pre-flight: the day against the source config and the version's
    feature spec, and the footers of the window the baseline trains on. (The champion's columns are
    read only when they are the source's: ``training.evaluate``; else it is not comparable.)"""
    version = version_to_evaluate(registry, day, run_id)
    manifest = registry.manifest(version)
    description = registry.description(version)
    train_days = [dt.date.fromisoformat(d) for d in manifest["train_days"]]
    check_events(source, [day], log)
    check_features(source, [day], description["feature_spec"], f"version {version}, evaluated on {day}")
    check_schemas(source, train_days, log)
    return EvalDay(eval_day=day, model_version=version, model_uri=registry.version_uri(version),
                   params=TrainingParams.model_validate(description["params"]), train_days=tuple(train_days))


def champion_ref(registry: ModelRegistry, version: str) -> ChampionRef | None:
    """``version`` as a champion reference (None if it is gone or half-written; a version without
    a recorded window counts as trained on the oldest data)."""
    if not registry.is_complete(version):
        return None
    through = registry.trained_through(version) or dt.date.min
    return ChampionRef(version=version, uri=registry.version_uri(version), trained_through=through)


def eval_spec(registry: ModelRegistry, config: EvaluationConfig, source: Any, plan: list[EvalDay],
              log: Any) -> EvalRangeSpec:
    """The job spec: the champion now, and the intact past champions a day may be compared with."""
    current = registry.champion_version()
    if current:
        try:
            registry.manifest(current)
        except RegistryError as exc:
            raise dg.Failure(description=f"cannot compare with champion {current}: {exc}", allow_retries=False) from None
    earlier = [r for r in (champion_ref(registry, v) for v in registry.past_champions()) if r]
    while True:
        spec = EvalRangeSpec(source=source, gates=config.gates(), days=tuple(plan), earlier_champions=tuple(earlier),
                             champion=champion_ref(registry, current) if current else None)
        broken = _broken_comparison(registry, spec, log)
        if broken is None:
            return spec
        earlier = [r for r in earlier if r.version != broken]


def _broken_comparison(registry: ModelRegistry, spec: EvalRangeSpec, log: Any) -> str | None:
    """A past champion some day would be compared with that is no longer intact (None: all are)."""
    checked: set[str] = set()
    for i in range(len(spec.days)):
        ref = spec.comparison(i, spec.champion)
        if ref is None or ref == spec.champion or ref.version in checked:
            continue
        try:
            registry.manifest(ref.version)
        except RegistryError as exc:
            log.warning(f"past champion {ref.version} is left out of the comparisons: {exc}")
            return ref.version
        checked.add(ref.version)
    return None


def evaluate_days(context: dg.AssetExecutionContext, config: EvaluationConfig, registry: ModelRegistry,
                  source: Any, ray_cluster: RayClusterResource, days: list[dt.date]) -> list[Verdict]:
    """Evaluate every day in one job, then record and promote in date order; the verdicts."""
    plan = [eval_day(registry, source, d, context.run.run_id, context.log) for d in days]
    spec = eval_spec(registry, config, source, plan, context.log)
    check_scoring_ahead(context, registry, source, days, settled=False)
    champion = spec.champion.version if spec.champion else None
    resolved = ray_cluster.cluster_request(widest([d.params for d in plan]), context.run.run_id)
    results = DayResults()
    metadata = DayMetadata(context, results)
    try:
        run_step(context, ray_cluster, resolved, "evaluate", spec, days, results, registry.layout.root)
    except (dg.DagsterExecutionInterruptedError, KeyboardInterrupt):
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
    champion, verdicts = spec.champion, []
    for i, d in enumerate(spec.days):
        r = results.days.get(d.eval_day.isoformat())
        if r is None:
            break
        m = r["metrics"]
        step = gate_step(d.eval_day.isoformat(), d.model_version, max(d.train_days), m, spec.gates, champion)
        _same_as_job(step, r.get("step") or {}, spec.comparison(i, champion), m)
        if step.held_back:
            context.log.warning(step.held_back)
        if not step.passed:
            context.log.warning(f"{d.model_version} stays a candidate: " + "; ".join(
                v.text for v in step.verdicts if not v.passed) + f"; champion unchanged ({champion or 'none'})")
        promoted = step.promotes and _promote(context, registry, step, m)
        registry.record_evaluation(d.model_version, d.eval_day, numeric(m), passed=step.passed, promoted=promoted,
                                   champion_before=step.champion_before, champion_after=registry.champion_version(),
                                   compared_with=m.get("champion_version"), held_back=step.held_back,
                                   gates={v.check: v.passed for v in step.verdicts}, run_id=context.run.run_id)
        metadata.add(d.eval_day.isoformat(), _day_metadata(m, step, promoted))
        verdicts += step.verdicts
        champion = d.as_champion() if step.promotes else champion
    return verdicts


def _same_as_job(step: GateStep, reported: dict[str, Any], comparison: ChampionRef | None, m: dict[str, Any]) -> None:
    """The job walked the same chain (same champion, same comparison, same verdict): else its
    numbers compare other things and nothing may be promoted on them."""
    theirs = (reported.get("champion_before"), reported.get("passed"))
    compared = m.get("champion_version") if "champion_auc" in m else None
    if theirs == (step.champion_before, step.passed) and compared in (None, comparison and comparison.version):
        return
    raise dg.Failure(description=f"{step.day}: the evaluation job compared {step.version} with "
                     f"{compared or 'no model'} under champion {theirs[0] or 'none'} (gates passed: {theirs[1]}), "
                     f"but the chain here has champion {step.champion_before or 'none'}, comparison "
                     f"{comparison.version if comparison else 'none'} (gates passed: {step.passed}); "
                     "nothing promoted", allow_retries=False)


def _promote(context: dg.AssetExecutionContext, registry: ModelRegistry, step: GateStep, m: dict[str, Any]) -> bool:
    current = registry.champion_version()
    if current != step.champion_before:       # someone promoted or rolled back while this run evaluated
        raise dg.Failure(description=f"the champion of {registry.model_name} changed during this run "
                         f"({step.champion_before or 'none'} -> {current or 'none'}); {step.version} was compared "
                         f"with {step.champion_before or 'none'} on {step.day} and is not promoted: "
                         "evaluate the day again", allow_retries=False)
    reason = f"passed gates on {step.day}: " + "; ".join(v.text for v in step.verdicts)
    doc = registry.promote(step.version, reason=reason, by=f"dagster run {context.run.run_id}", metrics=numeric(m))
    context.log_event(champion_changed(doc))
    context.log.info(f"promoted {step.version} to champion of {registry.model_name}")
    return True


def _day_metadata(m: dict[str, Any], step: GateStep, promoted: bool) -> dict[str, Any]:
    lift = {"lift_vs_baseline": float(m["auc"]) - float(m["baseline_auc"])}
    if "champion_auc" in m:
        lift["lift_vs_champion"] = float(m["auc"]) - float(m["champion_auc"])
    return {**numeric(m), **lift, "model_version": step.version, "eval_day": step.day,
            "champion_version": m.get("champion_version", "none"), "promoted": promoted,
            "gates_passed": step.passed, "champion_after": step.champion_after or "none",
            **({"held_back": step.held_back} if step.held_back else {})}
