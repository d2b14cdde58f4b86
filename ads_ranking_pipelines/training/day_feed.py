"""The day feed of a range (``range_trainer``): a Ray actor on the driver's node that holds the
per-day datasets the driver puts ahead of time, which every rank of the one worker group takes,
and, the other way, rank 0's progress records for the driver (it is the run's
``progress_box.ProgressBox``: one actor per range run, not a feed and a queue).

It lives apart from the Ray Train entry point (``ray_train_days``) because of what imports a
module: the feed's handle travels inside the workers' config, which Ray Train also hands to its
controller, so every process that unpickles the handle imports the module defining the class.
Kept here (standard library only), neither the feed actor nor the controller imports torch and
TorchRec (measured here: ~2.7 CPU-s of imports in each, of a ~49 CPU-s tiny daily run).
"""

from __future__ import annotations

import time
from typing import Any

from ads_ranking_pipelines.training.progress_box import ProgressBox

FEED_POLL_S = 0.05


class DayFeed(ProgressBox):
    """The driver's per-day datasets for the workers: the driver puts day ``i`` ahead of time,
    every rank gets it, the driver drops it once written; rank 0's progress records (the base)."""

    def __init__(self) -> None:
        super().__init__()
        self.days: dict[int, dict[str, Any]] = {}

    def put(self, i: int, entry: dict[str, Any]) -> None:
        self.days[i] = entry

    def get(self, i: int) -> dict[str, Any] | None:
        return self.days.get(i)

    def drop(self, i: int) -> None:
        self.days.pop(i, None)


def day_entry(feed: Any, i: int) -> dict[str, Any]:
    """Day ``i``'s entry from the feed (a rank's call; waits until the driver has put it)."""
    import ray

    while (entry := ray.get(feed.get.remote(i))) is None:
        time.sleep(FEED_POLL_S)
    return entry
