"""The job driver's Dagster Pipes writer: Dagster's default one, each message stamped
``[writer id, counter]`` (:mod:`ads_ranking_pipelines.contracts.pipes_stamp`) so the
orchestrator delivers it once however often the driver log is read."""

from __future__ import annotations

import contextlib
import itertools
import threading
import uuid
from collections.abc import Iterator

from dagster_pipes import PipesDefaultMessageWriter, PipesMessage, PipesMessageWriterChannel, PipesParams

from ads_ranking_pipelines.contracts.pipes_stamp import STAMP_FIELD


class StampingChannel(PipesMessageWriterChannel):
    """Writes each message through ``inner`` with the next stamp of ``writer_id``; numbering
    and writing are one step, so a writer's messages appear in counter order."""

    def __init__(self, inner: PipesMessageWriterChannel, writer_id: str) -> None:
        self._inner = inner
        self._writer_id = writer_id
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def write_message(self, message: PipesMessage) -> None:
        with self._lock:
            stamped = {**message, STAMP_FIELD: [self._writer_id, next(self._counter)]}
            self._inner.write_message(stamped)  # type: ignore[arg-type]


class StampingMessageWriter(PipesDefaultMessageWriter):
    """:class:`PipesDefaultMessageWriter` (stdout, stderr or a file, as the params say) whose
    messages carry a stamp; a new random writer id per writer unless ``writer_id`` names one
    (the run driver's step id: its reader takes only that step's messages)."""

    def __init__(self, writer_id: str | None = None) -> None:
        super().__init__()
        self.writer_id = writer_id or uuid.uuid4().hex

    @contextlib.contextmanager
    def open(self, params: PipesParams) -> Iterator[PipesMessageWriterChannel]:
        with super().open(params) as channel:
            yield StampingChannel(channel, self.writer_id)
