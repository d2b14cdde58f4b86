"""Wall time, GPU-hours and cost of a range, from the recorded days of the same model and pool.

Each recorded day (``storage/train_history.py``) gives a training time per window row; the
median of those rates times a day's window rows is that day's estimate, and their lowest and
highest rates give the spread. A day whose rows are unknown takes the median recorded day.
Records with the run's worker count are preferred; with none, the pool's others are used as
they are (not scaled) and the note says so. No record: the estimate is unknown, never invented.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ads_ranking_pipelines.config.pools import GpuPool
from ads_ranking_pipelines.config.training import TrainingParams


@dataclass(frozen=True)
class DayEstimate:
    day: dt.date
    rows: int | None
    wall_seconds: float
    low_seconds: float
    high_seconds: float


@dataclass(frozen=True)
class Estimate:
    """``days`` empty and ``basis_days`` 0 when there is no history (everything unknown)."""

    model_name: str
    gpu_pool: str
    num_workers: int
    gpus_per_worker: int
    days: tuple[DayEstimate, ...]
    basis_days: int                     # past days the estimate rests on
    rate_median: float | None           # seconds per window row
    rate_low: float | None
    rate_high: float | None
    cost_per_gpu_hour: float | None
    cost_per_worker_hour: float | None
    note: str = ""

    @property
    def known(self) -> bool:
        return self.basis_days > 0

    def wall_seconds(self, which: str = "wall_seconds") -> float:
        return sum(getattr(d, which) for d in self.days)

    def gpu_hours(self, which: str = "wall_seconds") -> float:
        return self.wall_seconds(which) / 3600.0 * self.num_workers * self.gpus_per_worker

    def worker_hours(self, which: str = "wall_seconds") -> float:
        return self.wall_seconds(which) / 3600.0 * self.num_workers

    def cost(self, which: str = "wall_seconds") -> float | None:
        if self.cost_per_gpu_hour is None and self.cost_per_worker_hour is None:
            return None
        return (self.gpu_hours(which) * (self.cost_per_gpu_hour or 0.0)
                + self.worker_hours(which) * (self.cost_per_worker_hour or 0.0))

    def for_day(self, day: dt.date) -> DayEstimate | None:
        return next((d for d in self.days if d.day == day), None)


def _usable(history: Sequence[Mapping[str, Any]], params: TrainingParams) -> tuple[list[Mapping[str, Any]], str]:
    pool = [r for r in history if r.get("gpu_pool") == params.gpu_pool
            and float(r.get("rows") or 0) > 0 and float(r.get("wall_seconds") or 0) > 0]
    same = [r for r in pool if r.get("num_workers") == params.num_workers]
    if same or not pool:
        return same, ""
    seen = sorted({int(r.get("num_workers") or 0) for r in pool})
    return pool, (f"history ran with {'/'.join(map(str, seen))} worker(s), this run has {params.num_workers}: "
                  "the times are not scaled")


def estimate_range(history: Sequence[Mapping[str, Any]], params: TrainingParams, pool: GpuPool,
                   rows_by_day: Mapping[dt.date, int | None]) -> Estimate:
    """The estimate for training the days of ``rows_by_day`` (day -> its window's rows)."""
    records, note = _usable(history, params)
    base = dict(model_name=params.model_name, gpu_pool=params.gpu_pool, num_workers=params.num_workers,
                gpus_per_worker=params.gpus_per_worker, cost_per_gpu_hour=pool.cost_per_gpu_hour,
                cost_per_worker_hour=pool.cost_per_worker_hour)
    if not records:
        return Estimate(days=(), basis_days=0, rate_median=None, rate_low=None, rate_high=None,
                        note=f"no history of {params.model_name} on pool {params.gpu_pool}: estimate unknown "
                             "(the first run records it)", **base)
    rates = [float(r["wall_seconds"]) / float(r["rows"]) for r in records]
    walls = [float(r["wall_seconds"]) for r in records]
    med, low, high = statistics.median(rates), min(rates), max(rates)
    days = []
    for day in sorted(rows_by_day):
        rows = rows_by_day[day]
        if rows:
            days.append(DayEstimate(day, rows, med * rows, low * rows, high * rows))
        else:
            days.append(DayEstimate(day, None, statistics.median(walls), min(walls), max(walls)))
    if any(d.rows is None for d in days):
        note = "; ".join(filter(None, [note, "rows unknown for some days: they take the median recorded day"]))
    return Estimate(days=tuple(days), basis_days=len(records), rate_median=med, rate_low=low, rate_high=high,
                    note=note, **base)
