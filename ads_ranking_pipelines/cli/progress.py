"""What ``pipeline run`` prints while the run goes: a story, not the event log.

A thread follows the run's records in the Dagster instance and prints one line per step start
and end, per-epoch loss and samples/s, the evaluation table, the gate verdicts, promotions and
warnings. The full event log stays in the instance (``make ui``); ``--verbose`` prints it all
instead.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

EPOCH_LINE = "  {partition}epoch {epoch}/{epochs}: loss {loss:.4f}, {samples_per_s:,.0f} samples/s"
TABLE_ROWS = (("model", ""), ("xgboost baseline", "baseline_"), ("champion", "champion_"), ("oracle", "oracle_"))
SAY_INFO = ("promoted ", "provisioning Ray cluster", "training ")


def _value(metadata: dict[str, Any], key: str) -> Any:
    v = metadata.get(key)
    return getattr(v, "value", v)


def evaluation_table(metadata: dict[str, Any]) -> list[str]:
    """The held-out metrics of one day as a small aligned table."""
    day = _value(metadata, "eval_day")
    lines = [f"  evaluation on {day} ({_value(metadata, 'model_version')}):",
             f"    {'':18} {'auc':>7} {'logloss':>8} {'ne':>7} {'calib':>6}"]
    for label, prefix in TABLE_ROWS:
        auc = _value(metadata, f"{prefix}auc")
        if auc is None:
            continue
        cells = [_value(metadata, f"{prefix}{k}") for k in ("logloss", "normalized_entropy", "calibration")]
        text = " ".join(f"{c:>{w}.4f}" if isinstance(c, (int, float)) else f"{'-':>{w}}" for c, w in zip(cells, (8, 7, 6)))
        lines.append(f"    {label:18} {auc:>7.4f} {text}")
    return lines


def _error_text(error: Any) -> str:
    """The user's exception, not Dagster's wrapper around it."""
    while error is not None and error.cause is not None and "DagsterExecution" in (error.cls_name or ""):
        error = error.cause
    if error is None:
        return "unknown error"
    message = error.message.strip()
    return message if error.cls_name in message else f"{error.cls_name}: {message}"


class RunNarrator:
    """Follows one run's records in ``instance`` and prints the story through ``echo``."""

    def __init__(self, instance: Any, run_id: str, echo: Callable[[str], None], poll_s: float = 0.5):
        self.instance, self.run_id, self.echo, self.poll_s = instance, run_id, echo, poll_s
        self._cursor: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="run-narrator", daemon=True)

    def __enter__(self) -> "RunNarrator":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self._drain()

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            self._drain()

    def _drain(self) -> None:
        try:
            conn = self.instance.get_records_for_run(self.run_id, cursor=self._cursor, limit=1000)
        except Exception:      # the run is not stored yet
            return
        self._cursor = conn.cursor
        for record in conn.records:
            for line in self.lines(record.event_log_entry):
                self.echo(line)

    def lines(self, entry: Any) -> list[str]:
        event = entry.dagster_event
        if event is None:
            return self._user_lines(entry)
        kind, step = event.event_type_value, event.step_key
        if kind == "STEP_START":
            return [f"▶ {step}"]
        if kind == "STEP_SUCCESS":
            return [f"✓ {step} ({event.event_specific_data.duration_ms / 1000:.1f} s)"]
        if kind == "STEP_FAILURE":
            err = event.event_specific_data
            desc = (err.user_failure_data.description if err.user_failure_data else None) or _error_text(err.error)
            return [f"✗ {step} failed: {' '.join(str(desc).split())[:400]}"]
        if kind == "STEP_SKIPPED":
            return [f"- {step} skipped (an upstream step failed)"]
        if kind == "ASSET_OBSERVATION":
            return self._observation(event.event_specific_data.asset_observation)
        if kind == "ASSET_MATERIALIZATION":
            mat = event.event_specific_data.materialization
            return evaluation_table(mat.metadata) if "eval_day" in mat.metadata else []
        if kind == "ASSET_CHECK_EVALUATION":
            ev = event.event_specific_data
            return [f"  gate {ev.check_name}: {'passed' if ev.passed else 'FAILED'} — {ev.description or ''}"[:600]]
        return []

    def _observation(self, obs: Any) -> list[str]:
        md = {k: getattr(v, "value", v) for k, v in obs.metadata.items()}
        if md.get("kind") != "epoch" or "loss" not in md:
            return []
        return [EPOCH_LINE.format(partition=f"{obs.partition} " if obs.partition else "", epoch=md.get("epoch"), epochs=md.get("epochs", "?"),
                                  loss=float(md["loss"]), samples_per_s=float(md.get("samples_per_s", 0.0)))]

    def _user_lines(self, entry: Any) -> list[str]:
        msg = entry.user_message or ""
        if entry.level >= 30:          # WARNING and above
            return [f"! {msg.splitlines()[0][:400]}"] if msg else []
        return [f"  {msg.splitlines()[0][:300]}"] if msg.startswith(SAY_INFO) else []
