"""How many rows a training window holds, without reading the rows (for estimates).

A synthetic source generates ``rows_per_day`` rows a day; a parquet source's days are counted
from their parquet footers; a file kind not yet imported lays ``rows_per_day`` rows on each day.
A day not on storage (yet) makes the count unknown (None).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pyarrow.parquet as pq

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.events.layout import part_uris
from ads_ranking_pipelines.storage.fs import filesystem


def day_rows(source: SourceConfig, day: dt.date) -> int | None:
    """Rows of one day of ``source`` (None: the day is not on storage)."""
    if source.kind == "synthetic":
        return source.synthetic.rows_per_day
    if source.is_file_kind:
        return source.rows_per_day
    parts = part_uris(source.uri, day, source.completeness) if source.uri else []
    if not parts:
        return None
    total = 0
    for uri in parts:
        fs, path = filesystem(uri)
        with fs.open_input_file(path) as fh:
            total += pq.ParquetFile(fh).metadata.num_rows
    return total


def window_rows(source: SourceConfig, days: Sequence[dt.date]) -> int | None:
    """Rows of ``days`` together (None if any of them is not on storage)."""
    counts = [day_rows(source, d) for d in days]
    return None if any(c is None for c in counts) else sum(counts)  # type: ignore[arg-type]
