import datetime as dt
import os

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.events import layout
from ads_ranking_pipelines.events.layout import (
    PART_NAME, SUCCESS_MARKER, EventLayoutError, LabelError, MissingPartitionsError, SchemaError,
    available_days, check_labels, check_window, ensure_synthetic_days, read_days, validate_schema,
    write_day,
)
from ads_ranking_pipelines.events.synthetic import generate_table
from ads_ranking_pipelines.storage.layout import day_uri

from .conftest import DAY

DAYS = [DAY + dt.timedelta(days=i) for i in range(3)]


def _table(labels=(0, 1, 0, 1), dense=(1.0, 2.0, 3.0, 4.0), sparse=("a", "b", "a", "c")):
    return pa.table({"y": list(labels), "x": list(dense), "cat": list(sparse)})


def _source(root, **kw) -> SourceConfig:
    args = dict(kind="parquet", uri=str(root), label_column="y", dense_columns=("x",),
                sparse_columns=("cat",))
    args.update(kw)
    return SourceConfig(**args)


def test_write_read_round_trip(small_source):
    table = generate_table(DAY, small_source.synthetic)
    part = write_day(table, small_source.uri, DAY)
    assert part.endswith(f"event_date={DAY.isoformat()}/{PART_NAME}")
    assert available_days(small_source.uri) == [DAY]
    assert read_days(small_source, [DAY], table.column_names).equals(table)
    default = read_days(small_source, [DAY])
    assert default.column_names == [small_source.label_column, *small_source.feature_columns]
    folder = day_uri(small_source.uri, DAY)
    assert sorted(os.listdir(folder)) == [SUCCESS_MARKER, PART_NAME]   # no temp file left


def test_a_written_day_is_cut_into_row_groups_readers_can_take_apart(tmp_path):
    rows = 2 * layout.ROW_GROUP_ROWS + 5
    part = write_day(pa.table({"y": [0] * rows}), str(tmp_path), DAY)
    meta = pq.ParquetFile(part).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [
        layout.ROW_GROUP_ROWS, layout.ROW_GROUP_ROWS, 5]


def test_file_uri_root(tmp_path):
    src = _source("file://" + str(tmp_path / "ev"))
    write_day(_table(), src.uri, DAY)
    assert available_days(src.uri) == [DAY]
    assert read_days(src, [DAY]).num_rows == 4


def test_incomplete_day_is_invisible(tmp_path):
    src = _source(tmp_path)
    write_day(_table(), src.uri, DAY)
    # a writer that died after the part and before the marker, and one mid-way through a temp file
    for day, name in [(DAYS[1], PART_NAME), (DAYS[2], f".{PART_NAME}.tmp-123")]:
        folder = tmp_path / f"event_date={day.isoformat()}"
        folder.mkdir()
        pq.write_table(_table(), folder / name)
    (tmp_path / "event_date=not-a-date").mkdir()
    (tmp_path / "other").mkdir()
    assert available_days(src.uri) == [DAY]
    with pytest.raises(MissingPartitionsError) as e:
        read_days(src, DAYS)
    assert e.value.missing == DAYS[1:] and e.value.incomplete == DAYS[1:]
    assert "incomplete" in str(e.value) and SUCCESS_MARKER in str(e.value)


def test_failed_write_leaves_no_visible_day(tmp_path, monkeypatch):
    src = _source(tmp_path)
    write_day(_table(), src.uri, DAY)

    def boom(table, where, **kw):
        where.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(layout.pq, "write_table", boom)
    with pytest.raises(OSError, match="disk full"):
        write_day(_table(), src.uri, DAY)           # replacing: marker goes first
    with pytest.raises(OSError):
        write_day(_table(), src.uri, DAYS[1])
    assert available_days(src.uri) == []
    for day in DAYS[:2]:
        assert not [n for n in os.listdir(day_uri(src.uri, day)) if n.startswith(".")]


def test_object_store_branch_writes_part_then_marker(tmp_path, monkeypatch):
    """Non-local filesystems write the part in place; the marker still comes last."""
    real = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())

    def fake_filesystem(uri):
        assert uri.startswith("s3://bucket")
        path = uri[len("s3://"):]
        return real, path

    monkeypatch.setattr(layout, "filesystem", fake_filesystem)
    src = _source("s3://bucket/events")
    write_day(_table(), src.uri, DAY)
    folder = tmp_path / "bucket/events" / f"event_date={DAY.isoformat()}"
    assert sorted(os.listdir(folder)) == [SUCCESS_MARKER, PART_NAME]
    assert available_days(src.uri) == [DAY]
    assert read_days(src, [DAY]).num_rows == 4
    os.remove(folder / SUCCESS_MARKER)
    assert available_days(src.uri) == []


