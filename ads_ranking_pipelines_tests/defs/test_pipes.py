from __future__ import annotations

import json

from ads_ranking_pipelines.defs.pipes import parse_pipes_message

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

import threading  # noqa: E402

from ads_ranking_pipelines.backends.base import JobState, JobStatus  # noqa: E402
from ads_ranking_pipelines.defs.pipes import wait_until_terminal  # noqa: E402


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

