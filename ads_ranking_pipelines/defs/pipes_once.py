"""Each Dagster Pipes message of a job delivered once, however often its log is read.

The driver's writer stamps every message ``[writer id, counter]``
(:mod:`ads_ranking_pipelines.contracts.pipes_stamp`); a stamp seen before is a replay (a
retried KubeRay submitter pod printing the driver log again past what the replay filter could
match, a pod that died mid-line) and is dropped. Messages without a stamp (a driver not using
our writer) cannot be told apart and are all delivered, as before.
"""

from __future__ import annotations

from ads_ranking_pipelines.contracts.pipes_stamp import stamp_of


class SeenMessages:
    """The stamps seen so far, by writer."""

    def __init__(self) -> None:
        self._seen: dict[str, set[int]] = {}
        self.dropped = 0

    def first_time(self, message: dict) -> bool:
        """Whether ``message`` is new (and remember it); False for a stamp seen before."""
        stamp = stamp_of(message)
        if stamp is None:
            return True
        writer, counter = stamp
        seen = self._seen.setdefault(writer, set())
        if counter in seen:
            self.dropped += 1
            return False
        seen.add(counter)
        return True
