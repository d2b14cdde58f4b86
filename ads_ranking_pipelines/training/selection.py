"""Which epoch is best: early stopping minimizes ``selection_loss``, reported as
``SELECTION_METRIC``, the metric Ray Train keeps checkpoints by. Apart from ``train_loop`` so
that a job driver, which names the metric, needs no TorchRec."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SELECTION_METRIC = "selection_loss"      # params.early_stopping_metric as a loss (see selection_loss)


def selection_loss(metrics: Mapping[str, Any], metric: str) -> float:
    """What early stopping minimizes: the validation ``metric`` as a loss (training loss without
    a validation slice)."""
    if "valid_logloss" not in metrics:
        return float(metrics["loss"])
    ll, auc_ = float(metrics["valid_logloss"]), metrics.get("valid_auc")
    if metric == "logloss" or auc_ is None:
        return ll
    return -float(auc_) if metric == "auc" else ll - float(auc_)
