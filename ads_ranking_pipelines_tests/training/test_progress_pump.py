"""The driver's progress pump ends as soon as training does, with every record handled."""

from __future__ import annotations

import queue

from ads_ranking_pipelines.training.trainer import _ProgressPump


class Records:
    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []
        self.logs: list[str] = []

    def log(self, message: str) -> None:
        self.logs.append(message)

    def metrics(self, kind: str, values: dict) -> None:
        self.seen.append((kind, values))


def test_leaving_the_pump_does_not_wait_out_its_blocking_get():
    q: queue.Queue = queue.Queue()
    reporter = Records()
    # an hour-long get: a pump that waited for it to time out would still be running below
    pump = _ProgressPump(q, reporter, poll_s=3600.0)
    with pump:
        q.put({"kind": "epoch", "epoch": 1, "loss": 0.5})
        q.put({"kind": "progress", "step": 3})
    assert not pump.thread.is_alive()
    assert [k for k, _ in reporter.seen] == ["epoch", "progress"]
    assert pump.epochs == [{"epoch": 1, "loss": 0.5}]
    assert q.empty()

