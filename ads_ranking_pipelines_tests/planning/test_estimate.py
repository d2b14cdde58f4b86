"""The estimate rests on the recorded days of the same model and pool, scaled by window rows."""

from __future__ import annotations

import datetime as dt

import pytest

from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.planning.estimate import estimate_range

D = [dt.date(2026, 3, 10) + dt.timedelta(days=i) for i in range(3)]
H100 = load_catalog().get("h100-80gb").model_copy(update={"cost_per_gpu_hour": 10.0, "cost_per_worker_hour": 1.0})
PARAMS = TrainingParams(gpu_pool="h100-80gb", num_workers=2, gpus_per_worker=4)


def _rec(rows, seconds, pool="h100-80gb", workers=2):
    return {"gpu_pool": pool, "num_workers": workers, "rows": rows, "wall_seconds": seconds}


def test_per_day_figures_are_the_median_rate_times_the_days_rows_with_the_spread_of_the_rates():
    history = [_rec(1_000_000, 100.0), _rec(2_000_000, 300.0), _rec(1_000_000, 120.0),
               _rec(1_000_000, 5.0, pool="l4")]                       # another pool: not used
    e = estimate_range(history, PARAMS, H100, {D[0]: 2_000_000, D[1]: 1_000_000})
    assert e.known and e.basis_days == 3
    assert e.rate_median == pytest.approx(120e-6) and (e.rate_low, e.rate_high) == (pytest.approx(100e-6),
                                                                                    pytest.approx(150e-6))
    assert [d.wall_seconds for d in e.days] == [pytest.approx(240.0), pytest.approx(120.0)]
    assert e.wall_seconds() == pytest.approx(360.0)
    assert (e.wall_seconds("low_seconds"), e.wall_seconds("high_seconds")) == (pytest.approx(300.0), pytest.approx(450.0))
    assert e.gpu_hours() == pytest.approx(360 / 3600 * 2 * 4)
    assert e.cost() == pytest.approx(0.8 * 10 + 0.2 * 1.0)


def test_no_history_is_unknown_and_says_so_rather_than_inventing():
    e = estimate_range([_rec(1_000, 5.0, pool="l4")], PARAMS, H100, {D[0]: 10})
    assert not e.known and e.days == () and e.basis_days == 0
    assert e.note.startswith("no history of quest_ranker on pool h100-80gb: estimate unknown")


def test_other_worker_counts_are_used_unscaled_and_named_and_unknown_rows_take_the_median_day():
    e = estimate_range([_rec(1_000, 10.0, workers=4), _rec(1_000, 30.0, workers=8)], PARAMS, H100,
                       {D[0]: None, D[1]: 1_000})
    assert e.basis_days == 2
    assert "history ran with 4/8 worker(s), this run has 2" in e.note and "rows unknown" in e.note
    assert e.days[0].rows is None and e.days[0].wall_seconds == pytest.approx(20.0)
    assert (e.days[0].low_seconds, e.days[0].high_seconds) == (10.0, 30.0)


def test_a_pool_without_cost_rates_has_an_unknown_cost():
    e = estimate_range([_rec(1_000, 10.0)], PARAMS, load_catalog().get("h100-80gb"), {D[0]: 1_000})
    assert e.known and e.cost() is None
