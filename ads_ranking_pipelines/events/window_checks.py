"""Checks of what a window's event days hold: the columns a step reads, and 0/1 labels of both classes.

The preflight (``defs.preflight``) runs them before any cluster starts; batch inference checks
its day's schema too. They read footers (schemas) and, for labels, the label column only.

That every day exists is the layout's rule: ``layout.check_window``, which stays beside
``layout.read_days`` because reading applies it too. Here is what the days must hold:

* :func:`validate_schema`: every part file of a day has every column the source declares, with
  numeric label and dense columns (:class:`~ads_ranking_pipelines.events.layout.SchemaError`);
* :func:`validate_features`: the same for the columns of a model version's feature spec (what
  scoring or evaluation with that version reads);
* :func:`check_labels`: the label column over the days holds only 0/1 and both classes
  (:class:`LabelError`).

Every error names the day and the part file (and the column or row); a part that is not a
readable parquet file raises :class:`UnreadableFileError`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import difflib
from collections import Counter
from typing import Any, Mapping, Sequence

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
    source_root,
)
from ads_ranking_pipelines.storage.fs import filesystem

NUMERIC_TYPES = "integer, floating, decimal or boolean"
TYPED_ROLES = ("label", "dense")          # sparse columns may have any type: they are hashed
Roles = Sequence[tuple[str, str]]         # (role, column)


class LabelError(EventLayoutError):
    def __init__(self, message: str, counts: dict | None = None):
        super().__init__(message)
        self.counts = dict(counts or {})


class UnreadableFileError(EventLayoutError):
    """A part file that is not a readable parquet file (truncated, not parquet, unreadable)."""

    def __init__(self, message: str, day: dt.date, uri: str):
        super().__init__(message)
        self.day = day
        self.uri = uri


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


def _unreadable(uri: str, day: dt.date, exc: Exception) -> UnreadableFileError:
    return UnreadableFileError(
        f"event file {uri} of day {day} is not a readable parquet file ({type(exc).__name__}: {exc}); "
        f"each part-*.parquet must be a complete parquet file (ending in the 'PAR1' footer): rewrite "
        f"the day's parts, then its {SUCCESS_MARKER} marker", day, uri)


def _read(uri: str, day: dt.date, column: str | None = None) -> tuple[pa.Schema, pa.Table | None]:
    """A part file's schema (its footer) and, with ``column``, that column if the file has it;
    raises :class:`UnreadableFileError` naming day and file."""
    fs, path = filesystem(uri)
    try:
        with fs.open_input_file(path) as f:
            pf = pq.ParquetFile(f)
            schema = pf.schema_arrow
            table = pf.read(columns=[column]) if column in schema.names else None
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise _unreadable(uri, day, exc) from None
    return schema, table


def _day_parts(source: SourceConfig, day: dt.date) -> list[str]:
    root = source_root(source)
    parts = part_uris(root, day, source.completeness)
    if not parts:
        check_window(source, [day])
        raise MissingPartitionsError(  # complete but without parts
            f"day {day} under {root} has a {SUCCESS_MARKER} marker but no part-*.parquet file",
            [day], available_days(root, source.completeness))
    return parts


def source_roles(source: SourceConfig) -> list[tuple[str, str]]:
    """The columns the source declares, with their roles."""
    return [("label", source.label_column), *(("dense", c) for c in source.dense_columns),
            *(("sparse", c) for c in source.sparse_columns)]


def feature_roles(feature_spec: Mapping[str, Any], with_label: bool = False) -> list[tuple[str, str]]:
    """The columns a model version's feature spec (``model.json``'s ``feature_spec``) reads."""
    label = [("label", feature_spec["label_column"])] if with_label else []
    return [*label, *(("dense", c) for c in feature_spec.get("dense_columns", ())),
            *(("sparse", c) for c in feature_spec.get("sparse_columns", ()))]


def _part_problems(schema: pa.Schema, roles: Roles) -> tuple[list[str], list[str], list[str]]:
    """(missing columns, wrongly typed columns, problem texts) of one part's schema."""
    missing, wrong, problems = [], [], []
    for role, col in roles:
        if col not in schema.names:
            hint = _suggest(col, schema.names)
            missing.append(col)
            problems.append(f"{role} column {col!r} is missing" + (f" (did you mean {hint!r}?)" if hint else ""))
        elif role in TYPED_ROLES and not _is_numeric(t := schema.field(col).type):
            wrong.append(col)
            problems.append(f"{role} column {col!r} has type {t}; {role} columns must be numeric ({NUMERIC_TYPES})")
    return missing, wrong, problems


