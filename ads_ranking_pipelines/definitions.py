"""The Dagster code location. Environment variables are read here, when resources are built."""

from __future__ import annotations

import os
from collections.abc import Mapping

import dagster as dg

from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.defs.assets import batch_scores, impressions, model_evaluation, trained_model
from ads_ranking_pipelines.defs.gc_sensor import make_gc_sensor
from ads_ranking_pipelines.defs.jobs import daily_retraining, daily_retraining_schedule
from ads_ranking_pipelines.defs.ray_resources import ray_resource
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource


def build_definitions(environ: Mapping[str, str]) -> dg.Definitions:
    settings = Settings.from_environ(environ)
    return dg.Definitions(
        assets=[impressions, trained_model, model_evaluation, batch_scores],
        jobs=[daily_retraining],
        schedules=[daily_retraining_schedule],
        sensors=[make_gc_sensor(settings)],
        resources={
            "storage": StorageResource(home=settings.home),
            "event_source": EventSourceResource(),
            "ray_cluster": ray_resource(settings),
        },
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions(os.environ)
