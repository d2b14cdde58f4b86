"""Window rows for an estimate come from parquet footers (no rows read) or the synthetic config."""

from __future__ import annotations

import datetime as dt

from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.events.layout import write_day
from ads_ranking_pipelines.events.row_counts import window_rows
from ads_ranking_pipelines.events.synthetic import generate_table

D = [dt.date(2026, 3, 9), dt.date(2026, 3, 10)]


def test_parquet_days_are_counted_from_their_footers_and_a_missing_day_is_unknown(tmp_path):
    spec = SyntheticSpec(rows_per_day=300, num_users=50, num_ads=20)
    for day in D:
        write_day(generate_table(day, spec), str(tmp_path), day)
    base = SourceConfig()
    source = SourceConfig(kind="parquet", uri=str(tmp_path), label_column="clicked",
                          dense_columns=base.dense_columns, sparse_columns=base.sparse_columns)
    assert window_rows(source, D) == 600
    assert window_rows(source, [*D, dt.date(2026, 3, 11)]) is None


def test_a_synthetic_window_is_rows_per_day_times_days():
    source = SourceConfig(synthetic=SyntheticSpec(rows_per_day=1234))
    assert window_rows(source, D) == 2468
