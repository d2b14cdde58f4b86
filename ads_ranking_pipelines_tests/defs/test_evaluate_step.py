"""Back in Dagster: the evaluation job's per-day results become registry writes, in date order."""

from __future__ import annotations

import datetime as dt
import types

import dagster as dg
import pytest

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.gates import GateConfig, gate_step
from ads_ranking_pipelines.contracts.ranges import DAY_RESULT, EvalDay, EvalRangeSpec
from ads_ranking_pipelines.defs.evaluate_step import apply_chain, eval_spec
from ads_ranking_pipelines.defs.config import EvaluationConfig
from ads_ranking_pipelines.defs.range_jobs import DayMetadata, DayResults
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry

D = [dt.date(2026, 3, 10) + dt.timedelta(days=i) for i in range(3)]
AUC = {"v0": 0.70, "v1": 0.75, "v2": 0.60, "v3": 0.76, "v9": 0.80}
DAY = dt.timedelta(days=1)
# the day each version's training window ends: vN (N=1..3) is D[N-1]'s version; v9 trained after the range
THROUGH = {"v0": D[0] - 2 * DAY, "v1": D[0] - DAY, "v2": D[1] - DAY, "v3": D[2] - DAY, "v9": D[2] + 5 * DAY}
GATES = GateConfig(max_auc_gap_vs_baseline=0.2)


class Log:
    def __init__(self):
        self.lines = []

    def info(self, m):
        self.lines.append(m)

    warning = info


@pytest.fixture
def setup(tmp_path):
    registry = ModelRegistry(StorageLayout(str(tmp_path)), "m")
    for v in AUC:
        fs.write_json(fs.join(registry.version_uri(v), "manifest.json"),
                      {"model_version": v, "files": {}, "train_days": [THROUGH[v].isoformat()]})
    registry.promote("v0", reason="before the run")
    events: list = []
    context = types.SimpleNamespace(log=Log(), run=types.SimpleNamespace(run_id="r" * 32), log_event=events.append,
                                    events=events)
    return registry, context, eval_spec(registry, EvaluationConfig(**GATES.model_dump()), SourceConfig(uri="/e"),
                                        _plan(registry), context.log)


def _plan(registry: ModelRegistry) -> list[EvalDay]:
    return [EvalDay(eval_day=d, model_version=f"v{i + 1}", model_uri=registry.version_uri(f"v{i + 1}"),
                    params=TrainingParams(), train_days=(d - DAY,)) for i, d in enumerate(D)]


def _results(spec: EvalRangeSpec, n: int) -> DayResults:
    """What the job reports for its first ``n`` days (the same chain the job walks)."""
    results, champion = DayResults(), spec.champion
    for i, d in enumerate(spec.days[:n]):
        m = {"auc": AUC[d.model_version], "baseline_auc": 0.7, "calibration": 1.0}
        if (ref := spec.comparison(i, champion)) is not None:
            m.update(champion_auc=AUC[ref.version], champion_version=ref.version)
        step = gate_step(d.eval_day.isoformat(), d.model_version, max(d.train_days), m, GATES, champion)
        results.add({"kind": DAY_RESULT, "values": {"day": d.eval_day.isoformat(), "metrics": m, "step": step.to_dict()}})
        champion = d.as_champion() if step.promotes else champion
    return results


def test_promotions_follow_the_chain_in_date_order(setup):
    registry, context, spec = setup
    metadata = DayMetadata(context)
    verdicts = apply_chain(context, registry, spec, _results(spec, 3), metadata)
    assert [(e["action"], e["model_version"], e["from_version"]) for e in registry.history()] == [
        ("promote", "v0", None), ("promote", "v1", "v0"), ("promote", "v3", "v1")]     # v2 failed: no change
    records = [registry.evaluation(f"v{i + 1}", d) for i, d in enumerate(D)]
    assert [(r["champion_before"], r["passed"], r["promoted"], r["champion_after"]) for r in records] == [
        ("v0", True, True, "v1"), ("v1", False, False, "v1"), ("v1", True, True, "v3")]
    assert metadata.by_day["2026-03-11"]["promoted"] is False and len(verdicts) == 9
    assert any(line.startswith("v2 stays a candidate") for line in context.log.lines)
    assert [(e.asset_key.to_user_string(), e.metadata["model_version"].value, e.metadata["from_version"].value)
            for e in context.events] == [("model_champion", "v1", "v0"), ("model_champion", "v3", "v1")]


