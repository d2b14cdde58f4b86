"""Where resume-keyed training leaves its records (``planning/resume.py``).

* ``models/<model>/resume/<first day>_<last day>.json``: the range's latest attempt: its resume
  key and what the key is made of, the version name of every day, and the runs that worked on it.
* ``runs/<run id>/versions.json``: the version of each day that run ``run id`` trained or took
  over from an earlier attempt: evaluation and scoring of that run use these.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout


def _range_uri(layout: StorageLayout, model: str, first: str, last: str) -> str:
    return fs.join(layout.model_root(model), "resume", f"{first}_{last}.json")


def read_attempt(layout: StorageLayout, model: str, days: list[str]) -> dict[str, Any] | None:
    """The range's latest attempt, or None."""
    return fs.read_json_object(_range_uri(layout, model, days[0], days[-1]))


def write_attempt(layout: StorageLayout, model: str, days: list[str], *, key: str, parts: dict[str, Any],
                  versions: dict[str, str], run_id: str, resumed_from: str | None) -> dict[str, Any]:
    """Record this attempt (keeping the runs of the earlier ones with the same key)."""
    uri = _range_uri(layout, model, days[0], days[-1])
    earlier = fs.read_json_object(uri) or {}
    runs = list(earlier.get("runs") or []) if earlier.get("key") == key else []
    record = {"key": key, "components": parts, "versions": versions, "run_id": resumed_from or run_id,
              "runs": [*[r for r in runs if r != run_id], run_id], "updated_at": round(time.time(), 3)}
    fs.write_json_atomic(uri, record)
    return record


def mark_finished(layout: StorageLayout, model: str, days: list[str], key: str) -> None:
    """The attempt with ``key`` trained all its days: the same work run again starts fresh."""
    uri = _range_uri(layout, model, days[0], days[-1])
    record = fs.read_json_object(uri)
    if record is not None and record.get("key") == key:
        fs.write_json_atomic(uri, {**record, "finished": True, "updated_at": round(time.time(), 3)})


def write_run_versions(layout: StorageLayout, run_id: str, versions: dict[str, str]) -> None:
    fs.write_json_atomic(fs.join(layout.runs_root(), run_id, "versions.json"), versions)


def run_version_of(layout: StorageLayout, run_id: str, day: dt.date) -> str | None:
    """The version run ``run_id`` trained (or took over) for ``day``, if it recorded one."""
    record = fs.read_json_object(fs.join(layout.runs_root(), run_id, "versions.json")) or {}
    version = record.get(day.isoformat())
    return version if isinstance(version, str) else None
