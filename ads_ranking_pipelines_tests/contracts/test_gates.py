"""The gate decision and the champion chain, as both the evaluation job and Dagster take them."""

from __future__ import annotations

import datetime as dt

from ads_ranking_pipelines.contracts.gates import CHECK_CHAMPION, ChampionRef, GateConfig, comparison_for, gate_step
from ads_ranking_pipelines.defs.config import EvaluationConfig

GOOD = {"auc": 0.75, "baseline_auc": 0.74, "calibration": 1.02}
MAR = [dt.date(2026, 3, d) for d in range(1, 32)]     # MAR[i] is March i+1


def ref(version: str, through: dt.date) -> ChampionRef:
    return ChampionRef(version=version, uri=f"/m/{version}", trained_through=through)


def test_a_passing_day_becomes_the_champion_for_the_days_after():
    step = gate_step("2026-03-10", "v1", MAR[8], GOOD, GateConfig(), None)
    assert step.passed and step.promotes and (step.champion_before, step.champion_after) == (None, "v1")


def test_a_failed_gate_leaves_the_champion():
    worse = {**GOOD, "auc": 0.74, "champion_auc": 0.76, "champion_version": "v1"}
    step = gate_step("2026-03-11", "v2", MAR[9], worse, GateConfig(), ref("v1", MAR[8]))
    assert not step.passed and not step.promotes and step.champion_after == "v1"
    assert [v.check for v in step.verdicts if not v.passed] == [CHECK_CHAMPION]
    assert step.to_dict()["verdicts"][1]["passed"] is False


def test_promote_off_and_the_champion_itself_change_nothing():
    assert gate_step("d", "v1", MAR[8], GOOD, GateConfig(promote=False), None).champion_after is None
    again = gate_step("d", "v1", MAR[8], GOOD, GateConfig(), ref("v1", MAR[8]))
    assert again.passed and not again.promotes


def test_the_dagster_config_and_the_job_gates_have_the_same_fields_and_defaults():
    assert EvaluationConfig().gates() == GateConfig()
    assert set(EvaluationConfig.model_fields) == set(GateConfig.model_fields)
    assert EvaluationConfig(max_auc_drop_vs_champion=0.1).gates().max_auc_drop_vs_champion == 0.1


def test_a_champion_that_trained_on_the_day_is_not_compared_there():
    """A day re-run after later days: the champion's window reaches it, so the newest past
    champion whose window ends before the day is the comparison; none, if no past one does."""
    champion = ref("v20", MAR[18])                       # trained through March 19
    past = [ref("v05", MAR[3]), ref("v12", MAR[10]), ref("v09", MAR[7])]
    assert comparison_for(MAR[19], champion, past) == champion               # March 20: fair
    assert comparison_for(MAR[18], champion, past).version == "v12"          # March 19: it trained on it
    assert comparison_for(MAR[10], champion, past).version == "v09"          # v12 trained on March 11 too
    assert comparison_for(MAR[3], champion, past) is None
    assert comparison_for(MAR[3], None, past) is None


def test_a_version_on_older_data_never_replaces_the_champion():
    """Its gates pass, but the champion was trained on newer data: nothing changes, and why is said."""
    step = gate_step("2026-03-12", "v12", MAR[10], GOOD, GateConfig(), ref("v20", MAR[18]))
    assert step.passed and not step.promotes and step.champion_after == "v20"
    assert "v12 (trained through 2026-03-11) is not promoted" in step.held_back
    assert "v20 was trained on newer data (through 2026-03-19)" in step.held_back
    assert step.to_dict()["held_back"] == step.held_back


def test_a_retrain_on_the_champions_own_window_may_replace_it():
    step = gate_step("2026-03-20", "v20b", MAR[18], GOOD, GateConfig(), ref("v20", MAR[18]))
    assert step.promotes and step.champion_after == "v20b" and step.held_back == ""


def test_no_comparable_champion_says_why():
    m = {**GOOD, "no_champion_reason": "champion v20 trained on 2026-03-12"}
    verdict = gate_step("2026-03-12", "v12", MAR[10], m, GateConfig(), ref("v20", MAR[18])).verdicts[1]
    assert verdict.passed and verdict.text == "2026-03-12: champion v20 trained on 2026-03-12"
