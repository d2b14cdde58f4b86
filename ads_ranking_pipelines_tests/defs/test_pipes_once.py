"""Each Pipes message of a job reaches Dagster once, told apart by the stamp its writer gave it
(``[writer id, counter]``), not by its text: a replayed log is dropped message by message, and
two real messages with the same text both arrive."""

from __future__ import annotations

import datetime as dt
import json
import warnings

import dagster as dg
from dagster_pipes import PIPES_PROTOCOL_VERSION, PIPES_PROTOCOL_VERSION_FIELD

from ads_ranking_pipelines.backends.base import ClusterSession, JobSpec, JobState, JobStatus
from ads_ranking_pipelines.contracts.pipes_stamp import STAMP_FIELD, stamp_of
from ads_ranking_pipelines.defs.pipes import BackendJobLogReader, run_ray_job
from ads_ranking_pipelines.defs.pipes_once import SeenMessages
from ads_ranking_pipelines.defs.range_jobs import DayResults, run_days

DAYS = [dt.date(2026, 3, 10), dt.date(2026, 3, 11)]


def line(method: str, params: dict | None, stamp: list | None) -> str:
    msg = {PIPES_PROTOCOL_VERSION_FIELD: PIPES_PROTOCOL_VERSION, "method": method, "params": params}
    if stamp is not None:
        msg[STAMP_FIELD] = stamp
    return json.dumps(msg)


def custom(payload: dict, stamp: list | None) -> str:
    return line("report_custom_message", {"payload": payload}, stamp)


def test_seen_messages_drops_a_stamp_seen_before() -> None:
    seen = SeenMessages()
    assert seen.first_time({STAMP_FIELD: ["w1", 1]})
    assert seen.first_time({STAMP_FIELD: ["w1", 2]})
    assert seen.first_time({STAMP_FIELD: ["w2", 1]})            # another writer's 1
    assert not seen.first_time({STAMP_FIELD: ["w1", 1]})        # a replay
    assert seen.first_time({"method": "log"}) and seen.first_time({"method": "log"})  # unstamped
    assert seen.dropped == 1


def test_a_bad_stamp_is_no_stamp() -> None:
    for bad in (["w1"], ["w1", "1"], ["w1", True], [1, 1], "w1:1", None):
        assert stamp_of({STAMP_FIELD: bad}) is None
    assert stamp_of({STAMP_FIELD: ["w1", 7]}) == ("w1", 7)


class _ReplayingSession(ClusterSession):
    """A session whose job log holds the driver's log twice over, as a retried submitter pod
    prints it when the backend's replay filter cannot match it (here: a line the filter does
    not know ahead of the replay)."""

    name, dashboard_url = "fake", None

    def __init__(self, driver_log: list[str]) -> None:
        self.lines = [*driver_log, "ray: an unexpected warning of the CLI", *driver_log]

    def submit(self, job):
        return job.submission_id

    def status(self, job_id):
        return JobStatus(JobState.SUCCEEDED, "")

    def logs(self, job_id, follow=True):
        yield from self.lines

    def stop(self, job_id):
        pass


def _driver_log(writer: str) -> list[str]:
    epoch = {"kind": "epoch", "values": {"epoch": 1, "loss": 0.5}}
    return [line("opened", {"extras": {}}, [writer, 1]),
            custom(epoch, [writer, 2]),
            custom(epoch, [writer, 3]),              # the same text again: a real second record
            *[custom({"kind": "day_result", "values": {"day": d.isoformat(), "auc": 0.7}},
                     [writer, 4 + i]) for i, d in enumerate(DAYS)],
            custom({"kind": "result", "values": {"days": 2}}, [writer, 6]),
            line("closed", {}, [writer, 7])]


def test_a_range_jobs_replayed_log_delivers_each_message_once() -> None:
    payloads: list = []

    class Counting(DayResults):
        def add(self, payload):
            payloads.append(payload)
            super().add(payload)

    seen: dict = {}

    @dg.asset
    def ranged(context):
        seen["outcome"] = run_days(context, _ReplayingSession(_driver_log("w1")),
                                   JobSpec("train-x", "python -m x"), DAYS, Counting())
        return dg.MaterializeResult()

    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([ranged], instance=instance, raise_on_error=False)
    logged = [e.user_message for e in instance.all_logs(result.run_id)]
    assert result.success, logged
    assert [p["kind"] for p in payloads] == ["epoch", "epoch", "day_result", "day_result", "result"]
    assert [m["kind"] for m in seen["outcome"].custom_messages] == \
        ["epoch", "epoch", "day_result", "day_result", "result"]
    assert len(result.asset_observations_for_node("ranged")) == 2  # the two epoch records
    assert not any("unexpected message received after closed" in m for m in logged)


def test_unstamped_messages_are_all_delivered() -> None:
    """A driver that does not stamp (not our writer): nothing can tell a replay from a real
    repeat, so nothing is dropped."""
    result_line = custom({"kind": "result", "values": {"days": 0}}, None)
    session = _ReplayingSession([line("opened", {"extras": {}}, None), result_line,
                                 line("closed", {}, None)])
    seen: dict = {}

    @dg.asset
    def plain(context):
        seen["outcome"] = run_ray_job(context, session, JobSpec("train-y", "python -m y"),
                                      poll_interval_s=0.05)
        return dg.MaterializeResult()

    assert dg.materialize([plain], raise_on_error=False).success
    assert [m["kind"] for m in seen["outcome"].custom_messages] == ["result", "result"]


def test_the_reader_answers_the_writer_count_without_dagsters_preview_warning() -> None:
    """Dagster's Pipes session reads ``expected_writer_count`` of every reader; the base class's
    property is a preview API that warns each time. Ours answers it (one writer, the driver),
    so no warning filter is needed anywhere (none is set at import)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", dg.PreviewWarning)
        assert BackendJobLogReader(None, None).expected_writer_count == 1
    assert not [f for f in warnings.filters if "expected_writer_count" in str(f[1])]
