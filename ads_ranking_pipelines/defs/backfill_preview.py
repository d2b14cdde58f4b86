"""``trained_model``'s pre-flight estimate and budget, and estimate vs actual once a day is trained.

Before any cluster starts, the run's range is estimated from the model's recorded days on its
pool (``planning/``), logged, put on the run's tags and the step's metadata, and refused
(``dg.Failure`` naming the estimate and the limit) when it is over the pool's or the run's
budget. After each day is trained, its actual time beside the estimate goes into the day's
metadata and the history (``storage/train_history.py``) the next estimate is made from.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import dagster as dg

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.partitions import window_days
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
from ads_ranking_pipelines.events.row_counts import window_rows
from ads_ranking_pipelines.planning.budget import budget_for
from ads_ranking_pipelines.planning.preview import Preview, build_preview, capacity_of
from ads_ranking_pipelines.planning.render import duration, preview_json, preview_lines
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.train_history import read_history, record_day

ESTIMATE_TAG = "ads-ranking/estimate"


def range_preview(params: TrainingParams, pool: Any, layout: StorageLayout, source: Any, days: list[dt.date],
                  gpu_hours: float | None = None, cost: float | None = None,
                  run_limit: int | None = None) -> Preview:
    """The preview of training ``days`` (run limit: the pool's ``max_concurrent_runs`` unless given)."""
    rows = {d: window_rows(source, window_days(d, params.dataset_window_days)) for d in days}
    history = read_history(layout, params.model_name, params.gpu_pool)
    limit = run_limit if run_limit is not None else pool.max_concurrent_runs
    return build_preview(history, params, pool, rows, capacity_of(pool, limit), budget_for(pool, gpu_hours, cost))


def tag_text(p: Preview) -> str:
    e = p.estimate
    if not e.known:
        return f"{len(p.days)} day(s): unknown (no history)"
    cost = e.cost()
    return (f"{len(p.days)} day(s): ~{duration(e.wall_seconds())}, {e.gpu_hours():.3g} GPU-h"
            + (f", cost {cost:.3g}" if cost is not None else "") + f" (from {e.basis_days} past day(s))")


def check_budget(context: dg.AssetExecutionContext, ray_cluster: RayClusterResource, params: TrainingParams,
                 layout: StorageLayout, source: Any, days: list[dt.date], config: Any) -> tuple[Preview, dict]:
    """Log and record the preview; refuse the run when it is over budget. Returns it and its metadata."""
    pool = ray_cluster.catalog().get(params.gpu_pool)
    try:
        preview = range_preview(params, pool, layout, source, days, config.budget_gpu_hours, config.budget_cost)
    except ValueError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    for line in preview_lines(preview):
        context.log.info(line)
    meta = {"estimate": dg.MetadataValue.json(preview_json(preview)),
            "estimate_basis_days": preview.estimate.basis_days}
    if preview.estimate.known:
        meta |= {"estimated_wall_seconds": round(preview.estimate.wall_seconds(), 2),
                 "estimated_gpu_hours": preview.estimate.gpu_hours()}
    context.instance.add_run_tags(context.run.run_id, {ESTIMATE_TAG: tag_text(preview)})
    refusal = preview.refusal()
    if refusal:
        raise dg.Failure(description=refusal, metadata=meta, allow_retries=False)
    if preview.unchecked():
        context.log.warning(preview.unchecked())
    return preview, meta


def day_estimates(preview: Preview) -> dict[str, dict[str, float]]:
    """ISO day -> its estimate (empty without history)."""
    e = preview.estimate
    return {d.day.isoformat(): {"wall_seconds": round(d.wall_seconds, 2),
                                "gpu_hours": d.wall_seconds / 3600 * e.num_workers * e.gpus_per_worker}
            for d in e.days}


def versus(estimate: dict[str, float] | None, seconds: float) -> dict[str, Any]:
    """The day's metadata fields of estimate vs actual."""
    if not estimate:
        return {"estimate_note": "none: no recorded day of the model on the pool before this run"}
    est = estimate["wall_seconds"]
    return {"estimated_wall_seconds": est, "estimated_gpu_hours": estimate["gpu_hours"],
            "estimate_error_pct": round((seconds - est) / est * 100, 1) if est else 0.0}


def record_actual(layout: StorageLayout, params: TrainingParams, day: dt.date, meta: dict[str, Any],
                  estimate: dict[str, float] | None) -> None:
    """The trained day's actual figures (its metadata) and its estimate into the history."""
    record_day(layout, params.model_name, {
        "model_version": meta["model_version"], "day": day.isoformat(), "gpu_pool": params.gpu_pool,
        "num_workers": params.num_workers, "gpus_per_worker": params.gpus_per_worker,
        "rows": meta.get("rows"), "wall_seconds": meta["job_wall_seconds"], "gpu_hours": meta["gpu_hours"],
        "worker_hours": meta["worker_hours"], "estimate": estimate})
