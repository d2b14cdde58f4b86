"""Stream a public-format CTR file (Criteo TSV, Avazu CSV) into the event-parquet layout.

``import_source(source)`` reads ``source.files`` in order, block by block (``chunk_bytes``),
checks every row, and lays the rows onto consecutive days from ``source.start_date``,
``source.rows_per_day`` each, in file order. Memory stays at about one block whatever the file
size: each day is streamed into its part file (:class:`layout.DayWriter`), never held whole.

Every row is checked: field count, the label is ``0``/``1``, the declared integer columns hold
integers (negative allowed; empty = missing). A bad row fails the import with the file, the line
number, what is wrong and the line's text, unless ``source.max_bad_rows`` allows skipping it
(skipped rows are counted in the import record). A day without a click also fails the import.
A day becomes visible only when it is complete (its ``_SUCCESS`` marker is written last); a
failed import never leaves a half-written day that looks complete.

The row-count check: the data lines of the files, counted separately byte by byte, must equal
the rows written plus the rows skipped, and the written parts' row counts are read back.
When everything passed, ``<events_uri>/_IMPORT.json`` records the import; the pipeline imports
on first use and re-imports only when the files or the import settings change.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.events.format_registry import formats
from ads_ranking_pipelines.events.formats import FileFormat, FileFormatError
from ads_ranking_pipelines.events.layout import DayWriter, EventLayoutError, part_uris
from ads_ranking_pipelines.storage import fs

IMPORT_RECORD = "_IMPORT.json"
DEFAULT_CHUNK_BYTES = 4 << 20
_INT_RE = r"^[+-]?[0-9]+$"


class ImportFormatError(EventLayoutError):
    """A row or file that is not what the source declares; names file and line."""

    def __init__(self, message: str, file: str, line: int | None) -> None:
        super().__init__(message)
        self.file = file
        self.line = line


@dataclass
class ImportReport:
    events_uri: str
    digest: str
    files: list[dict]
    rows_written: int = 0
    rows_skipped: int = 0
    days: list[str] = field(default_factory=list)
    partial_last_day: bool = False
    skipped_samples: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    skipped: bool = False          # already imported with the same settings: nothing done

    def to_dict(self) -> dict:
        return asdict(self)


# ---- reading -----------------------------------------------------------------------------------

def _file_info(uri: str) -> dict:
    f, path = fs.filesystem(uri)
    info = f.get_file_info(path)
    if info.type.name != "File":
        raise ImportFormatError(f"source file not found: {uri}", uri, None)
    return {"uri": uri, "size": info.size, "mtime_ns": info.mtime_ns}


def _first_line(uri: str, limit: int = 1 << 16) -> str:
    f, path = fs.filesystem(uri)
    with f.open_input_stream(path) as s:
        head = s.read(limit)
    return head.split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", errors="replace")


def count_data_lines(uri: str, header_lines: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> int:
    """Lines of a file (a last line without newline counts), minus the header; constant memory."""
    f, path = fs.filesystem(uri)
    lines, last = 0, b"\n"
    with f.open_input_stream(path) as s:
        while True:
            block = s.read(chunk_bytes)
            if not block:
                break
            lines += block.count(b"\n")
            last = block[-1:]
    if last != b"\n":
        lines += 1
    return lines - header_lines


class _Reader:
    """Record batches of one file, all columns as strings, with physical line numbers."""

    def __init__(self, uri: str, fmt: FileFormat, chunk_bytes: int) -> None:
        self.uri = uri
        self.fmt = fmt
        try:
            self.header_lines = fmt.header_lines(_first_line(uri), uri)
        except FileFormatError as exc:
            raise ImportFormatError(str(exc), exc.file, exc.line) from None
        self.skipped_lines: list[tuple[int, str]] = []   # invalid rows: (line, reason + text)
        self.next_line = 1 + self.header_lines
        self.chunk_bytes = chunk_bytes

    def _on_invalid(self, row) -> str:
        self.skipped_lines.append((int(row.number), f"expected {row.expected_columns} "
                                   f"{self.fmt.separator_name}-separated fields, found {row.actual_columns}: "
                                   f"{row.text[:200]!r}"))
        return "skip"

    def batches(self) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
        f, path = fs.filesystem(self.uri)
        with f.open_input_stream(path) as stream:
            reader = pacsv.open_csv(
                stream,
                read_options=pacsv.ReadOptions(column_names=list(self.fmt.columns), use_threads=False,
                                               block_size=self.chunk_bytes, skip_rows=self.header_lines),
                parse_options=pacsv.ParseOptions(delimiter=self.fmt.delimiter, quote_char=False,
                                                 ignore_empty_lines=False,
                                                 invalid_row_handler=self._on_invalid),
                convert_options=pacsv.ConvertOptions(
                    column_types={c: pa.string() for c in self.fmt.columns},
                    null_values=[""], strings_can_be_null=True))
            for batch in reader:
                yield batch, self._lines(batch.num_rows)

    def _lines(self, n: int) -> np.ndarray:
        lines = self.next_line + np.arange(n, dtype=np.int64)
        for s, _ in sorted(self.skipped_lines):
            if s >= self.next_line:
                lines[lines >= s] += 1
        self.next_line = int(lines[-1]) + 1 if n else self.next_line
        return lines


# ---- checking ----------------------------------------------------------------------------------

def _bad_rows(batch: pa.RecordBatch, fmt: FileFormat) -> tuple[np.ndarray, list[str]]:
    """Mask of rows that break the format, and per bad row the reason (first problem)."""
    n = batch.num_rows
    bad = np.zeros(n, dtype=bool)
    reasons = np.empty(n, dtype=object)
    label = batch.column(fmt.columns.index(fmt.label))
    ok = pc.fill_null(pc.is_in(label, value_set=pa.array(["0", "1"])), False).to_numpy(zero_copy_only=False)
    reasons[~ok & ~bad] = f"label {fmt.label!r} must be 0 or 1"
    bad |= ~ok
    for col in fmt.int_columns:
        values = batch.column(fmt.columns.index(col))
        ok = pc.fill_null(pc.match_substring_regex(values, _INT_RE), True).to_numpy(zero_copy_only=False)
        reasons[~ok & ~bad] = f"column {col!r} must be an integer"
        bad |= ~ok
    return bad, reasons


def _typed(batch: pa.RecordBatch, fmt: FileFormat) -> pa.Table:
    cols = {}
    for i, name in enumerate(fmt.columns):
        col = batch.column(i)
        cols[name] = pc.cast(col, pa.int64()) if (name in fmt.int_columns or name == fmt.label) else col
    table = pa.table(cols)
    return fmt.derive(table) if fmt.derive else table


# ---- the import --------------------------------------------------------------------------------

class _Days:
    """Cuts the accepted rows into days and streams each day into its writer."""

    def __init__(self, source: SourceConfig, report: ImportReport, log: Callable[[str], None]) -> None:
        self.source = source
        self.report = report
        self.log = log
        self.per_day = int(source.rows_per_day)
        self.writer: DayWriter | None = None
        self.positives = 0
        self.first_line: tuple[str, int] | None = None
        self.last_line: tuple[str, int] | None = None

    def add(self, table: pa.Table, lines: np.ndarray, uri: str) -> None:
        start = 0
        while start < table.num_rows:
            if self.writer is None:
                day = self.source.start_date + dt.timedelta(days=len(self.report.days))
                self.writer = DayWriter(self.source.events_uri, day, table.schema)
                self.positives = 0
                self.first_line = (uri, int(lines[start]))
            take = min(self.per_day - self.writer.rows, table.num_rows - start)
            piece = table.slice(start, take)
            self.writer.write(piece)
            self.positives += int(pc.sum(piece.column(self.source.label_column)).as_py() or 0)
            self.last_line = (uri, int(lines[start + take - 1]))
            start += take
            if self.writer.rows == self.per_day:
                self.close()

    def close(self, partial: bool = False) -> None:
        w, self.writer = self.writer, None
        if w is None:
            return
        (f0, l0), (f1, l1) = self.first_line, self.last_line
        where = f"{f0}:{l0}" + (f"-{l1}" if f0 == f1 else f" to {f1}:{l1}")
        if self.positives == 0:
            w.abort()
            raise ImportFormatError(
                f"day {w.day} ({w.rows} rows, {where}) has no positive label ({self.source.label_column}=1): "
                "a day needs clicks to train or evaluate on; check the label column or raise rows_per_day",
                f0, l0)
        w.commit({"import_digest": self.report.digest, "lines": where, "positives": self.positives,
                  "partial": partial})
        self.report.days.append(w.day.isoformat())
        self.report.rows_written += w.rows
        if partial:
            self.report.partial_last_day = True
            self.log(f"last day {w.day} holds {w.rows} of {self.per_day} rows (the files ended)")

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
            self.writer = None


def _skip(report: ImportReport, max_bad: int, fmt: FileFormat, uri: str, line: int, reason: str) -> None:
    """Count one malformed row; fail with its file and line once more than ``max_bad`` are seen."""
    report.rows_skipped += 1
    if report.rows_skipped > max_bad:
        raise ImportFormatError(
            f"{uri}:{line}: {reason}. Expected {fmt.description}. "
            f"{max_bad} malformed row(s) may be skipped (source.max_bad_rows); is the file of the "
            f"declared kind?", uri, line)
    if len(report.skipped_samples) < 20:
        report.skipped_samples.append({"file": uri, "line": line, "reason": reason})


def _import_file(uri: str, fmt: FileFormat, days: _Days, report: ImportReport,
                 chunk_bytes: int) -> tuple[int, int]:
    """Stream one file into ``days``; returns (data rows seen by the reader, header lines)."""
    reader = _Reader(uri, fmt, chunk_bytes)
    seen, invalid_done = 0, 0
    max_bad = days.source.max_bad_rows
    for batch, lines in reader.batches():
        seen += batch.num_rows
        for line, reason in reader.skipped_lines[invalid_done:]:
            _skip(report, max_bad, fmt, uri, line, reason)
        invalid_done = len(reader.skipped_lines)
        bad, reasons = _bad_rows(batch, fmt)
        for i in np.flatnonzero(bad):
            values = batch.slice(int(i), 1).to_pylist()[0].values()
            text = fmt.delimiter.join("" if v is None else str(v) for v in values)
            _skip(report, max_bad, fmt, uri, int(lines[i]), f"{reasons[i]}: {text[:200]!r}")
        if bad.any():
            batch, lines = batch.filter(pa.array(~bad)), lines[~bad]
        if batch.num_rows:
            days.add(_typed(batch, fmt), lines, uri)
    for line, reason in reader.skipped_lines[invalid_done:]:
        _skip(report, max_bad, fmt, uri, line, reason)
    return seen + len(reader.skipped_lines), reader.header_lines


def _check_counts(source: SourceConfig, report: ImportReport, counted: list[tuple[str, int, int]]) -> None:
    """Lines in the files == rows written + rows skipped == rows the parts hold."""
    lines = sum(n for _, n, _ in counted)
    if lines != report.rows_written + report.rows_skipped:
        detail = ", ".join(f"{u}: {n} data lines" for u, n, _ in counted)
        raise ImportFormatError(
            f"row-count check failed: the files hold {lines} data lines ({detail}) but "
            f"{report.rows_written} rows were written and {report.rows_skipped} skipped",
            counted[0][0], None)
    stored = 0
    for day in report.days:
        for part in part_uris(source.events_uri, dt.date.fromisoformat(day)):
            f, path = fs.filesystem(part)
            with f.open_input_file(path) as fh:
                stored += pq.ParquetFile(fh).metadata.num_rows
    if stored != report.rows_written:
        raise ImportFormatError(f"row-count check failed: {report.rows_written} rows written but the "
                                f"day parts under {source.events_uri} hold {stored}", counted[0][0], None)


def import_record(source: SourceConfig) -> dict | None:
    """The record of a finished import of ``source`` (``None``: not imported, or other settings)."""
    uri = fs.join(fs.normalize(source.events_uri), IMPORT_RECORD)
    if not fs.exists(uri):
        return None
    record = fs.read_json(uri)
    if record.get("digest") != source.import_digest():
        return None
    if [(f["uri"], f["size"], f["mtime_ns"]) for f in record.get("files", [])] != \
            [(f["uri"], f["size"], f["mtime_ns"]) for f in map(_file_info, source.files)]:
        return None      # a file changed since
    return record


def import_source(source: SourceConfig, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                  log: Callable[[str], None] = print, force: bool = False) -> ImportReport:
    """Import a file-kind source into ``source.events_uri`` (see the module docstring)."""
    if not source.is_file_kind:
        raise EventLayoutError(f"source kind {source.kind!r} is not imported; file kinds: criteo_tsv, avazu_csv")
    if not source.events_uri:
        raise EventLayoutError("source.events_uri is not resolved; call source.with_root(<storage root>)")
    fmt = formats()[source.kind]
    files = [_file_info(u) for u in source.files]
    report = ImportReport(events_uri=fs.normalize(source.events_uri), digest=source.import_digest(), files=files)
    done = None if force else import_record(source)
    if done is not None:
        report.rows_written, report.rows_skipped = done["rows_written"], done["rows_skipped"]
        report.days, report.skipped = list(done["days"]), True
        return report
    t0 = time.perf_counter()
    record_uri = fs.join(report.events_uri, IMPORT_RECORD)
    if fs.exists(record_uri):
        f, path = fs.filesystem(record_uri)
        f.delete_file(path)
    days = _Days(source, report, log)
    counted = []
    try:
        for info in files:
            log(f"importing {info['uri']} ({info['size'] / 1e6:.1f} MB) as {source.kind}")
            seen, header = _import_file(info["uri"], fmt, days, report, chunk_bytes)
            counted.append((info["uri"], count_data_lines(info["uri"], header, chunk_bytes), seen))
        days.close(partial=True)
    except BaseException:
        days.abort()
        raise
    if not report.days:
        raise ImportFormatError(f"no rows in {source.files}", source.files[0], None)
    _check_counts(source, report, counted)
    report.seconds = round(time.perf_counter() - t0, 3)
    fs.write_json(record_uri, report.to_dict())
    log(f"imported {report.rows_written} rows into {len(report.days)} day(s) {report.days[0]}..{report.days[-1]} "
        f"under {report.events_uri} ({report.rows_skipped} malformed row(s) skipped) in {report.seconds}s")
    return report
