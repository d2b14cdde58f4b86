"""Model versions and the champion pointer, with a who/why/when history of every change.

A version is a folder with a ``manifest.json`` (written last by the trainer) listing the sha256
of each file. A folder without a manifest is half-written; one whose files do not match their
checksums is corrupt: neither is ever promoted.

The champion is one small JSON document replaced as a whole (``champion.json``):
``model_version``, ``reason``, ``by``, ``at``, the ``previous`` champions (a stack, for
rollback) and ``events``, the append-only log of every promotion and rollback.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout

MANIFEST = "manifest.json"
MODEL_FILE = "model.json"          # params and feature spec (training.export writes it)
MAX_EVENTS = 500
UNATTENDED = "UNATTENDED.json"   # written into a version whose run died before judging it


class RegistryError(ValueError):
    """A registry operation was refused (unknown, incomplete or corrupt version; no history)."""


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


class ModelRegistry:
    def __init__(self, layout: StorageLayout, model_name: str):
        self.layout = layout
        self.model_name = model_name

    # ---- versions ------------------------------------------------------------------------
    def version_uri(self, version: str) -> str:
        return self.layout.model_version(self.model_name, version)

    def is_complete(self, version: str) -> bool:
        return fs.exists(fs.join(self.version_uri(version), MANIFEST))

    def versions(self) -> list[str]:
        """Complete versions, oldest first (names start with the partition day)."""
        root = self.layout.versions_root(self.model_name)
        return sorted(v for v in fs.list_dir(root) if self.is_complete(v))

    def versions_for_day(self, day: dt.date) -> list[str]:
        """The day's complete versions that may be used (warm start, evaluation): not those a
        dead run left unattended."""
        return [v for v in self.versions() if v.startswith(f"{day:%Y%m%d}-") and self.unattended(v) is None]

    def manifest(self, version: str) -> dict[str, Any]:
        """The version's manifest after checking every file against its sha256 (RegistryError if not)."""
        uri = self.version_uri(version)
        if not fs.exists(uri):
            raise RegistryError(f"{self.model_name} has no version {version!r}; "
                                f"recent versions: {self._recent()}")
        if not self.is_complete(version):
            raise RegistryError(f"{self.model_name} version {version!r} is half-written (no {MANIFEST}); "
                                f"recent complete versions: {self._recent()}")
        try:
            manifest = fs.read_json(fs.join(uri, MANIFEST))
        except (ValueError, OSError) as exc:
            raise RegistryError(f"{self.model_name} version {version!r} is corrupt: unreadable {MANIFEST} ({exc})") from None
        for name, info in (manifest.get("files") or {}).items():
            path = fs.join(uri, name)
            if not fs.exists(path):
                raise RegistryError(f"{self.model_name} version {version!r} is corrupt: {name} is missing")
            if info.get("sha256") and hashlib.sha256(fs.read_bytes(path)).hexdigest() != info["sha256"]:
                raise RegistryError(f"{self.model_name} version {version!r} is corrupt: {name} does not "
                                    "match the sha256 in its manifest")
        return manifest

    def trained_through(self, version: str) -> dt.date | None:
        """The last day of the version's training window, from its manifest (no checksum pass);
        None if the version or the field is missing."""
        try:
            days = fs.read_json(fs.join(self.version_uri(version), MANIFEST)).get("train_days") or []
        except (ValueError, OSError):
            return None
        return max(dt.date.fromisoformat(d) for d in days) if days else None

    def description(self, version: str) -> dict[str, Any]:
        """The version's ``model.json``: its training ``params`` and the ``feature_spec`` it reads."""
        try:
            return fs.read_json(fs.join(self.version_uri(version), MODEL_FILE))
        except (ValueError, OSError) as exc:
            raise RegistryError(f"{self.model_name} version {version!r} has no readable {MODEL_FILE} ({exc})") from None

    def _recent(self) -> str:
        return ", ".join(self.versions()[-5:]) or "none"

    def discard_incomplete(self, version: str) -> bool:
        """Remove a version folder that never got its manifest (a failed or cancelled run)."""
        if fs.exists(self.version_uri(version)) and not self.is_complete(version):
            fs.delete_dir(self.version_uri(version))
            return True
        return False

    # ---- versions whose run died -------------------------------------------------------------
    def _unattended_uri(self, version: str) -> str:
        return fs.join(self.version_uri(version), UNATTENDED)

    def unattended(self, version: str) -> dict[str, Any] | None:
        """Why ``version`` was written by a run that died before judging it (None if it was not)."""
        uri = self._unattended_uri(version)
        try:
            return fs.read_json(uri) if fs.exists(uri) else None
        except (ValueError, OSError):
            return {"reason": f"unreadable {UNATTENDED}"}

    def mark_unattended(self, run_id: str, reason: str) -> list[str]:
        """Mark the complete versions trained by run ``run_id`` that no evaluation judged: their
        run died, so nobody gated them and they are never candidates for promotion. Returns
        the versions marked."""
        marked = []
        for version in self.versions():
            if not version.endswith(f"-{run_id[:8]}") or self.evaluations(version) \
                    or self.unattended(version) is not None:
                continue
            fs.write_json_atomic(self._unattended_uri(version), {"run_id": run_id, "reason": reason,
                                                                 "at": _now()})
            marked.append(version)
        return marked

    def adopt(self, version: str) -> dict[str, Any] | None:
        """A later attempt of the same work (resume key) takes over ``version`` and will judge it:
        it is no longer unattended. Returns the marker it had (None: it had none)."""
        marker = self.unattended(version)
        if marker is not None:
            fs.delete_file(self._unattended_uri(version))
        return marker

    # ---- evaluations ---------------------------------------------------------------------
    def _evaluation_uri(self, version: str, day: dt.date) -> str:
        return fs.join(self.layout.model_root(self.model_name), "evaluations", version, f"{day.isoformat()}.json")

    def record_evaluation(self, version: str, day: dt.date, metrics: dict[str, Any],
                          **extra: Any) -> str:
        """Keep a version's held-out metrics (and gate verdicts) beside it."""
        uri = self._evaluation_uri(version, day)
        fs.write_json(uri, {"model_version": version, "eval_day": day.isoformat(), "metrics": metrics,
                            "recorded_at": _now(), **extra})
        return uri

    def evaluation(self, version: str, day: dt.date) -> dict[str, Any] | None:
        uri = self._evaluation_uri(version, day)
        return fs.read_json(uri) if fs.exists(uri) else None

    def evaluations(self, version: str) -> list[dict[str, Any]]:
        root = fs.join(self.layout.model_root(self.model_name), "evaluations", version)
        return [fs.read_json(fs.join(root, n)) for n in sorted(fs.list_dir(root)) if n.endswith(".json")]

    # ---- champion ------------------------------------------------------------------------
    def champion(self) -> dict[str, Any] | None:
        uri = self.layout.champion_pointer(self.model_name)
        if not fs.exists(uri):
            return None
        try:
            return fs.read_json(uri)
        except ValueError as exc:
            raise RegistryError(f"{uri} is not valid JSON ({exc}); fix or restore it before promoting") from None

    def champion_version(self) -> str | None:
        doc = self.champion()
        return doc["model_version"] if doc else None

    def history(self) -> list[dict[str, Any]]:
        """Every promotion and rollback, oldest first: action, model_version, from_version, reason, by, at."""
        return list((self.champion() or {}).get("events", []))

    def past_champions(self) -> list[str]:
        """Every version that was champion before the current one, oldest first, each once."""
        doc = self.champion() or {}
        seen = [e.get("from_version") for e in doc.get("events", [])] + [e.get("model_version") for e in doc.get("events", [])]
        seen += [p.get("model_version") for p in doc.get("previous", [])]
        out: list[str] = []
        for v in seen:
            if v and v != doc.get("model_version") and v not in out:
                out.append(v)
        return out

    def promote(self, version: str, reason: str, by: str = "unknown",
                metrics: dict[str, Any] | None = None) -> dict[str, Any]:
        """Make ``version`` the champion (refuses half-written, corrupt or unattended versions)."""
        self.manifest(version)
        mark = self.unattended(version)
        if mark is not None:
            raise RegistryError(f"{self.model_name} version {version!r} was written by a run that died "
                                f"before evaluating it ({mark.get('reason')}); it is not a candidate: "
                                f"promote an evaluated version (recent: {self._recent()})")
        current = self.champion()
        previous = list((current or {}).get("previous", []))
        if current:
            if current["model_version"] == version:
                raise RegistryError(f"{self.model_name} version {version!r} is already the champion")
            previous.append({k: current[k] for k in ("model_version", "reason", "by", "at") if k in current})
        return self._write("promote", version, reason, by, metrics or {}, previous, current)

    def rollback(self, reason: str = "", by: str = "unknown") -> dict[str, Any]:
        """Make the previous champion current again (refused if there is none, or it is no longer intact)."""
        current = self.champion()
        if not current or not current.get("previous"):
            raise RegistryError(f"{self.model_name} has no earlier champion to roll back to"
                                + (f" (champion: {current['model_version']})" if current else " (no champion yet)"))
        previous = list(current["previous"])
        target = previous.pop()
        self.manifest(target["model_version"])
        reason = reason or f"rollback from {current['model_version']}"
        return self._write("rollback", target["model_version"], reason, by, {}, previous, current)

    def _write(self, action: str, version: str, reason: str, by: str, metrics: dict[str, Any],
               previous: list[dict[str, Any]], current: dict[str, Any] | None) -> dict[str, Any]:
        at = _now()
        events = list((current or {}).get("events", []))
        events.append({"action": action, "model_version": version,
                       "from_version": current["model_version"] if current else None,
                       "reason": reason, "by": by, "at": at})
        doc = {"model_name": self.model_name, "model_version": version, "reason": reason, "by": by,
               "at": at, "metrics": json.loads(json.dumps(metrics, default=str)),
               "previous": previous[-50:], "events": events[-MAX_EVENTS:]}
        fs.write_json_atomic(self.layout.champion_pointer(self.model_name), doc)
        return doc
