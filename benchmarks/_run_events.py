"""Reading a finished pipeline run back from its Dagster event log: each step's span, when a
Ray job's lines arrived, and the P4 figures of one run (``analyze``: in-job compute against
overhead, with the breakdown ``p4_pipeline_overhead.py``'s docstring describes). Shared by P4,
P5 (a backfill's run) and S1."""

from __future__ import annotations

import datetime as dt
import re
import sys
from typing import Any


STEPS = ("impressions", "trained_model", "model_evaluation", "batch_scores")


IN_JOB = {"trained_model": "wall_seconds", "model_evaluation": "eval_seconds", "batch_scores": "seconds"}


def _events(instance, run_id: str) -> list[tuple[float, str, str | None, str]]:
    """(timestamp, event type or "LOG", step key, message) of every record of the run, in order."""
    out = []
    for r in instance.get_records_for_run(run_id, limit=1_000_000).records:
        e = r.event_log_entry
        de = e.dagster_event
        kind = de.event_type_value if de is not None else "LOG"
        step = (de.step_key if de is not None else None) or e.step_key
        out.append((float(e.timestamp), kind, step, e.user_message or ""))
    return out


def _first(events, pred) -> float | None:
    return next((t for t, k, s, m in events if pred(k, s, m)), None)


def _last(events, pred) -> float | None:
    return next((t for t, k, s, m in reversed(events) if pred(k, s, m)), None)


def step_span(events, step: str) -> tuple[float | None, float | None]:
    """(STEP_START, STEP_SUCCESS or STEP_FAILURE) times of ``step``'s events, None where missing."""
    mine = [e for e in events if e[2] == step]
    return (_first(mine, lambda k, s, m: k == "STEP_START"),
            _last(mine, lambda k, s, m: k in ("STEP_SUCCESS", "STEP_FAILURE")))


def k_is_log(e: tuple[float, str, str | None, str]) -> bool:
    return e[1] == "LOG"


RAY_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\s")


def _stamped(mine, marker: str) -> tuple[float, float] | None:
    """(when Ray wrote it, when it arrived) of the first line of a job's log that holds
    ``marker`` and starts with Ray's own timestamp (local time, milliseconds)."""
    for t, kind, _step, msg in mine:
        m = RAY_STAMP.match(msg)
        if kind == "LOG" and m and marker in msg:
            return dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp(), t
    return None


def _job_start_times(mine, submit: float | None) -> dict[str, float | None]:
    """From the timestamps Ray writes in a job's log (their arrival is late by what the
    dashboard's log tail waits): submit -> the job's driver has connected to Ray (job supervisor
    start, driver interpreter, imports, ``ray.init``), and how late the job manager's first line
    ("Runtime env is setting up", written as it accepts the job) arrived."""
    accepted, conn = _stamped(mine, "Runtime env is setting up"), _stamped(mine, "Connected to Ray cluster")
    out: dict[str, float | None] = {}
    if accepted is not None:
        out["log_arrival_lag_s"] = _rd(accepted[1] - accepted[0])
    if conn is not None and submit is not None:
        out["stamped_submit_to_ray_connected_s"] = _rd(conn[0] - submit)
    return out


def _rd(x: float | None, nd: int = 2) -> float | None:
    return round(x, nd) if x is not None else None


def _add_training_parts(parts: dict[str, float], obs: Any) -> None:
    """Adds a training job's ``dataset`` record (``read_s``) or ``epoch`` record (its training,
    validation and checkpoint seconds)."""
    if obs.asset_key.to_user_string() != "trained_model" or "kind" not in obs.metadata:
        return
    meta = {k: v.value for k, v in obs.metadata.items()}
    if meta["kind"] == "dataset" and "read_s" in meta:
        parts["read_s"] += float(meta["read_s"])
    elif meta["kind"] == "epoch":
        parts["epochs_s"] += sum(float(meta.get(k, 0.0)) for k in ("epoch_s", "valid_s", "checkpoint_s"))


