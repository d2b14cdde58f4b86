"""Helpers for tests and benchmarks: the public CTR samples (Criteo, Avazu), read whole.

Users name these files as a source instead (``kind: criteo_tsv`` / ``avazu_csv``, imported in a
streaming pass with checks by ``events.file_import``); these helpers read a small sample in one
go and lay it out for tests that need real rows.

The samples keep their own column names; rows are in time order and are split into
``num_days`` consecutive days starting at ``start_day``. Each importer returns the
``SourceConfig(kind="parquet", ...)`` describing what it wrote. The data is read from the
shared datasets folder (see :func:`shared_datasets_dir`) and never copied into the repo.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.events.layout import write_day
from ads_ranking_pipelines.storage.fs import normalize

SHARED_DATASETS_ENV = "ADS_RANKING_SHARED_DATASETS"

CRITEO_FILE = "criteo-sample/train_head_10k.txt"
CRITEO_LABEL = "label"
CRITEO_DENSE = tuple(f"I{i}" for i in range(1, 14))
CRITEO_SPARSE = tuple(f"C{i}" for i in range(1, 27))

AVAZU_FILES = ("avazu-sample/avazu_part_a.csv", "avazu-sample/avazu_part_b.csv")
AVAZU_LABEL = "click"
AVAZU_ID = "id"
AVAZU_COLUMNS = (
    "id", "click", "hour", "C1", "banner_pos", "site_id", "site_domain", "site_category",
    "app_id", "app_domain", "app_category", "device_id", "device_ip", "device_model",
    "device_type", "device_conn_type", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21",
)
_AVAZU_STRINGS = {"id", "site_id", "site_domain", "site_category", "app_id", "app_domain",
                  "app_category", "device_id", "device_ip", "device_model"}
# every Avazu field is categorical (hour is constant in the sample); ``id`` is a row id
AVAZU_SPARSE = tuple(c for c in AVAZU_COLUMNS if c not in ("id", "click", "hour"))


class DatasetNotFoundError(FileNotFoundError):
    pass


def shared_datasets_dir() -> Path | None:
    """The shared datasets folder: ``$ADS_RANKING_SHARED_DATASETS``, else ``<repo>/../shared/datasets``.

    None if it does not exist.
    """
    env = os.environ.get(SHARED_DATASETS_ENV)
    candidates = [Path(env).expanduser()] if env else []
    repo = Path(__file__).resolve().parents[2]
    candidates.append(repo.parent / "shared" / "datasets")
    for c in candidates:
        if c.is_dir():
            return c
    return None


def _dataset_file(relative: str, path: str | os.PathLike | None) -> Path:
    if path is not None:
        p = Path(path).expanduser()
    else:
        root = shared_datasets_dir()
        if root is None:
            raise DatasetNotFoundError(
                f"shared datasets folder not found: set {SHARED_DATASETS_ENV} or place it at "
                f"{Path(__file__).resolve().parents[3] / 'shared' / 'datasets'}")
        p = root / relative
    if not p.is_file():
        raise DatasetNotFoundError(f"dataset file not found: {p} (expected {relative})")
    return p


def read_criteo(path: str | os.PathLike | None = None) -> pa.Table:
    """Criteo ``train.txt`` rows: tab separated, no header; empty fields become nulls."""
    p = _dataset_file(CRITEO_FILE, path)
    names = [CRITEO_LABEL, *CRITEO_DENSE, *CRITEO_SPARSE]
    types = {CRITEO_LABEL: pa.int64(), **{c: pa.int64() for c in CRITEO_DENSE},
             **{c: pa.string() for c in CRITEO_SPARSE}}
    return pacsv.read_csv(
        p,
        read_options=pacsv.ReadOptions(column_names=names),
        parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
        convert_options=pacsv.ConvertOptions(column_types=types, null_values=[""],
                                             strings_can_be_null=True),
    )


def read_avazu(paths: Sequence[str | os.PathLike] | None = None) -> pa.Table:
    """Avazu rows: the first file has a header, any further files continue it without one."""
    files = ([_dataset_file(f, None) for f in AVAZU_FILES] if paths is None
             else [_dataset_file(str(p), p) for p in paths])
    types = {c: (pa.string() if c in _AVAZU_STRINGS else pa.int64()) for c in AVAZU_COLUMNS}
    convert = pacsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=True)
    tables = []
    for i, f in enumerate(files):
        read = (pacsv.ReadOptions() if i == 0
                else pacsv.ReadOptions(column_names=list(tables[0].column_names)))
        t = pacsv.read_csv(f, read_options=read, convert_options=convert)
        if i == 0 and tuple(t.column_names) != AVAZU_COLUMNS:
            raise ValueError(f"{f}: unexpected Avazu header {t.column_names}, expected {list(AVAZU_COLUMNS)}")
        tables.append(t)
    return pa.concat_tables(tables)


def write_consecutive_days(table: pa.Table, events_root: str, start_day: dt.date, num_days: int,
                           rows_per_day: int | None = None, marker: dict | None = None) -> list[dt.date]:
    """Split time-ordered rows into ``num_days`` consecutive days from ``start_day`` and write them.

    ``rows_per_day=None`` spreads all rows evenly; otherwise the first
    ``num_days * rows_per_day`` rows are used.
    """
    if num_days < 1:
        raise ValueError(f"num_days must be at least 1, got {num_days}")
    n = table.num_rows
    if rows_per_day is not None:
        if rows_per_day < 1:
            raise ValueError(f"rows_per_day must be at least 1, got {rows_per_day}")
        if rows_per_day * num_days > n:
            raise ValueError(
                f"{num_days} days x {rows_per_day} rows needs {num_days * rows_per_day} rows; "
                f"the data has {n} (at most {n // num_days} rows per day for {num_days} days)")
        bounds = np.arange(num_days + 1) * rows_per_day
    else:
        if num_days > n:
            raise ValueError(f"cannot split {n} rows into {num_days} days")
        bounds = np.linspace(0, n, num_days + 1).round().astype(int)
    days = [start_day + dt.timedelta(days=i) for i in range(num_days)]
    for day, lo, hi in zip(days, bounds[:-1], bounds[1:]):
        write_day(table.slice(int(lo), int(hi - lo)), events_root, day, marker=marker)
    return days


def import_criteo(events_root: str, start_day: dt.date, num_days: int, *,
                  rows_per_day: int | None = None,
                  path: str | os.PathLike | None = None) -> SourceConfig:
    """Write the Criteo sample as ``num_days`` days under ``events_root``.

    Columns: ``label``, ``I1..I13`` (int64 counts, nullable, dense) and ``C1..C26``
    (hashed categories as strings, nullable, sparse).
    """
    table = read_criteo(path)
    write_consecutive_days(table, events_root, start_day, num_days, rows_per_day,
                           marker={"imported_from": CRITEO_FILE})
    return SourceConfig(kind="parquet", uri=normalize(events_root), label_column=CRITEO_LABEL,
                        dense_columns=CRITEO_DENSE, sparse_columns=CRITEO_SPARSE)


def import_avazu(events_root: str, start_day: dt.date, num_days: int, *,
                 rows_per_day: int | None = None,
                 paths: Sequence[str | os.PathLike] | None = None,
                 dense_columns: Sequence[str] = ()) -> SourceConfig:
    """Write the Avazu sample as ``num_days`` days under ``events_root``.

    Avazu has no numeric features: every field but ``id``, ``click`` and ``hour`` is used
    as a sparse column. ``dense_columns`` moves some of them (e.g. ``("C15", "C16")``, the
    banner width and height) to the dense side instead.
    """
    unknown = [c for c in dense_columns if c not in AVAZU_SPARSE]
    if unknown:
        raise ValueError(f"dense_columns {unknown} are not Avazu feature columns; choose from "
                         f"{list(AVAZU_SPARSE)}")
    table = read_avazu(paths)
    write_consecutive_days(table, events_root, start_day, num_days, rows_per_day,
                           marker={"imported_from": "avazu-sample"})
    return SourceConfig(kind="parquet", uri=normalize(events_root), label_column=AVAZU_LABEL,
                        dense_columns=tuple(dense_columns),
                        sparse_columns=tuple(c for c in AVAZU_SPARSE if c not in dense_columns))
