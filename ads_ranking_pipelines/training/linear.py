"""Logistic regression on one-hot (hashed) ids and standardized dense inputs.

Two uses in evaluation, both trained on the same window as the network:

* the **logistic regression** reference (``lr_`` metrics): every sparse column one-hot through
  the same hashing as the network, every dense input standardized — the linear model of the
  CTR literature;
* the **correctly specified model** of a source whose click model is known (the synthetic
  source, ``specified_`` metrics): the true model's form (see ``events.synthetic.specified_design``)
  fitted on the same rows. With this much data that, not the oracle, is the realistic ceiling.

The L2 strength is chosen on the last ``valid_fraction`` of the window (in time), the model is
then refitted on the whole window and scored once on the held-out day.
"""

from __future__ import annotations

import time
import warnings
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from ads_ranking_pipelines.metrics import evaluate, logloss

C_GRID = (0.03, 0.1, 0.3)


def one_hot(columns: Sequence[np.ndarray], sizes: Sequence[int]) -> sp.csr_matrix:
    """Rows x sum(sizes) 0/1 matrix: column j's id ``v`` sets position ``offset_j + v``."""
    n = len(columns[0]) if columns else 0
    offsets = np.cumsum([0, *sizes[:-1]]) if sizes else np.zeros(0, dtype=np.int64)
    if not columns:
        return sp.csr_matrix((n, 0), dtype=np.float32)
    idx = np.stack([np.asarray(c, dtype=np.int64) + o for c, o in zip(columns, offsets)], axis=1)
    data = np.ones(idx.size, dtype=np.float32)
    indptr = np.arange(0, idx.size + 1, idx.shape[1])
    return sp.csr_matrix((data, idx.reshape(-1), indptr), shape=(n, int(sum(sizes))))


def compact_ids(train: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Ids renumbered 1..k by the training window's values; ids unseen in training map to 0."""
    uniq, inv = np.unique(train, return_inverse=True)
    pos = np.clip(np.searchsorted(uniq, other), 0, max(len(uniq) - 1, 0))
    found = (uniq[pos] == other) if len(uniq) else np.zeros(len(other), dtype=bool)
    return inv + 1, np.where(found, pos + 1, 0), len(uniq) + 1


def design(train_cats: Sequence[np.ndarray], eval_cats: Sequence[np.ndarray],
           train_dense: np.ndarray, eval_dense: np.ndarray) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """(train, eval) matrices: one-hot categoricals (unseen -> a shared 'other' column) + z-scored dense."""
    tr_ids, ev_ids, sizes = [], [], []
    for a, b in zip(train_cats, eval_cats):
        ta, tb, k = compact_ids(np.asarray(a), np.asarray(b))
        tr_ids.append(ta), ev_ids.append(tb), sizes.append(k)
    mean = train_dense.mean(axis=0) if train_dense.size else 0.0
    std = train_dense.std(axis=0) + 1e-6 if train_dense.size else 1.0
    parts_tr = [one_hot(tr_ids, sizes), sp.csr_matrix(((train_dense - mean) / std).astype(np.float32))]
    parts_ev = [one_hot(ev_ids, sizes), sp.csr_matrix(((eval_dense - mean) / std).astype(np.float32))]
    return sp.hstack(parts_tr, format="csr"), sp.hstack(parts_ev, format="csr")


def _fit(x: sp.csr_matrix, y: np.ndarray, c: float, init: Any = None, max_iter: int = 200):
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, solver="lbfgs", max_iter=max_iter, tol=1e-4, warm_start=init is not None)
    if init is not None:
        model.coef_, model.intercept_ = init.coef_.copy(), init.intercept_.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # ConvergenceWarning: the iteration cap is deliberate
        return model.fit(x, y)


def fit_and_score(x_train: sp.csr_matrix, y_train: np.ndarray, x_eval: sp.csr_matrix, y_eval: np.ndarray,
                  prefix: str, valid_fraction: float = 0.1,
                  grid: Sequence[float] = C_GRID) -> tuple[dict[str, float], np.ndarray]:
    """Pick C on the time-last slice of the window, refit on the window, score the eval rows.

    Returns (``<prefix>auc``, ``logloss``, ``normalized_entropy``, ``calibration``, ``l2_c``,
    ``train_seconds``; the eval rows' probabilities).
    """
    t0 = time.perf_counter()
    n = len(y_train)
    n_valid = max(1, int(round(n * valid_fraction)))
    fit, valid = slice(0, n - n_valid), slice(n - n_valid, n)
    losses, models, prev = {}, {}, None
    for c in sorted(grid):                  # increasing C: each fit starts from the previous one
        prev = models[c] = _fit(x_train[fit], y_train[fit], c, init=prev)
        losses[c] = logloss(y_train[valid], prev.predict_proba(x_train[valid])[:, 1])
    best = min(losses, key=losses.get)
    model = _fit(x_train, y_train, best, init=models[best])
    probs = model.predict_proba(x_eval)[:, 1]
    out = {f"{prefix}{k}": float(v) for k, v in evaluate(y_eval, probs).items() if k not in ("rows", "ctr")}
    out[f"{prefix}l2_c"] = float(best)
    out[f"{prefix}train_seconds"] = round(time.perf_counter() - t0, 2)
    return out, probs


def logistic_regression_metrics(train: dict[str, np.ndarray], held: dict[str, np.ndarray],
                                 prefix: str = "lr_") -> tuple[dict[str, float], np.ndarray]:
    """The LR reference on ``features.transform`` outputs of the window and the held-out day."""
    k = train["sparse"].shape[1]
    x_tr, x_ev = design([train["sparse"][:, j] for j in range(k)], [held["sparse"][:, j] for j in range(k)],
                        train["dense"], held["dense"])
    return fit_and_score(x_tr, train["label"], x_ev, held["label"], prefix)
