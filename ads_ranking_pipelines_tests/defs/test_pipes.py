from __future__ import annotations

import datetime as dt
import json
import threading

import dagster as dg
from dagster_pipes import PIPES_PROTOCOL_VERSION, PIPES_PROTOCOL_VERSION_FIELD

from ads_ranking_pipelines.backends.base import ClusterSession, JobSpec, JobState, JobStatus
from ads_ranking_pipelines.defs.jobs import range_tags
from ads_ranking_pipelines.defs.partitions import daily_partitions
from ads_ranking_pipelines.defs.pipes import parse_pipes_message, split_pipes_messages, wait_until_terminal
from ads_ranking_pipelines.defs.range_jobs import DayResults, run_days

MSG = {"__dagster_pipes_version": "0.1", "method": "log", "params": {"message": "hi", "level": "INFO"}}


def test_parses_plain_prefixed_and_colored_lines():
    line = json.dumps(MSG)
    assert parse_pipes_message(line) == MSG
    assert parse_pipes_message(f"(RayTrainWorker pid=123, ip=127.0.0.2) {line}") == MSG
    assert parse_pipes_message(f"\x1b[36m(RayTrainWorker pid=123)\x1b[0m {line}") == MSG


def test_other_lines_are_not_messages():
    assert parse_pipes_message("epoch 1 loss 0.3") is None
    assert parse_pipes_message('{"kind": "result", "values": {}}') is None
    assert parse_pipes_message('{"__dagster_pipes_version": broken') is None


def test_messages_glued_to_other_output_are_found_and_the_text_kept():
    # a driver thread's print split by another thread's message (seen in CI: a lost epoch record)
    m1, m2 = dict(MSG, params={"message": "a", "level": "INFO"}), dict(MSG, params={"message": "b", "level": "INFO"})
    worker = "(RayTrainWorker pid=1) [train] epoch 2/2 loss 0.14"
    assert split_pipes_messages(f"{worker}{json.dumps(m1)}") == ([m1], worker)
    assert split_pipes_messages(f"{json.dumps(m1)}{worker}") == ([m1], worker)
    assert split_pipes_messages(f"\x1b[36m{worker}\x1b[0m{json.dumps(m1)}{json.dumps(m2)}") == ([m1, m2], worker)
    assert split_pipes_messages(json.dumps(m1)) == ([m1], "")
    # a broken message stays text; indentation of plain lines is kept
    assert split_pipes_messages('x {"__dagster_pipes_version": broken') == ([], 'x {"__dagster_pipes_version": broken')
    assert split_pipes_messages('  File "a.py", line 1\n') == ([], '  File "a.py", line 1')


def test_library_chatter_is_recognised_and_our_lines_are_not():
    from ads_ranking_pipelines.defs.chatter import is_chatter

    seen = [  # lines from a real run's event log
        "(RayTrainWorker pid=21814) [TBE=a22447bc-fd8b-4890-a49a-c219520059ca] SplitTableBatchedEmbeddingBagsCodegen Arguments: {'self': ...",
        "(RayTrainWorker pid=21814) [TBE=a22447bc-fd8b-4890-a49a-c219520059ca] Feature Gates: [('TBE_V2', False)]",
        "2026-12-01 06:33:08,010\tWARNING __init__.py:28 -- Progress bars disabled. To enable, set ...",
        "2026-12-01 06:33:08,007\tINFO streaming_executor.py:216 -- Execution plan of Dataset dataset_0: InputDataBuffer",
        "(RayTrainWorker pid=18788) Reporting training result 1: TrainingReport(checkpoint=Checkpoint(filesystem=local",
        "(RayTrainWorker pid=18788) [rank1]:W1201 06:34:32 torch/fx/_symbolic_trace.py:56] is_fx_tracing will return true",
    ]
    assert all(is_chatter(line) for line in seen)
    ours = ["(RayTrainWorker pid=1) [train] epoch 2/2 loss 0.14", "model version 20260310-ab written to x",
            "(PlacementGroupCleaner pid=18783) Traceback (most recent call last):", "reading 2 day(s) of events"]
    assert not any(is_chatter(line) for line in ours)


# ---- waiting for the job ---------------------------------------------------------------------



