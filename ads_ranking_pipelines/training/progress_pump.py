"""The training driver's progress pump: rank 0's records, from a queue, to the reporter."""

from __future__ import annotations

import queue as queue_mod
import threading
from typing import Any

from ads_ranking_pipelines.training.reporting import Reporter

_PUMP_STOP = {"kind": "__pump_stop__"}


class ProgressPump:
    """Drains the workers' progress queue into the reporter from a background thread.

    Leaving the ``with`` block puts a stop record behind everything already queued, so the
    thread ends as soon as it has handled those (not after its blocking ``get`` times out).
    """

    def __init__(self, q: Any, reporter: Reporter, poll_s: float = 0.5) -> None:
        self.q = q
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
        try:
            self.q.put_nowait(dict(_PUMP_STOP))
        except Exception:                # full, or the queue actor died: the get times out
            pass
        self.thread.join(timeout=30)
        self._drain_all()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                record = self.q.get(block=True, timeout=self.poll_s)
            except queue_mod.Empty:
                continue
            except Exception:            # the queue actor died: nothing more will come
                if self.stop.wait(self.poll_s):
                    return
                continue
            if record == _PUMP_STOP:
                return
            self._handle(record)

    def _drain_all(self) -> None:
        try:
            while not self.q.empty():
                record = self.q.get_nowait()
                if record != _PUMP_STOP:
                    self._handle(record)
        except Exception:
            pass

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
