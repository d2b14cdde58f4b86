"""Scoring again after a rollback on realized labels: the ``rescore_after_rollback`` sensor.

``realized_performance`` names, in the metadata of the day that rolled the champion back, the days
the rolled-back version scored (``rescore_days``, only with ``rescore: true``). This sensor reads
each new materialization of it and requests ``rescore_batch_scores`` for those days, with the
event source of the run that asked; the champion is then the one rolled back to.
"""

from __future__ import annotations

import dagster as dg

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.defs.assets import batch_scores
from ads_ranking_pipelines.defs.partitions import daily_partitions
from ads_ranking_pipelines.defs.tags import run_tags

REALIZED_KEY = dg.AssetKey("realized_performance")
_DEFAULTS = TrainingParams()

rescore_batch_scores = dg.define_asset_job(
    "rescore_batch_scores", selection=dg.AssetSelection.assets(batch_scores), partitions_def=daily_partitions,
    executor_def=dg.in_process_executor, tags=run_tags(_DEFAULTS.model_name, _DEFAULTS.gpu_pool),
    description="Score days again with the current champion (after a rollback on realized labels).")


def rescore_requests(instance: dg.DagsterInstance, after: int | None) -> tuple[list[dg.RunRequest], int | None]:
    """Run requests for the ``rescore_days`` of realized_performance's materializations after
    storage id ``after``; the newest storage id seen."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=REALIZED_KEY, after_storage_id=after), limit=1000, ascending=True).records
    requests = []
    for record in records:
        after = record.storage_id
        days = record.asset_materialization.metadata.get("rescore_days") if record.asset_materialization else None
        if not days or not days.value:
            continue
        run = instance.get_run_by_id(record.run_id)
        resources = {k: v for k, v in ((run.run_config if run else {}).get("resources") or {}).items()
                     if k in ("event_source", "storage")}
        for day in str(days.value).split(", "):
            requests.append(dg.RunRequest(run_key=f"rescore:{record.run_id}:{day}", partition_key=day,
                                          run_config={"resources": resources} if resources else {}))
    return requests, after


@dg.sensor(job=rescore_batch_scores, name="rescore_after_rollback", minimum_interval_seconds=60,
           default_status=dg.DefaultSensorStatus.RUNNING,
           description="After realized_performance rolled the champion back (rescore: true), score the days the "
                       "rolled-back version scored again.")
def rescore_after_rollback(context: dg.SensorEvaluationContext):
    requests, cursor = rescore_requests(context.instance, int(context.cursor) if context.cursor else None)
    if cursor is not None:
        context.update_cursor(str(cursor))
    return requests or dg.SkipReason("no rollback on realized labels asked for scoring again")
