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
from ads_ranking_pipelines.defs.evaluate_step import apply_chain
from ads_ranking_pipelines.defs.range_jobs import DayMetadata, DayResults
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry

D = [dt.date(2026, 3, 10) + dt.timedelta(days=i) for i in range(3)]
AUC = {"v0": 0.70, "v1": 0.75, "v2": 0.60, "v3": 0.76}
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
        fs.write_json(fs.join(registry.version_uri(v), "manifest.json"), {"model_version": v, "files": {}})
    registry.promote("v0", reason="before the run")
    context = types.SimpleNamespace(log=Log(), run=types.SimpleNamespace(run_id="r" * 32))
    spec = EvalRangeSpec(source=SourceConfig(uri="/e"), gates=GATES, champion_version="v0", champion_uri="/m/v0",
                         days=tuple(EvalDay(eval_day=d, model_version=f"v{i + 1}", model_uri=f"/m/v{i + 1}",
                                            params=TrainingParams(), train_days=(d,)) for i, d in enumerate(D)))
    return registry, context, spec


def _results(spec: EvalRangeSpec, n: int) -> DayResults:
    """What the job reports for its first ``n`` days (the same chain the job walks)."""
    results, champion = DayResults(), spec.champion_version
    for d in spec.days[:n]:
        m = {"auc": AUC[d.model_version], "baseline_auc": 0.7, "calibration": 1.0,
             "champion_auc": AUC[champion], "champion_version": champion}
        step = gate_step(d.eval_day.isoformat(), d.model_version, m, GATES, champion)
        results.add({"kind": DAY_RESULT, "values": {"day": d.eval_day.isoformat(), "metrics": m, "step": step.to_dict()}})
        champion = step.champion_after
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


def test_only_the_finished_days_count(setup):
    registry, context, spec = setup
    apply_chain(context, registry, spec, _results(spec, 1), DayMetadata(context))
    assert registry.champion_version() == "v1" and registry.evaluation("v2", D[1]) is None


def test_a_job_that_walked_another_chain_promotes_nothing(setup):
    registry, context, spec = setup
    results = _results(spec, 1)
    results.days[D[0].isoformat()]["step"]["champion_before"] = "v9"
    with pytest.raises(dg.Failure, match="compared v1 with champion v9"):
        apply_chain(context, registry, spec, results, DayMetadata(context))
    assert registry.champion_version() == "v0"


def test_a_champion_changed_during_the_run_is_not_overwritten(setup):
    registry, context, spec = setup
    registry.promote("v2", reason="by hand, meanwhile")
    with pytest.raises(dg.Failure, match=r"changed during this run \(v0 -> v2\)"):
        apply_chain(context, registry, spec, _results(spec, 3), DayMetadata(context))
    assert registry.champion_version() == "v2"
