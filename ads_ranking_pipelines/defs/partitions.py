"""The daily partitioning shared by every asset: one partition per event day (UTC)."""

from __future__ import annotations

import datetime as dt

import dagster as dg

START_DATE = "2025-01-01"

daily_partitions = dg.DailyPartitionsDefinition(start_date=START_DATE, timezone="UTC", end_offset=1)


def partition_day(context: dg.AssetExecutionContext) -> dt.date:
    return dt.date.fromisoformat(context.partition_key)


def partition_days(context: dg.AssetExecutionContext) -> list[dt.date]:
    """The run's partition days in date order: one day, or a backfill's range (single-run policy)."""
    return sorted(dt.date.fromisoformat(k) for k in context.partition_keys)


def window_days(day: dt.date, window: int) -> list[dt.date]:
    """The ``window`` days before ``day`` (the training window), oldest first."""
    return [day - dt.timedelta(days=i) for i in range(window, 0, -1)]
