"""Checks of what a window's event days hold: the declared columns, and 0/1 labels of both classes.

The preflight (``defs.preflight``) runs them before any cluster starts; batch inference checks
its day's schema too.

That every day exists is the layout's rule: ``layout.check_window``, which stays beside
``layout.read_days`` because reading applies it too. Here is what the days must hold:

* :func:`validate_schema`: a day's parquet has every column the source declares, with numeric
  label and dense columns (:class:`~ads_ranking_pipelines.events.layout.SchemaError`);
* :func:`check_labels`: the label column over the days holds only 0/1 and both classes
  (:class:`LabelError`).
"""

from __future__ import annotations

import datetime as dt
import difflib
from collections import Counter
from typing import Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.events.layout import (
    SUCCESS_MARKER,
    EventLayoutError,
    MissingPartitionsError,
    SchemaError,
    available_days,
    check_window,
    format_days,
    part_uris,
    read_days,
    source_root,
)
from ads_ranking_pipelines.storage.fs import filesystem


class LabelError(EventLayoutError):
    def __init__(self, message: str, counts: dict | None = None):
        super().__init__(message)
        self.counts = dict(counts or {})


def _is_numeric(t: pa.DataType) -> bool:
    return (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)
            or pa.types.is_decimal(t) or pa.types.is_null(t))


def _suggest(name: str, candidates: Sequence[str]) -> str | None:
    """The existing column a misspelt or differently-cased name most likely meant."""
    lower = {c.lower(): c for c in candidates}
    if name.lower() in lower:
        return lower[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(lower), n=1, cutoff=0.6)
    if close:
        return lower[close[0]]
    contains = [c for c in candidates if name.lower() in c.lower() or c.lower() in name.lower()]
    return contains[0] if len(contains) == 1 else None


def _read_schema(uri: str) -> pa.Schema:
    fs, path = filesystem(uri)
    with fs.open_input_file(path) as f:
        return pq.read_schema(f)


def validate_schema(source: SourceConfig, day: dt.date) -> pa.Schema:
    """Check that ``day``'s parquet has every declared column, with numeric label and dense.

    Returns the schema; raises :class:`SchemaError` naming each missing column (with a close
    match if there is one) and each non-numeric dense/label column, and listing the columns
    that do exist.
    """
    root = source_root(source)
    parts = part_uris(root, day, source.completeness)
    if not parts:
        check_window(source, [day])
        raise MissingPartitionsError(  # complete but without parts
            f"day {day} under {root} has a {SUCCESS_MARKER} marker but no part-*.parquet file",
            [day], available_days(root, source.completeness))
    missing: list[str] = []
    non_numeric: list[str] = []
    problems: list[str] = []
    schema = _read_schema(parts[0])
    for part in parts:
        s = _read_schema(part)
        names = set(s.names)
        roles = [("label", source.label_column)]
        roles += [("dense", c) for c in source.dense_columns]
        roles += [("sparse", c) for c in source.sparse_columns]
        for role, col in roles:
            if col not in names:
                if col not in missing:
                    missing.append(col)
                    hint = _suggest(col, s.names)
                    problems.append(f"{role} column {col!r} is missing"
                                    + (f" (did you mean {hint!r}?)" if hint else ""))
                continue
            t = s.field(col).type
            if role in ("label", "dense") and not _is_numeric(t) and col not in non_numeric:
                non_numeric.append(col)
                problems.append(f"{role} column {col!r} has type {t}; {role} columns must be numeric "
                                "(integer, floating, decimal or boolean)")
    if problems:
        have = ", ".join(f"{f.name} ({f.type})" for f in schema)
        raise SchemaError(
            f"event schema of {day} under {root} does not match the source config: "
            + "; ".join(problems) + f". Columns in {parts[0]}: {have}.",
            missing, non_numeric, schema.names,
        )
    return schema


def check_labels(source: SourceConfig, days: Sequence[dt.date]) -> dict[str, int]:
    """Check the label column over ``days`` holds 0/1 values of both classes.

    Returns ``{"rows", "positives", "negatives"}``; raises :class:`LabelError` naming the
    column, the offending values and the counts.
    """
    col = source.label_column
    table = read_days(source, days, [col])
    values = table.column(col).to_pandas()
    nulls = int(values.isna().sum())
    numeric = pd.to_numeric(values.dropna(), errors="coerce")
    counts = Counter(values.dropna().tolist())
    shown = ", ".join(f"{v!r}: {n}" for v, n in counts.most_common(10))
    where = f"label column {col!r} over {format_days(days)}"
    bad = numeric.isna() | ~numeric.isin([0, 1])
    if nulls or bad.any():
        raise LabelError(
            f"{where} must hold only 0 (no click) and 1 (click); found {nulls} null(s) and "
            f"{int(bad.sum())} other value(s). Value counts: {{{shown}}}.",
            {**{str(k): v for k, v in counts.items()}, "null": nulls},
        )
    pos = int((numeric == 1).sum())
    neg = int((numeric == 0).sum())
    result = {"rows": pos + neg, "positives": pos, "negatives": neg}
    if pos == 0 or neg == 0:
        raise LabelError(
            f"{where} has a single class: {pos} positive (1) and {neg} negative (0) rows; "
            "training and AUC need both clicks and non-clicks in the window.",
            result,
        )
    return result