def check_columns(source: SourceConfig, day: dt.date, roles: Roles, against: str = "the source config") -> pa.Schema:
    """Check every part of ``day`` has the ``roles`` columns, label and dense ones numeric.

    Returns the first part's schema; raises :class:`SchemaError` naming the day, each part file
    with a problem, each missing column (with a close match if there is one) and each
    non-numeric label/dense column with its type, and listing the columns the file has.
    """
    parts = _day_parts(source, day)
    missing: list[str] = []
    wrong: list[str] = []
    texts: list[str] = []
    schemas = [_read(p, day)[0] for p in parts]
    for part, schema in zip(parts, schemas):
        m, w, problems = _part_problems(schema, roles)
        if problems:
            have = ", ".join(f"{f.name} ({f.type})" for f in schema)
            texts.append(f"in {part}: " + "; ".join(problems) + f" (its columns: {have})")
            missing += [c for c in m if c not in missing]
            wrong += [c for c in w if c not in wrong]
    if texts:
        raise SchemaError(f"event schema of day {day} under {source_root(source)} does not match {against}: "
                          + "; ".join(texts) + ".", missing, wrong, schemas[0].names)
    return schemas[0]


def validate_schema(source: SourceConfig, day: dt.date) -> pa.Schema:
    """Check that ``day``'s parquet has every declared column, with numeric label and dense."""
    return check_columns(source, day, source_roles(source))


def validate_features(source: SourceConfig, day: dt.date, feature_spec: Mapping[str, Any], whose: str,
                      with_label: bool = False) -> pa.Schema:
    """Check that ``day``'s parquet has every column of ``whose`` feature spec (dense numeric)."""
    return check_columns(source, day, feature_roles(feature_spec, with_label), f"the feature spec of {whose}")


def _read_labels(uri: str, day: dt.date, col: str) -> pd.Series:
    schema, table = _read(uri, day, col)
    if table is None:
        raise SchemaError(f"event file {uri} of day {day} lacks the label column {col!r}; it has "
                          f"{schema.names}", [col], (), schema.names)
    return table.column(col).to_pandas()


def _bad_rows(values: pd.Series) -> pd.Series:
    """True where a label is null or not 0/1."""
    numeric = pd.to_numeric(values, errors="coerce")
    return values.isna() | numeric.isna() | ~numeric.isin([0, 1])


def _where_bad(day: dt.date, uri: str, values: pd.Series, bad: pd.Series) -> str:
    rows = bad.to_numpy().nonzero()[0]
    first = int(rows[0])
    return (f"day {day}, {uri}: {len(rows)} bad value(s), first at row {first} "
            f"({values.iloc[first:first + 1].tolist()[0]!r}); row numbers count from 0 within the file")


@dataclasses.dataclass
class _LabelTally:
    counts: Counter = dataclasses.field(default_factory=Counter)
    nulls: int = 0
    others: int = 0
    positives: int = 0
    negatives: int = 0
    places: list[str] = dataclasses.field(default_factory=list)     # "day D, FILE: n bad value(s), first at row i"

    def add(self, day: dt.date, uri: str, values: pd.Series) -> None:
        bad = _bad_rows(values)
        if bad.any():
            self.places.append(_where_bad(day, uri, values, bad))
        numeric = pd.to_numeric(values, errors="coerce")
        self.nulls += int(values.isna().sum())
        self.others += int((bad & values.notna()).sum())
        self.positives += int((numeric == 1).sum())
        self.negatives += int((numeric == 0).sum())
        self.counts.update(values.dropna().tolist())


def check_labels(source: SourceConfig, days: Sequence[dt.date]) -> dict[str, int]:
    """Check the label column over ``days`` holds 0/1 values of both classes.

    Reads only the label column, file by file. Returns ``{"rows", "positives", "negatives"}``;
    raises :class:`LabelError` naming the column, each day and file with bad values (and its
    first bad row), the offending values and the counts.
    """
    col = source.label_column
    check_window(source, days)
    tally = _LabelTally()
    for day in days:
        for uri in _day_parts(source, day):
            tally.add(day, uri, _read_labels(uri, day, col))
    return _label_result(col, days, tally)


def _label_result(col: str, days: Sequence[dt.date], tally: _LabelTally) -> dict[str, int]:
    shown = ", ".join(f"{v!r}: {n}" for v, n in tally.counts.most_common(10))
    where = f"label column {col!r} over {format_days(days)}"
    if tally.places:
        more = f"; and {len(tally.places) - 5} more file(s)" if len(tally.places) > 5 else ""
        raise LabelError(
            f"{where} must hold only 0 (no click) and 1 (click); found {tally.nulls} null(s) and {tally.others} "
            "other value(s): " + "; ".join(tally.places[:5]) + more + f". Value counts: {{{shown}}}.",
            {**{str(k): v for k, v in tally.counts.items()}, "null": tally.nulls})
    pos, neg = tally.positives, tally.negatives
    result = {"rows": pos + neg, "positives": pos, "negatives": neg}
    if pos == 0 or neg == 0:
        raise LabelError(
            f"{where} has a single class: {pos} positive (1) and {neg} negative (0) rows; "
            "training and AUC need both clicks and non-clicks in the window.",
            result,
        )
    return result
