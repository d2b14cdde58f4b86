"""The daily retraining assets: impressions → trained_model → model_evaluation; batch_scores.

For partition day D: training reads the ``dataset_window_days`` days before D; evaluation and
batch inference use day D itself, which the model never trained on.

Every asset takes a partition range (``BackfillPolicy.single_run()``): a backfill is one run on
one Ray cluster that trains the days in date order, one model version per day (warm-started
from the previous day's version by default), then evaluates them in date order, each against
the champion of that moment, promoting the versions whose gates pass. ``batch_scores`` scores
each day with the champion as of the end of that day's evaluation, whatever the gates said: it
is not downstream of the (blocking) gates, it runs after them in the run (step priority).
Values move through the model registry, not an IO manager: a version is found again from its
day and the run that trained it.
"""

import datetime as dt
import os
import time
import uuid
import warnings
from typing import Any

import dagster as dg

from ads_ranking_pipelines.backends.base import JobSpec
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.jobs import EvalJobSpec, InferenceJobSpec, TrainJobSpec
from ads_ranking_pipelines.defs.checks import CHECK_SPECS, Verdict, check_results, gate_verdicts
from ads_ranking_pipelines.defs.config import EvaluationConfig, TrainingConfig
from ads_ranking_pipelines.defs.partitions import daily_partitions, partition_days, window_days
from ads_ranking_pipelines.defs.pipes import run_ray_job
from ads_ranking_pipelines.defs.preflight import check_events, check_training_window, resolve_events
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource
from ads_ranking_pipelines.defs.tags import MODEL_TAG, tags_mismatch
from ads_ranking_pipelines.ray_jobs.common import SPEC_ENV
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.registry import ModelRegistry, RegistryError
from ads_ranking_pipelines.version import code_version

# The single-run backfill policy is marked beta; it is the point of these assets, so say it once here.
warnings.filterwarnings("ignore", message=".*`backfill_policy`.*", category=dg.BetaWarning)

GROUP = "ads_ranking"
SINGLE_RUN = dg.BackfillPolicy.single_run()
# Order of steps that are ready together (in-process executor): scores come last.
PRIORITY = "dagster/priority"


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


def _run_version(day: dt.date, run_id: str) -> str:
    return f"{day:%Y%m%d}-{run_id[:8]}"


def _registry(context: dg.AssetExecutionContext, storage: StorageResource, model_name: str | None = None) -> ModelRegistry:
    name = model_name or context.run.tags.get(MODEL_TAG) or TrainingParams().model_name
    return ModelRegistry(storage.layout(), name)


def _hours(workers: int, gpus_per_worker: int, seconds: float) -> dict[str, float]:
    return {"worker_hours": workers * seconds / 3600.0, "gpu_hours": workers * gpus_per_worker * seconds / 3600.0}


