"""Source config: the file kinds, completeness, per-feature options, bad values named."""

import datetime as dt

import pytest
from pydantic import ValidationError

from ads_ranking_pipelines.config.source import (
    AVAZU_SPARSE, CRITEO_DENSE, CRITEO_SPARSE, SourceConfig,
)


def test_criteo_kind_fills_in_its_columns_and_resolves_under_the_root():
    src = SourceConfig(kind="criteo_tsv", uri="/data/train.txt", start_date="2026-11-01", rows_per_day=2000)
    assert (src.label_column, src.dense_columns, src.sparse_columns) == ("label", CRITEO_DENSE, CRITEO_SPARSE)
    assert src.start_date == dt.date(2026, 11, 1)
    resolved = src.with_root("/home/ads")
    assert resolved.events_uri == f"/home/ads/events/criteo_tsv-{src.import_digest()}"
    view = resolved.events_source()
    assert view.kind == "parquet" and view.uri == resolved.events_uri and view.sparse_columns == CRITEO_SPARSE
    # the import settings decide the digest (another layout of days is another import)
    other = src.model_copy(update={"rows_per_day": 1000})
    assert other.import_digest() != src.import_digest()


def test_avazu_kind_takes_several_files_and_a_subset_of_columns():
    src = SourceConfig(kind="avazu_csv", uri="/d/a.csv, /d/b.csv", start_date="2026-11-01", rows_per_day=10,
                       dense_columns=("C15", "C16"), sparse_columns=("site_id", "hour_of_day"))
    assert src.files == ["/d/a.csv", "/d/b.csv"] and src.label_column == "click"
    assert SourceConfig(kind="avazu_csv", uri="/a", start_date="2026-11-01", rows_per_day=1).sparse_columns == AVAZU_SPARSE


@pytest.mark.parametrize("values, message", [
    ({"kind": "criteo_tsv", "uri": "/t.txt"}, "needs start_date, rows_per_day"),
    ({"kind": "criteo_tsv", "uri": "/t.txt", "start_date": "2026-11-01", "rows_per_day": 0}, "rows_per_day"),
    ({"kind": "criteo_tsv", "uri": "/t.txt", "start_date": "2026-11-01", "rows_per_day": 5,
      "sparse_columns": ["C1", "site_id"]}, "['site_id'] are not feature columns of kind 'criteo_tsv'"),
    ({"kind": "avazu_csv", "uri": "/a", "start_date": "2026-11-01", "rows_per_day": 5,
      "label_column": "clicked"}, "the label of kind 'avazu_csv' is 'click'"),
    ({"kind": "parquet", "uri": "/p", "label_column": "y", "sparse_columns": ["a"],
      "rows_per_day": 5}, "belong to the file kinds"),
    ({"kind": "parquet", "uri": "/p", "label_column": "y", "sparse_columns": ["a"],
      "completeness": "sometimes"}, "completeness"),
    ({"kind": "parquet", "uri": "/p", "label_column": "y", "sparse_columns": ["a"],
      "features": {"b": {"hash_buckets": 10}}}, "features ['b'] are not sparse columns"),
    ({"kind": "parquet", "uri": "/p", "label_column": "y", "sparse_columns": ["a"],
      "features": {"a": {"embedding_dim": 6}}}, "multiple of 4"),
])
def test_bad_source_values_are_named(values, message):
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("]", r"\]")
                       .replace("(", r"\(").replace(")", r"\)")):
        SourceConfig.model_validate(values)
