"""Typed Dagster run config, turned into the pure models of ``config`` before anything starts.

Dagster does not refuse a pydantic constraint at launch (the run starts and the step fails),
so these classes carry types, defaults and descriptions only; ``to_params`` validates against
``TrainingParams`` and raises a ``dg.Failure`` naming each bad field and its valid range.
"""

from __future__ import annotations

import typing
from typing import Any, Optional

import dagster as dg
from pydantic import BaseModel, Field, ValidationError, create_model

from ads_ranking_pipelines.config.errors import format_validation_error
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.gates import GateConfig
from ads_ranking_pipelines.contracts.realized import RealizedTolerance


def _launchpad_type(annotation: Any) -> Any:
    """The type Dagster's config system takes for a ``TrainingParams`` field: a list for a tuple,
    a string for a ``Literal`` (the model checks the value in ``to_params``)."""
    origin = typing.get_origin(annotation)
    if origin is tuple:
        return list[typing.get_args(annotation)[0]]
    if origin is typing.Literal:
        return str
    return annotation


def launchpad_fields(model: type[BaseModel]) -> dict[str, Any]:
    """Every field of ``model`` as a Dagster config field: its default and description, no constraint."""
    defaults = model()
    fields = {}
    for name, info in model.model_fields.items():
        default = getattr(defaults, name)
        fields[name] = (_launchpad_type(info.annotation),
                        Field(default=list(default) if isinstance(default, tuple) else default,
                              description=info.description))
    return fields


class TrainingRunConfig(dg.Config):
    """What a run's config adds to the training parameters (every ``TrainingParams`` field is a
    field of :data:`TrainingConfig` too, with its default and description)."""

    warm_start: Optional[bool] = Field(
        None, description="Start each day's version from the previous day's version (this run's, else the newest "
        "on storage) instead of a random init. Unset: on for a multi-day (backfill) run, off for one day.")

    resume: bool = Field(
        True, description="Take over an earlier attempt of the same work (same model, partition range, training "
        "config, code version and data window: a retried or re-launched run): its complete days are not trained "
        "again and the day in progress resumes from its last checkpoint. false: train every day afresh.")

    budget_gpu_hours: Optional[float] = Field(
        None, description="Refuse the run, before any cluster starts, when its range is estimated (from this "
        "model's recorded days on the pool) to take more GPU-hours than this. Unset: the pool's budget_gpu_hours.")
    budget_cost: Optional[float] = Field(
        None, description="Refuse the run when its estimated cost (the pool catalog's rates) is over this. "
        "Unset: the pool's budget_cost.")

    def to_params(self) -> TrainingParams:
        return params_or_failure(self.model_dump(exclude=set(TrainingRunConfig.model_fields)))


# Run config of ``trained_model`` (the launchpad form): the training parameters, one field each,
# generated from ``TrainingParams`` so that the two never drift apart.
TrainingConfig = create_model("TrainingConfig", __base__=TrainingRunConfig, __module__=__name__,
                              **launchpad_fields(TrainingParams))


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
