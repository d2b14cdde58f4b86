"""XGBoost baseline on the same window and the same model inputs as the ranking model.

Inputs come from :func:`features.transform` (signed-log dense values and hashed sparse ids),
plus, per sparse column, a target-free frequency encoding: how often the hashed id occurs in
the training window (0 for ids never seen). Early stopping watches the most recent 10 % of
the training rows; the held-out day is scored once at the end.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.training.features import FeatureSpec, transform
from ads_ranking_pipelines.metrics import evaluate

PREFIX = "baseline_"
DEFAULT_PARAMS: dict[str, Any] = {
    "objective": "binary:logistic",
    "eval_metric": "logloss",
    "tree_method": "hist",
    "device": "cpu",
    "max_depth": 6,
    "min_child_weight": 5.0,
    "eta": 0.1,
    "subsample": 0.8,
    "colsample_bytree": 0.8,
    "lambda": 2.0,
    "max_bin": 256,
}


def _frequency_codes(train_ids: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """log1p(count in the training window) of each id, 0 for unseen ids."""
    uniq, counts = np.unique(train_ids, return_counts=True)
    pos = np.clip(np.searchsorted(uniq, ids), 0, len(uniq) - 1)
    found = uniq[pos] == ids
    return np.where(found, np.log1p(counts[pos]), 0.0).astype(np.float32)


def build_matrix(inputs: dict[str, np.ndarray], train_sparse: np.ndarray) -> np.ndarray:
    """Dense, hashed ids (as numbers) and frequency codes side by side, float32."""
    sparse = inputs["sparse"]
    freq = [_frequency_codes(train_sparse[:, j], sparse[:, j]) for j in range(sparse.shape[1])]
    parts = [inputs["dense"], sparse.astype(np.float32)]
    if freq:
        parts.append(np.stack(freq, axis=1))
    return np.concatenate(parts, axis=1)


def feature_names(spec: FeatureSpec) -> list[str]:
    missing = [f"{c}#missing" for c in spec.dense_columns] if spec.missing_indicators else []
    return [*spec.dense_columns, *missing, *(f"{c}#hash" for c in spec.sparse_columns),
            *(f"{c}#freq" for c in spec.sparse_columns)]


def train_and_evaluate_baseline(train_table: Any, eval_table: Any, source: SourceConfig,
                                hash_buckets: int, seed: int = 0, *, nthread: int = 2,
                                max_rounds: int = 300, early_stopping_rounds: int = 20,
                                valid_fraction: float = 0.1, with_probs: bool = False):
    """Train XGBoost on ``train_table`` and evaluate on ``eval_table`` (tables or DataFrames).

    Returns :func:`metrics.evaluate` of the eval day prefixed ``baseline_`` (``auc``,
    ``logloss``, ``normalized_entropy``, ``calibration``, ``rows``, ``ctr``) plus
    ``baseline_train_rows``, ``baseline_best_iteration`` and ``baseline_train_seconds``; with
    ``with_probs`` a tuple ``(metrics, eval-day probabilities)``.
    """
    import xgboost as xgb

    spec = FeatureSpec.from_source(source, hash_buckets)
    train = transform(train_table, spec)
    held = transform(eval_table, spec)
    n = len(train["label"])
    if n < 20:
        raise ValueError(f"the baseline needs at least 20 training rows, got {n}")
    if train["label"].min() == train["label"].max():
        raise ValueError(f"training labels ({spec.label_column!r}) are all {train['label'][0]:g} "
                         f"over {n} rows; the baseline needs clicks and non-clicks")
    x_train = build_matrix(train, train["sparse"])
    x_eval = build_matrix(held, train["sparse"])
    names = feature_names(spec)

    # early stopping on the most recent rows of the window (rows are in time order)
    n_valid = max(1, int(round(n * valid_fraction)))
    fit, valid = slice(0, n - n_valid), slice(n - n_valid, n)
    params = {**DEFAULT_PARAMS, "nthread": int(nthread), "seed": int(seed)}
    start = time.perf_counter()
    dfit = xgb.DMatrix(x_train[fit], label=train["label"][fit], feature_names=names, nthread=nthread)
    evals = [(dfit, "fit")]
    y_valid = train["label"][valid]
    use_valid = y_valid.min() != y_valid.max()
    if use_valid:
        evals.append((xgb.DMatrix(x_train[valid], label=y_valid, feature_names=names, nthread=nthread), "valid"))
    booster = xgb.train(params, dfit, num_boost_round=max_rounds, evals=evals,
                        early_stopping_rounds=early_stopping_rounds if use_valid else None,
                        verbose_eval=False)
    best = int(getattr(booster, "best_iteration", max_rounds - 1)) if use_valid else max_rounds - 1
    probs = booster.predict(xgb.DMatrix(x_eval, feature_names=names, nthread=nthread),
                            iteration_range=(0, best + 1))
    seconds = time.perf_counter() - start

    out = {f"{PREFIX}{k}": float(v) for k, v in evaluate(held["label"], probs).items()}
    out[f"{PREFIX}train_rows"] = float(n)
    out[f"{PREFIX}best_iteration"] = float(best)
    out[f"{PREFIX}train_seconds"] = float(seconds)
    return (out, probs) if with_probs else out
