"""How many runs of a range the pool can hold at once, and the range cut into that many.

A range is one run on one cluster (the days trained in date order, warm-started along the
chain). A pool that holds N runs at once (its run limit and, on a Kueue pool, its quota) can
take the range as N consecutive sub-ranges side by side, in about 1/N of the time, for the
same GPU-hours; each sub-range but the first starts cold unless the day before it is already
on storage.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Capacity:
    """What the pool holds at once: ``run_limit`` (Dagster's per-pool limit, None: none) and
    ``quota_runs`` (runs of this size Kueue's quota admits at once, None: not known / no Kueue)."""

    run_limit: int | None
    quota_runs: int | None = None
    notes: tuple[str, ...] = ()

    @property
    def parallel(self) -> int:
        limits = [n for n in (self.run_limit, self.quota_runs) if n is not None]
        return max(1, min(limits)) if limits else 1


@dataclass(frozen=True)
class Split:
    runs: tuple[tuple[dt.date, dt.date], ...]
    wall_seconds: float | None          # the longest sub-range's estimate (None: unknown)


def propose(days: Sequence[dt.date], day_seconds: Sequence[float] | None, capacity: Capacity) -> Split:
    """One run, or ``capacity.parallel`` consecutive runs balanced by estimated time (by day
    count without an estimate)."""
    n = min(capacity.parallel, len(days))
    weights = list(day_seconds) if day_seconds else [1.0] * len(days)
    chunks: list[list[int]] = [[]]
    target = sum(weights) / n
    acc = 0.0
    for i, w in enumerate(weights):
        left_days, left_chunks = len(days) - i, n - len(chunks)
        if chunks[-1] and (acc + w / 2 > target * len(chunks) or left_days <= left_chunks) and left_chunks > 0:
            chunks.append([])
        chunks[-1].append(i)
        acc += w
    wall = max(sum(day_seconds[i] for i in c) for c in chunks) if day_seconds else None
    return Split(tuple((days[c[0]], days[c[-1]]) for c in chunks), wall)
