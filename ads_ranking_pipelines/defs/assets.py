"""The daily retraining assets: impressions → trained_model → model_evaluation, batch_scores.

For partition day D: training reads the ``dataset_window_days`` days before D; evaluation and
batch inference use day D itself, which the model never trained on.
"""


import datetime as dt
import os
import uuid
from typing import Any

import dagster as dg

from ads_ranking_pipelines.backends.base import JobSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.config import EvaluationConfig, TrainingConfig
from ads_ranking_pipelines.defs.partitions import daily_partitions, partition_day, window_days
from ads_ranking_pipelines.defs.pipes import run_ray_job
from ads_ranking_pipelines.defs.preflight import check_events, check_training_window
from ads_ranking_pipelines.defs.resources import EventSourceResource, RayClusterResource, StorageResource
from ads_ranking_pipelines.ray_jobs.common import SPEC_ENV
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.registry import ModelRegistry
from ads_ranking_pipelines.contracts.jobs import EvalJobSpec, InferenceJobSpec, TrainJobSpec
from ads_ranking_pipelines.version import code_version

GROUP = "ads_ranking"
CHECK_BASELINE = "not_worse_than_xgboost_baseline"
CHECK_CHAMPION = "not_worse_than_champion"
CHECK_CALIBRATION = "calibrated"


