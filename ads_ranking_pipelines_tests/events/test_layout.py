import datetime as dt
import os

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.events import layout
from ads_ranking_pipelines.events.layout import (
    PART_NAME, SUCCESS_MARKER, EventLayoutError, MissingPartitionsError, available_days,
    check_window, ensure_synthetic_days, read_days, write_day,
)
from ads_ranking_pipelines.events.synthetic import generate_table
from ads_ranking_pipelines.events.window_checks import check_labels
from ads_ranking_pipelines.storage.layout import day_uri

from .helpers import DAY, DAYS, parquet_source, toy_table


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
    src = parquet_source("file://" + str(tmp_path / "ev"))
    write_day(toy_table(), src.uri, DAY)
    assert available_days(src.uri) == [DAY]
    assert read_days(src, [DAY]).num_rows == 4


def test_incomplete_day_is_invisible(tmp_path):
    src = parquet_source(tmp_path)
    write_day(toy_table(), src.uri, DAY)
    # a writer that died after the part and before the marker, and one mid-way through a temp file
    for day, name in [(DAYS[1], PART_NAME), (DAYS[2], f".{PART_NAME}.tmp-123")]:
        folder = tmp_path / f"event_date={day.isoformat()}"
        folder.mkdir()
        pq.write_table(toy_table(), folder / name)
    (tmp_path / "event_date=not-a-date").mkdir()
    (tmp_path / "other").mkdir()
    assert available_days(src.uri) == [DAY]
    with pytest.raises(MissingPartitionsError) as e:
        read_days(src, DAYS)
    assert e.value.missing == DAYS[1:] and e.value.incomplete == DAYS[1:]
    assert "incomplete" in str(e.value) and SUCCESS_MARKER in str(e.value)


def test_failed_write_leaves_no_visible_day(tmp_path, monkeypatch):
    src = parquet_source(tmp_path)
    write_day(toy_table(), src.uri, DAY)

    def boom(table, where, **kw):
        where.write(b"PAR1 half a file")
        raise OSError("disk full")

    monkeypatch.setattr(layout.pq, "write_table", boom)
    with pytest.raises(OSError, match="disk full"):
        write_day(toy_table(), src.uri, DAY)           # replacing: marker goes first
    with pytest.raises(OSError):
        write_day(toy_table(), src.uri, DAYS[1])
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
    src = parquet_source("s3://bucket/events")
    write_day(toy_table(), src.uri, DAY)
    folder = tmp_path / "bucket/events" / f"event_date={DAY.isoformat()}"
    assert sorted(os.listdir(folder)) == [SUCCESS_MARKER, PART_NAME]
    assert available_days(src.uri) == [DAY]
    assert read_days(src, [DAY]).num_rows == 4
    os.remove(folder / SUCCESS_MARKER)
    assert available_days(src.uri) == []


def test_missing_partitions_error_names_days_and_range(tmp_path):
    src = parquet_source(tmp_path)
    for d in DAYS:
        write_day(toy_table(), src.uri, d)
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
        check_window(parquet_source(tmp_path / "empty"), [DAY])


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
        ensure_synthetic_days(parquet_source(tmp_path), [DAY])
    with pytest.raises(EventLayoutError, match="with_root"):
        ensure_synthetic_days(SourceConfig(), [DAY])
