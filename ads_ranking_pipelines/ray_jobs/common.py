"""Shared plumbing of the Ray job entrypoints: read the job spec, open Pipes, report results.

A job entrypoint runs as the Ray job's driver. When Dagster launched it, the Pipes bootstrap
variables are in its environment and everything it reports flows back to the Dagster run
through the job's log (stdout); otherwise it prints, so the same entrypoint runs by hand.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from ads_ranking_pipelines.training.reporting import PrintReporter, Reporter, Scalar

SPEC_ENV = "ADS_RANKING_JOB_SPEC"
RESULT_KIND = "result"

S = TypeVar("S", bound=BaseModel)


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


def run_entrypoint(spec_model: type[S], body: Callable[[S, Reporter], dict[str, Any]]) -> None:
    """Load the spec, run ``body`` with the right reporter, report its result dict, exit 0/1."""
    quiet_progress_bars()
    spec = load_spec(spec_model)
    if os.environ.get("DAGSTER_PIPES_CONTEXT"):
        from dagster_pipes import open_dagster_pipes

        with open_dagster_pipes() as pipes:
            reporter = PipesReporter(pipes)
            result = _run(body, spec, reporter)
            pipes.report_custom_message({"kind": RESULT_KIND, "values": result})
    else:
        result = _run(body, spec, PrintReporter())
        print(json.dumps({"kind": RESULT_KIND, "values": result}, default=str), flush=True)


def _run(body: Callable[[S, Reporter], dict[str, Any]], spec: S, reporter: Reporter) -> dict[str, Any]:
    try:
        return body(spec, reporter)
    except Exception as exc:
        traceback.print_exc()
        reporter.log(f"job failed: {type(exc).__name__}: {exc}")
        raise
    finally:
        sys.stdout.flush()
