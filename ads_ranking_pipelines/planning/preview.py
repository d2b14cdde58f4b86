"""A backfill preview: the estimate, the pool's capacity, the proposed split and the budget
verdict, for one range of one model on one pool (what ``--dry-run`` prints and the run records)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ads_ranking_pipelines.config.pools import GpuPool
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.planning.budget import Budget, over_budget, unchecked
from ads_ranking_pipelines.planning.estimate import Estimate, estimate_range
from ads_ranking_pipelines.planning.split import Capacity, Split, propose


def span(days: Sequence[dt.date]) -> str:
    return days[0].isoformat() if len(days) == 1 else f"{days[0]}..{days[-1]}"


@dataclass(frozen=True)
class Preview:
    days: tuple[dt.date, ...]
    estimate: Estimate
    capacity: Capacity
    split: Split
    budget: Budget

    @property
    def span(self) -> str:
        return span(self.days)

    def refusal(self) -> str | None:
        return over_budget(self.estimate, self.budget, self.span)

    def unchecked(self) -> str | None:
        return unchecked(self.estimate, self.budget)


def capacity_of(pool: GpuPool, run_limit: int | None, quota_runs: int | None = None,
                quota_note: str | None = None) -> Capacity:
    notes = [f"pool {pool.name} runs at most {run_limit} run(s) at once" if run_limit is not None
             else f"pool {pool.name} has no Dagster run limit"]
    if pool.kueue is not None:
        notes.append(quota_note or f"Kueue LocalQueue {pool.kueue.local_queue}: quota not read")
    return Capacity(run_limit, quota_runs, tuple(notes))


def build_preview(history: Sequence[Mapping[str, Any]], params: TrainingParams, pool: GpuPool,
                  rows_by_day: Mapping[dt.date, int | None], capacity: Capacity, budget: Budget) -> Preview:
    days = tuple(sorted(rows_by_day))
    estimate = estimate_range(history, params, pool, rows_by_day)
    seconds = [d.wall_seconds for d in estimate.days] if estimate.known else None
    return Preview(days, estimate, capacity, propose(days, seconds, capacity), budget)
