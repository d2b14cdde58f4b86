"""``realized_performance``'s work: each day's scores against its labels now, beside the evaluation.

The version that scored a day and where its scores are come from the day's latest
``batch_scores`` materialization; what the version was predicted to do is its evaluation record
in the registry (the one that promoted it, else its latest). A day whose realized metrics regress
beyond the tolerance (``contracts.realized``) rolls the champion back through the registry, if
that version is still the champion: who is the check, why is the numbers. With ``rescore`` on,
the days the rolled-back version scored are named in the day's metadata (``rescore_days``) for the
``rescore_after_rollback`` sensor.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import dagster as dg

from ads_ranking_pipelines.contracts.gates import Verdict
from ads_ranking_pipelines.contracts.realized import CHECK_REALIZED, judge_realized
from ads_ranking_pipelines.defs.champion_asset import champion_changed
from ads_ranking_pipelines.defs.config import RealizedConfig
from ads_ranking_pipelines.events.realized import RealizedJoinError, realized_metrics
from ads_ranking_pipelines.metrics import MetricError
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import PARTITION_PREFIX
from ads_ranking_pipelines.storage.registry import ModelRegistry, RegistryError

SCORES_KEY = dg.AssetKey("batch_scores")
CHECK_WHO = f"check:{CHECK_REALIZED}"


def latest_scoring(instance: dg.DagsterInstance, day: dt.date) -> tuple[str, str] | None:
    """(version, scores URI) of ``day``'s latest ``batch_scores`` materialization (None: never scored)."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=SCORES_KEY, asset_partitions=[day.isoformat()]), limit=1).records
    if not records or records[0].asset_materialization is None:
        return None
    meta = records[0].asset_materialization.metadata
    if "model_version" not in meta or "scores_uri" not in meta:
        return None
    return str(meta["model_version"].value), str(meta["scores_uri"].value)


def predicted_metrics(registry: ModelRegistry, version: str) -> dict[str, Any]:
    """The version's evaluation metrics: the evaluation that promoted it, else its latest."""
    records = registry.evaluations(version)
    if not records:
        raise dg.Failure(description=f"{registry.model_name} version {version} has no evaluation record to compare "
                         "realized metrics with: materialize model_evaluation for its day first", allow_retries=False)
    promoted = [r for r in records if r.get("promoted")]
    return (promoted or records)[-1]["metrics"]


def judge_day(context: dg.AssetExecutionContext, config: RealizedConfig, registry: ModelRegistry,
              source: Any, day: dt.date) -> Verdict:
    scoring = latest_scoring(context.instance, day)
    if scoring is None:
        raise dg.Failure(description=f"{day} has no batch_scores materialization with a model_version and scores_uri: "
                         f"materialize batch_scores for {day} first", allow_retries=False)
    version, uri = scoring
    try:
        realized = realized_metrics(uri, source, day)
    except (RealizedJoinError, MetricError) as exc:
        raise dg.Failure(description=f"cannot compute realized metrics of {version} on {day}: {exc}",
                         allow_retries=False) from None
    verdict = judge_realized(day.isoformat(), version, realized, predicted_metrics(registry, version),
                             config.tolerance())
    context.add_asset_metadata({**verdict.metadata, "passed": verdict.passed,
                                "scores_uri": dg.MetadataValue.path(uri)}, partition_key=day.isoformat())
    return verdict


def judge_days(context: dg.AssetExecutionContext, config: RealizedConfig, registry: ModelRegistry,
               source: Any, days: list[dt.date]) -> list[Verdict]:
    """Judge each day in date order; a regression of the current champion rolls it back (once)."""
    verdicts = []
    for day in days:
        verdict = judge_day(context, config, registry, source, day)
        verdicts.append(verdict)
        if verdict.passed:
            context.log.info(verdict.text)
            continue
        context.log.warning(verdict.text)
        outcome = respond(context, config, registry, verdict)
        context.add_asset_metadata(outcome, partition_key=day.isoformat())
    return verdicts


def respond(context: dg.AssetExecutionContext, config: RealizedConfig, registry: ModelRegistry,
            verdict: Verdict) -> dict[str, str]:
    """Roll back a regressed champion (when configured and it still is the champion); what was done."""
    version, current = verdict.metadata["model_version"], registry.champion_version()
    if not config.rollback:
        return {"rollback": f"off (rollback: false); champion stays {current or 'none'}"}
    if current != version:
        context.log.warning(f"{version} is no longer the champion ({current or 'none'}): nothing rolled back")
        return {"rollback": f"none: {version} is no longer the champion ({current or 'none'})"}
    try:
        doc = registry.rollback(reason=f"realized labels: {verdict.text}", by=CHECK_WHO)
    except RegistryError as exc:
        context.log.warning(f"cannot roll back {version}: {exc}")
        return {"rollback": f"refused: {exc}"}
    context.log_event(champion_changed(doc))
    context.log.warning(f"rolled {registry.model_name} back from {version} to {doc['model_version']}")
    outcome = {"rollback": f"{version} -> {doc['model_version']}"}
    if config.rescore:
        days = scored_days(context.instance, registry, version)
        outcome["rescore_days"] = ", ".join(d.isoformat() for d in days)
        context.log.info(f"batch_scores requested again for {outcome['rescore_days'] or 'no day'}")
    return outcome


def scored_days(instance: dg.DagsterInstance, registry: ModelRegistry, version: str) -> list[dt.date]:
    """The days whose latest scores are ``version``'s, oldest first."""
    root = registry.layout.scores_root(registry.model_name)
    days = []
    for name in sorted(fs.list_dir(root)):
        if not name.startswith(PARTITION_PREFIX):
            continue
        day = dt.date.fromisoformat(name[len(PARTITION_PREFIX):])
        latest = latest_scoring(instance, day)
        if latest is not None and latest[0] == version:
            days.append(day)
    return days


def check_result(verdicts: list[Verdict]) -> dg.AssetCheckResult:
    """One result over the run's days: failed if any day regressed, with every day's numbers."""
    failed = [v for v in verdicts if not v.passed]
    shown = failed[0] if failed else verdicts[-1]
    text = "; ".join(("FAILED " if not v.passed else "") + v.text for v in verdicts)
    return dg.AssetCheckResult(check_name=CHECK_REALIZED, passed=not failed, description=text[:2000],
                               metadata={**shown.metadata, "days": len(verdicts),
                                         "failed_days": ", ".join(v.day for v in failed) or "none"})
