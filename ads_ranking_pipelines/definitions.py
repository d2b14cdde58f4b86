"""The code location. Environment variables are read here, when resources are built.

The CLI reaches the jobs through this module (never ``defs`` directly): ``JOB_NAME``,
``run_config`` and ``range_tags`` are re-exported for it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import dagster as dg

from ads_ranking_pipelines.config.settings import Settings, SettingsError
from ads_ranking_pipelines.defs.backfill_preview import range_preview
from ads_ranking_pipelines.defs.assets import batch_scores, impressions, model_evaluation, trained_model
from ads_ranking_pipelines.defs.champion_asset import champion_changed, champion_spec
from ads_ranking_pipelines.defs.champion_jobs import promote_model, rollback_model
from ads_ranking_pipelines.defs.gc_sensor import dagster_run_status, make_gc_sensor, mark_collected, mark_dead_runs
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.defs.local_ray_resource import LocalRayResource
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
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


def ray_resource(settings: Settings, target: Mapping[str, str] | None = None) -> RayClusterResource:
    """The provisioning resource for ``settings.backend``; ``target``: fields naming an existing
    cluster to run on (``existing_cluster``, local also ``ray_address``), checked by name."""
    resource = _ray_resource(settings)
    if not target:
        return resource
    unknown = sorted(set(target) - set(type(resource).model_fields))
    if unknown:
        valid = "existing_cluster" + (", ray_address, keep_warm_s" if settings.backend == "local" else "")
        raise SettingsError(unknown[0], target[unknown[0]], f"{valid} (the fields of backend {settings.backend!r})")
    # a new instance: Dagster keeps a resource's config apart from its pydantic fields
    return type(resource)(**{**resource.model_dump(), **target})


def _ray_resource(settings: Settings) -> RayClusterResource:
    if settings.backend == "kuberay":
        return KubeRayResource(
            pool_catalog=settings.pool_catalog, storage_home=settings.home,
            namespace=settings.namespace, ray_image=settings.ray_image,
            service_account=settings.ray_service_account, auth_secret=settings.ray_auth_secret,
            shared_volume_claim=settings.shared_volume_claim,
            rayjob_deletion=settings.rayjob_deletion,
            replica_failure_grace_s=settings.replica_failure_grace_s,
            kube_context=settings.kube_context,
            kube_config_file=settings.kube_config_file, in_cluster=settings.kube_in_cluster,
            dev_working_tree=settings.dev_working_tree, controller_timeout_s=settings.controller_timeout_s)
    return LocalRayResource(pool_catalog=settings.pool_catalog, state_dir=settings.state_dir,
                            controller_timeout_s=settings.controller_timeout_s)


@dg.definitions
def defs() -> dg.Definitions:
    return build_definitions(os.environ)
