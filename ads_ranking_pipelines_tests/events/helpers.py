"""Toy days for the event-layout tests: a fixed week and a four-row table, and a parquet source
over such days."""

import datetime as dt

import pyarrow as pa

from ads_ranking_pipelines.config.source import SourceConfig

DAY = dt.date(2024, 3, 4)  # a Monday
DAYS = [DAY + dt.timedelta(days=i) for i in range(3)]


def toy_table(labels=(0, 1, 0, 1), dense=(1.0, 2.0, 3.0, 4.0), sparse=("a", "b", "a", "c")) -> pa.Table:
    return pa.table({"y": list(labels), "x": list(dense), "cat": list(sparse)})


def parquet_source(root, **kw) -> SourceConfig:
    """A parquet source of :func:`toy_table` days under ``root``."""
    args = dict(kind="parquet", uri=str(root), label_column="y", dense_columns=("x",),
                sparse_columns=("cat",))
    args.update(kw)
    return SourceConfig(**args)
