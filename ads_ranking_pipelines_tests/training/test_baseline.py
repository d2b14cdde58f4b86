import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.events.importers import import_criteo
from ads_ranking_pipelines.events.layout import available_days, read_days
from ads_ranking_pipelines.events.synthetic import generate_table, oracle_metrics
from ads_ranking_pipelines.training.baseline import train_and_evaluate_baseline

DAY = dt.date(2024, 3, 4)
SPEC = SyntheticSpec(rows_per_day=20_000)


def test_baseline_on_synthetic_beats_chance_not_the_oracle():
    source = SourceConfig(synthetic=SPEC)
    train = pa.concat_tables([generate_table(DAY + dt.timedelta(days=i), SPEC) for i in range(3)])
    eval_day = DAY + dt.timedelta(days=3)
    m = train_and_evaluate_baseline(train, generate_table(eval_day, SPEC), source,
                                    hash_buckets=100_000, seed=0)
    oracle = oracle_metrics(eval_day, SPEC)
    assert set(m) >= {"baseline_auc", "baseline_logloss", "baseline_normalized_entropy",
                      "baseline_calibration", "baseline_rows", "baseline_ctr", "baseline_train_rows"}
    assert all(k.startswith("baseline_") for k in m)
    assert m["baseline_train_rows"] == 60_000 and m["baseline_rows"] == 20_000
    assert 0.65 < m["baseline_auc"] < oracle["oracle_auc"]
    assert m["baseline_logloss"] > oracle["oracle_logloss"]
    assert m["baseline_normalized_entropy"] < 1.0
    assert 0.7 < m["baseline_calibration"] < 1.4


def test_baseline_accepts_dataframes_and_parquet_sources_and_is_deterministic_per_seed():
    src = SourceConfig(kind="parquet", uri="/unused", label_column="y",
                       dense_columns=("x",), sparse_columns=("k",))
    rng = np.random.default_rng(0)
    n = 4_000
    k = rng.integers(0, 50, n)
    x = rng.normal(size=n)
    p = 1 / (1 + np.exp(-(x + (k % 3) - 2)))
    df = pa.table({"y": (rng.random(n) < p).astype(int), "x": x, "k": k.astype(str)}).to_pandas()
    m = train_and_evaluate_baseline(df.iloc[:3_000], df.iloc[3_000:], src, hash_buckets=64, seed=1)
    assert m["baseline_auc"] > 0.7
    again = train_and_evaluate_baseline(df.iloc[:3_000], df.iloc[3_000:], src, hash_buckets=64, seed=1)
    assert again["baseline_auc"] == m["baseline_auc"]          # deterministic per seed


def test_baseline_rejects_one_class_training_labels():
    source = SourceConfig(synthetic=SyntheticSpec(rows_per_day=1_000))
    t = generate_table(DAY, source.synthetic)
    zeros = t.set_column(t.column_names.index("clicked"), "clicked", pa.array([0] * t.num_rows))
    with pytest.raises(ValueError, match="'clicked'.*all 0"):
        train_and_evaluate_baseline(zeros, t, source, hash_buckets=1_000, seed=0)


@pytest.mark.needs_datasets
def test_baseline_on_criteo(tmp_path):
    src = import_criteo(str(tmp_path), DAY, 4, rows_per_day=2_500)
    days = available_days(src.uri)
    m = train_and_evaluate_baseline(read_days(src, days[:3]), read_days(src, days[3:]), src,
                                    hash_buckets=100_000, seed=0)
    assert 0.65 < m["baseline_auc"] < 0.85
