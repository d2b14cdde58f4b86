"""What the realized-labels tests share: the labels that land late, automation's requests, a launch."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import dagster as dg
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ads_ranking_pipelines.config.source import SYNTHETIC_LABEL
from ads_ranking_pipelines.events.layout import read_marker, write_day

REALIZED = dg.AssetKey("realized_performance")
IMPRESSIONS = dg.AssetKey("impressions")


def flip_labels(home: Path, day: dt.date) -> None:
    """Day ``day``'s clicks land and disagree with every score: the day's events written again
    (same marker, so the synthetic source keeps them)."""
    folder = next(home.glob(f"events/**/event_date={day}"))
    part = next(folder.glob("part-*.parquet"))
    table = pq.read_table(part)
    field = table.schema.field(SYNTHETIC_LABEL)
    flipped = table.set_column(table.schema.get_field_index(SYNTHETIC_LABEL), field,
                               pc.subtract(1, table.column(SYNTHETIC_LABEL)).cast(field.type))
    marker = {k: v for k, v in (read_marker(str(folder.parent), day) or {}).items() if k not in ("rows", "files")}
    write_day(flipped, str(folder.parent), day, marker=marker)


def requested_days(defs: dg.Definitions, instance: dg.DagsterInstance, cursor=None):
    """The realized_performance partitions Dagster's automation asks for now, and its cursor."""
    result = dg.evaluate_automation_conditions(defs, instance, asset_selection=dg.AssetSelection.assets(REALIZED),
                                               cursor=cursor)
    return set(result.get_requested_partitions(REALIZED)), result.cursor


def materialize(defs: dg.Definitions, instance: dg.DagsterInstance, key: dg.AssetKey, day: dt.date,
                resources: dict, config: dict | None = None) -> dg.ExecuteInProcessResult:
    """One partition of one asset, as a launch of it from the UI runs it (the implicit asset job)."""
    cfg = {"resources": resources, **({"ops": {key.path[-1]: {"config": config}}} if config else {})}
    return defs.resolve_implicit_global_asset_job_def().execute_in_process(
        run_config=cfg, asset_selection=[key], partition_key=day.isoformat(), instance=instance,
        raise_on_error=False)


def check_evaluation(result: dg.ExecuteInProcessResult):
    """The run's one asset check evaluation."""
    (evaluation,) = [e.asset_check_evaluation_data for e in result.all_events
                     if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    return evaluation


def rescore_requests(defs: dg.Definitions, instance: dg.DagsterInstance,
                     cursor: str | None = None) -> tuple[list[dg.RunRequest], str | None]:
    """One tick of the rescore_after_rollback sensor: its run requests and its new cursor."""
    sensor = defs.get_sensor_def("rescore_after_rollback")
    tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, definitions=defs, cursor=cursor))
    return list(tick.run_requests or []), tick.cursor
