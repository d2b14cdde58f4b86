"""Each run's progress on the storage root: ``runs/<run id>/progress.json``, written by the run's
steps as their Ray jobs report (``defs/progress.py``), read by X-Ray (``/runs``).

One record per run: its model, when it was last updated, its state (running / succeeded /
failed), its Ray links, and per step (``trained_model``, ``model_evaluation``, ``batch_scores``)
the latest :class:`~ads_ranking_pipelines.planning.progress.Progress` as a dict. Each write
replaces the file whole (atomic), so a reader never sees half of one.
"""

from __future__ import annotations

import time
from typing import Any

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout

MAX_RUNS = 200          # newest first


def update_progress(layout: StorageLayout, run_id: str, *, model: str, step: str | None = None,
                    progress: dict[str, Any] | None = None, state: str | None = None,
                    links: dict[str, str] | None = None, now: float | None = None) -> dict[str, Any]:
    """Merge what is new into run ``run_id``'s record and write it; the record."""
    uri = layout.run_progress(run_id)
    record = read_one(uri) or {"run_id": run_id, "model": model, "state": "running", "steps": {}, "links": {}}
    if step is not None and progress is not None:
        record["steps"][step] = progress
        record["current_step"] = step
    if state is not None:
        record["state"] = state
    if links:
        record["links"].update(links)
    record["updated_at"] = round(now if now is not None else time.time(), 3)
    fs.write_json_atomic(uri, record)
    return record


def read_one(uri: str) -> dict[str, Any] | None:
    """A run's record, or None when there is none (or it cannot be read as one)."""
    record = fs.read_json_object(uri)
    return record if record is not None and isinstance(record.get("steps"), dict) else None


def read_progress(layout: StorageLayout) -> list[dict[str, Any]]:
    """Every run's record, the most recently updated first (at most ``MAX_RUNS``)."""
    root = layout.runs_root()
    if not fs.exists(root):
        return []
    records = [r for run_id in fs.list_dir(root) if (r := read_one(layout.run_progress(run_id)))]
    return sorted(records, key=lambda r: float(r.get("updated_at") or 0.0), reverse=True)[:MAX_RUNS]
