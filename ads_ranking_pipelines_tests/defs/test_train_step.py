"""trained_model's range plan and what a failed or cancelled training job leaves (no Ray here)."""

from __future__ import annotations

import datetime as dt
import types

import dagster as dg
import pytest
from dagster._core.errors import DagsterExecutionInterruptedError

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.ranges import DAY_RESULT
from ads_ranking_pipelines.defs import train_step
from ads_ranking_pipelines.defs.range_jobs import DayMetadata, DayResults
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.registry import ModelRegistry

D = [dt.date(2026, 3, 10) + dt.timedelta(days=i) for i in range(3)]
RUN = "abcdef12" + "0" * 24


class Context:
    def __init__(self):
        self.lines, self.events = [], []
        self.log = types.SimpleNamespace(info=self.lines.append, warning=self.lines.append)
        self.asset_key = dg.AssetKey("trained_model")

    def log_event(self, event):
        self.events.append(event)


@pytest.fixture
def registry(tmp_path):
    return ModelRegistry(StorageLayout(str(tmp_path)), "m")


def _complete(registry, version):
    fs.write_json(fs.join(registry.version_uri(version), "manifest.json"), {"model_version": version, "files": {}})


def test_the_plan_warm_starts_day_one_from_storage_and_each_later_day_from_the_day_before(registry):
    _complete(registry, "20260309-old00000")
    plan = train_step.plan(registry, TrainingParams(dataset_window_days=2), SourceConfig(uri="/e"), D, RUN,
                           warm=True, cluster={})
    versions = [d.model_version for d in plan.spec.days]
    assert versions == ["20260310-abcdef12", "20260311-abcdef12", "20260312-abcdef12"]
    assert list(plan.warm_from.values()) == ["20260309-old00000", *versions[:2]]
    assert plan.spec.day_spec(1).init_model_uri == registry.version_uri(versions[0])
    assert plan.spec.days[0].train_days == (dt.date(2026, 3, 8), dt.date(2026, 3, 9))
    cold = train_step.plan(registry, TrainingParams(), SourceConfig(uri="/e"), D, RUN, warm=False, cluster={})
    assert cold.spec.init_model_uri is None and set(cold.warm_from.values()) == {None}


@pytest.mark.parametrize("exc, why", [(DagsterExecutionInterruptedError("x"), "the run was cancelled"),
                                      (dg.Failure("ended FAILED"), "the training job failed")])
def test_a_stop_on_day_two_keeps_day_one_and_removes_the_half_written_version(registry, exc, why):
    plan = train_step.plan(registry, TrainingParams(), SourceConfig(uri="/e"), D, RUN, warm=True, cluster={})
    v1, v2, _ = (d.model_version for d in plan.spec.days)
    _complete(registry, v1)
    fs.write_bytes(fs.join(registry.version_uri(v2), "weights.pt"), b"half")       # no manifest yet
    results = DayResults()
    results.add({"kind": DAY_RESULT, "values": {"day": D[0].isoformat(), "final_loss": 0.4, "day_seconds": 3.0}})
    context = Context()
    train_step._keep_finished(context, registry, plan, results, DayMetadata(context), exc)
    assert registry.versions() == [v1] and not fs.exists(registry.version_uri(v2))
    (event,) = context.events                                      # day 1 recorded as materialized
    assert event.partition == D[0].isoformat() and event.metadata["model_version"].value == v1
    assert context.lines == [f"{why} while training {D[1]} ({v2} not kept; its half-written files were removed): "
                             f"kept 1 complete version(s) of the days before ({v1}); not trained: {D[2]}; "
                             "the champion is unchanged (none)"]


RUN_B = "bbbbbbbb" + "1" * 24


def test_a_retry_takes_over_the_earlier_attempt_of_the_same_work(registry):
    """A run killed on day 2 of 3, then the same range again (a Dagster retry is a new run): day
    1's version is reused (and no longer unattended), days 2 and 3 keep the first attempt's names
    (so day 2's checkpoint folder is found), day 2 warm-starts from day 1's version."""
    params = TrainingParams(dataset_window_days=2)
    first = train_step.plan(registry, params, SourceConfig(uri="/e"), D, RUN, warm=True, cluster={})
    v1, v2, v3 = (d.model_version for d in first.spec.days)
    _complete(registry, v1)
    assert registry.mark_unattended(RUN, "its run died") == [v1]
    retry = train_step.plan(registry, params, SourceConfig(uri="/e"), D, RUN_B, warm=True, cluster={})
    assert retry.resume.resumed_from == RUN and retry.resume.key == first.resume.key
    assert retry.reused == {D[0].isoformat(): v1}
    assert [d.model_version for d in retry.spec.days] == [v2, v3]
    assert [d.run_name for d in retry.spec.days] == [f"{params.model_name}-{v}" for v in (v2, v3)]
    assert retry.spec.init_model_uri == registry.version_uri(v1)
    assert [train_step.version_of_run(registry, d, RUN_B) for d in D] == [v1, v2, v3]
    context = Context()
    metadata = DayMetadata(context)
    train_step._tell_resume(context, registry, retry, metadata)
    assert registry.unattended(v1) is None                          # this run judges it now
    assert context.lines[0] == (f"[resume] key {retry.resume.key}: resuming run {RUN} (same model, range, config, "
                                f"code version and data as run {RUN}): 1 day(s) complete, not trained again "
                                f"({D[0]}); training {D[1]}, {D[2]} (a day with checkpoints resumes from its last one)")
    assert "its run died" in context.lines[1]
    assert metadata.by_day[D[0].isoformat()]["resumed"] == f"trained complete by run {RUN}: not trained again"
    for d in (v2, v3):
        _complete(registry, d)
    done = train_step.plan(registry, params, SourceConfig(uri="/e"), D, "cccccccc" + "2" * 24, warm=True, cluster={})
    assert done.spec is None and sorted(done.reused.values()) == [v1, v2, v3]
    train_step._finished(registry, done)                 # the work is finished: the same work again is a re-run
    again = train_step.plan(registry, params, SourceConfig(uri="/e"), D, "eeeeeeee" + "4" * 24, warm=True, cluster={})
    assert again.resume.resumed_from is None and not again.reused and len(again.spec.days) == 3
    assert again.resume.reason == f"the earlier attempt (run {RUN}) finished its days: training afresh"


def test_a_changed_config_or_resume_off_starts_fresh_and_says_why(registry):
    params = TrainingParams(dataset_window_days=2)
    first = train_step.plan(registry, params, SourceConfig(uri="/e"), D, RUN, warm=True, cluster={})
    _complete(registry, first.spec.days[0].model_version)
    changed = train_step.plan(registry, params.model_copy(update={"learning_rate": 0.02}), SourceConfig(uri="/e"),
                              D, RUN_B, warm=True, cluster={})
    assert changed.resume.resumed_from is None and not changed.reused
    assert changed.resume.reason == "config changed (learning_rate: 0.01 -> 0.02)"
    assert [d.model_version for d in changed.spec.days] == [f"{d:%Y%m%d}-bbbbbbbb" for d in D]
    off = train_step.plan(registry, params.model_copy(update={"learning_rate": 0.02}), SourceConfig(uri="/e"), D,
                          "dddddddd" + "3" * 24, warm=True, cluster={}, resume=False)
    assert off.resume.resumed_from is None and off.resume.reason == "resume is off for this run (resume=false)"