def analyze(instance, run_id: str, t_call: float, total: float) -> dict[str, Any]:
    """The P4 figures of one finished run (``t_call``: epoch time of the call, ``total``: its wall);
    for a run over a partition range, in-job figures are summed over its days."""
    t_return = t_call + total
    events = _events(instance, run_id)
    for t, kind, step, msg in events:   # the whole run, for the log (stderr)
        print(f"[event +{t - t_call:8.2f}s] {kind:<24} {step or '-':<18} {msg[:160]!r}", file=sys.stderr)
    in_job_by_step: dict[str, float] = {}     # summed over the run's partitions (a range run: every day)
    training_parts = {"read_s": 0.0, "epochs_s": 0.0}
    for rec in instance.get_records_for_run(run_id, limit=1_000_000).records:
        de = rec.event_log_entry.dagster_event
        if de is not None and de.event_type_value == "ASSET_MATERIALIZATION":
            m = de.event_specific_data.materialization
            asset = m.asset_key.to_user_string()
            if asset in IN_JOB and IN_JOB[asset] in m.metadata:
                in_job_by_step[asset] = in_job_by_step.get(asset, 0.0) + float(m.metadata[IN_JOB[asset]].value)
        if de is not None and de.event_type_value == "ASSET_OBSERVATION":
            _add_training_parts(training_parts, de.event_specific_data.asset_observation)

    run_start = _first(events, lambda k, s, m: k in ("RUN_START", "PIPELINE_START"))
    run_end = _last(events, lambda k, s, m: k in ("RUN_SUCCESS", "PIPELINE_SUCCESS", "RUN_FAILURE", "PIPELINE_FAILURE"))
    steps_done = _last(events, lambda k, s, m: k == "ENGINE_EVENT" and m.startswith("Finished steps"))
    steps: dict[str, Any] = {}
    in_job_total = 0.0
    last_step_end = None
    for step in STEPS:
        mine = [e for e in events if e[2] == step]
        start, end = step_span(events, step)
        dur = (end - start) if start is not None and end is not None else None
        if end is not None:
            last_step_end = max(last_step_end or end, end)
        row: dict[str, Any] = {"step_s": _rd(dur)}
        if step not in IN_JOB:
            row["rest_s"] = _rd(dur)
            steps[step] = row
            continue
        if step not in in_job_by_step:
            raise RuntimeError(f"{step} reported no {IN_JOB[step]}")
        in_job = in_job_by_step[step]
        in_job_total += in_job
        row.update({"in_job_s": _rd(in_job), "rest_s": _rd(dur - in_job) if dur is not None else None})
        # when the lines arrived in the event log (the dashboard's tail delivers them late by <= 1-2 s)
        submit = _first(mine, lambda k, s, m: "[pipes] Ray job" in m and "submitted" in m)
        entry = _first(mine, lambda k, s, m: m.startswith("Running entrypoint for job"))
        pipes = _first(mine, lambda k, s, m: "successfully opened dagster pipes" in m)
        conn = _first(mine, lambda k, s, m: "Connected to Ray cluster" in m)
        output = _first(mine, lambda k, s, m: k == "STEP_OUTPUT")
        last_line = _last([e for e in mine if output is None or e[0] < output], lambda k, s, m: k == "LOG")
        prov = _first(mine, lambda k, s, m: "provisioning Ray cluster" in m)
        ready = _first(mine, lambda k, s, m: m.startswith("Ray cluster") and "ready" in m)
        cluster_s = (ready - prov) if prov is not None and ready is not None else 0.0
        if prov is not None and ready is not None:
            row["cluster_start_s"] = _rd(cluster_s)
        if start is not None and submit is not None:
            row["start_to_submit_s"] = _rd(submit - start - cluster_s)   # preflight checks etc.
        if submit is not None and entry is not None:
            row["submit_to_entrypoint_s"] = _rd(entry - submit)
        if entry is not None and pipes is not None:
            row["entrypoint_to_pipes_open_s"] = _rd(pipes - entry)
        if entry is not None and conn is not None:
            row["entrypoint_to_ray_connected_s"] = _rd(conn - entry)        # imports + ray.init
        row.update(_job_start_times(mine, submit))
        if last_line is not None and end is not None:
            row["job_last_line_to_step_end_s"] = _rd(end - last_line)       # job exit, poll, drain
        # "[pipes] Ray job ... SUCCEEDED": when the step saw the job terminal
        terminal = _first(mine, lambda k, s, m: m.startswith("[pipes] Ray job") and m.endswith(("SUCCEEDED", "FAILED", "STOPPED")))
        job_lines = [e for e in mine if e[3] and not e[3].startswith("[pipes] Ray job") and k_is_log(e)]
        job_last = _last([e for e in job_lines if terminal is None or e[0] <= terminal], lambda k, s, m: True)
        if terminal is not None and job_last is not None:
            row["job_last_line_to_terminal_seen_s"] = _rd(terminal - job_last)   # job exit + status read
        if terminal is not None and end is not None:
            row["terminal_seen_to_step_end_s"] = _rd(end - terminal)             # log drain + the asset's bookkeeping
        steps[step] = row

    overhead = total - in_job_total
    # The stricter view: the window read and everything of the training job that is not
    # its epochs (ray.init, Ray Train's controller and worker-group start, export) are overhead too.
    train_not_epochs = in_job_by_step.get("trained_model", 0.0) - training_parts["epochs_s"]
    strict = overhead + max(0.0, train_not_epochs)
    return {
        "ratio": round(overhead / total, 3),
        "metric": "overhead / total wall time of one daily run (overhead = total - in-job compute)",
        "total_s": round(total, 2),
        "in_job_compute_s": round(in_job_total, 2),
        "overhead_s": round(overhead, 2),
        "strict_overhead_s": round(strict, 2),
        "strict_ratio": round(strict / total, 3),
        "breakdown": {
            "training_read_s": _rd(training_parts["read_s"]),
            "training_epochs_s": _rd(training_parts["epochs_s"]),
            "training_not_epochs_s": _rd(train_not_epochs),
            "cluster_start_s": steps["trained_model"].get("cluster_start_s"),
            "run_launch_s": _rd(run_start - t_call) if run_start else None,
            "steps": steps,
            "teardown_s": _rd(steps_done - last_step_end) if steps_done and last_step_end else None,
            "last_step_end_to_run_end_s": _rd(run_end - last_step_end) if run_end and last_step_end else None,
            "run_end_to_return_s": _rd(t_return - run_end) if run_end else None,
            "run_span_s": _rd(run_end - run_start) if run_start and run_end else None,
        },
    }
