"""The gates of a new model version, as blocking asset checks on ``model_evaluation``.

A version is promoted only when every gate of its held-out day passes. ``gate_verdicts`` is the
decision (numbers in, verdicts out); ``check_results`` turns the verdicts of one or more days
into one result per check, with the numbers in the description so the UI shows why.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import dagster as dg

CHECK_BASELINE = "not_worse_than_xgboost_baseline"
CHECK_CHAMPION = "not_worse_than_champion"
CHECK_CALIBRATION = "calibrated"
CHECKS = (CHECK_BASELINE, CHECK_CHAMPION, CHECK_CALIBRATION)

CHECK_SPECS = [
    dg.AssetCheckSpec(CHECK_BASELINE, asset="model_evaluation", blocking=True,
                      description="AUC on the held-out day within `max_auc_gap_vs_baseline` of an XGBoost "
                                  "baseline trained on the same window."),
    dg.AssetCheckSpec(CHECK_CHAMPION, asset="model_evaluation", blocking=True,
                      description="AUC on the held-out day not below the current champion's on the same day "
                                  "by more than `max_auc_drop_vs_champion` (passes when there is no champion)."),
    dg.AssetCheckSpec(CHECK_CALIBRATION, asset="model_evaluation", blocking=True,
                      description="Mean prediction / observed CTR within [`min_calibration`, `max_calibration`]."),
]


@dataclasses.dataclass(frozen=True)
class Verdict:
    check: str
    day: str
    passed: bool
    text: str                      # the numbers, one line
    metadata: dict[str, Any]


def gate_verdicts(day: str, m: dict[str, Any], config: Any) -> list[Verdict]:
    """The three gates of one day's metrics ``m`` under the thresholds of ``config`` (EvaluationConfig)."""
    auc, base, cal = float(m["auc"]), float(m["baseline_auc"]), float(m["calibration"])
    gap = config.max_auc_gap_vs_baseline
    out = [Verdict(CHECK_BASELINE, day, auc >= base - gap,
                   f"{day}: auc {auc:.4f} vs xgboost {base:.4f} (lift {auc - base:+.4f}, allowed -{gap})",
                   {"auc": auc, "baseline_auc": base, "lift": auc - base, "margin": gap})]
    if "champion_auc" in m:
        champ, drop = float(m["champion_auc"]), config.max_auc_drop_vs_champion
        out.append(Verdict(CHECK_CHAMPION, day, auc >= champ - drop,
                           f"{day}: auc {auc:.4f} vs champion {m.get('champion_version')} {champ:.4f} "
                           f"(lift {auc - champ:+.4f}, allowed -{drop})",
                           {"auc": auc, "champion_auc": champ, "lift": auc - champ, "margin": drop,
                            "champion_version": str(m.get("champion_version"))}))
    else:
        out.append(Verdict(CHECK_CHAMPION, day, True, f"{day}: no comparable champion yet",
                           {"auc": auc, "champion_version": "none"}))
    lo, hi = config.min_calibration, config.max_calibration
    out.append(Verdict(CHECK_CALIBRATION, day, lo <= cal <= hi,
                       f"{day}: calibration {cal:.3f} (allowed {lo}..{hi})",
                       {"calibration": cal, "min": lo, "max": hi}))
    return out


def check_results(verdicts: list[Verdict]) -> list[dg.AssetCheckResult]:
    """One result per check over every evaluated day: failed if any day failed."""
    results = []
    for name in CHECKS:
        mine = [v for v in verdicts if v.check == name]
        if not mine:
            continue
        failed = [v for v in mine if not v.passed]
        shown = failed[0] if failed else mine[-1]
        text = "; ".join(("FAILED " if not v.passed else "") + v.text for v in mine)
        results.append(dg.AssetCheckResult(
            check_name=name, passed=not failed, description=text[:2000],
            metadata={**shown.metadata, "days": len(mine), "failed_days": ", ".join(v.day for v in failed) or "none"}))
    return results
