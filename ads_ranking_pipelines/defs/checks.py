"""The gates of a new model version, as blocking asset checks on ``model_evaluation``.

A version is promoted only when every gate of its held-out day passes. The decision itself
(numbers in, verdicts out, and the champion chain over a run's days) is
:mod:`ads_ranking_pipelines.contracts.gates`, shared with the evaluation job; ``check_results``
turns the verdicts of one or more days into one result per check, with the numbers in the
description so the UI shows why.
"""

from __future__ import annotations

import dagster as dg

from ads_ranking_pipelines.contracts.gates import (  # noqa: F401 - the gates' names and decision, re-exported
    CHECK_BASELINE,
    CHECK_CALIBRATION,
    CHECK_CHAMPION,
    CHECKS,
    Verdict,
    gate_verdicts,
)

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
