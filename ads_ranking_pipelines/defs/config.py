"""Typed Dagster run config, turned into the pure models of ``config`` before anything starts.

Dagster does not refuse a pydantic constraint at launch (the run starts and the step fails),
so these classes carry types, defaults and descriptions only; ``to_params`` validates against
``TrainingParams`` and raises a ``dg.Failure`` naming each bad field and its valid range.
"""

from __future__ import annotations

from typing import Optional

import dagster as dg
from pydantic import Field, ValidationError

from ads_ranking_pipelines.config.errors import format_validation_error
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.gates import GateConfig
from ads_ranking_pipelines.contracts.realized import RealizedTolerance

_DEFAULTS = TrainingParams()


def _f(name: str):
    info = TrainingParams.model_fields[name]
    default = getattr(_DEFAULTS, name)
    if isinstance(default, tuple):
        default = list(default)
    return Field(default=default, description=info.description)


class TrainingConfig(dg.Config):
    """Run config of ``trained_model`` (the launchpad form)."""

    model_name: str = _f("model_name")
    dataset_window_days: int = _f("dataset_window_days")
    gpu_pool: str = _f("gpu_pool")
    num_workers: int = _f("num_workers")
    gpus_per_worker: int = _f("gpus_per_worker")
    cpus_per_worker: float | None = _f("cpus_per_worker")
    epochs: int = _f("epochs")
    validation_fraction: float = _f("validation_fraction")
    early_stopping_patience: int = _f("early_stopping_patience")
    early_stopping_min_steps: int = _f("early_stopping_min_steps")
    early_stopping_min_delta: float = _f("early_stopping_min_delta")
    early_stopping_metric: str = _f("early_stopping_metric")
    batch_size: int = _f("batch_size")
    learning_rate: float = _f("learning_rate")
    embedding_learning_rate: float | None = _f("embedding_learning_rate")
    embedding_eps: float = _f("embedding_eps")
    dense_weight_decay: float = _f("dense_weight_decay")
    final_lr_fraction: float = _f("final_lr_fraction")
    embedding_dim: int = _f("embedding_dim")
    hash_buckets: int = _f("hash_buckets")
    dense_arch: list[int] = _f("dense_arch")
    over_arch: list[int] = _f("over_arch")
    concat_embeddings: bool = _f("concat_embeddings")
    wide: bool = _f("wide")
    min_id_count: int = _f("min_id_count")
    count_features: bool = _f("count_features")
    dense_normalization: bool = _f("dense_normalization")
    seed: int = _f("seed")
    max_failures: int = _f("max_failures")
    profile_steps: bool = _f("profile_steps")
    warm_start: Optional[bool] = Field(
        None, description="Start each day's version from the previous day's version (this run's, else the newest "
        "on storage) instead of a random init. Unset: on for a multi-day (backfill) run, off for one day.")

    def to_params(self) -> TrainingParams:
        return params_or_failure(self.model_dump(exclude={"warm_start"}))


def params_or_failure(values: dict) -> TrainingParams:
    try:
        return TrainingParams.model_validate(values)
    except ValidationError as exc:
        raise dg.Failure(description=format_validation_error(exc, TrainingParams), allow_retries=False) from None


class EvaluationConfig(dg.Config):
    """Gates of a new model version (asset checks on ``model_evaluation``)."""

    max_auc_drop_vs_champion: float = Field(0.005, description="A new version may trail the champion's AUC by at most this.")
    max_auc_gap_vs_baseline: float = Field(0.02, description="A new version may trail the XGBoost baseline's AUC by at most this.")
    min_calibration: float = Field(0.7, description="Lowest acceptable mean prediction / observed CTR.")
    max_calibration: float = Field(1.4, description="Highest acceptable mean prediction / observed CTR.")
    promote: bool = Field(True, description="Make the version champion when every gate passes (false: evaluate only).")

    def gates(self) -> GateConfig:
        """The thresholds as the pure model the evaluation job and the gate decision take."""
        return GateConfig.model_validate(self.model_dump())


class RealizedConfig(dg.Config):
    """Tolerances of ``realized_performance``'s check: the scored days' realized metrics against the
    scoring version's evaluation, and what a regression does."""

    max_auc_drop: float = Field(0.02, description="Realized AUC may trail the version's evaluation AUC by at most this.")
    max_logloss_rise: float = Field(0.02, description="Realized logloss may exceed the evaluation's by at most this.")
    min_calibration: float = Field(0.7, description="Lowest acceptable realized mean prediction / observed CTR.")
    max_calibration: float = Field(1.4, description="Highest acceptable realized mean prediction / observed CTR.")
    rollback: bool = Field(True, description="On a regression of the current champion, roll back to the previous one.")
    rescore: bool = Field(False, description="After such a rollback, request batch_scores again for the days the "
                          "rolled-back version scored (the rescore_after_rollback sensor launches them).")

    def tolerance(self) -> RealizedTolerance:
        return RealizedTolerance.model_validate(self.model_dump(exclude={"rollback", "rescore"}))
