import pyarrow as pa
import pytest

from ads_ranking_pipelines.events.layout import (
    MissingPartitionsError, SchemaError, ensure_synthetic_days, write_day,
)
from ads_ranking_pipelines.events.window_checks import LabelError, check_labels, validate_schema

from .conftest import DAY, DAYS, parquet_source, toy_table


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
