"""The mailbox of a run's one Ray job driver (``ray_jobs/run_driver.py``), shared by the
driver and the Dagster steps that use it (``defs/run_driver.py``).

The run's Ray steps (train, evaluate, score) are served by ONE Ray job: the driver imports
once and then takes the steps one after another from a folder on the run's storage root
(Dagster and the Ray workers see the same root on both backends). Step ``n`` is the document
``<mailbox>/<n>.json`` (``{"kind", "step_id", "spec", "pipes"}``: the step's kind, its job
spec JSON and its Dagster Pipes bootstrap params); when the step's body is done the driver
writes ``<mailbox>/<n>.result.json`` (``{"ok": true}`` or ``{"ok": false, "error": ...}``)
and then prints the step's end marker. Kind ``exit`` tells the driver to end. Every line the
driver prints between a step's begin and end markers belongs to that step, and each Pipes
message of the step carries the step id as its stamp's writer id (``contracts/pipes_stamp.py``).
"""

from __future__ import annotations

MAILBOX_ENV = "ADS_RANKING_RUN_DRIVER_MAILBOX"
EXIT_KIND = "exit"
STEP_KINDS = ("train", "evaluate", "infer")
_MARKER = "[run-driver] step "


def request_name(n: int) -> str:
    return f"{n:04d}.json"


def result_name(n: int) -> str:
    return f"{n:04d}.result.json"


def begin_marker(step_id: str) -> str:
    return f"{_MARKER}{step_id} begins"


def end_marker(step_id: str) -> str:
    return f"{_MARKER}{step_id} ends"


def parse_marker(text: str) -> tuple[str, str] | None:
    """``("begin" | "end", step id)`` for a marker line (Ray's prefix already stripped), else None."""
    if not text.startswith(_MARKER):
        return None
    step_id, _, what = text[len(_MARKER):].strip().rpartition(" ")
    if not step_id or " " in step_id or what not in ("begins", "ends"):
        return None
    return ("begin" if what == "begins" else "end"), step_id
