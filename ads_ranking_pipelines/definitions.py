"""The code location. Environment variables are read here, when resources are built.

The CLI reaches the jobs through this module (never ``defs`` directly): ``JOB_NAME``,
``run_config`` and ``range_tags`` are re-exported for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import dagster as dg

from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.defs.backfill_preview import range_preview
from ads_ranking_pipelines.defs.assets import batch_scores, impressions, model_evaluation, trained_model
from ads_ranking_pipelines.defs.champion_asset import champion_changed, champion_spec
from ads_ranking_pipelines.defs.champion_jobs import promote_model, rollback_model
from ads_ranking_pipelines.defs.gc_sensor import dagster_run_status, make_gc_sensor, mark_collected, mark_dead_runs
from ads_ranking_pipelines.defs.ray_resources import ray_resource
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource
from ads_ranking_pipelines.defs.jobs import JOB_NAME, daily_retraining, daily_retraining_schedule, range_tags, run_config
from ads_ranking_pipelines.defs.partitions import daily_partitions
from ads_ranking_pipelines.defs.realized_asset import realized_performance
from ads_ranking_pipelines.defs.rescore_sensor import rescore_after_rollback, rescore_batch_scores
from ads_ranking_pipelines.defs.tags import run_tags

__all__ = ["JOB_NAME", "build_definitions", "champion_changed", "dagster_run_status", "daily_partitions",
           "evaluation_config_fields", "event_source_config", "mark_collected", "mark_dead_runs",
           "range_preview", "range_tags", "ray_resource",
           "run_config", "run_tags"]

event_source_config = EventSourceResource.from_source


def evaluation_config_fields() -> dict[str, type]:
    """The gate thresholds of ``model_evaluation`` (for the CLI's --gate)."""
    from ads_ranking_pipelines.defs.config import EvaluationConfig

    return {name: f.annotation for name, f in EvaluationConfig.model_fields.items()}


def build_definitions(environ: Mapping[str, str], ray_target: Mapping[str, str] | None = None) -> dg.Definitions:
    """``ray_target``: run on an existing cluster (``ray_cluster`` fields: ``existing_cluster``, local
    also ``ray_address``) instead of creating one."""
    settings = Settings.from_environ(environ)
    return dg.Definitions(
        assets=[impressions, trained_model, model_evaluation, batch_scores, realized_performance, champion_spec],
        jobs=[daily_retraining, rescore_batch_scores, promote_model, rollback_model],
        schedules=[daily_retraining_schedule],
        sensors=[make_gc_sensor(settings), rescore_after_rollback],
        resources={
            "storage": StorageResource(home=settings.home),
            "event_source": EventSourceResource(),
            "ray_cluster": ray_resource(settings, ray_target),
        },
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions(os.environ)
