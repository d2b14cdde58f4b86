"""A day's scores joined with the day's labels as they are now (clicks land after scoring).

``batch_scores`` writes each day's scores as parquet parts, in the day's row order, with the
impression id where the source has one (synthetic). The join is on that id; without it, on row
order (the parts are written in the order of the day's part files and their row groups), with
the row counts checked.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.events.layout import read_days
from ads_ranking_pipelines.metrics import evaluate
from ads_ranking_pipelines.storage import fs

SCORE_COLUMN = "score"
ID_COLUMN = "impression_id"


class RealizedJoinError(ValueError):
    """The day's scores and labels cannot be joined (no scores, or the rows do not match)."""


def read_scores(scores_uri: str) -> pa.Table:
    """Every part of a day's scores, in part order."""
    if not fs.exists(fs.join(scores_uri, "_SUCCESS")):
        raise RealizedJoinError(f"no complete scores at {scores_uri} (no _SUCCESS): materialize batch_scores "
                                "for the day first")
    parts = sorted(n for n in fs.list_dir(scores_uri) if n.endswith(".parquet"))
    tables = []
    for name in parts:
        filesystem, path = fs.filesystem(fs.join(scores_uri, name))
        with filesystem.open_input_file(path) as f:
            tables.append(pq.read_table(f))
    if not tables:
        raise RealizedJoinError(f"the scores at {scores_uri} have no rows")
    return pa.concat_tables(tables)


def scores_with_labels(scores_uri: str, source: SourceConfig, day: dt.date) -> tuple[np.ndarray, np.ndarray]:
    """(labels, scores) of ``day``, row for row."""
    scores = read_scores(scores_uri)
    if ID_COLUMN in scores.column_names:
        events = read_days(source, [day], columns=[ID_COLUMN, source.label_column])
        joined = scores.select([ID_COLUMN, SCORE_COLUMN]).join(events, ID_COLUMN, join_type="inner")
        if joined.num_rows != scores.num_rows:
            raise RealizedJoinError(f"{day}: {scores.num_rows} scored impressions, {joined.num_rows} of them found "
                                    f"in the day's events ({events.num_rows} rows) by {ID_COLUMN}")
        return joined.column(source.label_column).to_numpy(), joined.column(SCORE_COLUMN).to_numpy()
    events = read_days(source, [day], columns=[source.label_column])
    if events.num_rows != scores.num_rows:
        raise RealizedJoinError(f"{day}: {scores.num_rows} scored rows but the day's events have {events.num_rows} "
                                f"now; without an {ID_COLUMN} column they are joined by row order and must match")
    return events.column(source.label_column).to_numpy(), scores.column(SCORE_COLUMN).to_numpy()


def realized_metrics(scores_uri: str, source: SourceConfig, day: dt.date) -> dict[str, float]:
    """AUC, logloss, normalized entropy, calibration, rows and CTR of the day's scores on its labels now."""
    labels, scores = scores_with_labels(scores_uri, source, day)
    return evaluate(labels.astype(np.float64), np.clip(scores.astype(np.float64), 0.0, 1.0))
