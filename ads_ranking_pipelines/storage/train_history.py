"""What each trained day cost: the durable history backfill estimates are made from.

One small JSON document per model version, ``models/<model>/history/<version>.json``, written
by the training step once the version is complete: the day, pool, workers, window rows, the
training job's wall seconds for the day and its GPU-/worker-hours (the version names the run:
``<day>-<run id[:8]>``), and what the pre-flight
estimate said for that day (``estimate``, None when there was none), so estimate and actual
sit side by side. It lives beside the versions on the storage root, so it outlives the Dagster
instance and reads the same from the CLI, Dagster and X-Ray.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout

HISTORY_DIR = "history"
FIELDS = ("model_version", "day", "gpu_pool", "num_workers", "gpus_per_worker", "rows", "wall_seconds",
          "gpu_hours", "worker_hours", "estimate")


def history_root(layout: StorageLayout, model_name: str) -> str:
    return fs.join(layout.model_root(model_name), HISTORY_DIR)


def record_day(layout: StorageLayout, model_name: str, record: dict[str, Any]) -> str:
    """Keep one trained day's figures (``FIELDS``); returns where."""
    missing = [k for k in FIELDS if k not in record]
    if missing:
        raise ValueError(f"history record of {model_name} lacks {', '.join(missing)}; needs {', '.join(FIELDS)}")
    doc = {**{k: record[k] for k in FIELDS},
           "recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    uri = fs.join(history_root(layout, model_name), f"{record['model_version']}.json")
    fs.write_json_atomic(uri, doc)
    return uri


def read_history(layout: StorageLayout, model_name: str, gpu_pool: str | None = None) -> list[dict[str, Any]]:
    """The model's recorded days, oldest day first (only ``gpu_pool``'s when given); unreadable
    records are skipped."""
    root = history_root(layout, model_name)
    out = []
    for name in sorted(fs.list_dir(root)) if fs.exists(root) else []:
        if not name.endswith(".json"):
            continue
        try:
            doc = fs.read_json(fs.join(root, name))
        except (ValueError, OSError):
            continue
        if isinstance(doc, dict) and (gpu_pool is None or doc.get("gpu_pool") == gpu_pool):
            out.append(doc)
    return sorted(out, key=lambda d: (str(d.get("day")), str(d.get("model_version"))))
