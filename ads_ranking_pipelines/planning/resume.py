"""Resume keyed on content: a training step run again with the same work picks up where the
earlier attempt stopped, whatever run it belongs to (a Dagster run retry, a re-launched backfill
after a lost pod or node, a spot reclaim).

The work is named by its **resume key**: a hash of the model, the partition range, the resolved
training parameters, the code version and a fingerprint of the data window. Two attempts with
the same key train the same days from the same inputs, so the second keeps the first one's
model version names (and with them its per-day checkpoint folders): days whose version is
complete are not trained again, the day in progress resumes from its last checkpoint. Only
unfinished work is taken over: once an attempt has trained all its days, running the same work
again trains it afresh (that is what a deliberate re-run asks for). A key that differs starts
fresh, and :func:`why_fresh` says which part changed. Pure: no storage.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

KEY_PARTS = ("model", "days", "config", "code_version", "data")


def digest(obj: Any, n: int = 16) -> str:
    """A short stable hash of a JSON-able value (keys sorted)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:n]


def components(model: str, days: list[str], params: dict[str, Any], code_version: str,
               data_fingerprint: str) -> dict[str, Any]:
    """What the resume key is made of; ``params`` is kept whole so a change can be named."""
    return {"model": model, "days": f"{days[0]}..{days[-1]}", "config": digest(params, 12), "params": params,
            "code_version": code_version, "data": data_fingerprint}


def resume_key(parts: dict[str, Any]) -> str:
    return digest({k: parts.get(k) for k in KEY_PARTS})


def why_fresh(earlier: dict[str, Any] | None, parts: dict[str, Any]) -> str:
    """Why an attempt starts fresh rather than resuming ``earlier`` (the same range's last record)."""
    if earlier is None:
        return "no earlier attempt of this model and range"
    old = earlier.get("components") or {}
    changed = []
    if old.get("config") != parts["config"]:
        before, after = old.get("params") or {}, parts["params"]
        fields = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
        changed.append("config changed (" + ", ".join(f"{k}: {before.get(k)!r} -> {after.get(k)!r}"
                                                      for k in fields[:5]) + ")")
    if old.get("code_version") != parts["code_version"]:
        changed.append(f"code version changed ({old.get('code_version')} -> {parts['code_version']})")
    if old.get("data") != parts["data"]:
        changed.append(f"data window changed (fingerprint {old.get('data')} -> {parts['data']})")
    return "; ".join(changed) or "the earlier attempt's record differs"


@dataclasses.dataclass(frozen=True)
class ResumeDecision:
    key: str
    versions: dict[str, str]        # ISO day -> the model version name this attempt writes (or reuses)
    resumed_from: str | None        # the earlier attempt's run id, when resuming
    reason: str                     # why it resumes or starts fresh


def decide(earlier: dict[str, Any] | None, parts: dict[str, Any], days: list[str], fresh_versions: dict[str, str],
           run_id: str, allowed: bool = True) -> ResumeDecision:
    """Resume ``earlier`` (same key, same days) or start fresh with ``fresh_versions``."""
    key = resume_key(parts)
    if not allowed:
        return ResumeDecision(key, fresh_versions, None, "resume is off for this run (resume=false)")
    same = earlier is not None and earlier.get("key") == key and set(earlier.get("versions") or {}) == set(days)
    if same and earlier.get("finished"):       # a run of finished work again: meant to train it again
        return ResumeDecision(key, fresh_versions, None, f"the earlier attempt (run {earlier.get('run_id')}) "
                              "finished its days: training afresh")
    if same and earlier.get("run_id") != run_id:
        return ResumeDecision(key, dict(earlier["versions"]), earlier.get("run_id"),
                              f"same model, range, config, code version and data as run {earlier.get('run_id')}")
    if same:                        # this run's own record (the step re-executed in the same run)
        return ResumeDecision(key, dict(earlier["versions"]), None, "this run's own earlier attempt")
    return ResumeDecision(key, fresh_versions, None, why_fresh(earlier, parts))
