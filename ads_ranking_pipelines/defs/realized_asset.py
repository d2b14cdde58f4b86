"""``realized_performance``: the champion judged again on the days it scored, once their labels landed.

Clicks arrive late: a day's events are written again with the clicks that came in after it was
scored, and its ``impressions`` partition is materialized again (``ads-ranking pipeline run``
or the producer's own job). Dagster's automation (``LABELS_LANDED``) then materializes this
asset's partition for that day, as it does when ``batch_scores`` scores the day; its blocking
check ``realized_not_worse_than_evaluation`` compares the realized metrics with the scoring
version's evaluation and, on a regression, rolls the champion back (``realized_step``).
"""

import dagster as dg

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.realized import CHECK_REALIZED
from ads_ranking_pipelines.defs.assets import batch_scores, daily_asset, impressions
from ads_ranking_pipelines.defs.config import RealizedConfig
from ads_ranking_pipelines.defs.partitions import partition_days
from ads_ranking_pipelines.defs.preflight import resolve_events
from ads_ranking_pipelines.defs.realized_step import check_result, judge_days
from ads_ranking_pipelines.defs.resources import EventSourceResource, StorageResource
from ads_ranking_pipelines.defs.tags import MODEL_TAG
from ads_ranking_pipelines.storage.registry import ModelRegistry

# eager() without its "latest time window only": late labels land on any past day
LABELS_LANDED = dg.AutomationCondition.eager().without(
    dg.AutomationCondition.in_latest_time_window()).with_label("eager, any day (labels landed or day rescored)")

REALIZED_CHECK = dg.AssetCheckSpec(
    CHECK_REALIZED, asset="realized_performance", blocking=True,
    description="Realized AUC / logloss / calibration of the day's scores on its labels now, against the scoring "
                "version's evaluation (tolerances in the run config); a regression of the champion rolls it back.")


@daily_asset(deps=[batch_scores, impressions], kinds={"parquet"}, check_specs=[REALIZED_CHECK],
             automation_condition=LABELS_LANDED,
             description="The day's scores joined with its labels as they are now (clicks land late): realized AUC, "
                         "logloss and calibration of the version that scored it, beside what its evaluation predicted.")
def realized_performance(context: dg.AssetExecutionContext, config: RealizedConfig, storage: StorageResource,
                         event_source: EventSourceResource):
    registry = ModelRegistry(storage.layout(), context.run.tags.get(MODEL_TAG) or TrainingParams().model_name)
    source = resolve_events(event_source.source_config(storage.home), context.log)
    verdicts = judge_days(context, config, registry, source, partition_days(context))
    yield dg.MaterializeResult()
    yield check_result(verdicts)
