"""Event-parquet layout: ``<root>/event_date=YYYY-MM-DD/part-*.parquet`` plus a ``_SUCCESS`` marker.

The default completeness rule, for every root (local, file://, s3://, gs://):

    **a day exists if and only if its folder holds ``_SUCCESS``.**

Sources whose writers produce no marker set ``completeness: none``: then a day exists when its
folder holds at least one ``part-*.parquet`` file (the writer must make the parts appear
atomically, e.g. write-then-rename or object-store PUTs, and only after the day is final).

:func:`write_day` removes the marker first, writes the part (on a local disk under a hidden
temporary name in the same folder, then renamed, so even a reader that ignores the marker
never sees half a file), and writes the marker last. Readers (:func:`available_days`,
:func:`read_days`, :func:`check_window` and the content checks in
:mod:`~ads_ranking_pipelines.events.window_checks`) only look at days with the marker and only
at ``part-*.parquet`` files in them. External writers (Spark writes ``_SUCCESS`` by default)
must follow the same rule.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Iterable, Sequence

import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.storage.fs import filesystem, join, normalize
from ads_ranking_pipelines.storage.layout import PARTITION_PREFIX, day_uri

SUCCESS_MARKER = "_SUCCESS"
PART_NAME = "part-00000.parquet"
# Rows per parquet row group of a written day. pyarrow's default (1Mi rows) made a day of up to
# a million impressions one row group: the smallest unit a reader can take without reading the
# rest, so batch scoring had one piece per day, for one task on one core.
ROW_GROUP_ROWS = 131_072
_PART_PREFIX = "part-"
_PART_SUFFIX = ".parquet"


class EventLayoutError(ValueError):
    """Base of the errors about event partitions and their contents."""


class MissingPartitionsError(EventLayoutError):
    def __init__(self, message: str, missing: Sequence[dt.date], available: Sequence[dt.date],
                 incomplete: Sequence[dt.date] = ()):
        super().__init__(message)
        self.missing = list(missing)
        self.available = list(available)
        self.incomplete = list(incomplete)


class SchemaError(EventLayoutError):
    def __init__(self, message: str, missing: Sequence[str] = (), non_numeric: Sequence[str] = (),
                 available: Sequence[str] = ()):
        super().__init__(message)
        self.missing = list(missing)
        self.non_numeric = list(non_numeric)
        self.available = list(available)


# ---------------------------------------------------------------------------------------------
# formatting helpers

def format_days(days: Iterable[dt.date]) -> str:
    """``2024-01-01..2024-01-03, 2024-01-07`` (consecutive runs collapsed)."""
    ds = sorted(set(days))
    if not ds:
        return "none"
    runs: list[tuple[dt.date, dt.date]] = []
    for d in ds:
        if runs and (d - runs[-1][1]).days == 1:
            runs[-1] = (runs[-1][0], d)
        else:
            runs.append((d, d))
    return ", ".join(a.isoformat() if a == b else f"{a.isoformat()}..{b.isoformat()}" for a, b in runs)


def source_root(source: SourceConfig) -> str:
    """The normalized URI under which ``source``'s days live; raises if it is not set."""
    if not source.uri:
        raise EventLayoutError(
            "source.uri is not set; for a synthetic source call source.with_root(<storage root>) "
            "(events then live under <root>/events/synthetic), for parquet set source.uri"
        )
    return normalize(source.uri)


def _parse_day(folder: str) -> dt.date | None:
    if not folder.startswith(PARTITION_PREFIX):
        return None
    try:
        return dt.date.fromisoformat(folder[len(PARTITION_PREFIX):])
    except ValueError:
        return None


def _is_part(name: str) -> bool:
    return name.startswith(_PART_PREFIX) and name.endswith(_PART_SUFFIX)


# ---------------------------------------------------------------------------------------------
# writing

def write_day(table: pa.Table | pd.DataFrame, events_root: str, day: dt.date,
              marker: dict | None = None) -> str:
    """Write ``table`` as ``<events_root>/event_date=<day>/part-00000.parquet`` + ``_SUCCESS``.

    Replaces the day if it exists (marker removed first, so it is never visible half
    replaced). ``marker`` is extra JSON stored in ``_SUCCESS``. Returns the part's URI.
    """
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    folder = day_uri(normalize(events_root), day)
    fs, folder_path = filesystem(folder)
    fs.create_dir(folder_path, recursive=True)
    marker_path = f"{folder_path}/{SUCCESS_MARKER}"
    if fs.get_file_info(marker_path).type != pafs.FileType.NotFound:
        fs.delete_file(marker_path)
    for info in fs.get_file_info(pafs.FileSelector(folder_path, recursive=False)):
        if info.type == pafs.FileType.File and _is_part(info.base_name) and info.base_name != PART_NAME:
            fs.delete_file(info.path)   # stale parts of an earlier writer

    final_path = f"{folder_path}/{PART_NAME}"
    if isinstance(fs, pafs.LocalFileSystem):
        tmp_path = f"{folder_path}/.{PART_NAME}.tmp-{uuid.uuid4().hex}"
        try:
            with fs.open_output_stream(tmp_path) as out:
                pq.write_table(table, out, row_group_size=ROW_GROUP_ROWS)
            fs.move(tmp_path, final_path)   # atomic rename within one folder
        finally:
            if fs.get_file_info(tmp_path).type != pafs.FileType.NotFound:
                fs.delete_file(tmp_path)
    else:
        # object stores: a PUT is atomic per object, and the day is invisible until _SUCCESS
        with fs.open_output_stream(final_path) as out:
            pq.write_table(table, out, row_group_size=ROW_GROUP_ROWS)

    info = {"rows": table.num_rows, "files": [PART_NAME], **(marker or {})}
    with fs.open_output_stream(marker_path) as out:
        out.write(json.dumps(info, sort_keys=True, default=str).encode())
    return join(folder, PART_NAME)


