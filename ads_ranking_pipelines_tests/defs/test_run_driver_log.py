"""The run driver's one log split among its steps (``defs/run_driver_log.py``): each line to the
step it belongs to, each step's reader ending at its end marker, and a message another step's
writer stamped is not taken."""

from __future__ import annotations

import json
import threading
import types

from ads_ranking_pipelines.backends.base import JobState, JobStatus
from ads_ranking_pipelines.contracts.pipes_stamp import step_writer_id
from ads_ranking_pipelines.contracts.run_driver import begin_marker, end_marker
from ads_ranking_pipelines.defs.run_driver_log import END, DriverLog, StepLogReader


class _DriverSession:
    """A driver log in two parts, each printed once its event is set."""

    name, dashboard_url = "fake", None

    def __init__(self, first, second):
        self.first, self.second, self.go, self.go_on = first, second, threading.Event(), threading.Event()

    def logs(self, job_id, follow=True):
        self.go.wait(10)
        yield from self.first
        self.go_on.wait(10)
        yield from self.second

    def status(self, job_id):
        return JobStatus(JobState.RUNNING)


def _drain(lines):
    out = []
    while (line := lines.get(timeout=10)) is not END:
        out.append(line)
    return out


def test_lines_go_to_their_step_and_each_reader_ends_at_its_marker():
    session = _DriverSession(
        ["driver starting", begin_marker("a"), "(RayTrainWorker pid=1) a-line", end_marker("a")],
        ["late line", begin_marker("b"), "b-line", end_marker("b"), "after the last step"])
    log = DriverLog(session, "run-1")
    a = log.register("a")
    session.go.set()
    assert _drain(a) == ["driver starting", "(RayTrainWorker pid=1) a-line"]
    log.unregister("a")
    session.go_on.set()               # "late line" comes while no step waits: kept for the next one
    b = log.register("b")
    assert _drain(b) == ["late line", "b-line"]
    log.unregister("b")
    log.join(10)
    assert log.ended.is_set() and _drain(log.register("c")) == []      # the driver is gone: nothing more


class _Handler:
    def __init__(self):
        self.messages = []

    def handle_message(self, msg):
        self.messages.append(msg)


def _message(writer, n):
    return json.dumps({"__dagster_pipes_version": "0.1", "method": "log", "params": {"message": f"m{n}", "level": "INFO"},
                       "ads_ranking_stamp": [writer, n]})


def test_a_step_reader_takes_only_its_own_writers_messages():
    logged = []
    context = types.SimpleNamespace(log=types.SimpleNamespace(info=logged.append, debug=logged.append))
    reader = StepLogReader(None, context, None, "b")
    handler = _Handler()
    for line in (_message("b", 1), _message("a", 7), _message("b", 2)):
        reader._take(handler, line)
    assert [m["params"]["message"] for m in handler.messages] == ["m1", "m2"]


def test_a_readmitted_driver_s_messages_for_the_same_step_are_new_not_replays():
    """A driver started again (Kueue readmitted its RayJob) numbers the step's messages from 1
    again under a new attempt: both attempts' messages reach the step, a replay of either does not."""
    context = types.SimpleNamespace(log=types.SimpleNamespace(info=lambda m: None, debug=lambda m: None))
    reader = StepLogReader(None, context, None, "train-1")
    handler = _Handler()
    first, again = step_writer_id("train-1", "a1"), step_writer_id("train-1", "b2")
    for line in (_message(first, 1), _message(first, 2), _message(first, 1),     # a retried pod's replay
                 _message(again, 1), _message(again, 2), _message(step_writer_id("score-2", "b2"), 3)):
        reader._take(handler, line)
    assert [m["ads_ranking_stamp"] for m in handler.messages] == [[first, 1], [first, 2], [again, 1], [again, 2]]