class ScriptedSession:
    """Status reads follow a script; ``on_read`` runs before each (e.g. the job starts exiting)."""

    def __init__(self, states: list[str], on_read=None) -> None:
        self.states = list(states)
        self.reads = 0
        self.on_read = on_read

    def status(self, job_id: str) -> JobStatus:
        self.reads += 1
        if self.on_read:
            self.on_read(self.reads)
        return JobStatus(JobState(self.states.pop(0)))


class RecordingEvent(threading.Event):
    """An event whose timed waits are recorded and return at once (no real waiting)."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[float] = []

    def wait(self, timeout=None):
        self.waits.append(timeout)
        return self.is_set()


def test_the_wait_reads_the_status_quickly_once_the_job_is_ending():
    ending = RecordingEvent()
    sleeps: list[float] = []
    # running for two idle polls; then its Pipes session closes; it exits two quick polls later
    session = ScriptedSession(["RUNNING", "RUNNING", "RUNNING", "RUNNING", "RUNNING", "SUCCEEDED"],
                              on_read=lambda n: ending.set() if n == 3 else None)
    status = wait_until_terminal(session, "j", ending, idle_poll_s=5.0, soon_poll_s=0.05,
                                 max_soon_poll_s=0.5, sleep=sleeps.append)
    assert status.state == JobState.SUCCEEDED
    assert session.reads == 6                    # returns on the first terminal read
    # idle polls wait on the event (a Pipes "closed" message ends them early), and only
    # until the job said it is ending
    assert ending.waits == [5.0, 5.0]
    assert sleeps == [0.05, 0.1, 0.2]            # then quick reads, backing off


class _RangeJobSession(ClusterSession):
    """A cluster session whose one job printed two days' results (day 2's only when ``ok``)."""

    name, dashboard_url = "fake", None

    def __init__(self, ok: bool):
        def line(payload):
            return json.dumps({PIPES_PROTOCOL_VERSION_FIELD: PIPES_PROTOCOL_VERSION,
                               "method": "report_custom_message", "params": {"payload": payload}})

        days = ["2026-03-10", "2026-03-11"] if ok else ["2026-03-10"]
        self.lines = [line({"kind": "epoch", "values": {"epoch": 1, "loss": 0.5, "day": d}}) for d in days]
        self.lines[0] = "(RayTrainWorker pid=7) [train] epoch 1/1" + self.lines[0]   # glued by another thread
        self.lines += [line({"kind": "day_result", "values": {"day": d, "final_loss": 0.5}}) for d in days]
        self.lines += [line({"kind": "result", "values": {"days": len(days)}})] if ok else ["Traceback: day 2 broke"]
        self.ok = ok

    def submit(self, job):
        return job.submission_id

    def status(self, job_id):
        return JobStatus(JobState.SUCCEEDED if self.ok else JobState.FAILED, "" if self.ok else "day 2 broke")

    def logs(self, job_id, follow=True):
        yield from self.lines

    def stop(self, job_id):
        pass


def _run_range(ok: bool):
    results = DayResults()
    days = [dt.date(2026, 3, 10), dt.date(2026, 3, 11)]

    @dg.asset(partitions_def=daily_partitions, backfill_policy=dg.BackfillPolicy.single_run())
    def ranged(context):
        run_days(context, _RangeJobSession(ok), JobSpec("train-x", "python -m x"), days, results)
        return dg.MaterializeResult()

    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([ranged], instance=instance, tags=range_tags(days[0], days[-1]), raise_on_error=False)
    observed = [e.event_specific_data.asset_observation for e in result.all_events
                if e.event_type_value == "ASSET_OBSERVATION"]
    logged = [e.user_message for e in instance.all_logs(result.run_id)]
    return result, results, observed, logged


def test_a_range_job_reports_each_day_and_its_live_records_land_on_their_partitions():
    result, results, observed, logged = _run_range(ok=True)
    assert result.success
    assert list(results.days) == ["2026-03-10", "2026-03-11"]
    assert [o.partition for o in observed] == ["2026-03-10", "2026-03-11"]
    assert "(RayTrainWorker pid=7) [train] epoch 1/1" in logged    # the glued text is still a log line


def test_days_reported_before_the_job_failed_are_kept():
    result, results, _, _ = _run_range(ok=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.is_step_failure)
    assert "ended FAILED: day 2 broke" in failure.step_failure_data.user_failure_data.description
    assert list(results.days) == ["2026-03-10"]