def _numeric(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _job(kind: str, context: dg.AssetExecutionContext, day: dt.date, python: str, spec: Any) -> JobSpec:
    return JobSpec(
        submission_id=f"{kind}-{day:%Y%m%d}-{context.run.run_id[:8]}-{uuid.uuid4().hex[:6]}",
        entrypoint=f"{python} -m ads_ranking_pipelines.ray_jobs.{kind}",
        env_vars={SPEC_ENV: spec.model_dump_json()},
        metadata={"dagster_run_id": context.run.run_id, "dagster_asset": context.asset_key.to_user_string(),
                  "partition": day.isoformat()},
    )


def _session(context: dg.AssetExecutionContext, ray_cluster: RayClusterResource, request: Any):
    origin = context.dagster_run.remote_job_origin
    location = origin.location_name if origin is not None else None
    return ray_cluster.session(request, context.log, run_id=context.run.run_id, code_location=location)


@dg.asset(partitions_def=daily_partitions, group_name=GROUP, kinds={"parquet"},
          description="One day of ad impressions in the event-parquet layout (generated for synthetic sources).")
def impressions(context: dg.AssetExecutionContext, storage: StorageResource,
                event_source: EventSourceResource) -> dg.MaterializeResult:
    day = partition_day(context)
    source = event_source.source_config(storage.home)
    meta = check_events(source, [day], context.log)
    return dg.MaterializeResult(metadata={"uri": fs.join(source.uri, f"event_date={day}"), **meta})


@dg.asset(partitions_def=daily_partitions, group_name=GROUP, deps=[impressions], kinds={"ray", "pytorch"},
          description="A TorchRec-sharded DLRM trained on Ray over the window before the partition day.")
def trained_model(context: dg.AssetExecutionContext, config: TrainingConfig, storage: StorageResource,
                  event_source: EventSourceResource, ray_cluster: RayClusterResource) -> dg.Output[dict]:
    day = partition_day(context)
    params = config.to_params()
    request = ray_cluster.cluster_request(params, context.run.run_id)          # bad pool/size: fails here
    params = params.with_cluster_cpus(request.cpus_per_worker)               # unset: the pool's share
    source = event_source.source_config(storage.home)
    train_days = window_days(day, params.dataset_window_days)
    check_training_window(source, train_days, day, context.log)            # missing days/columns/labels
    layout = storage.layout()
    version = f"{day:%Y%m%d}-{context.run.run_id[:8]}"
    model_uri = layout.model_version(params.model_name, version)
    spec = TrainJobSpec(params=params, source=source, train_days=tuple(train_days), model_version=version,
                        model_uri=model_uri, ray_storage_uri=layout.ray_storage(),
                        run_name=f"{params.model_name}-{version}", code_version=code_version(os.environ))
    session = _session(context, ray_cluster, request)
    try:
        outcome = run_ray_job(context, session, _job("train", context, day, ray_cluster.python(), spec))
    except BaseException:
        ModelRegistry(layout, params.model_name).discard_incomplete(version)
        raise
    result = outcome.result
    value = {"model_name": params.model_name, "model_version": version, "model_uri": model_uri,
             "params": params.model_dump(mode="json"), "train_days": [d.isoformat() for d in train_days]}
    return dg.Output(value, metadata={
        "model_version": version, "model_uri": dg.MetadataValue.path(model_uri),
        "ray_job_id": outcome.job_id, "train_window": f"{train_days[0]}..{train_days[-1]}",
        "num_workers": params.num_workers, "gpu_pool": params.gpu_pool,
        **_numeric({k: result.get(k) for k in ("final_loss", "samples_per_s", "rows", "epochs",
                                                "wall_seconds", "worker_restarts", "resumed_from_epoch")}),
        "sharding_plan": dg.MetadataValue.json(result.get("sharding_plan") or {}),
    })


@dg.asset(partitions_def=daily_partitions, group_name=GROUP, kinds={"ray", "xgboost"},
          check_specs=[
              dg.AssetCheckSpec(CHECK_BASELINE, asset="model_evaluation",
                                description="AUC on the held-out day within a margin of an XGBoost baseline trained on the same window."),
              dg.AssetCheckSpec(CHECK_CHAMPION, asset="model_evaluation",
                                description="AUC on the held-out day not below the current champion's by more than the margin."),
              dg.AssetCheckSpec(CHECK_CALIBRATION, asset="model_evaluation",
                                description="Mean prediction / observed CTR within bounds."),
          ],
          description="Held-out-day metrics of the new version beside the XGBoost baseline and the champion; promotes on pass.")
def model_evaluation(context: dg.AssetExecutionContext, config: EvaluationConfig, trained_model: dict,
                     storage: StorageResource, event_source: EventSourceResource,
                     ray_cluster: RayClusterResource):
    day = partition_day(context)
    params = TrainingParams.model_validate(trained_model["params"])
    source = event_source.source_config(storage.home)
    check_events(source, [day], context.log)
    registry = ModelRegistry(storage.layout(), params.model_name)
    champion = registry.champion()
    champion_uri = registry.version_uri(champion["model_version"]) if champion else None
    if champion and champion["model_version"] == trained_model["model_version"]:
        champion_uri = None
    spec = EvalJobSpec(params=params, source=source,
                       train_days=tuple(dt.date.fromisoformat(d) for d in trained_model["train_days"]),
                       eval_day=day, model_uri=trained_model["model_uri"], champion_uri=champion_uri)
    session = _session(context, ray_cluster, ray_cluster.cluster_request(params, context.run.run_id))
    m = run_ray_job(context, session, _job("evaluate", context, day, ray_cluster.python(), spec)).result

    registry.record_evaluation(trained_model["model_version"], day, m)
    checks = evaluate_gates(m, config)
    passed = all(c.passed for c in checks)
    promoted = False
    if passed and config.promote:
        registry.promote(trained_model["model_version"], reason=f"passed gates on {day}", metrics=_numeric(m))
        promoted = True
        context.log.info(f"promoted {trained_model['model_version']} to champion of {params.model_name}")
    yield dg.MaterializeResult(metadata={
        **_numeric(m), "model_version": trained_model["model_version"], "eval_day": day.isoformat(),
        "champion_version": m.get("champion_version", "none"), "promoted": promoted,
    })
    yield from checks


def evaluate_gates(m: dict[str, Any], config: EvaluationConfig) -> list[dg.AssetCheckResult]:
    auc, base = float(m["auc"]), float(m["baseline_auc"])
    out = [dg.AssetCheckResult(
        check_name=CHECK_BASELINE, passed=auc >= base - config.max_auc_gap_vs_baseline,
        metadata={"auc": auc, "baseline_auc": base, "margin": config.max_auc_gap_vs_baseline,
                  "lift": auc - base})]
    if "champion_auc" in m:
        champ = float(m["champion_auc"])
        out.append(dg.AssetCheckResult(
            check_name=CHECK_CHAMPION, passed=auc >= champ - config.max_auc_drop_vs_champion,
            metadata={"auc": auc, "champion_auc": champ, "champion_version": m.get("champion_version"),
                      "margin": config.max_auc_drop_vs_champion, "lift": auc - champ}))
    else:
        out.append(dg.AssetCheckResult(check_name=CHECK_CHAMPION, passed=True,
                                       metadata={"auc": auc, "note": "no champion yet"}))
    cal = float(m["calibration"])
    out.append(dg.AssetCheckResult(
        check_name=CHECK_CALIBRATION, passed=config.min_calibration <= cal <= config.max_calibration,
        metadata={"calibration": cal, "min": config.min_calibration, "max": config.max_calibration}))
    return out


@dg.asset(partitions_def=daily_partitions, group_name=GROUP, kinds={"ray", "parquet"},
          description="The partition day's impressions scored by the new version (Ray Data map_batches).")
def batch_scores(context: dg.AssetExecutionContext, trained_model: dict, storage: StorageResource,
                 event_source: EventSourceResource, ray_cluster: RayClusterResource) -> dg.MaterializeResult:
    day = partition_day(context)
    params = TrainingParams.model_validate(trained_model["params"])
    source = event_source.source_config(storage.home)
    check_events(source, [day], context.log)
    out_uri = storage.layout().scores(params.model_name, day, trained_model["model_version"])
    id_columns = ("impression_id",) if source.kind == "synthetic" else ()
    spec = InferenceJobSpec(source=source, day=day, model_uri=trained_model["model_uri"],
                            model_version=trained_model["model_version"], output_uri=out_uri,
                            hash_buckets=params.hash_buckets, id_columns=id_columns)
    session = _session(context, ray_cluster, ray_cluster.cluster_request(params, context.run.run_id))
    stats = run_ray_job(context, session, _job("infer", context, day, ray_cluster.python(), spec)).result
    return dg.MaterializeResult(metadata={
        **_numeric(stats), "scores_uri": dg.MetadataValue.path(out_uri),
        "model_version": trained_model["model_version"]})
