"""Shared plumbing of the Ray job entrypoints: read the job spec, open Pipes, report results.

A job entrypoint runs as the Ray job's driver, over every day of the run's partition range: its
body yields one result per finished day, reported at once, so a failure on day k loses nothing
of the days before. When Dagster launched it, the Pipes bootstrap
variables are in its environment and everything it reports flows back to the Dagster run
through the job's log (stdout), each message stamped so that it is delivered once even when the
log is read twice (``pipes_writer``); otherwise it prints, so the same entrypoint runs by hand.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from pydantic import BaseModel

from ads_ranking_pipelines.contracts.ranges import DAY_RESULT
from ads_ranking_pipelines.ray_jobs.driver_threads import use_container_cpus
from ads_ranking_pipelines.ray_jobs.lease_watch import watch_from_env
from ads_ranking_pipelines.ray_jobs.whole_lines import whole_lines
from ads_ranking_pipelines.training.reporting import PrintReporter, Reporter, Scalar

SPEC_ENV = "ADS_RANKING_JOB_SPEC"
RESULT_KIND = "result"

S = TypeVar("S", bound=BaseModel)
# A job body: the spec's days in date order, one result dict yielded per finished day.
DaysBody = Callable[[Any, Reporter], Iterator[dict[str, Any]]]


class PipesReporter:
    """Reporter that speaks Dagster Pipes: logs become Dagster log events, metrics custom messages."""

    def __init__(self, pipes: Any) -> None:
        self._pipes = pipes

    def log(self, message: str) -> None:
        self._pipes.log.info(message)

    def metrics(self, kind: str, values: dict[str, Scalar]) -> None:
        self._pipes.report_custom_message({"kind": kind, "values": values})


def quiet_progress_bars() -> None:
    """Progress bars redraw with carriage returns: in a job log every redraw is a line."""
    os.environ.setdefault("RAY_DATA_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TQDM_DISABLE", "1")
    try:
        from ray.data import DataContext

        DataContext.get_current().enable_progress_bars = False
    except ImportError:
        pass


def load_spec(model: type[S], environ: dict[str, str] | None = None) -> S:
    env = os.environ if environ is None else environ
    raw = env.get(SPEC_ENV)
    if not raw:
        raise SystemExit(f"{SPEC_ENV} is not set: this entrypoint expects its job spec as JSON there")
    return model.model_validate_json(raw)


def run_entrypoint(spec_model: type[S], body: DaysBody) -> None:
    """Load the spec, run ``body`` with the right reporter, report each day it yields as it
    finishes (``DAY_RESULT``) and then the job's ``result`` (how many days), exit 0/1."""
    use_container_cpus()             # before torch/numpy load: Ray left the driver one thread
    quiet_progress_bars()
    spec = load_spec(spec_model)
    watch_from_env()                 # stop at once if the process driving the run dies
    with whole_lines():              # Pipes messages must stay lines of their own (see whole_lines)
        if os.environ.get("DAGSTER_PIPES_CONTEXT"):
            from dagster_pipes import open_dagster_pipes

            from ads_ranking_pipelines.ray_jobs.pipes_writer import StampingMessageWriter

            with open_dagster_pipes(message_writer=StampingMessageWriter()) as pipes:
                run_body(body, spec, PipesReporter(pipes), pipes.report_custom_message)
        else:
            run_body(body, spec, PrintReporter(), _print_message)


def _print_message(payload: dict[str, Any]) -> None:
    print(json.dumps(payload, default=str), flush=True)


def run_body(body: DaysBody, spec: S, reporter: Reporter, send: Callable[[dict[str, Any]], None]) -> None:
    done = 0
    try:
        t0 = time.perf_counter()
        for values in body(spec, reporter):
            t1 = time.perf_counter()
            send({"kind": DAY_RESULT, "values": {**values, "day_seconds": round(t1 - t0, 2)}})
            done, t0 = done + 1, t1
        send({"kind": RESULT_KIND, "values": {"days": done}})
    except Exception as exc:
        traceback.print_exc()
        reporter.log(f"job failed after {done} finished day(s): {type(exc).__name__}: {exc}")
        raise
    finally:
        sys.stdout.flush()


class DayReporter:
    """A reporter whose metrics records name the day they belong to (a range job's live plots)."""

    def __init__(self, inner: Reporter, day: dt.date) -> None:
        self._inner, self._day = inner, day.isoformat()

    def log(self, message: str) -> None:
        self._inner.log(message)

    def metrics(self, kind: str, values: dict[str, Scalar]) -> None:
        self._inner.metrics(kind, {**values, "day": self._day})
