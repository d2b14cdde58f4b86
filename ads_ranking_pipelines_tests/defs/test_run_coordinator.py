"""Which runs the run queue tags with a GPU pool before queueing them."""

from __future__ import annotations

import dagster as dg

from ads_ranking_pipelines.defs.run_coordinator import implied_tags

POOL, MODEL = "ads-ranking/gpu-pool", "ads-ranking/model"


def _run(job: str = "__ASSET_JOB", tags=None, selection=("impressions", "trained_model"), config=None) -> dg.DagsterRun:
    return dg.DagsterRun(job_name=job, run_id="r", tags=tags or {}, run_config=config or {},
                         asset_selection={dg.AssetKey(a) for a in selection} if selection is not None else None)


def test_an_untagged_training_run_gets_the_pool_and_model_its_config_implies():
    assert implied_tags(_run()) == {POOL: "local", MODEL: "quest_ranker", "team": "ads-ranking"}
    configured = _run(config={"ops": {"trained_model": {"config": {"gpu_pool": "h100-80gb", "model_name": "m2"}}}})
    assert implied_tags(configured)[POOL] == "h100-80gb" and implied_tags(configured)[MODEL] == "m2"
    assert implied_tags(_run(job="daily_retraining", selection=None))[POOL] == "local"


def test_tagged_runs_and_runs_that_train_nothing_are_left_alone():
    assert implied_tags(_run(tags={POOL: "a100-80gb"})) == {}
    assert implied_tags(_run(selection=("batch_scores",))) == {}
    assert implied_tags(_run(job="promote_model", selection=None)) == {}
    assert implied_tags(_run(tags={MODEL: "quest_ranker", "team": "x"})) == {POOL: "local"}
