"""Ray job: the run's ONE driver, serving its Ray steps (train, evaluate, score) one after another.

Submitted once per Dagster run by its first Ray step (``defs/run_driver.py``), it pays for the
job start and the imports once. It takes step ``n`` from the run's mailbox
(``contracts/run_driver.py``), runs that step's body (``ray_jobs.train/evaluate/infer``'s
``body``, as their own entrypoints do) inside a Dagster Pipes session of that step's own
bootstrap params, its messages stamped with the step id and this driver's attempt, between the step's begin and end
markers; then writes the step's result (ok, or the error) and waits for the next one. A failing
step fails only that step: the driver goes on with the run's next one. Started again (KubeRay
resubmits a RayJob readmitted by Kueue), it skips the steps that have a result. It ends when told
(``exit``), when its job is stopped, or when the run's controller lease goes stale
(``lease_watch``).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from typing import Any

from ads_ranking_pipelines.contracts import run_driver as mailbox
from ads_ranking_pipelines.ray_jobs.common import PipesReporter, quiet_progress_bars, run_body
from ads_ranking_pipelines.ray_jobs.driver_threads import use_container_cpus
from ads_ranking_pipelines.ray_jobs.lease_watch import watch_from_env
from ads_ranking_pipelines.ray_jobs.whole_lines import whole_lines
from ads_ranking_pipelines.storage import fs

# step kind -> (module with ``body``, its spec model's module and name)
BODIES = {
    "train": ("ads_ranking_pipelines.ray_jobs.train", "TrainRangeSpec"),
    "evaluate": ("ads_ranking_pipelines.ray_jobs.evaluate", "EvalRangeSpec"),
    "infer": ("ads_ranking_pipelines.ray_jobs.infer", "InferRangeSpec"),
}
POLL_S = 0.2
TRACEBACK_CHARS = 4000


def next_request(box: str, n: int, poll_s: float = POLL_S,
                 sleep: Callable[[float], Any] = time.sleep) -> dict[str, Any]:
    """Step ``n``'s request, once Dagster has written it."""
    uri = fs.join(box, mailbox.request_name(n))
    while not fs.exists(uri):
        sleep(poll_s)
    return fs.read_json(uri)


def run_step(request: dict[str, Any], attempt: str) -> dict[str, Any]:
    """One step's body in its own Pipes session, its messages stamped as this step's from this
    ``attempt`` of the driver; what to write as its result."""
    from dagster_pipes import PipesContext, PipesDefaultContextLoader, PipesMappingParamsLoader

    from ads_ranking_pipelines.contracts import ranges
    from ads_ranking_pipelines.contracts.pipes_stamp import step_writer_id
    from ads_ranking_pipelines.ray_jobs.pipes_writer import StampingMessageWriter

    kind, step_id = request.get("kind"), str(request.get("step_id"))
    if kind not in BODIES:
        return {"ok": False, "error": f"unknown step kind {kind!r}: valid kinds are {', '.join(BODIES)}"}
    module, model = BODIES[kind]
    try:
        body = importlib.import_module(module).body
        spec = getattr(ranges, model).model_validate_json(request["spec"])
        params = PipesMappingParamsLoader(request.get("pipes") or {})
        writer = StampingMessageWriter(step_writer_id(step_id, attempt))
        with PipesContext(params, PipesDefaultContextLoader(), writer) as pipes:
            run_body(body, spec, PipesReporter(pipes), pipes.report_custom_message)
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc()[-TRACEBACK_CHARS:]}
    return {"ok": True}


def serve(box: str, poll_s: float = POLL_S) -> int:
    """Serve the mailbox's steps in order until told to exit; how many were served."""
    n, attempt = 1, uuid.uuid4().hex[:8]      # this start of the driver (a readmitted job starts it again)
    while True:
        request = next_request(box, n, poll_s)
        if request.get("kind") == mailbox.EXIT_KIND:
            print(f"[run-driver] told to exit after {n - 1} step(s)", flush=True)
            return n - 1
        step_id, result_uri = str(request.get("step_id")), fs.join(box, mailbox.result_name(n))
        if fs.exists(result_uri):    # this job was started again (a Kueue readmission, a retry)
            print(f"[run-driver] step {step_id} was served by this job's earlier attempt: skipped", flush=True)
            n += 1
            continue
        print(mailbox.begin_marker(step_id), flush=True)
        result = run_step(request, attempt)
        sys.stdout.flush()
        sys.stderr.flush()
        fs.write_json_atomic(result_uri, result)
        print(mailbox.end_marker(step_id), flush=True)
        n += 1


def main() -> None:
    use_container_cpus()             # before torch/numpy load: Ray left the driver one thread
    quiet_progress_bars()
    box = os.environ.get(mailbox.MAILBOX_ENV)
    if not box:
        raise SystemExit(f"{mailbox.MAILBOX_ENV} is not set: the run driver expects its mailbox's URI there")
    watch_from_env()                 # stop at once if the process driving the run dies
    with whole_lines():              # Pipes messages must stay lines of their own (see whole_lines)
        serve(box)


if __name__ == "__main__":
    main()