@dg.asset(partitions_def=daily_partitions, group_name=GROUP, kinds={"parquet"}, backfill_policy=SINGLE_RUN,
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


def _previous_version(registry: ModelRegistry, day: dt.date, trained: dict[dt.date, str]) -> str | None:
    """The version of the day before ``day``: trained in this run, else the newest on storage."""
    before = day - dt.timedelta(days=1)
    if before in trained:
        return trained[before]
    earlier = registry.versions_for_day(before)
    return earlier[-1] if earlier else None


@dg.asset(partitions_def=daily_partitions, group_name=GROUP, deps=[impressions], kinds={"ray", "pytorch"},
          backfill_policy=SINGLE_RUN, op_tags={PRIORITY: "30"},
          description="A TorchRec-sharded DLRM trained on Ray over the window before each partition day; "
                      "one model version per day, in date order, on one cluster.")
def trained_model(context: dg.AssetExecutionContext, config: TrainingConfig, storage: StorageResource,
                  event_source: EventSourceResource, ray_cluster: RayClusterResource) -> dg.MaterializeResult:
    days = partition_days(context)
    params = config.to_params()
    request = ray_cluster.cluster_request(params, context.run.run_id)          # bad pool/size: fails here
    mismatch = tags_mismatch(dict(context.run.tags), params.model_name, params.gpu_pool)
    if mismatch:                                                             # queued under the wrong pool
        raise dg.Failure(description=mismatch, allow_retries=False)
    params = params.with_cluster_cpus(request.cpus_per_worker)               # unset: the pool's share
    source = resolve_events(event_source.source_config(storage.home), context.log)
    for day in days:                                                         # every missing day named, before any cluster
        check_training_window(source, window_days(day, params.dataset_window_days), day, context.log)
    warm = config.warm_start if config.warm_start is not None else len(days) > 1
    registry = _registry(context, storage, params.model_name)
    trained: dict[dt.date, str] = {}
    for day in days:
        init = _previous_version(registry, day, trained) if warm else None
        trained[day] = _train_day(context, ray_cluster, registry, params, source, request, day, init)
    return dg.MaterializeResult(metadata={"model_versions": ", ".join(trained.values()), "days": len(days)})


def cluster_record(ray_cluster: RayClusterResource, request: Any) -> dict[str, Any]:
    """What a model version records about its cluster: the request, and on KubeRay the rendered RayCluster."""
    record: dict[str, Any] = {"request": request.model_dump(mode="json"), "backend": ray_cluster.backend_name}
    if ray_cluster.backend_name == "kuberay":
        from ads_ranking_pipelines.config.validation import resolve_request
        from ads_ranking_pipelines.kuberay.raycluster import build_raycluster

        record["manifest"] = build_raycluster(resolve_request(request, ray_cluster.catalog()))
    return record


def _train_day(context: dg.AssetExecutionContext, ray_cluster: RayClusterResource, registry: ModelRegistry,
               params: TrainingParams, source: Any, request: Any, day: dt.date, init: str | None) -> str:
    version = _run_version(day, context.run.run_id)
    train_days = window_days(day, params.dataset_window_days)
    layout = registry.layout
    spec = TrainJobSpec(params=params, source=source, train_days=tuple(train_days), model_version=version,
                        model_uri=registry.version_uri(version), ray_storage_uri=layout.ray_storage(),
                        run_name=f"{params.model_name}-{version}", code_version=code_version(os.environ),
                        init_model_uri=registry.version_uri(init) if init else None,
                        cluster=cluster_record(ray_cluster, request))
    context.log.info(f"training {version} on {train_days[0]}..{train_days[-1]}"
                     + (f", warm start from {init}" if init else ""))
    session = _session(context, ray_cluster, request)
    t0 = time.perf_counter()
    try:
        outcome = run_ray_job(context, session, _job("train", context, day, ray_cluster.python(), spec))
    except BaseException:
        registry.discard_incomplete(version)
        raise
    wall = time.perf_counter() - t0
    r = outcome.result
    context.add_asset_metadata({
        "model_version": version, "model_uri": dg.MetadataValue.path(spec.model_uri),
        "ray_job_id": outcome.job_id, "train_window": f"{train_days[0]}..{train_days[-1]}",
        "warm_start_from": init or "none", "num_workers": params.num_workers, "gpu_pool": params.gpu_pool,
        "job_wall_seconds": round(wall, 2), **_hours(params.num_workers, params.gpus_per_worker, wall),
        **_numeric({k: r.get(k) for k in ("final_loss", "samples_per_s", "rows", "epochs",
                                           "wall_seconds", "worker_restarts", "resumed_from_epoch",
                                           "best_epoch", "train_rows", "valid_logloss", "valid_auc")}),
        "sharding_plan": dg.MetadataValue.json(r.get("sharding_plan") or {}),
    }, partition_key=day.isoformat())
    return version


def _version_to_evaluate(registry: ModelRegistry, day: dt.date, run_id: str) -> str:
    mine = _run_version(day, run_id)
    if registry.is_complete(mine):
        return mine
    done = registry.versions_for_day(day)
    if not done:
        raise dg.Failure(description=f"no trained {registry.model_name} version for {day}: materialize "
                         f"trained_model for {day} first", allow_retries=False)
    return done[-1]


@dg.asset(partitions_def=daily_partitions, group_name=GROUP, deps=[trained_model], kinds={"ray", "xgboost"},
          backfill_policy=SINGLE_RUN, op_tags={PRIORITY: "20"}, check_specs=CHECK_SPECS,
          description="Held-out-day metrics of each day's version beside the XGBoost baseline and the champion. "
                      "Gates are blocking asset checks; a version whose gates all pass becomes champion.")
def model_evaluation(context: dg.AssetExecutionContext, config: EvaluationConfig, storage: StorageResource,
                     event_source: EventSourceResource, ray_cluster: RayClusterResource):
    registry = _registry(context, storage)
    source = resolve_events(event_source.source_config(storage.home), context.log)
    verdicts: list[Verdict] = []
    for day in partition_days(context):
        verdicts += _evaluate_day(context, config, registry, source, ray_cluster, day)
    yield dg.MaterializeResult()
    yield from check_results(verdicts)


def _evaluate_day(context: dg.AssetExecutionContext, config: EvaluationConfig, registry: ModelRegistry,
                  source: Any, ray_cluster: RayClusterResource, day: dt.date) -> list[Verdict]:
    version = _version_to_evaluate(registry, day, context.run.run_id)
    manifest = registry.manifest(version)
    params = TrainingParams.model_validate(fs.read_json(fs.join(registry.version_uri(version), "model.json"))["params"])
    check_events(source, [day], context.log)
    champion = registry.champion_version()
    champion_uri = registry.version_uri(champion) if champion and champion != version else None
    spec = EvalJobSpec(params=params, source=source, train_days=tuple(dt.date.fromisoformat(d) for d in manifest["train_days"]),
                       eval_day=day, model_uri=registry.version_uri(version), champion_uri=champion_uri)
    session = _session(context, ray_cluster, ray_cluster.cluster_request(params, context.run.run_id))
    m = run_ray_job(context, session, _job("evaluate", context, day, ray_cluster.python(), spec)).result
    verdicts = gate_verdicts(day.isoformat(), m, config)
    passed = all(v.passed for v in verdicts)
    promoted = _promote_if_passed(context, config, registry, version, day, m, verdicts, passed)
    champion_after = registry.champion_version()
    registry.record_evaluation(version, day, _numeric(m), passed=passed, promoted=promoted,
                               champion_before=champion, champion_after=champion_after,
                               gates={v.check: v.passed for v in verdicts}, run_id=context.run.run_id)
    lift = {"lift_vs_baseline": float(m["auc"]) - float(m["baseline_auc"])}
    if "champion_auc" in m:
        lift["lift_vs_champion"] = float(m["auc"]) - float(m["champion_auc"])
    context.add_asset_metadata({
        **_numeric(m), **lift, "model_version": version, "eval_day": day.isoformat(),
        "champion_version": m.get("champion_version", "none"), "promoted": promoted,
        "gates_passed": passed, "champion_after": champion_after or "none",
    }, partition_key=day.isoformat())
    return verdicts


def _promote_if_passed(context: dg.AssetExecutionContext, config: EvaluationConfig, registry: ModelRegistry,
                       version: str, day: dt.date, m: dict[str, Any], verdicts: list[Verdict], passed: bool) -> bool:
    if not passed:
        context.log.warning(f"{version} stays a candidate: " + "; ".join(v.text for v in verdicts if not v.passed)
                            + f"; champion unchanged ({registry.champion_version() or 'none'})")
        return False
    if not config.promote or registry.champion_version() == version:
        return False
    reason = f"passed gates on {day}: " + "; ".join(v.text for v in verdicts)
    registry.promote(version, reason=reason, by=f"dagster run {context.run.run_id}", metrics=_numeric(m))
    context.log.info(f"promoted {version} to champion of {registry.model_name}")
    return True


def _champion_for_day(registry: ModelRegistry, day: dt.date, run_id: str) -> str:
    """The champion as of the end of ``day``'s evaluation in this run, else the current one."""
    record = registry.evaluation(_run_version(day, run_id), day)
    version = (record or {}).get("champion_after") or registry.champion_version()
    if not version:
        raise dg.Failure(description=f"{registry.model_name} has no champion to score {day} with: no version "
                         "has passed the gates yet (promote one with `ads-ranking model promote VERSION --reason ...`)",
                         allow_retries=False)
    return version


@dg.asset(partitions_def=daily_partitions, group_name=GROUP, deps=[impressions], kinds={"ray", "parquet"},
          backfill_policy=SINGLE_RUN, op_tags={PRIORITY: "10"},
          description="Each partition day's impressions scored by the champion as of the end of that day's "
                      "evaluation (Ray Data map_batches); records the version used.")
def batch_scores(context: dg.AssetExecutionContext, storage: StorageResource,
                 event_source: EventSourceResource, ray_cluster: RayClusterResource) -> dg.MaterializeResult:
    registry = _registry(context, storage)
    source = resolve_events(event_source.source_config(storage.home), context.log)
    for day in partition_days(context):
        _score_day(context, registry, source, ray_cluster, day)
    return dg.MaterializeResult()


def _score_day(context: dg.AssetExecutionContext, registry: ModelRegistry, source: Any,
               ray_cluster: RayClusterResource, day: dt.date) -> None:
    version = _champion_for_day(registry, day, context.run.run_id)
    try:
        registry.manifest(version)
    except RegistryError as exc:
        raise dg.Failure(description=f"cannot score {day} with champion {version}: {exc}", allow_retries=False) from None
    model_uri = registry.version_uri(version)
    params = TrainingParams.model_validate(fs.read_json(fs.join(model_uri, "model.json"))["params"])
    check_events(source, [day], context.log)
    out_uri = registry.layout.scores(registry.model_name, day, version)
    id_columns = ("impression_id",) if source.kind == "synthetic" else ()
    spec = InferenceJobSpec(source=source, day=day, model_uri=model_uri, model_version=version, output_uri=out_uri,
                            hash_buckets=params.hash_buckets, id_columns=id_columns)
    session = _session(context, ray_cluster, ray_cluster.cluster_request(params, context.run.run_id))
    t0 = time.perf_counter()
    stats = run_ray_job(context, session, _job("infer", context, day, ray_cluster.python(), spec)).result
    context.add_asset_metadata({
        **_numeric(stats), "scores_uri": dg.MetadataValue.path(out_uri), "model_version": version,
        "job_wall_seconds": round(time.perf_counter() - t0, 2)}, partition_key=day.isoformat())
