import datetime as dt
import io
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ads_ranking_pipelines.config.source import (
    SYNTHETIC_DENSE, SYNTHETIC_LABEL, SYNTHETIC_SPARSE, SyntheticSpec,
)
from ads_ranking_pipelines.events.synthetic import (
    EVENT_TS, IMPRESSION_ID, generate_day, generate_table, oracle_auc, oracle_metrics,
)
from ads_ranking_pipelines.metrics import auc, logloss

from .helpers import DAY

DEFAULT = SyntheticSpec()


def _parquet_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


@pytest.fixture(scope="module")
def default_day():
    return generate_day(DAY, DEFAULT)


def test_same_day_and_seed_is_byte_identical(default_day):
    again = generate_day(DAY, SyntheticSpec())
    assert again.table.equals(default_day.table)
    assert _parquet_bytes(again.table) == _parquet_bytes(default_day.table)
    np.testing.assert_array_equal(again.click_prob, default_day.click_prob)


def test_different_day_or_seed_differs(default_day):
    other_day = generate_table(DAY + dt.timedelta(days=1), DEFAULT)
    other_seed = generate_table(DAY, SyntheticSpec(seed=DEFAULT.seed + 1))
    for other in (other_day, other_seed):
        assert not other.equals(default_day.table)
        assert not np.array_equal(other.column("user_id").to_numpy(),
                                  default_day.table.column("user_id").to_numpy())


def test_columns_and_types(default_day):
    t = default_day.table
    assert t.column_names == [IMPRESSION_ID, EVENT_TS, SYNTHETIC_LABEL, *SYNTHETIC_DENSE, *SYNTHETIC_SPARSE]
    assert t.num_rows == DEFAULT.rows_per_day
    for c in SYNTHETIC_DENSE:
        assert pa.types.is_integer(t.schema.field(c).type) or pa.types.is_floating(t.schema.field(c).type)
    assert t.schema.field("country").type == pa.string()
    assert set(np.unique(t.column(SYNTHETIC_LABEL).to_numpy())) == {0, 1}
    assert all(t.column(c).null_count == 0 for c in t.column_names)
    ts = t.column(EVENT_TS).to_pandas()
    assert ts.is_monotonic_increasing
    assert ts.dt.date.eq(DAY).all()
    assert (t.column("hour_of_day").to_numpy() == ts.dt.hour.to_numpy()).all()


def test_impression_ids_unique_across_days(default_day):
    ids = default_day.table.column(IMPRESSION_ID).to_numpy()
    next_ids = generate_table(DAY + dt.timedelta(days=1), DEFAULT).column(IMPRESSION_ID).to_numpy()
    assert len(np.unique(np.concatenate([ids, next_ids]))) == 2 * len(ids)


def test_cardinalities_and_power_law(default_day):
    t = default_day.table
    users = t.column("user_id").to_numpy()
    ads = t.column("ad_id").to_numpy()
    assert users.min() >= 0 and users.max() < DEFAULT.num_users
    assert ads.min() >= 0 and ads.max() < DEFAULT.num_ads
    assert len(np.unique(users)) > 10_000          # up to ~10^5 distinct ids
    assert len(np.unique(ads)) > 5_000
    assert t.column("campaign_id").to_numpy().max() < DEFAULT.num_ads // 10
    for col, want in [("quest_category", 48), ("placement", 12), ("device_type", 5),
                      ("country", 30), ("hour_of_day", 24)]:
        assert len(pa.compute.unique(t.column(col))) == want, col
    # heavy head: the top 1 % of users and ads take a large share of impressions
    for ids, share in [(users, 0.15), (ads, 0.3)]:
        counts = np.sort(np.unique(ids, return_counts=True)[1])[::-1]
        top = counts[: max(1, len(counts) // 100)].sum() / counts.sum()
        assert top > share


def test_ctr_range_and_drift_across_days():
    ctrs = []
    for i in range(7):
        g = generate_day(DAY + dt.timedelta(days=i), SyntheticSpec(rows_per_day=20_000))
        ctrs.append(g.labels.mean())
        assert 0.03 <= ctrs[-1] <= 0.10
        assert abs(g.click_prob.mean() - g.labels.mean()) < 0.01
    assert max(ctrs) - min(ctrs) > 0.002     # the day-of-week drift shows


def test_dense_heavy_tails(default_day):
    t = default_day.table
    for c in ("dense_0", "dense_3", "dense_4", "dense_5"):
        x = t.column(c).to_numpy().astype(float)
        assert np.quantile(x, 0.999) > 5 * np.median(x), c


def test_oracle_auc_in_range_and_beats_shuffled(default_day):
    m = oracle_metrics(DAY, DEFAULT)
    assert 0.7 < m["oracle_auc"] < 0.9
    assert m["oracle_auc"] == oracle_auc(DAY, DEFAULT)
    assert 0.03 < m["ctr"] < 0.10 and m["rows"] == DEFAULT.rows_per_day
    y, p = default_day.labels, default_day.click_prob
    shuffled = np.random.default_rng(0).permutation(p)
    assert auc(y, p) > auc(y, shuffled) + 0.2
    assert logloss(y, p) < logloss(y, shuffled)
    assert 0.9 < m["oracle_calibration"] < 1.1


def test_generates_50k_rows_fast():
    generate_day(DAY, DEFAULT)  # world is built and cached once per seed
    start = time.perf_counter()
    generate_day(DAY + dt.timedelta(days=30), DEFAULT)
    assert time.perf_counter() - start < 1.0


def test_rejects_datetime():
    with pytest.raises(TypeError, match="datetime.date"):
        generate_day(dt.datetime(2024, 1, 1), DEFAULT)
