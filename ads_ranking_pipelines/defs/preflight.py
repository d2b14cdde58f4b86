"""Checks of the input data that run before any cluster starts."""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping

import dagster as dg

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.events.layout import (
    EventLayoutError,
    check_window,
    ensure_synthetic_days,
    format_days,
)
from ads_ranking_pipelines.events.window_checks import check_labels, validate_features, validate_schema


def resolve_events(source: SourceConfig, log: Any) -> SourceConfig:
    """The event-parquet view of ``source``; a file kind is imported on first use."""
    if not source.is_file_kind:
        return source
    from ads_ranking_pipelines.events.file_import import import_source

    try:
        report = import_source(source, log=log.info)
    except EventLayoutError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    if report.skipped:
        log.info(f"{source.kind} source already imported under {report.events_uri} "
                 f"({report.rows_written} rows, days {report.days[0]}..{report.days[-1]})")
    return source.events_source()


def _ready(source: SourceConfig, days: list[dt.date], log: Any) -> None:
    if source.kind == "synthetic":
        written = ensure_synthetic_days(source, days)
        if written:
            log.info(f"generated synthetic events for {format_days(written)} under {source.uri}")
    else:
        check_window(source, days)
    for day in days:
        validate_schema(source, day)


def check_events(source: SourceConfig, days: list[dt.date], log: Any) -> dict[str, Any]:
    """Make sure ``days`` exist and have the declared columns; return their label counts."""
    try:
        _ready(source, days, log)
        counts = check_labels(source, days)
    except EventLayoutError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    rows = int(counts["rows"])
    meta: dict[str, Any] = {"rows": rows, "positives": int(counts["positives"]),
                            "ctr": counts["positives"] / rows if rows else 0.0}
    if source.kind == "synthetic" and len(days) == 1:
        from ads_ranking_pipelines.events.synthetic import oracle_metrics

        meta["oracle_auc"] = oracle_metrics(days[0], source.synthetic)["oracle_auc"]
    return meta


def check_training_window(source: SourceConfig, train_days: list[dt.date], eval_day: dt.date,
                          log: Any) -> dict[str, Any]:
    """The window and the held-out day must be complete, well-formed and have both classes."""
    try:
        _ready(source, [*train_days, eval_day], log)
        window = check_labels(source, train_days)
        check_labels(source, [eval_day])
    except EventLayoutError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    return {"train_rows": int(window["rows"])}


def check_schemas(source: SourceConfig, days: list[dt.date], log: Any) -> None:
    """``days`` exist and have the declared columns (footers only: no labels read)."""
    try:
        _ready(source, days, log)
    except EventLayoutError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None


def check_features(source: SourceConfig, days: list[dt.date], feature_spec: Mapping[str, Any], whose: str,
                   with_label: bool = False) -> None:
    """Each of ``days`` has the columns ``whose`` feature spec reads (``model.json``), dense ones numeric."""
    try:
        for day in days:
            validate_features(source, day, feature_spec, whose, with_label)
    except EventLayoutError as exc:
        raise dg.Failure(description=str(exc), allow_retries=False) from None


def run_assets(context: dg.AssetExecutionContext) -> set[str]:
    """The assets this run materializes (its selection, else the whole job's)."""
    selection = context.dagster_run.asset_selection
    keys = selection if selection is not None else context.job_def.asset_layer.selected_asset_keys
    return {k.to_user_string() for k in keys}
