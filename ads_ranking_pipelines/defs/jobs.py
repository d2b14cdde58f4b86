"""The daily retraining job and its schedule."""

from __future__ import annotations

import dagster as dg

from ads_ranking_pipelines.defs.assets import batch_scores, impressions, model_evaluation, trained_model
from ads_ranking_pipelines.defs.partitions import daily_partitions

JOB_NAME = "daily_retraining"

# One process per run: the Ray cluster session is provisioned once and serves every step.
daily_retraining = dg.define_asset_job(
    JOB_NAME,
    selection=dg.AssetSelection.assets(impressions, trained_model, model_evaluation, batch_scores),
    partitions_def=daily_partitions,
    executor_def=dg.in_process_executor,
    description="Train, evaluate and score one day: window before D → model version → gates on D → scores of D.",
    tags={"team": "ads-ranking"},
)

# At 03:00 UTC each day, run the partition of the day that just ended.
daily_retraining_schedule = dg.build_schedule_from_partitioned_job(
    daily_retraining, hour_of_day=3, minute_of_hour=0, name="daily_retraining_schedule",
)
