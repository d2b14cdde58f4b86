"""The training driver's progress pump: rank 0's records, from the driver's progress box
(``progress_box.ProgressBox``, a Ray actor), to the reporter."""

from __future__ import annotations

import queue as queue_mod
import threading
from collections.abc import Callable
from typing import Any

from ads_ranking_pipelines.training.reporting import Reporter


class ProgressPump:
    """Takes the workers' progress records into the reporter from a background thread.

    ``take`` returns the records waiting, oldest first (for the box actor: ``lambda:
    ray.get(box.take_progress.remote())``); the thread calls it again at once while records come,
    else after ``poll_s``. Leaving the ``with`` block wakes the thread, which takes what is still
    waiting and ends (it does not sleep out ``poll_s``). A ``take`` that raises (the box actor
    died) counts as nothing waiting.
    """

    def __init__(self, take: Callable[[], list[dict[str, Any]]], reporter: Reporter, poll_s: float = 0.25) -> None:
        self.take = take
        self.reporter = reporter
        self.poll_s = poll_s
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.epochs: list[dict[str, Any]] = []
        self.starts: list[dict[str, Any]] = []
        self.plan: str | None = None
        self.group_starts = 0            # "group_started" records: worker-group starts (a range's)
        self.day_ends: queue_mod.Queue[int] = queue_mod.Queue()   # a range's "day_end" day indexes
        self.thread = threading.Thread(target=self._run, name="train-progress", daemon=True)

    def __enter__(self) -> "ProgressPump":
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            stopping = self.stop.is_set()        # read before taking: what was put before the stop is taken
            records = self._take()
            for record in records:
                self._handle(record)
            if records:
                continue
            if stopping:
                return
            self.stop.wait(self.poll_s)

    def _take(self) -> list[dict[str, Any]]:
        try:
            return list(self.take())
        except Exception:                # the box actor died: nothing more will come
            return []

    def _handle(self, record: dict[str, Any]) -> None:
        record = dict(record)
        kind = str(record.pop("kind", "progress"))
        with self.lock:
            try:
                if kind == "sharding_plan":
                    self.plan = record.get("plan")
                    return
                if kind == "day_end":
                    self.day_ends.put(int(record["day_index"]))
                    return
                if kind == "group_started":
                    self.group_starts += 1
                if kind == "epoch":
                    self.epochs.append(record)
                if kind == "started":
                    self.starts.append(record)
                    if record.get("resumed"):
                        self.reporter.log(f"workers resumed from a checkpoint with "
                                          f"{record.get('epochs_done')} epoch(s) done")
                values = {k: v for k, v in record.items() if isinstance(v, (int, float, str, bool))}
                self.reporter.metrics(kind, values)
            except Exception as e:       # a broken reporter must not kill the driver
                print(f"progress reporter failed: {e!r}", flush=True)