class DayWriter:
    """Stream record batches into one day: ``<root>/event_date=<day>/part-00000.parquet``.

    Same protocol as :func:`write_day` (marker removed first, the part written under a hidden
    name and renamed on a local disk, the marker written last by :meth:`commit`), but the rows
    arrive in pieces, so memory stays at one batch however large the day is. A writer closed
    without :meth:`commit` (an exception) leaves no part and no marker: the day stays invisible.
    """

    def __init__(self, events_root: str, day: dt.date, schema: pa.Schema) -> None:
        folder = day_uri(normalize(events_root), day)
        self.fs, self.folder_path = filesystem(folder)
        self.fs.create_dir(self.folder_path, recursive=True)
        self.marker_path = f"{self.folder_path}/{SUCCESS_MARKER}"
        if self.fs.get_file_info(self.marker_path).type != pafs.FileType.NotFound:
            self.fs.delete_file(self.marker_path)
        for info in self.fs.get_file_info(pafs.FileSelector(self.folder_path, recursive=False)):
            if info.type == pafs.FileType.File and _is_part(info.base_name):
                self.fs.delete_file(info.path)
        self.final_path = f"{self.folder_path}/{PART_NAME}"
        local = isinstance(self.fs, pafs.LocalFileSystem)
        self.tmp_path = (f"{self.folder_path}/.{PART_NAME}.tmp-{uuid.uuid4().hex}" if local
                         else self.final_path)
        self._out = self.fs.open_output_stream(self.tmp_path)
        self._writer = pq.ParquetWriter(self._out, schema)
        self.rows = 0
        self.day = day

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        self._writer.write(batch)
        self.rows += batch.num_rows

    def commit(self, marker: dict | None = None) -> None:
        self._writer.close()
        self._out.close()
        if self.tmp_path != self.final_path:
            self.fs.move(self.tmp_path, self.final_path)
        info = {"rows": self.rows, "files": [PART_NAME], **(marker or {})}
        with self.fs.open_output_stream(self.marker_path) as out:
            out.write(json.dumps(info, sort_keys=True, default=str).encode())

    def abort(self) -> None:
        """Drop what was written; the day is left without part or marker."""
        for close in (self._writer.close, self._out.close):
            try:
                close()
            except Exception:
                pass
        if self.fs.get_file_info(self.tmp_path).type != pafs.FileType.NotFound:
            self.fs.delete_file(self.tmp_path)


# ---------------------------------------------------------------------------------------------
# discovery

MARKER = "success_marker"


def _has_parts(fs: pafs.FileSystem, folder_path: str) -> bool:
    infos = fs.get_file_info(pafs.FileSelector(folder_path, recursive=False))
    return any(i.type == pafs.FileType.File and _is_part(i.base_name) for i in infos)


def _scan(events_root: str, completeness: str = MARKER) -> tuple[list[dt.date], list[dt.date]]:
    """(complete days, incomplete day folders) under ``events_root``, each sorted."""
    fs, root_path = filesystem(normalize(events_root))
    if fs.get_file_info(root_path).type != pafs.FileType.Directory:
        return [], []
    folders: dict[dt.date, bool] = {}
    infos = fs.get_file_info(pafs.FileSelector(root_path, recursive=False))
    for info in infos:
        day = _parse_day(info.base_name)
        if day is None or info.type != pafs.FileType.Directory:
            continue
        if completeness == MARKER:
            folders[day] = fs.get_file_info(f"{info.path}/{SUCCESS_MARKER}").type == pafs.FileType.File
        else:
            folders[day] = _has_parts(fs, info.path)
    complete = sorted(d for d, ok in folders.items() if ok)
    incomplete = sorted(d for d, ok in folders.items() if not ok)
    return complete, incomplete


def available_days(events_root: str, completeness: str = MARKER) -> list[dt.date]:
    """Complete days (folders with ``_SUCCESS``, or with parts for ``none``) under ``events_root``."""
    return _scan(events_root, completeness)[0]


def is_day_complete(events_root: str, day: dt.date, completeness: str = MARKER) -> bool:
    if completeness != MARKER:
        fs, path = filesystem(day_uri(normalize(events_root), day))
        return fs.get_file_info(path).type == pafs.FileType.Directory and _has_parts(fs, path)
    fs, path = filesystem(join(day_uri(normalize(events_root), day), SUCCESS_MARKER))
    return fs.get_file_info(path).type == pafs.FileType.File


