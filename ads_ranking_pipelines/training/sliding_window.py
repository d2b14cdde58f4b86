"""The windows of a range's days, sliding: each day reads only the days it did not hold yet.

A range trains day after day on windows that overlap in all but one day. :class:`SlidingWindow`
keeps the transformed rows of every day of the current window, per day; for the next day it reads
the day(s) new to the window, drops the ones that left it, and builds that day's
:class:`~ads_ranking_pipelines.training.window.Window` from the held days joined in time order,
exactly as one read of the whole window would: the rows are the same, in the same order
(``transform`` works row by row), so the validation slice is the same time-last part of the window
and the training rows are permuted with the same seed.
"""

from __future__ import annotations

import datetime as dt

import numpy as np

from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.training.features import FeatureSpec, transform
from ads_ranking_pipelines.training.window import Arrays, Window, window_of


class SlidingWindow:
    """The held days' rows; ``reads`` lists the days each :meth:`advance` read (a figure the
    driver reports: after the first day of a range it is one day)."""

    def __init__(self, feature_spec: FeatureSpec, with_id_counts: bool = False) -> None:
        self.feature_spec = feature_spec
        self.with_id_counts = with_id_counts
        self.held: dict[dt.date, Arrays] = {}
        self.reads: list[list[dt.date]] = []

    def advance(self, spec: TrainJobSpec) -> Window:
        """The window of ``spec.train_days``, reading only the days not held."""
        return window_of(self.arrays(spec), spec, self.feature_spec, self.with_id_counts)

    def arrays(self, spec: TrainJobSpec) -> Arrays:
        """The rows of ``spec.train_days`` in time order, transformed, reading only the
        days not held."""
        days = list(spec.train_days)
        if not days:
            raise ValueError("train_days is empty")
        self.held = {d: a for d, a in self.held.items() if d in days}
        new = [d for d in days if d not in self.held]
        for d in new:
            self.held[d] = self._read_day(spec, d)
        self.reads.append(new)
        arrays = {k: np.concatenate([self.held[d][k] for d in days]) for k in self.held[days[0]]}
        if len(arrays["label"]) == 0:
            raise ValueError(f"the training window {[d.isoformat() for d in days]} has no rows")
        return arrays

    def _read_day(self, spec: TrainJobSpec, day: dt.date) -> Arrays:
        from ads_ranking_pipelines.events.layout import read_days

        return transform(read_days(spec.source, [day], columns=self.feature_spec.read_columns), self.feature_spec)
