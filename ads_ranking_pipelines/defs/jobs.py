"""The daily retraining job, its schedule, and the run config / tags every launcher uses."""

from __future__ import annotations

import datetime as dt
from typing import Any

import dagster as dg

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.assets import batch_scores, impressions, model_evaluation, trained_model
from ads_ranking_pipelines.defs.partitions import daily_partitions
from ads_ranking_pipelines.defs.tags import run_tags

JOB_NAME = "daily_retraining"
SCHEDULE_NAME = "daily_retraining_schedule"
_DEFAULTS = TrainingParams()

# One process per run: the Ray cluster session is provisioned once and serves every step (and,
# for a backfill's range, every day).
daily_retraining = dg.define_asset_job(
    JOB_NAME,
    selection=dg.AssetSelection.assets(impressions, trained_model, model_evaluation, batch_scores),
    partitions_def=daily_partitions,
    executor_def=dg.in_process_executor,
    description="Train, evaluate and score one day (or a range of days in one run): window before D → model "
                "version → gates on D (promotion) → D scored by the champion.",
    tags=run_tags(_DEFAULTS.model_name, _DEFAULTS.gpu_pool),
)


def run_config(params: TrainingParams, source_resource: dict[str, Any] | None = None,
               warm_start: bool | None = None, evaluation: dict[str, Any] | None = None,
               budget: dict[str, float] | None = None) -> dict[str, Any]:
    """Run config of ``daily_retraining`` for ``params`` (and an event-source resource config);
    ``budget``: the run's ``budget_gpu_hours`` / ``budget_cost`` overrides."""
    training = params.model_dump(mode="json")
    if warm_start is not None:
        training["warm_start"] = warm_start
    training.update({k: v for k, v in (budget or {}).items() if v is not None})
    config: dict[str, Any] = {"ops": {"trained_model": {"config": training}}}
    if evaluation:
        config["ops"]["model_evaluation"] = {"config": evaluation}
    if source_resource is not None:
        config["resources"] = {"event_source": {"config": source_resource}}
    return config


def range_tags(first: dt.date, last: dt.date) -> dict[str, str]:
    """Tags that make one run cover a partition range (what a single-run backfill sets)."""
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    return {ASSET_PARTITION_RANGE_START_TAG: first.isoformat(), ASSET_PARTITION_RANGE_END_TAG: last.isoformat()}


@dg.schedule(job=daily_retraining, cron_schedule="0 3 * * *", execution_timezone="UTC", name=SCHEDULE_NAME,
             description="At 03:00 UTC, the day that just ended, with the launchpad defaults.")
def daily_retraining_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
    day = context.scheduled_execution_time.astimezone(dt.timezone.utc).date() - dt.timedelta(days=1)
    return dg.RunRequest(run_key=day.isoformat(), partition_key=day.isoformat(),
                         tags=run_tags(_DEFAULTS.model_name, _DEFAULTS.gpu_pool))
