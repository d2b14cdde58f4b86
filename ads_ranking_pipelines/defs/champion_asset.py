"""The champion as a Dagster asset: every promotion and rollback is one materialization of it.

The registry (``storage.registry``) is where the champion lives; this asset is its history in
the UI: the asset's page lists each change with the version, the one it replaced, why and who
(and the gate numbers of an automatic promotion), and plots the numeric metadata over time.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

CHAMPION_KEY = dg.AssetKey("model_champion")

champion_spec = dg.AssetSpec(
    CHAMPION_KEY, group_name="ads_ranking",
    description="The model version the platform serves. Each materialization is one change of champion "
                "(a promotion by model_evaluation's gates, or promote_model / rollback_model): version, the "
                "version it replaced, reason, who. The registry (`ads-ranking model list`) is the source of truth.")


def champion_changed(doc: dict[str, Any]) -> dg.AssetMaterialization:
    """The materialization that records ``doc`` (the registry's new champion document; its last
    event says what changed)."""
    events = doc.get("events") or [{}]
    action = events[-1].get("action", "promote")
    metrics = {k: float(v) for k, v in (doc.get("metrics") or {}).items()
               if k in ("auc", "logloss", "calibration", "baseline_auc", "champion_auc") and isinstance(v, (int, float))}
    return dg.AssetMaterialization(CHAMPION_KEY, description=f"{action}: {doc['model_version']}", metadata={
        "model_name": doc["model_name"], "action": action, "model_version": doc["model_version"],
        "from_version": events[-1].get("from_version") or "none", "reason": doc.get("reason", ""),
        "by": doc.get("by", ""), "at": doc.get("at", ""), **metrics})
