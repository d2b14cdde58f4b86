"""A range over its budget is refused naming the estimate and the limit; the run's override wins."""

from __future__ import annotations

import datetime as dt

import pytest

from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.planning.budget import budget_for
from ads_ranking_pipelines.planning.preview import build_preview, capacity_of
from ads_ranking_pipelines.planning.render import preview_json, preview_lines

D = [dt.date(2026, 3, 10) + dt.timedelta(days=i) for i in range(3)]
POOL = load_catalog().get("h100-80gb").model_copy(update={"cost_per_gpu_hour": 10.0, "budget_gpu_hours": 5.0})
PARAMS = TrainingParams(gpu_pool="h100-80gb", num_workers=1, gpus_per_worker=8)
HISTORY = [{"gpu_pool": "h100-80gb", "num_workers": 1, "rows": 1_000, "wall_seconds": s} for s in (900, 1200, 1800)]


def _preview(history=HISTORY, **override):
    return build_preview(history, PARAMS, POOL, {d: 1_000 for d in D}, capacity_of(POOL, 1), budget_for(POOL, **override))


def test_over_the_pools_budget_is_refused_naming_estimate_spread_and_limit():
    p = _preview()                                   # 3 days x 1200 s x 8 GPUs = 8 GPU-hours > 5
    refusal = p.refusal()
    assert refusal is not None
    assert "estimated 8 GPU-hours (from 3 past day(s), spread 6..12) > budget_gpu_hours 5" in refusal
    assert "pool h100-80gb's budget in the pool catalog" in refusal and "2026-03-10..2026-03-12" in refusal
    assert "valid: a shorter range" in refusal
    assert preview_json(p)["over_budget"] == refusal
    assert preview_lines(p)[-1].startswith("  budget: OVER: refused before any cluster starts")


def test_the_runs_override_replaces_the_pools_budget():
    assert _preview(gpu_hours=10.0).refusal() is None
    refusal = _preview(gpu_hours=10.0, cost=50.0).refusal()
    assert "estimated cost 80 (from 3 past day(s), spread 60..120) > budget_cost 50 (the run's budget_cost)" in refusal


def test_without_history_the_budget_is_not_checked_and_that_is_said():
    p = _preview(history=[])
    assert p.refusal() is None and p.unchecked().startswith("budget not checked: no history of quest_ranker")


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_a_bad_override_names_the_value_and_what_is_valid(bad):
    with pytest.raises(ValueError, match=rf"invalid budget_gpu_hours={bad}; valid: a number > 0"):
        budget_for(POOL, gpu_hours=bad)
