"""Rank 0's progress records on their way to the training driver, in a Ray actor on its node.

The driver makes one such actor per fit (the range's :class:`~ads_ranking_pipelines.training.day_feed.DayFeed`
is one too, so a range run starts no second actor for it); rank 0 puts records, the driver's
``ProgressPump`` takes them. It lives on the driver's node: a lost worker node must not take the
records (and the restart count derived from them) with it.

Standard library only, for the reason ``day_feed`` gives: the actor's handle travels in the
workers' config, and every process that unpickles it imports this module.
"""

from __future__ import annotations

import collections
from typing import Any

MAX_RECORDS = 10_000        # held, not yet taken: beyond this a record is dropped (progress is best effort)
TAKE_AT_MOST = 1_000


class ProgressBox:
    """Records in the order rank 0 put them; ``take_progress`` hands them out once each."""

    def __init__(self, max_records: int = MAX_RECORDS) -> None:
        self._records: collections.deque[dict[str, Any]] = collections.deque()
        self._max_records = max_records
        self.dropped = 0

    def put_progress(self, record: dict[str, Any]) -> bool:
        """Keep ``record``; False (and counted) when ``max_records`` are already waiting."""
        if len(self._records) >= self._max_records:
            self.dropped += 1
            return False
        self._records.append(record)
        return True

    def take_progress(self, at_most: int = TAKE_AT_MOST) -> list[dict[str, Any]]:
        """The oldest records, at most ``at_most`` of them, removed from the box."""
        return [self._records.popleft() for _ in range(min(at_most, len(self._records)))]
