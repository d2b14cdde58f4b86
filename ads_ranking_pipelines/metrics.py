"""Ranking metrics (AUC, logloss, normalized entropy, calibration): numpy only, no project imports.

``auc`` equals scikit-learn's ``roc_auc_score`` (ties get half credit), ``logloss`` equals
``log_loss`` on probabilities clipped to ``[eps, 1 - eps]``.
"""

from __future__ import annotations

import numpy as np

EPS = 1e-7


class MetricError(ValueError):
    """The inputs cannot give the requested metric (e.g. labels of one class only for AUC)."""


def _labels(labels: np.ndarray) -> np.ndarray:
    y = np.asarray(labels)
    if y.ndim != 1:
        y = y.reshape(-1)
    if y.size == 0:
        raise MetricError("no rows: labels are empty")
    y = y.astype(np.float64)
    bad = ~np.isin(y, (0.0, 1.0))
    if bad.any():
        raise MetricError(
            f"labels must be 0 or 1; found {int(bad.sum())} other values, e.g. {y[bad][:3].tolist()}"
        )
    return y


def _inputs(labels: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = _labels(labels)
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    if p.shape != y.shape:
        raise MetricError(f"labels and probs differ in length: {y.size} labels, {p.size} probs")
    bad = ~np.isfinite(p) | (p < 0.0) | (p > 1.0)
    if bad.any():
        raise MetricError(
            f"probs must be finite and within [0, 1]; found {int(bad.sum())} others, "
            f"e.g. {p[bad][:3].tolist()}"
        )
    return y, p


def _one_class_message(y: np.ndarray, what: str) -> str:
    pos = int(y.sum())
    return (f"{what} is undefined when all labels are one class: {pos} positives and "
            f"{y.size - pos} negatives in {y.size} rows; it needs at least one of each")


def auc(labels: np.ndarray, probs: np.ndarray) -> float:
    """ROC AUC (Mann-Whitney U with average ranks for ties)."""
    y, p = _inputs(labels, probs)
    pos = y.sum()
    neg = y.size - pos
    if pos == 0 or neg == 0:
        raise MetricError(_one_class_message(y, "AUC"))
    order = np.argsort(p, kind="mergesort")
    sp = p[order]
    # average 1-based rank of each run of tied scores
    starts = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]])
    ends = np.r_[starts[1:], sp.size]
    avg_rank = (starts + 1 + ends) / 2.0
    ranks = np.repeat(avg_rank, ends - starts)
    rank_sum_pos = float(ranks[y[order] == 1.0].sum())
    return float((rank_sum_pos - pos * (pos + 1) / 2.0) / (pos * neg))


def logloss(labels: np.ndarray, probs: np.ndarray, eps: float = EPS) -> float:
    """Mean binary cross-entropy, probabilities clipped to ``[eps, 1 - eps]``."""
    y, p = _inputs(labels, probs)
    p = np.clip(p, eps, 1.0 - eps)
    return float(-np.mean(y * np.log(p) + (1.0 - y) * np.log1p(-p)))


def _entropy(rate: float) -> float:
    return float(-(rate * np.log(rate) + (1.0 - rate) * np.log1p(-rate)))


def normalized_entropy(labels: np.ndarray, probs: np.ndarray, eps: float = EPS) -> float:
    """Logloss divided by the entropy of the observed base rate (< 1 beats predicting the CTR)."""
    y = _labels(labels)
    ctr = float(y.mean())
    if ctr in (0.0, 1.0):
        raise MetricError(_one_class_message(y, "normalized entropy"))
    return logloss(y, probs, eps) / _entropy(ctr)


def calibration(labels: np.ndarray, probs: np.ndarray) -> float:
    """Mean prediction / observed CTR (1.0 is calibrated on average)."""
    y, p = _inputs(labels, probs)
    ctr = float(y.mean())
    if ctr == 0.0:
        raise MetricError(f"calibration is undefined with no positive labels ({y.size} rows, all 0)")
    return float(p.mean()) / ctr


