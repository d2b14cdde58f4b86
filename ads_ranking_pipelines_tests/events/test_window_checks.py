import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ads_ranking_pipelines.events.layout import (
    MissingPartitionsError, SchemaError, ensure_synthetic_days, write_day,
)
from ads_ranking_pipelines.events.window_checks import (
    LabelError, UnreadableFileError, check_labels, validate_features, validate_schema,
)

from .helpers import DAY, DAYS, parquet_source, toy_table


def test_schema_error_names_missing_and_non_numeric_columns(tmp_path):
    write_day(pa.table({"y": [0, 1], "x": ["1", "2"], "category": ["a", "b"]}), str(tmp_path), DAY)
    src = parquet_source(tmp_path)
    with pytest.raises(SchemaError) as e:
        validate_schema(src, DAY)
    msg = str(e.value)
    assert e.value.missing == ["cat"] and e.value.non_numeric == ["x"]
    assert "sparse column 'cat' is missing" in msg and "did you mean 'category'" in msg
    assert "dense column 'x' has type string" in msg
    assert "y (int64), x (string), category (string)" in msg
    assert validate_schema(parquet_source(tmp_path, sparse_columns=("category",), dense_columns=()), DAY)


def test_validate_schema_of_synthetic_day(small_source):
    assert ensure_synthetic_days(small_source, [DAY]) == [DAY]
    schema = validate_schema(small_source, DAY)
    assert set(small_source.feature_columns) <= set(schema.names)
    with pytest.raises(MissingPartitionsError, match=str(DAYS[1])):
        validate_schema(small_source, DAYS[1])


def test_check_labels(tmp_path):
    src = parquet_source(tmp_path)
    write_day(toy_table(labels=(0, 0, 0, 0)), src.uri, DAYS[0])
    write_day(toy_table(labels=(0, 0, 0, 0)), src.uri, DAYS[1])
    write_day(toy_table(labels=(0, 2, 1, 0)), src.uri, DAYS[2])
    with pytest.raises(LabelError) as e:
        check_labels(src, DAYS[:2])
    msg = str(e.value)
    assert "label column 'y'" in msg and "0 positive (1) and 8 negative (0)" in msg
    with pytest.raises(LabelError, match=r"label column 'y'.*only 0 .* and 1 .*2: 1"):
        check_labels(src, DAYS)
    write_day(toy_table(labels=(0, 1, 1, 0)), src.uri, DAYS[2])
    assert check_labels(src, DAYS) == {"rows": 12, "positives": 2, "negatives": 10}


def test_check_labels_rejects_nulls(tmp_path):
    src = parquet_source(tmp_path)
    write_day(pa.table({"y": [0, None, 1], "x": [1.0, 2.0, 3.0], "cat": ["a", "b", "c"]}), src.uri, DAY)
    with pytest.raises(LabelError, match="1 null"):
        check_labels(src, [DAY])


def _truncate(part_uri: str, keep: int = 40) -> None:
    with open(part_uri, "rb") as f:
        head = f.read(keep)
    with open(part_uri, "wb") as f:
        f.write(head)


def test_truncated_part_names_day_and_file(tmp_path):
    src = parquet_source(tmp_path)
    for d in DAYS:
        write_day(toy_table(), src.uri, d)
    part = write_day(toy_table(), src.uri, DAYS[1])
    _truncate(part)
    for check in (lambda: validate_schema(src, DAYS[1]), lambda: check_labels(src, DAYS)):
        with pytest.raises(UnreadableFileError) as e:
            check()
        msg = str(e.value)
        assert f"day {DAYS[1]}" in msg and part in msg and "not a readable parquet file" in msg
        assert "complete parquet file" in msg and e.value.day == DAYS[1] and e.value.uri == part


def test_bad_label_names_day_file_and_row(tmp_path):
    src = parquet_source(tmp_path)
    write_day(toy_table(), src.uri, DAYS[0])
    part = write_day(toy_table(labels=(0, 1, 2, 1)), src.uri, DAYS[1])
    with pytest.raises(LabelError) as e:
        check_labels(src, DAYS[:2])
    msg = str(e.value)
    assert f"day {DAYS[1]}, {part}: 1 bad value(s), first at row 2 (2)" in msg
    assert str(DAYS[0]) + "," not in msg                 # the good day is not blamed
    assert "only 0 (no click) and 1 (click)" in msg


def test_wrong_column_type_names_day_file_column_type_and_accepted_types(tmp_path):
    src = parquet_source(tmp_path)
    part = write_day(toy_table(dense=("1", "2", "x", "4")), src.uri, DAY)
    with pytest.raises(SchemaError) as e:
        validate_schema(src, DAY)
    msg = str(e.value)
    assert f"day {DAY}" in msg and f"in {part}:" in msg
    assert "dense column 'x' has type string" in msg and "integer, floating, decimal or boolean" in msg
    assert e.value.non_numeric == ["x"]


def test_only_the_bad_part_of_a_day_is_named(tmp_path):
    src = parquet_source(tmp_path)
    write_day(toy_table(), src.uri, DAY)
    bad = tmp_path / f"event_date={DAY}" / "part-00001.parquet"
    pq.write_table(pa.table({"y": [0, 1], "x": ["a", "b"], "cat": ["a", "b"]}), str(bad))
    with pytest.raises(SchemaError) as e:
        validate_schema(src, DAY)
    msg = str(e.value)
    assert f"in {bad}:" in msg and "part-00000.parquet" not in msg


def test_validate_features_checks_a_model_feature_spec(tmp_path):
    src = parquet_source(tmp_path)
    part = write_day(toy_table(), src.uri, DAY)
    spec = {"label_column": "y", "dense_columns": ["x", "dense_0"], "sparse_columns": ["cat"]}
    with pytest.raises(SchemaError) as e:
        validate_features(src, DAY, spec, "champion v1")
    msg = str(e.value)
    assert "the feature spec of champion v1" in msg and f"day {DAY}" in msg and part in msg
    assert "dense column 'dense_0' is missing" in msg and "x (double)" in msg
    assert e.value.missing == ["dense_0"]
    assert validate_features(src, DAY, {**spec, "dense_columns": ["x"]}, "champion v1")
