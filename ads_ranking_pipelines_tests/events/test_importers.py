import datetime as dt

import pyarrow as pa
import pytest

from ads_ranking_pipelines.events.importers import (
    AVAZU_SPARSE, CRITEO_DENSE, CRITEO_SPARSE, SHARED_DATASETS_ENV, DatasetNotFoundError,
    import_avazu, import_criteo, read_criteo, shared_datasets_dir,
)
from ads_ranking_pipelines.events.layout import available_days, read_days
from ads_ranking_pipelines.events.window_checks import check_labels, validate_schema

from .helpers import DAY

DATASETS = shared_datasets_dir()
needs_datasets = pytest.mark.needs_datasets


@needs_datasets
def test_criteo_import(tmp_path):
    src = import_criteo(str(tmp_path / "criteo"), DAY, 4, rows_per_day=2_500)
    days = [DAY + dt.timedelta(days=i) for i in range(4)]
    assert src.kind == "parquet" and src.label_column == "label"
    assert src.dense_columns == CRITEO_DENSE and src.sparse_columns == CRITEO_SPARSE
    assert available_days(src.uri) == days
    schema = validate_schema(src, days[0])
    assert schema.field("I2").type == pa.int64() and schema.field("C1").type == pa.string()
    t = read_days(src, days)
    assert t.num_rows == 10_000
    assert [read_days(src, [d]).num_rows for d in days] == [2_500] * 4
    assert t.column("I1").null_count > 0 and t.column("C22").null_count > 0   # empty fields
    assert (t.column("I2").to_numpy(zero_copy_only=False) < 0).any()
    counts = check_labels(src, days)
    assert abs(counts["positives"] / counts["rows"] - 0.218) < 0.005
    # rows keep their order: the first day's first row is the file's first line
    first = read_days(src, days[:1], ["label", "I1", "I5", "C1"]).slice(0, 1).to_pylist()[0]
    assert first == {"label": 0, "I1": 1, "I5": 1382, "C1": "68fd1e64"}


@needs_datasets
def test_avazu_import_joins_both_parts(tmp_path):
    src = import_avazu(str(tmp_path / "avazu"), DAY, 4)
    days = available_days(src.uri)
    assert len(days) == 4 and days[0] == DAY
    assert src.label_column == "click" and src.sparse_columns == AVAZU_SPARSE
    assert src.dense_columns == ()
    sizes = [read_days(src, [d]).num_rows for d in days]
    assert sum(sizes) == 9_999 and max(sizes) - min(sizes) <= 1
    ids = read_days(src, days, ["id"]).column("id")
    assert ids.type == pa.string() and len(pa.compute.unique(ids)) == 9_999
    counts = check_labels(src, days)
    assert abs(counts["positives"] / counts["rows"] - 0.171) < 0.005
    with_dense = import_avazu(str(tmp_path / "avazu2"), DAY, 2, rows_per_day=100,
                              dense_columns=("C15", "C16"))
    assert with_dense.dense_columns == ("C15", "C16") and "C15" not in with_dense.sparse_columns
    validate_schema(with_dense, DAY)


@needs_datasets
def test_import_rejects_too_many_rows(tmp_path):
    with pytest.raises(ValueError, match="needs 12000 rows; the data has 10000"):
        import_criteo(str(tmp_path), DAY, 4, rows_per_day=3_000)
    with pytest.raises(ValueError, match="not Avazu feature columns"):
        import_avazu(str(tmp_path), DAY, 4, dense_columns=("nope",))


def test_env_override_and_parsing(tmp_path, monkeypatch):
    """Runs without the real samples: a tiny Criteo-format file found through the env var."""
    folder = tmp_path / "criteo-sample"
    folder.mkdir()
    fields = ["1", "3", "", "-2"] + [""] * 10 + ["0a1b2c3d", ""] + [f"{i:08x}" for i in range(24)]
    line = "\t".join(fields)
    (folder / "train_head_10k.txt").write_text(line + "\n" + line.replace("1\t3", "0\t4", 1) + "\n")
    monkeypatch.setenv(SHARED_DATASETS_ENV, str(tmp_path))
    assert shared_datasets_dir() == tmp_path
    t = read_criteo()
    assert t.num_rows == 2 and t.column_names[:3] == ["label", "I1", "I2"]
    assert t.column("label").to_pylist() == [1, 0] and t.column("I1").to_pylist() == [3, 4]
    assert t.column("I2").to_pylist() == [None, None] and t.column("I3").to_pylist() == [-2, -2]
    assert t.column("C1").to_pylist() == ["0a1b2c3d"] * 2 and t.column("C2").null_count == 2
    src = import_criteo(str(tmp_path / "out"), DAY, 2)
    assert [read_days(src, [d]).num_rows for d in available_days(src.uri)] == [1, 1]


def test_missing_dataset_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv(SHARED_DATASETS_ENV, str(tmp_path))   # exists but holds no samples
    with pytest.raises(DatasetNotFoundError, match="criteo-sample/train_head_10k.txt"):
        read_criteo()
    with pytest.raises(DatasetNotFoundError, match="nope.txt"):
        read_criteo(tmp_path / "nope.txt")
