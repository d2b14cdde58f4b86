"""The range job drivers without Ray: days stream back one by one; evaluation walks the champion chain."""

from __future__ import annotations

import datetime as dt

import pytest

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.gates import ChampionRef, GateConfig
from ads_ranking_pipelines.contracts.ranges import DAY_RESULT, EvalDay, EvalRangeSpec
from ads_ranking_pipelines.ray_jobs import common, evaluate

D = [dt.date(2026, 3, 10) + dt.timedelta(days=i) for i in range(3)]


class Collect:
    def __init__(self):
        self.logs, self.records = [], []

    def log(self, message):
        self.logs.append(message)

    def metrics(self, kind, values):
        self.records.append((kind, values))


def test_each_finished_day_is_sent_before_the_next_starts_and_a_failure_keeps_them():
    sent: list[dict] = []

    def body(spec, reporter):
        yield {"day": "2026-03-10", "x": 1}
        assert [m["kind"] for m in sent] == [DAY_RESULT]          # day 1 is out before day 2 runs
        raise RuntimeError("day 2 broke")

    reporter = Collect()
    with pytest.raises(RuntimeError, match="day 2 broke"):
        common.run_body(body, None, reporter, sent.append)
    assert [(m["kind"], m["values"]["day"]) for m in sent] == [(DAY_RESULT, "2026-03-10")]
    assert "day_seconds" in sent[0]["values"]
    assert "job failed after 1 finished day(s): RuntimeError: day 2 broke" in reporter.logs[-1]


def test_the_job_result_counts_the_days():
    sent: list[dict] = []
    common.run_body(lambda spec, r: iter([{"day": "a"}, {"day": "b"}]), None, Collect(), sent.append)
    assert [m["kind"] for m in sent] == [DAY_RESULT, DAY_RESULT, common.RESULT_KIND]
    assert sent[-1]["values"] == {"days": 2}


def test_day_reporter_names_the_day_of_each_metrics_record():
    inner = Collect()
    common.DayReporter(inner, D[1]).metrics("epoch", {"loss": 0.5})
    assert inner.records == [("epoch", {"loss": 0.5, "day": "2026-03-11"})]


AUC = {"/m/v1": 0.75, "/m/v2": 0.60, "/m/v3": 0.76, "/m/v0": 0.70, "/m/v9": 0.80}
DAY = dt.timedelta(days=1)


def _fake_evaluate(monkeypatch, compared: list[str | None]) -> None:
    def fake_evaluate(spec, reporter):
        compared.append(spec.champion_uri)
        m = {"auc": AUC[spec.model_uri], "baseline_auc": 0.70, "calibration": 1.0}
        if spec.champion_uri:
            m.update(champion_auc=AUC[spec.champion_uri], champion_version=spec.champion_uri.rsplit("/", 1)[-1])
        return m

    import ads_ranking_pipelines.training.evaluate as training_evaluate

    monkeypatch.setattr(training_evaluate, "evaluate_version", fake_evaluate)


def _days() -> tuple[EvalDay, ...]:
    return tuple(EvalDay(eval_day=d, model_version=f"v{i + 1}", model_uri=f"/m/v{i + 1}", params=TrainingParams(),
                         train_days=(d - DAY,)) for i, d in enumerate(D))


def test_evaluation_walks_the_chain(monkeypatch):
    """Day 2 fails its gate: day 3 is compared with day 1's version, the champion after day 2."""
    compared: list[str | None] = []
    _fake_evaluate(monkeypatch, compared)
    spec = EvalRangeSpec(source=SourceConfig(uri="/e"), gates=GateConfig(max_auc_gap_vs_baseline=0.2),
                         champion=ChampionRef(version="v0", uri="/m/v0", trained_through=D[0] - 2 * DAY), days=_days())
    out = list(evaluate.body(spec, Collect()))
    assert compared == ["/m/v0", "/m/v1", "/m/v1"]
    steps = [o["step"] for o in out]
    assert [(s["champion_before"], s["passed"], s["champion_after"]) for s in steps] == [
        ("v0", True, "v1"), ("v1", False, "v1"), ("v1", True, "v3")]
    assert [o["day"] for o in out] == [d.isoformat() for d in D]


def test_days_run_again_after_later_ones_compare_with_a_fair_champion_and_promote_nothing(monkeypatch):
    """The champion v9 trained through after the range: each day is compared with v0, the past
    champion that did not train on it (or with nothing, where none did), and none replaces v9."""
    compared: list[str | None] = []
    _fake_evaluate(monkeypatch, compared)
    v9 = ChampionRef(version="v9", uri="/m/v9", trained_through=D[-1] + 5 * DAY)
    v0 = ChampionRef(version="v0", uri="/m/v0", trained_through=D[1] - DAY)     # trained on day 1's eval day
    spec = EvalRangeSpec(source=SourceConfig(uri="/e"), gates=GateConfig(max_auc_gap_vs_baseline=0.2),
                         champion=v9, earlier_champions=(v0,), days=_days())
    reporter = Collect()
    out = list(evaluate.body(spec, reporter))
    assert compared == [None, "/m/v0", "/m/v0"]
    assert "champion v9 trained on 2026-03-10" in out[0]["metrics"]["no_champion_reason"]
    steps = [o["step"] for o in out]
    assert [(s["passed"], s["champion_after"]) for s in steps] == [(True, "v9"), (False, "v9"), (True, "v9")]
    assert "v3 (trained through 2026-03-11) is not promoted" in steps[2]["held_back"]
    assert any("is not promoted: champion v9" in line for line in reporter.logs)