def evaluate(labels: np.ndarray, probs: np.ndarray, eps: float = EPS) -> dict[str, float]:
    """``auc, logloss, normalized_entropy, calibration, rows, ctr`` (all floats)."""
    y, p = _inputs(labels, probs)
    if y.sum() in (0.0, float(y.size)):
        raise MetricError(_one_class_message(y, "evaluation (AUC)"))
    return {
        "auc": auc(y, p),
        "logloss": logloss(y, p, eps),
        "normalized_entropy": normalized_entropy(y, p, eps),
        "calibration": calibration(y, p),
        "rows": float(y.size),
        "ctr": float(y.mean()),
    }


def _grouped_auc(gp: np.ndarray, gn: np.ndarray) -> float:
    """AUC from per-tie-group positive and negative weights (groups in increasing score)."""
    neg_below = np.cumsum(gn) - gn
    tp, tn = gp.sum(), gn.sum()
    if tp == 0 or tn == 0:
        return float("nan")
    return float((gp * (neg_below + 0.5 * gn)).sum() / (tp * tn))


def _bootstrap_inputs(y: np.ndarray, p: np.ndarray, eps: float) -> tuple[np.ndarray, ...]:
    """Per model, what every resample reuses: score order, tie groups, sorted labels, row loss."""
    y_, p = _inputs(y, p)
    order = np.argsort(p, kind="mergesort")
    ps = p[order]
    group = np.cumsum(np.r_[True, ps[1:] != ps[:-1]]) - 1
    pc = np.clip(p, eps, 1.0 - eps)
    return order, group, y_[order], -(y_ * np.log(pc) + (1.0 - y_) * np.log1p(-pc))


def bootstrap(labels: np.ndarray, probs: dict[str, np.ndarray], *, reference: str | None = None,
              resamples: int = 200, level: float = 0.95, seed: int = 0,
              eps: float = EPS) -> dict[str, float]:
    """Percentile bootstrap intervals of AUC and logloss for each model in ``probs``.

    All models are scored on the same resamples of the rows (a paired bootstrap), so with
    ``reference`` (a key of ``probs``) the interval of each other model's AUC difference to it
    is exact about what the shared rows contribute. Returns flat keys:
    ``<name>auc_ci_low``, ``<name>auc_ci_high``, ``<name>logloss_ci_low``, ``<name>logloss_ci_high``
    and ``<name>auc_diff_vs_<reference>`` (+ ``_ci_low`` / ``_ci_high``), where ``<name>`` is the
    key as given (use ``""`` for the main model, ``"baseline_"`` etc. for the others).
    """
    y = _labels(labels)
    rng = np.random.default_rng(seed)
    n = y.size
    prepared = {name: _bootstrap_inputs(y, p, eps) for name, p in probs.items()}
    stats = {name: {"auc": np.empty(resamples), "logloss": np.empty(resamples)} for name in probs}
    for b in range(resamples):      # one resample's row weights at a time: memory O(rows), not O(resamples x rows)
        w = np.bincount(rng.integers(0, n, n), minlength=n).astype(np.float64)
        for name, (order, group, ys, ll) in prepared.items():
            ws = w[order]
            stats[name]["auc"][b] = _grouped_auc(np.bincount(group, ws * ys), np.bincount(group, ws * (1.0 - ys)))
            stats[name]["logloss"][b] = float((w * ll).sum() / w.sum())
    lo, hi = 100 * (1 - level) / 2, 100 * (1 + level) / 2
    out: dict[str, float] = {}
    for name, s in stats.items():
        for metric, values in s.items():
            out[f"{name}{metric}_ci_low"] = float(np.nanpercentile(values, lo))
            out[f"{name}{metric}_ci_high"] = float(np.nanpercentile(values, hi))
        if reference is not None and name != reference and reference in stats:
            diff = s["auc"] - stats[reference]["auc"]
            tag = f"{name}auc_diff_vs_{reference.rstrip('_') or 'model'}"
            out[f"{tag}_ci_low"] = float(np.nanpercentile(diff, lo))
            out[f"{tag}_ci_high"] = float(np.nanpercentile(diff, hi))
    return out
