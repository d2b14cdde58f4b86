"""The run queue: Dagster's ``QueuedRunCoordinator`` that also tags untagged training runs with their GPU pool.

The queue limits runs per ``ads-ranking/gpu-pool`` tag. Schedules, the CLI and launchpad runs
carry it, but a backfill launched from the UI's asset graph runs as Dagster's implicit asset
job with the backfill's own tags only, so the pool limit would not hold it back. Before a run
is queued, a run that materializes ``trained_model`` and has no pool tag gets the pool and
model tags its run config implies (``trained_model``'s ``gpu_pool`` / ``model_name``, else the
defaults). A run that carries the tags keeps them (``trained_model`` refuses tags that disagree
with its config). Used by ``dagster.yaml`` (``config.dagster_instance``) and the Helm values.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.tags import GPU_POOL_TAG, run_tags

TRAINING_ASSET = dg.AssetKey("trained_model")
TRAINING_JOBS = ("daily_retraining",)


def implied_tags(run: dg.DagsterRun) -> dict[str, str]:
    """The pool and model tags ``run`` lacks (empty if it has them or trains nothing)."""
    if GPU_POOL_TAG in run.tags:
        return {}
    selection = run.asset_selection
    trains = TRAINING_ASSET in selection if selection is not None else run.job_name in TRAINING_JOBS
    if not trains:
        return {}
    config: dict[str, Any] = ((run.run_config or {}).get("ops") or {}).get("trained_model", {}).get("config") or {}
    defaults = TrainingParams()
    tags = run_tags(str(config.get("model_name", defaults.model_name)), str(config.get("gpu_pool", defaults.gpu_pool)))
    return {k: v for k, v in tags.items() if k not in run.tags}


class PoolTaggingRunCoordinator(dg.QueuedRunCoordinator):
    """``QueuedRunCoordinator`` (same config) that adds :func:`implied_tags` before queueing."""

    def submit_run(self, context: dg.SubmitRunContext) -> dg.DagsterRun:
        run = context.dagster_run
        missing = implied_tags(run)
        if missing:
            self._instance.add_run_tags(run.run_id, missing)
            run = self._instance.get_run_by_id(run.run_id) or run
            context = dg.SubmitRunContext(run, context.workspace)
        return super().submit_run(context)
