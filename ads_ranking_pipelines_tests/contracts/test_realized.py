"""The realized-labels verdict: numbers in, one verdict out, every number in its text."""

from __future__ import annotations

from ads_ranking_pipelines.contracts.realized import CHECK_REALIZED, RealizedTolerance, judge_realized

PREDICTED = {"auc": 0.75, "logloss": 0.40, "calibration": 1.01}


def test_realized_within_tolerance_passes_and_shows_both_sides():
    v = judge_realized("2026-03-11", "v2", {"auc": 0.74, "logloss": 0.41, "calibration": 1.05, "rows": 2000.0},
                       PREDICTED, RealizedTolerance())
    assert v.passed and v.check == CHECK_REALIZED
    assert v.text == ("2026-03-11: v2 realized auc 0.7400 (evaluation 0.7500), logloss 0.4100 (evaluation 0.4000), "
                      "calibration 1.0500 on 2000 rows")
    assert v.metadata["predicted_auc"] == 0.75 and v.metadata["realized_auc"] == 0.74


def test_each_regression_beyond_its_tolerance_fails_and_is_named():
    tol = RealizedTolerance()
    auc = judge_realized("d", "v2", {"auc": 0.72, "logloss": 0.40, "calibration": 1.0, "rows": 10.0}, PREDICTED, tol)
    assert not auc.passed and "regression: auc drop 0.0300 > 0.02" in auc.text
    loss = judge_realized("d", "v2", {"auc": 0.75, "logloss": 0.43, "calibration": 1.0, "rows": 10.0}, PREDICTED, tol)
    assert not loss.passed and "regression: logloss rise 0.0300 > 0.02" in loss.text
    cal = judge_realized("d", "v2", {"auc": 0.75, "logloss": 0.40, "calibration": 1.6, "rows": 10.0}, PREDICTED, tol)
    assert not cal.passed and "regression: calibration 1.6000 outside [0.7, 1.4]" in cal.text
    loose = RealizedTolerance(max_auc_drop=0.05)
    assert judge_realized("d", "v2", {"auc": 0.72, "logloss": 0.40, "calibration": 1.0, "rows": 10.0},
                          PREDICTED, loose).passed
