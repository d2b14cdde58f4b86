import datetime as dt

import pyarrow as pa
import pytest

from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec

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


@pytest.fixture
def small_source(tmp_path) -> SourceConfig:
    """A synthetic source with small days under a temporary root."""
    return SourceConfig(synthetic=SyntheticSpec(rows_per_day=2_000, num_users=5_000, num_ads=1_000)
                        ).with_root(str(tmp_path))
