"""The gate decision and the champion chain, as both the evaluation job and Dagster take them."""

from __future__ import annotations

from ads_ranking_pipelines.contracts.gates import CHECK_CHAMPION, GateConfig, gate_step
from ads_ranking_pipelines.defs.config import EvaluationConfig

GOOD = {"auc": 0.75, "baseline_auc": 0.74, "calibration": 1.02}


def test_a_passing_day_becomes_the_champion_for_the_days_after():
    step = gate_step("2026-03-10", "v1", GOOD, GateConfig(), None)
    assert step.passed and step.promotes and (step.champion_before, step.champion_after) == (None, "v1")


def test_a_failed_gate_leaves_the_champion():
    worse = {**GOOD, "auc": 0.74, "champion_auc": 0.76, "champion_version": "v1"}
    step = gate_step("2026-03-11", "v2", worse, GateConfig(), "v1")
    assert not step.passed and not step.promotes and step.champion_after == "v1"
    assert [v.check for v in step.verdicts if not v.passed] == [CHECK_CHAMPION]
    assert step.to_dict()["verdicts"][1]["passed"] is False


def test_promote_off_and_the_champion_itself_change_nothing():
    assert gate_step("d", "v1", GOOD, GateConfig(promote=False), None).champion_after is None
    again = gate_step("d", "v1", GOOD, GateConfig(), "v1")
    assert again.passed and not again.promotes


def test_the_dagster_config_and_the_job_gates_have_the_same_fields_and_defaults():
    assert EvaluationConfig().gates() == GateConfig()
    assert set(EvaluationConfig.model_fields) == set(GateConfig.model_fields)
    assert EvaluationConfig(max_auc_drop_vs_champion=0.1).gates().max_auc_drop_vs_champion == 0.1
