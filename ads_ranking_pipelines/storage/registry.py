"""Model versions and the champion pointer, with promotion history for rollback.

A version is a folder with a ``manifest.json`` (written last by the trainer). The champion is
one small JSON document replaced as a whole; its ``history`` lists earlier champions.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout

MANIFEST = "manifest.json"


class RegistryError(ValueError):
    pass


class ModelRegistry:
    def __init__(self, layout: StorageLayout, model_name: str):
        self.layout = layout
        self.model_name = model_name

    def version_uri(self, version: str) -> str:
        return self.layout.model_version(self.model_name, version)

    def is_complete(self, version: str) -> bool:
        return fs.exists(fs.join(self.version_uri(version), MANIFEST))

    def versions(self) -> list[str]:
        root = self.layout.versions_root(self.model_name)
        return [v for v in fs.list_dir(root) if self.is_complete(v)]

    def discard_incomplete(self, version: str) -> bool:
        """Remove a version folder that never got its manifest (a failed or cancelled run)."""
        if fs.exists(self.version_uri(version)) and not self.is_complete(version):
            fs.delete_dir(self.version_uri(version))
            return True
        return False

    def record_evaluation(self, version: str, day: dt.date, metrics: dict[str, Any]) -> str:
        """Keep a version's held-out metrics beside it (the version folder itself stays as written)."""
        uri = fs.join(self.layout.model_root(self.model_name), "evaluations", version, f"{day.isoformat()}.json")
        fs.write_json(uri, {"model_version": version, "eval_day": day.isoformat(), "metrics": metrics})
        return uri

    def champion(self) -> dict[str, Any] | None:
        uri = self.layout.champion_pointer(self.model_name)
        return fs.read_json(uri) if fs.exists(uri) else None

    def promote(self, version: str, reason: str, metrics: dict[str, Any] | None = None) -> dict[str, Any]:
        if not self.is_complete(version):
            valid = ", ".join(self.versions()[-5:]) or "none"
            raise RegistryError(f"cannot promote {self.model_name} version {version!r}: not a complete "
                                f"version (recent complete versions: {valid})")
        current = self.champion()
        history = list((current or {}).get("history", []))
        if current:
            history.append({k: current[k] for k in ("model_version", "promoted_at", "reason") if k in current})
        doc = {"model_name": self.model_name, "model_version": version, "reason": reason,
               "promoted_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               "metrics": metrics or {}, "history": history[-50:]}
        fs.write_json(self.layout.champion_pointer(self.model_name), doc)
        return doc

    def rollback(self) -> dict[str, Any]:
        """Make the previous champion current again."""
        current = self.champion()
        if not current or not current.get("history"):
            raise RegistryError(f"{self.model_name} has no earlier champion to roll back to")
        previous = current["history"][-1]
        doc = {"model_name": self.model_name, "model_version": previous["model_version"],
               "reason": f"rollback from {current['model_version']}",
               "promoted_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               "metrics": {}, "history": current["history"][:-1]}
        if not self.is_complete(doc["model_version"]):
            raise RegistryError(f"earlier champion {doc['model_version']} is no longer a complete version")
        fs.write_json(self.layout.champion_pointer(self.model_name), doc)
        return doc
