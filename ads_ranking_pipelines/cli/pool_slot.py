"""A slot of the run's GPU pool for ``pipeline run | backfill``, which execute in this process.

Queued runs (UI, schedules, ``dagster job launch``) wait in the instance's run queue for a slot
of their ``ads-ranking/gpu-pool``; a CLI run does not go through the queue, so it takes its slot
here, by the queue's own rule: the runs holding a slot are the instance's runs in an active
status (``ACTIVE_RUN_STATUSES``: STARTING, STARTED, CANCELING, what the queue daemon counts) that
carry the pool's tag, and the limit is the instance's ``run_coordinator``
``tag_concurrency_limits`` rule for the pool (``dagster.yaml``), else the catalog's
``max_concurrent_runs`` (an instance whose run queue has no rule for the pool).

Claiming is atomic across processes on one ``DAGSTER_HOME``: a process holds an exclusive
``flock`` on ``DAGSTER_HOME/.ads-ranking-pool-<pool>.lock`` from the count until its own run is
STARTED in the instance (the lock goes with the process if it dies), so two CLI runs never
both see the last slot free. The queue daemon takes no lock: it may count the runs just before
the CLI run is STARTED and start a queued run just after. So, when the queue holds the pool to
the limit (it has the rule), once its run is STARTED the CLI waits ``settle_s`` and counts the
others again; if they fill the pool, the CLI run yields: it stays STARTED but runs no step until
they are below the limit (a run the queue started never waits, so a tie goes to it).
"""

from __future__ import annotations

import fcntl
import os
import time
from dataclasses import dataclass
from typing import Any, Callable

from ads_ranking_pipelines.config.dagster_instance import GPU_POOL_TAG
from ads_ranking_pipelines.config.pools import PoolCatalog

POLL_S = 3.0      # how often a waiting run counts the pool's runs again
SETTLE_S = 5.0    # how long after its start a CLI run re-counts: the queue daemon's count-to-start window
BUSY_WAIT_S = 60.0  # how long a count waits out SQLite's "database is locked" (another writer)
                  # (seconds on a loaded 2-core machine); a daemon slower than that can still overlap


class PoolBusy(Exception):
    """The pool is at its limit and the caller chose not to wait."""


@dataclass(frozen=True)
class PoolLimit:
    pool: str
    limit: int
    source: str               # where the limit comes from, for messages
    queued: bool              # the instance's run queue holds the pool to this limit (its daemon may race a claim)
    per_value: bool = True    # False: a tag rule without value limits every run carrying the tag

    def describe(self) -> str:
        runs = "run" if self.limit == 1 else "runs"
        return f"pool {self.pool!r} allows {self.limit} concurrent {runs} ({self.source})"


def pool_limit(instance: Any, pool: str, catalog: PoolCatalog) -> PoolLimit:
    """The limit the instance's run queue applies to ``pool``; the catalog's without a queue rule."""
    import dagster as dg

    coordinator = instance.run_coordinator
    if isinstance(coordinator, dg.QueuedRunCoordinator):
        rules = [r for r in coordinator.get_run_queue_config().tag_concurrency_limits
                 if r.get("key") == GPU_POOL_TAG and (r.get("value") in (None, pool) or isinstance(r.get("value"), dict))]
        if rules:
            rule = min(rules, key=lambda r: int(r["limit"]))
            value = rule.get("value")
            per_value = isinstance(value, str) or (isinstance(value, dict) and bool(value.get("applyLimitPerUniqueValue")))
            return PoolLimit(pool, int(rule["limit"]), "the instance's run_coordinator tag_concurrency_limits, "
                             f"{instance.root_directory}/dagster.yaml", True, per_value)
    return PoolLimit(pool, catalog.get(pool).max_concurrent_runs, "the pool catalog's max_concurrent_runs", False)


def holders(instance: Any, limit: PoolLimit, exclude: str | None = None) -> list[str]:
    """Ids of the active runs that take a slot of ``limit``'s pool (oldest first)."""
    from dagster import RunsFilter
    from dagster._core.storage.dagster_run import ACTIVE_RUN_STATUSES

    tags = {GPU_POOL_TAG: limit.pool} if limit.per_value else {}
    records = instance.get_run_records(filters=RunsFilter(statuses=ACTIVE_RUN_STATUSES, tags=tags), ascending=True)
    return [r.dagster_run.run_id for r in records
            if r.dagster_run.run_id != exclude and GPU_POOL_TAG in r.dagster_run.tags]


def count_holders(instance: Any, limit: PoolLimit, exclude: str | None = None,
                  busy_wait_s: float = BUSY_WAIT_S) -> list[str]:
    """:func:`holders`, again while the instance's SQLite storage answers "database is locked"
    (another process is writing: the run next door, the daemon); a loaded machine made a waiting
    CLI run crash on it. Other errors, and a lock lasting ``busy_wait_s``, are raised."""
    from sqlalchemy.exc import OperationalError

    deadline = time.monotonic() + busy_wait_s
    while True:
        try:
            return holders(instance, limit, exclude)
        except OperationalError as exc:
            if "database is locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


class PoolSlot:
    """``with PoolSlot(...):`` around ``execute_in_process(run_id=run_id)``: enters once a slot is
    free (or raises :class:`PoolBusy` with ``wait=False``), holding the pool's lock until the run
    is STARTED."""

    def __init__(self, instance: Any, limit: PoolLimit, run_id: str, say: Callable[[str], None],
                 wait: bool = True, poll_s: float = POLL_S, settle_s: float = SETTLE_S):
        self.instance, self.limit, self.run_id, self.say = instance, limit, run_id, say
        self.wait, self.poll_s, self.settle_s = wait, poll_s, settle_s
        self._fd: int | None = None
        self._started = False
        self._path = os.path.join(instance.root_directory, f".ads-ranking-pool-{limit.pool}.lock")

    def __enter__(self) -> "PoolSlot":
        announced = False
        while True:
            self._lock()
            taken = count_holders(self.instance, self.limit)
            if len(taken) < self.limit.limit:
                break
            self._unlock()
            message = f"{self.limit.describe()}, held by run {', '.join(taken)}"
            if not self.wait:
                raise PoolBusy(f"{message}; not waiting (--no-wait): run again once it has finished, "
                               "or leave out --no-wait to wait for the slot")
            if not announced:
                self.say(f"{message}; waiting for a slot (counting again every {self.poll_s:g} s)")
                announced = True
            time.sleep(self.poll_s)
        self.instance.add_event_listener(self.run_id, self._on_event)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._unlock()

    def _on_event(self, event: Any) -> None:
        """Called by the instance, in the run's thread, for each of the run's events as it is stored."""
        from dagster import DagsterEventType

        if self._started or not event.is_dagster_event or event.dagster_event.event_type != DagsterEventType.RUN_START:
            return
        self._started = True
        self._unlock()          # the run is STARTED: every other process counts it now
        if self.limit.queued:
            time.sleep(self.settle_s)
            self._yield_to_queued_runs()

    def _yield_to_queued_runs(self) -> None:
        announced = False
        while len(others := count_holders(self.instance, self.limit, exclude=self.run_id)) >= self.limit.limit:
            if not announced:
                self.say(f"{self.limit.describe()}: run {', '.join(others)} started from the run queue as run "
                         f"{self.run_id} started; this run waits, before its first step, until the pool has a slot")
                announced = True
            time.sleep(self.poll_s)

    def _lock(self) -> None:
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX)

    def _unlock(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)        # closing the only descriptor releases the flock
