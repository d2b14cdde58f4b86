"""The realized-labels check: a champion judged again on the days it scored, once their clicks landed.

Numbers in, a verdict out (no Dagster, Ray or torch). ``realized`` are the metrics of the scores
the version wrote for a day against that day's labels as they are now; ``predicted`` are the
version's own evaluation metrics (what its gates saw when it was promoted). A regression beyond
the tolerance fails the check; ``defs/realized_step.py`` then rolls the champion back.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from ads_ranking_pipelines.contracts.gates import Verdict

CHECK_REALIZED = "realized_not_worse_than_evaluation"


class RealizedTolerance(BaseModel):
    """How far realized metrics may fall behind the evaluation's (the run config, as a pure model)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_auc_drop: float = 0.02
    max_logloss_rise: float = 0.02
    min_calibration: float = 0.7
    max_calibration: float = 1.4


def judge_realized(day: str, version: str, realized: dict[str, float], predicted: dict[str, Any],
                   tolerance: RealizedTolerance) -> Verdict:
    """One day's verdict: realized AUC not below the evaluation's by more than ``max_auc_drop``,
    realized logloss not above it by more than ``max_logloss_rise``, realized calibration within
    [``min_calibration``, ``max_calibration``]. The text carries every number."""
    auc, logloss, cal = float(realized["auc"]), float(realized["logloss"]), float(realized["calibration"])
    p_auc, p_logloss = float(predicted["auc"]), float(predicted["logloss"])
    failed = []
    if auc < p_auc - tolerance.max_auc_drop:
        failed.append(f"auc drop {p_auc - auc:.4f} > {tolerance.max_auc_drop}")
    if logloss > p_logloss + tolerance.max_logloss_rise:
        failed.append(f"logloss rise {logloss - p_logloss:.4f} > {tolerance.max_logloss_rise}")
    if not tolerance.min_calibration <= cal <= tolerance.max_calibration:
        failed.append(f"calibration {cal:.4f} outside [{tolerance.min_calibration}, {tolerance.max_calibration}]")
    text = (f"{day}: {version} realized auc {auc:.4f} (evaluation {p_auc:.4f}), logloss {logloss:.4f} "
            f"(evaluation {p_logloss:.4f}), calibration {cal:.4f} on {int(realized['rows'])} rows"
            + (f"; regression: {', '.join(failed)}" if failed else ""))
    metadata = {"realized_auc": auc, "realized_logloss": logloss, "realized_calibration": cal,
                "predicted_auc": p_auc, "predicted_logloss": p_logloss,
                "rows": float(realized["rows"]), "model_version": version}
    if "calibration" in predicted:
        metadata["predicted_calibration"] = float(predicted["calibration"])
    return Verdict(check=CHECK_REALIZED, day=day, passed=not failed, text=text, metadata=metadata)
