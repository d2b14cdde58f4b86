"""How far a Ray step of a run is, and when it should end: percent done and ETA from the records
its job reports as it runs (pure: no clock of its own, no Dagster).

A step covers the run's days (one, or a backfill's range). Training reports per-epoch records
(``epoch``: ``epoch`` of ``epochs``) and in-epoch ones every few seconds (``progress``: the
step within the epoch, of ``epoch_steps``), each naming its ``day``; every step reports each
finished day (``day_result``). The fraction done counts the finished days whole and the
current day by its epochs (early stopping can end a day before its last epoch: the day's
``day_result`` then counts it whole). ETA = time so far x (1 - done) / done: the rate so far,
start-up included, so an early ETA errs long rather than short.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ads_ranking_pipelines.contracts.ranges import DAY_RESULT

TELL_EVERY_S = 5.0        # at most one progress line per this many seconds (and one per finished day)


@dataclasses.dataclass(frozen=True)
class Progress:
    step: str
    days_done: int
    days_total: int
    fraction: float
    elapsed_s: float
    eta_s: float | None
    day: str | None = None
    epoch: int | None = None
    epochs: int | None = None
    day_number: int | None = None       # the current day's place in the range, from 1

    @property
    def percent(self) -> float:
        return round(100.0 * self.fraction, 1)

    def text(self) -> str:
        """``day 2/3 (2026-03-11), epoch 5/10: 47.0% done, 1m05s so far, ETA 1m12s``."""
        where = []
        if self.days_total > 1 or self.day:
            current = self.day_number or min(self.days_done + 1, self.days_total)
            where.append(f"day {current}/{self.days_total}" + (f" ({self.day})" if self.day else ""))
        if self.epoch and self.epochs:
            where.append(f"epoch {self.epoch}/{self.epochs}")
        eta = duration(self.eta_s) if self.eta_s is not None else "unknown"
        head = ", ".join(where)
        return (f"{head}: " if head else "") + (f"{self.percent:.1f}% done, {duration(self.elapsed_s)} so far, "
                                                f"ETA {eta} ({self.days_done}/{self.days_total} day(s) done)")

    def record(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "percent": self.percent}


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class ProgressTracker:
    """Percent done and ETA of one step over ``days`` (ISO dates), from its job's records."""

    def __init__(self, step: str, days: list[str], started: float, tell_every_s: float = TELL_EVERY_S) -> None:
        if not days:
            raise ValueError(f"step {step!r}: no days to track; valid: one day or more")
        self.step, self.days, self.started, self.tell_every_s = step, list(days), started, tell_every_s
        self.done: set[str] = set()
        self.day: str | None = None
        self.within = 0.0                       # fraction of the current day done
        self.epoch: int | None = None
        self.epochs: int | None = None
        self.last: Progress | None = None
        self._told_at: float | None = None

    def observe(self, payload: Any, now: float) -> Progress | None:
        """Take one record; a :class:`Progress` when it is time to tell one (a day finished, or
        ``tell_every_s`` since the last), else None."""
        if not isinstance(payload, dict) or not isinstance(payload.get("values"), dict):
            return None
        kind, values = payload.get("kind"), payload["values"]
        day = values.get("day") if values.get("day") in self.days else (self.days[0] if len(self.days) == 1 else None)
        finished = kind == DAY_RESULT and day is not None and day not in self.done
        if finished:
            self.done.add(day)
            if day == self.day:
                self.day, self.within, self.epoch = None, 0.0, None
        elif not (kind in ("epoch", "progress") and day is not None and day not in self.done
                  and self._take_epoch(kind, values, day)):
            return None
        self.last = self.now(now)
        if finished or self._told_at is None or now - self._told_at >= self.tell_every_s:
            self._told_at = now
            return self.last
        return None

    def _take_epoch(self, kind: str, values: dict[str, Any], day: str) -> bool:
        """Whether the record was one to take (an epoch of ``epochs``)."""
        epochs, epoch = _int(values.get("epochs")), _int(values.get("epoch"))
        if not epochs or not epoch:
            return False
        if kind == "epoch":
            within = epoch / epochs
        else:
            steps, step = _int(values.get("epoch_steps")), _int(values.get("epoch_step")) or 0
            within = (epoch - 1 + (min(step, steps) / steps if steps else 0.0)) / epochs
        if day == self.day and within < self.within:      # a record that arrived late: never go back
            return True
        self.day, self.epoch, self.epochs, self.within = day, epoch, epochs, min(within, 1.0)
        return True

    def now(self, now: float) -> Progress:
        """Where the step stands at ``now``."""
        # days run in date order: a later day's record means the days before it have trained (their
        # results may still be on the way)
        before = max(len(self.done), self.days.index(self.day)) if self.day else len(self.done)
        fraction = min(1.0, (before + (self.within if self.day else 0.0)) / len(self.days))
        elapsed = max(0.0, now - self.started)
        eta = elapsed * (1.0 - fraction) / fraction if fraction > 0 else None
        return Progress(self.step, len(self.done), len(self.days), fraction, round(elapsed, 1),
                        round(eta, 1) if eta is not None else None, self.day, self.epoch if self.day else None,
                        self.epochs if self.day else None, self.days.index(self.day) + 1 if self.day else None)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None