def read_marker(events_root: str, day: dt.date) -> dict | None:
    """The JSON in a day's ``_SUCCESS`` (``{}`` for an empty marker), or None if incomplete."""
    fs, path = filesystem(join(day_uri(normalize(events_root), day), SUCCESS_MARKER))
    if fs.get_file_info(path).type != pafs.FileType.File:
        return None
    with fs.open_input_stream(path) as f:
        data = f.read()
    try:
        return json.loads(data) if data.strip() else {}
    except ValueError:
        return {}


def part_uris(events_root: str, day: dt.date, completeness: str = MARKER) -> list[str]:
    """URIs of a complete day's ``part-*.parquet`` files; [] if the day is not complete."""
    if not is_day_complete(events_root, day, completeness):
        return []
    folder = day_uri(normalize(events_root), day)
    fs, path = filesystem(folder)
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=False))
    return sorted(join(folder, i.base_name) for i in infos
                  if i.type == pafs.FileType.File and _is_part(i.base_name))


# ---------------------------------------------------------------------------------------------
# completeness of a window

def check_window(source: SourceConfig, days: Sequence[dt.date]) -> None:
    """Raise :class:`MissingPartitionsError` unless every day in ``days`` is complete."""
    root = source_root(source)
    complete, incomplete = _scan(root, source.completeness)
    have = set(complete)
    missing = sorted({d for d in days if d not in have})
    if not missing:
        return
    half = sorted(set(missing) & set(incomplete))
    lines = [
        f"{len(missing)} of {len(set(days))} requested day(s) of events are missing under {root}: "
        f"{format_days(missing)}.",
        f"Available complete days: {format_days(complete)}"
        + (f" ({len(complete)} days, {complete[0]} to {complete[-1]})." if complete else "."),
    ]
    if half and source.completeness == MARKER:
        lines.append(
            f"These day folders exist but are incomplete (no {SUCCESS_MARKER} marker: a writer "
            f"failed or is still writing): {format_days(half)}."
        )
    if source.kind == "synthetic":
        lines.append("Synthetic days are generated by events.layout.ensure_synthetic_days.")
    elif source.completeness != MARKER:
        lines.append(f"With completeness: none a day is a {PARTITION_PREFIX}YYYY-MM-DD/ folder "
                     "holding part-*.parquet files.")
    else:
        lines.append(
            f"Write each day as {PARTITION_PREFIX}YYYY-MM-DD/part-*.parquet followed by an empty "
            f"{SUCCESS_MARKER} file, or choose a window inside the available days."
        )
    raise MissingPartitionsError(" ".join(lines), missing, complete, half)


# ---------------------------------------------------------------------------------------------
# reading and generating

def read_days(source: SourceConfig, days: Sequence[dt.date],
              columns: Sequence[str] | None = None) -> pa.Table:
    """Rows of ``days`` (in the given order) as one table, for small-scale local use.

    ``columns`` defaults to the label and feature columns. Missing days raise
    :class:`MissingPartitionsError`, missing columns :class:`SchemaError`.
    """
    root = source_root(source)
    check_window(source, days)
    cols = list(columns) if columns is not None else [source.label_column, *source.feature_columns]
    tables = []
    for day in days:
        for part in part_uris(root, day, source.completeness):
            fs, path = filesystem(part)
            with fs.open_input_file(path) as f:
                pf = pq.ParquetFile(f)
                absent = [c for c in cols if c not in pf.schema_arrow.names]
                if absent:
                    raise SchemaError(
                        f"{part} lacks requested column(s) {absent}; it has {pf.schema_arrow.names}",
                        absent, (), pf.schema_arrow.names)
                tables.append(pf.read(columns=cols))
    if not tables:
        raise MissingPartitionsError(f"no days requested under {root}", [],
                                     available_days(root, source.completeness))
    return pa.concat_tables(tables, promote_options="permissive")


def ensure_synthetic_days(source: SourceConfig, days: Iterable[dt.date]) -> list[dt.date]:
    """Generate the synthetic days that are missing (idempotent); returns those written.

    A day written with a different ``SyntheticSpec`` (recorded in its marker) is regenerated,
    since a synthetic day is a pure function of (day, spec).
    """
    from ads_ranking_pipelines.events.synthetic import generate_table

    if source.kind != "synthetic":
        raise EventLayoutError(
            f"ensure_synthetic_days generates synthetic events only; this source is "
            f"kind={source.kind!r} at {source.uri}: its days must be written by its producer")
    root = source_root(source)
    spec = source.synthetic.model_dump(mode="json")
    have = set(available_days(root))
    written = []
    for day in sorted(set(days)):
        if day in have:
            marker = read_marker(root, day) or {}
            if marker.get("synthetic_spec", spec) == spec:
                continue
        write_day(generate_table(day, source.synthetic), root, day, marker={"synthetic_spec": spec})
        written.append(day)
    return written