def test_missing_partitions_error_names_days_and_range(tmp_path):
    src = _source(tmp_path)
    for d in DAYS:
        write_day(_table(), src.uri, d)
    check_window(src, DAYS)
    want = [DAY - dt.timedelta(days=1), DAYS[-1] + dt.timedelta(days=2)]
    with pytest.raises(MissingPartitionsError) as e:
        check_window(src, [*DAYS, *want])
    msg = str(e.value)
    assert e.value.missing == want
    for d in want:
        assert d.isoformat() in msg
    assert f"{DAYS[0]}..{DAYS[-1]}" in msg and "3 days" in msg
    with pytest.raises(MissingPartitionsError, match="none"):
        check_window(_source(tmp_path / "empty"), [DAY])


def test_schema_error_names_missing_and_non_numeric_columns(tmp_path):
    write_day(pa.table({"y": [0, 1], "x": ["1", "2"], "category": ["a", "b"]}), str(tmp_path), DAY)
    src = _source(tmp_path)
    with pytest.raises(SchemaError) as e:
        validate_schema(src, DAY)
    msg = str(e.value)
    assert e.value.missing == ["cat"] and e.value.non_numeric == ["x"]
    assert "sparse column 'cat' is missing" in msg and "did you mean 'category'" in msg
    assert "dense column 'x' has type string" in msg
    assert "y (int64), x (string), category (string)" in msg
    assert validate_schema(_source(tmp_path, sparse_columns=("category",), dense_columns=()), DAY)


def test_validate_schema_of_synthetic_day(small_source):
    assert ensure_synthetic_days(small_source, [DAY]) == [DAY]
    schema = validate_schema(small_source, DAY)
    assert set(small_source.feature_columns) <= set(schema.names)
    with pytest.raises(MissingPartitionsError, match=str(DAYS[1])):
        validate_schema(small_source, DAYS[1])


def test_check_labels(tmp_path):
    src = _source(tmp_path)
    write_day(_table(labels=(0, 0, 0, 0)), src.uri, DAYS[0])
    write_day(_table(labels=(0, 0, 0, 0)), src.uri, DAYS[1])
    write_day(_table(labels=(0, 2, 1, 0)), src.uri, DAYS[2])
    with pytest.raises(LabelError) as e:
        check_labels(src, DAYS[:2])
    msg = str(e.value)
    assert "label column 'y'" in msg and "0 positive (1) and 8 negative (0)" in msg
    with pytest.raises(LabelError, match=r"label column 'y'.*only 0 .* and 1 .*2: 1"):
        check_labels(src, DAYS)
    write_day(_table(labels=(0, 1, 1, 0)), src.uri, DAYS[2])
    assert check_labels(src, DAYS) == {"rows": 12, "positives": 2, "negatives": 10}


def test_check_labels_rejects_nulls(tmp_path):
    src = _source(tmp_path)
    write_day(pa.table({"y": [0, None, 1], "x": [1.0, 2.0, 3.0], "cat": ["a", "b", "c"]}), src.uri, DAY)
    with pytest.raises(LabelError, match="1 null"):
        check_labels(src, [DAY])


def test_ensure_synthetic_days_is_idempotent(small_source):
    assert ensure_synthetic_days(small_source, DAYS[:2]) == DAYS[:2]
    before = os.stat(os.path.join(day_uri(small_source.uri, DAYS[0]), PART_NAME)).st_mtime_ns
    assert ensure_synthetic_days(small_source, DAYS) == DAYS[2:]
    assert ensure_synthetic_days(small_source, DAYS) == []
    assert os.stat(os.path.join(day_uri(small_source.uri, DAYS[0]), PART_NAME)).st_mtime_ns == before
    assert available_days(small_source.uri) == DAYS
    t = read_days(small_source, DAYS)
    assert t.num_rows == 3 * small_source.synthetic.rows_per_day
    check_labels(small_source, DAYS)
    # a different generator spec regenerates (a synthetic day is a function of day and spec)
    bigger = small_source.model_copy(update={"synthetic": SyntheticSpec(
        rows_per_day=3_000, num_users=5_000, num_ads=1_000)})
    assert ensure_synthetic_days(bigger, DAYS[:1]) == DAYS[:1]
    assert read_days(bigger, DAYS[:1]).num_rows == 3_000


def test_ensure_synthetic_days_rejects_parquet_and_unset_root(tmp_path):
    with pytest.raises(EventLayoutError, match="kind='parquet'"):
        ensure_synthetic_days(_source(tmp_path), [DAY])
    with pytest.raises(EventLayoutError, match="with_root"):
        ensure_synthetic_days(SourceConfig(), [DAY])