def test_only_the_finished_days_count(setup):
    registry, context, spec = setup
    apply_chain(context, registry, spec, _results(spec, 1), DayMetadata(context))
    assert registry.champion_version() == "v1" and registry.evaluation("v2", D[1]) is None


@pytest.mark.parametrize("part, key, value, words", [
    ("step", "champion_before", "v9", "compared v1 with v0 under champion v9"),      # another chain
    ("metrics", "champion_version", "v2", "compared v1 with v2 .* comparison v0"),   # another model
])
def test_a_job_that_compared_other_things_promotes_nothing(setup, part, key, value, words):
    registry, context, spec = setup
    results = _results(spec, 1)
    results.days[D[0].isoformat()][part][key] = value
    with pytest.raises(dg.Failure, match=words):
        apply_chain(context, registry, spec, results, DayMetadata(context))
    assert registry.champion_version() == "v0"


def test_a_champion_changed_during_the_run_is_not_overwritten(setup):
    registry, context, spec = setup
    registry.promote("v2", reason="by hand, meanwhile")
    with pytest.raises(dg.Failure, match=r"changed during this run \(v0 -> v2\)"):
        apply_chain(context, registry, spec, _results(spec, 3), DayMetadata(context))
    assert registry.champion_version() == "v2"


def test_days_run_again_after_a_newer_champion_are_compared_fairly_and_change_nothing(setup):
    """v9 (trained after the range) is champion, v0 was before it: the days are compared with v0
    where v0 did not train on them, v9 stays champion, and each record says why."""
    registry, context, _ = setup
    registry.promote("v9", reason="a later day")
    spec = eval_spec(registry, EvaluationConfig(**GATES.model_dump()), SourceConfig(uri="/e"), _plan(registry), context.log)
    assert spec.champion.version == "v9" and [c.version for c in spec.earlier_champions] == ["v0"]
    assert [r.version if r else None for r in (spec.comparison(i, spec.champion) for i in range(3))] == ["v0"] * 3
    metadata = DayMetadata(context)
    apply_chain(context, registry, spec, _results(spec, 3), metadata)
    assert registry.champion_version() == "v9" and [e["model_version"] for e in registry.history()] == ["v0", "v9"]
    records = [registry.evaluation(f"v{i + 1}", d) for i, d in enumerate(D)]
    assert [(r["compared_with"], r["passed"], r["promoted"]) for r in records] == [
        ("v0", True, False), ("v0", False, False), ("v0", True, False)]
    assert "champion v9 was trained on newer data" in records[0]["held_back"]
    assert "not promoted" in metadata.by_day[D[2].isoformat()]["held_back"]


def test_a_corrupt_past_champion_is_left_out_of_the_comparisons(setup):
    registry, context, _ = setup
    registry.promote("v9", reason="a later day")
    fs.write_json(fs.join(registry.version_uri("v0"), "manifest.json"), {"model_version": "v0", "train_days": [
        THROUGH["v0"].isoformat()], "files": {"weights.pt": {"sha256": "0" * 64}}})
    spec = eval_spec(registry, EvaluationConfig(**GATES.model_dump()), SourceConfig(uri="/e"), _plan(registry), context.log)
    assert spec.earlier_champions == () and spec.comparison(0, spec.champion) is None
    assert any("past champion v0 is left out" in line for line in context.log.lines)
