"""The daily retraining assets: impressions → trained_model → model_evaluation; batch_scores.

For partition day D: training reads the ``dataset_window_days`` days before D; evaluation and
batch inference use day D itself, which the model never trained on.

Every asset takes a partition range (``BackfillPolicy.single_run()``): a backfill is one run on
one Ray cluster, and each Ray step is ONE Ray job over the whole range (one day included): it
trains the days in date order, one model version per day (warm-started from the previous day's
version by default), then evaluates them in date order, each against the champion of that
moment, promoting the versions whose gates pass (``train_step``, ``evaluate_step``, ``score_step``).
``batch_scores`` scores each day with the champion as of the end of that day's evaluation,
whatever the gates said: it is not downstream of the (blocking) gates, it runs after them in
the run (step priority).
Values move through the model registry, not an IO manager: a version is found again from its
day and the run that trained it.
"""

import dataclasses
import warnings
from collections.abc import Callable
from typing import Any

import dagster as dg

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.config.validation import ResolvedRequest
from ads_ranking_pipelines.defs.backfill_preview import check_budget, day_estimates
from ads_ranking_pipelines.defs.checks import CHECK_SPECS, check_results
from ads_ranking_pipelines.defs.config import EvaluationConfig, TrainingConfig
from ads_ranking_pipelines.defs.evaluate_step import evaluate_days
from ads_ranking_pipelines.defs.partitions import daily_partitions, partition_days, window_days
from ads_ranking_pipelines.defs.preflight import check_events, check_training_window, resolve_events, run_assets
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource
from ads_ranking_pipelines.defs.score_step import check_scoring_ahead, score_days
from ads_ranking_pipelines.defs.tags import MODEL_TAG, tags_mismatch
from ads_ranking_pipelines.defs.train_step import plan, train_days
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.registry import ModelRegistry

GROUP = "ads_ranking"
SINGLE_RUN = dg.BackfillPolicy.single_run()
# Order of steps that are ready together (in-process executor): scores come last.
PRIORITY = "dagster/priority"


def daily_asset(**kwargs: Any) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """``dg.asset`` for the daily assets, backfilled in one run per range (``SINGLE_RUN``).
    Dagster marks ``backfill_policy`` beta and warns at each definition; single-run backfills
    are the point of these assets, so that one warning is silenced here, not process-wide."""
    def define(fn: Callable[..., Any]) -> dg.AssetsDefinition:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*`backfill_policy`.*", category=dg.BetaWarning)
            return dg.asset(partitions_def=daily_partitions, group_name=GROUP,
                            backfill_policy=SINGLE_RUN, **kwargs)(fn)
    return define


def _registry(context: dg.AssetExecutionContext, storage: StorageResource, model_name: str | None = None) -> ModelRegistry:
    name = model_name or context.run.tags.get(MODEL_TAG) or TrainingParams().model_name
    return ModelRegistry(storage.layout(), name)


@daily_asset(kinds={"parquet"},
             op_tags={PRIORITY: "40"},
             description="One day of ad impressions in the event-parquet layout (generated for synthetic sources).")
def impressions(context: dg.AssetExecutionContext, storage: StorageResource,
                event_source: EventSourceResource) -> dg.MaterializeResult:
    source = resolve_events(event_source.source_config(storage.home), context.log)
    for day in partition_days(context):
        meta = check_events(source, [day], context.log)
        context.add_asset_metadata({"uri": fs.join(source.uri, f"event_date={day}"), **meta},
                                   partition_key=day.isoformat())
    return dg.MaterializeResult()


@daily_asset(deps=[impressions], kinds={"ray", "pytorch"},
             op_tags={PRIORITY: "30"},
             description="A TorchRec-sharded DLRM trained on Ray over the window before each partition day; "
                         "one model version per day, in date order, on one cluster.")
def trained_model(context: dg.AssetExecutionContext, config: TrainingConfig, storage: StorageResource,
                  event_source: EventSourceResource, ray_cluster: RayClusterResource) -> dg.MaterializeResult:
    days = partition_days(context)
    params = config.to_params()
    resolved = ray_cluster.cluster_request(params, context.run.run_id)         # bad pool/size: fails here
    mismatch = tags_mismatch(dict(context.run.tags), params.model_name, params.gpu_pool)
    if mismatch:                                                             # queued under the wrong pool
        raise dg.Failure(description=mismatch, allow_retries=False)
    params = params.with_cluster_cpus(resolved.request.cpus_per_worker)      # unset: the pool's share
    source = resolve_events(event_source.source_config(storage.home), context.log)
    for day in days:                                                         # every missing day named, before any cluster
        check_training_window(source, window_days(day, params.dataset_window_days), day, context.log)
    warm = config.warm_start if config.warm_start is not None else len(days) > 1
    registry = _registry(context, storage, params.model_name)
    check_scoring_ahead(context, registry, source, days, settled="model_evaluation" not in run_assets(context))
    preview, estimate_meta = check_budget(context, ray_cluster, params, registry.layout, source, days, config)
    the_plan = plan(registry, params, source, days, context.run.run_id, warm, cluster_record(ray_cluster, resolved),
                    resume=config.resume)
    the_plan = dataclasses.replace(the_plan, estimates=day_estimates(preview))
    versions = train_days(context, ray_cluster, registry, the_plan, resolved)
    return dg.MaterializeResult(metadata={"model_versions": ", ".join(versions), "days": len(days), **estimate_meta})


def cluster_record(ray_cluster: RayClusterResource, resolved: ResolvedRequest) -> dict[str, Any]:
    """What a model version records about its cluster: the request, and on KubeRay the rendered RayCluster
    (or the existing cluster the run used)."""
    record: dict[str, Any] = {"request": resolved.request.model_dump(mode="json"),
                              "backend": ray_cluster.backend_name}
    if ray_cluster.borrowed() is not None:                                   # not made by the run
        record["existing_cluster"] = ray_cluster.borrowed()
    elif ray_cluster.backend_name == "kuberay":
        from ads_ranking_pipelines.kuberay.raycluster import build_raycluster

        record["manifest"] = build_raycluster(resolved)
    return record


@daily_asset(deps=[trained_model], kinds={"ray", "xgboost"},
             op_tags={PRIORITY: "20"}, check_specs=CHECK_SPECS,
             description="Held-out-day metrics of each day's version beside the XGBoost baseline and the champion. "
                         "Gates are blocking asset checks; a version whose gates all pass becomes champion.")
def model_evaluation(context: dg.AssetExecutionContext, config: EvaluationConfig, storage: StorageResource,
                     event_source: EventSourceResource, ray_cluster: RayClusterResource):
    registry = _registry(context, storage)
    source = resolve_events(event_source.source_config(storage.home), context.log)
    verdicts = evaluate_days(context, config, registry, source, ray_cluster, partition_days(context))
    yield dg.MaterializeResult()
    yield from check_results(verdicts)


@daily_asset(deps=[impressions], kinds={"ray", "parquet"},
             op_tags={PRIORITY: "10"},
             description="Each partition day's impressions scored by the champion as of the end of that day's "
                         "evaluation (Ray Data map_batches); records the version used.")
def batch_scores(context: dg.AssetExecutionContext, storage: StorageResource,
                 event_source: EventSourceResource, ray_cluster: RayClusterResource) -> dg.MaterializeResult:
    registry = _registry(context, storage)
    source = resolve_events(event_source.source_config(storage.home), context.log)
    score_days(context, registry, source, ray_cluster, partition_days(context))
    return dg.MaterializeResult()
