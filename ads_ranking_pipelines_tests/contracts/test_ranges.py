"""Range job specs hand out one-day specs: warm start chains, date order, the champion's uri."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.gates import ChampionRef, GateConfig
from ads_ranking_pipelines.contracts.ranges import EvalDay, EvalRangeSpec, InferDay, InferRangeSpec, TrainDay, TrainRangeSpec

D = [dt.date(2026, 3, 10) + dt.timedelta(days=i) for i in range(3)]
SOURCE = SourceConfig(uri="/tmp/events")


def _train(warm: bool, days=D) -> TrainRangeSpec:
    return TrainRangeSpec(params=TrainingParams(), source=SOURCE, ray_storage_uri="/tmp/ray", warm_start=warm,
                          init_model_uri="/m/v0" if warm else None,
                          days=tuple(TrainDay(day=d, train_days=(d - dt.timedelta(days=1),), model_version=f"v{i + 1}",
                                              model_uri=f"/m/v{i + 1}", run_name=f"r{i + 1}") for i, d in enumerate(days)))


def test_warm_start_chains_each_day_to_the_version_the_day_before_wrote():
    spec = _train(warm=True)
    assert [spec.day_spec(i).init_model_uri for i in range(3)] == ["/m/v0", "/m/v1", "/m/v2"]
    assert [spec.day_spec(i).init_model_uri for i in range(3)] != [None] * 3
    cold = _train(warm=False)
    assert [cold.day_spec(i).init_model_uri for i in range(3)] == [None, None, None]
    assert cold.day_spec(2).model_uri == "/m/v3" and cold.day_spec(2).train_days == (D[1],)


def test_days_out_of_order_or_none_are_refused():
    with pytest.raises(ValidationError, match="date order"):
        _train(warm=False, days=[D[1], D[0]])
    with pytest.raises(ValidationError, match="at least 1"):
        _train(warm=False, days=[])


def test_eval_day_spec_compares_with_the_champion_of_that_moment():
    days = tuple(EvalDay(eval_day=d, model_version=f"v{i + 1}", model_uri=f"/m/v{i + 1}", params=TrainingParams(),
                         train_days=(d - dt.timedelta(days=1),)) for i, d in enumerate(D))
    v0 = ChampionRef(version="v0", uri="/m/v0", trained_through=D[0] - dt.timedelta(days=2))
    spec = EvalRangeSpec(source=SOURCE, gates=GateConfig(), champion=v0, days=days)
    assert spec.day_spec(0, v0).champion_uri == "/m/v0"
    assert spec.day_spec(1, days[0].as_champion()).champion_uri == "/m/v1"    # day 1's version won
    assert spec.day_spec(1, None).champion_uri is None
    assert spec.day_spec(0, days[0].as_champion()).champion_uri is None       # a version is not its own champion


def test_eval_day_spec_skips_a_champion_that_trained_on_the_day():
    days = tuple(EvalDay(eval_day=d, model_version=f"v{i + 1}", model_uri=f"/m/v{i + 1}", params=TrainingParams(),
                         train_days=(d - dt.timedelta(days=1),)) for i, d in enumerate(D))
    newer = ChampionRef(version="v9", uri="/m/v9", trained_through=D[-1] + dt.timedelta(days=5))
    old = ChampionRef(version="v0", uri="/m/v0", trained_through=D[0] - dt.timedelta(days=1))
    spec = EvalRangeSpec(source=SOURCE, gates=GateConfig(), champion=newer, earlier_champions=(old,), days=days)
    assert [spec.day_spec(i, newer).champion_uri for i in range(len(D))] == ["/m/v0"] * len(D)
    assert EvalRangeSpec(source=SOURCE, gates=GateConfig(), champion=newer, days=days).day_spec(0, newer).champion_uri is None




def test_infer_day_specs_carry_the_scoring_concurrency_the_cluster_was_asked_for():
    days = tuple(InferDay(day=d, model_uri="/m/v1", model_version="v1", output_uri=f"/s/{d}", hash_buckets=100)
                 for d in D[:2])
    spec = InferRangeSpec(source=SOURCE, days=days, concurrency=6)
    assert [spec.day_spec(i).concurrency for i in range(2)] == [6, 6]
    assert InferRangeSpec(source=SOURCE, days=days).day_spec(0).concurrency is None   # the CPUs Ray sees
    with pytest.raises(ValidationError, match="concurrency"):
        InferRangeSpec(source=SOURCE, days=days, concurrency=0)
