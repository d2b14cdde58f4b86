"""A range job's Pipes messages reach the Dagster run once across a retried KubeRay submitter,
through the resource and the fake API server: the retried pod prints what KubeRay v1.7.0's
submitter prints (wait echo, its own timestamped ``cli.py`` banner) and then the whole driver
log again from its first line - its per-day results included."""

# No ``from __future__ import annotations``: Dagster reads the asset's context annotation.
import datetime as dt
import json
from typing import Any

import dagster as dg
from dagster_pipes import PIPES_PROTOCOL_VERSION, PIPES_PROTOCOL_VERSION_FIELD
import pytest

from ads_ranking_pipelines.backends.base import JobSpec
from ads_ranking_pipelines.contracts.pipes_stamp import STAMP_FIELD
from ads_ranking_pipelines.defs.range_jobs import DayResults, run_days
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource
from ads_ranking_pipelines_tests.defs import test_resource_kuberay as base
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import FakeKubeApiServer, Scenario

pytestmark = pytest.mark.slow  # real processes (README: Tests)

DAYS = [dt.date(2026, 3, 10), dt.date(2026, 3, 11)]
WRITER = "4f1c0de5a7b94e2d8c3b6a1f0e9d8c7b"


def stamped(counter: int, method: str, params: dict[str, Any] | None) -> str:
    """A driver stdout line as ``ray_jobs/pipes_writer.py`` writes it."""
    return json.dumps({PIPES_PROTOCOL_VERSION_FIELD: PIPES_PROTOCOL_VERSION, "method": method,
                       "params": params, STAMP_FIELD: [WRITER, counter]})


def day(counter: int, d: dt.date) -> str:
    return stamped(counter, "report_custom_message",
                   {"payload": {"kind": "day_result", "values": {"day": d.isoformat(), "auc": 0.7}}})


DRIVER_LOG = (
    stamped(1, "opened", {"extras": {}}),
    base.PLAIN_LINE,
    day(2, DAYS[0]),
    "day 2026-03-11: training",
    day(3, DAYS[1]),
    stamped(4, "report_custom_message", {"payload": {"kind": "result", "values": {"days": 2}}}),
    stamped(5, "closed", {}),
)


class CountingDayResults(DayResults):
    """Every payload handed to the range job's ``on_message``, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.payloads: list[Any] = []

    def add(self, payload: Any) -> None:
        self.payloads.append(payload)
        super().add(payload)


def range_asset(fake: FakeKubeApiServer, seen: dict[str, Any]):
    @dg.asset(name="kuberay_range")
    def kuberay_range(context: dg.AssetExecutionContext,
                      ray_cluster: RayClusterResource) -> dg.MaterializeResult:
        request = ray_cluster.cluster_request(base.CPU, context.run.run_id)
        session = ray_cluster.session(request, context.log, run_id=context.run.run_id,
                                      code_location=base.CODE_LOCATION)
        job = JobSpec(submission_id=f"train-{context.run.run_id[:8]}",
                      entrypoint="python -m ads_ranking_pipelines.ray_jobs.train")
        results = seen["results"] = CountingDayResults()
        seen["outcome"] = outcome = run_days(context, session, job, DAYS, results)
        seen["submitter_pods"] = fake.sim[("rayjobs", base.NS, outcome.job_id)]["attempts"]
        return dg.MaterializeResult()

    return kuberay_range


def test_range_jobs_day_results_come_once_across_a_submitter_retry(
        fake_apiserver: FakeKubeApiServer, tmp_path) -> None:
    # The first submitter pod dies after day 1's result; the second prints everything again.
    fake_apiserver.scenario = Scenario(log_lines=DRIVER_LOG, submitter_failures=1,
                                       crash_after_lines=4, dashboard_wait_lines=1)
    seen: dict[str, Any] = {}
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([range_asset(fake_apiserver, seen)], instance=instance,
                            resources={"ray_cluster": base.make_resource(fake_apiserver, tmp_path)},
                            raise_on_error=False)
    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert result.success, messages
    assert seen["submitter_pods"] == 2  # the first died; the second replayed the whole log
    payloads = seen["results"].payloads
    assert [(p["kind"], p["values"].get("day")) for p in payloads] == [
        ("day_result", "2026-03-10"), ("day_result", "2026-03-11"), ("result", None)]
    assert [m["kind"] for m in seen["outcome"].custom_messages] == ["day_result", "day_result", "result"]
    assert messages.count(base.PLAIN_LINE) == 1
    assert not any("unexpected message received after closed" in m for m in messages)
    assert not any("cli.py:" in m or "Waiting for Ray Dashboard" in m for m in messages)
    base.assert_nothing_left(fake_apiserver)
