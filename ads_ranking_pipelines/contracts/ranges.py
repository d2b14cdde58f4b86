"""Job specs over a run's partition range: one Ray job per step trains, evaluates or scores every day.

Each range spec holds what its days share once and the per-day rest, and hands out the one-day
specs of :mod:`ads_ranking_pipelines.contracts.jobs` that the training code takes. The job
reports one ``DAY_RESULT`` message per finished day, in date order, as it goes.
"""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.gates import ChampionRef, GateConfig, comparison_for
from ads_ranking_pipelines.contracts.jobs import EvalJobSpec, InferenceJobSpec, TrainJobSpec

DAY_RESULT = "day_result"      # custom message kind: one finished day, {"day": ISO date, ...}
_FROZEN = ConfigDict(frozen=True, extra="forbid")


def _in_date_order(days: list[dt.date]) -> None:
    if any(b <= a for a, b in zip(days, days[1:])):
        raise ValueError(f"days must be in strictly increasing date order, got {[d.isoformat() for d in days]}")


class TrainDay(BaseModel):
    model_config = _FROZEN

    day: dt.date
    train_days: tuple[dt.date, ...]
    model_version: str
    model_uri: str
    run_name: str


class TrainRangeSpec(BaseModel):
    """Train the days in date order, each version written complete before the next starts."""

    model_config = _FROZEN

    params: TrainingParams
    source: SourceConfig
    ray_storage_uri: str
    code_version: str = "unknown"
    cluster: dict | None = None
    days: tuple[TrainDay, ...] = Field(min_length=1)
    init_model_uri: str | None = None   # warm start of the first day (None: random init)
    warm_start: bool = False            # each later day starts from the version of the day before

    @model_validator(mode="after")
    def _ordered(self) -> "TrainRangeSpec":
        _in_date_order([d.day for d in self.days])
        return self

    def day_spec(self, i: int) -> TrainJobSpec:
        d = self.days[i]
        init = self.init_model_uri if i == 0 else (self.days[i - 1].model_uri if self.warm_start else None)
        return TrainJobSpec(params=self.params, source=self.source, train_days=d.train_days,
                            model_version=d.model_version, model_uri=d.model_uri,
                            ray_storage_uri=self.ray_storage_uri, run_name=d.run_name,
                            code_version=self.code_version, init_model_uri=init, cluster=self.cluster)


class EvalDay(BaseModel):
    model_config = _FROZEN

    eval_day: dt.date
    model_version: str
    model_uri: str
    params: TrainingParams
    train_days: tuple[dt.date, ...] = Field(min_length=1)

    def as_champion(self) -> ChampionRef:
        return ChampionRef(version=self.model_version, uri=self.model_uri, trained_through=max(self.train_days))


class EvalRangeSpec(BaseModel):
    """Evaluate each day's version on its day beside the champion of that moment, walking the chain.

    ``earlier_champions`` are the past champions a day is compared with when the current one
    trained on it (``contracts.gates.comparison_for``)."""

    model_config = _FROZEN

    source: SourceConfig
    gates: GateConfig
    champion: ChampionRef | None = None     # the champion before the run
    earlier_champions: tuple[ChampionRef, ...] = ()
    days: tuple[EvalDay, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> "EvalRangeSpec":
        _in_date_order([d.eval_day for d in self.days])
        return self

    def comparison(self, i: int, champion: ChampionRef | None) -> ChampionRef | None:
        """What day ``i``'s version is compared with while ``champion`` is the champion."""
        d = self.days[i]
        ref = comparison_for(d.eval_day, champion, self.earlier_champions)
        return None if ref is None or ref.version == d.model_version else ref

    def day_spec(self, i: int, champion: ChampionRef | None) -> EvalJobSpec:
        d, ref = self.days[i], self.comparison(i, champion)
        return EvalJobSpec(params=d.params, source=self.source, train_days=d.train_days, eval_day=d.eval_day,
                           model_uri=d.model_uri, champion_uri=ref.uri if ref else None)


class InferDay(BaseModel):
    model_config = _FROZEN

    day: dt.date
    model_uri: str
    model_version: str
    output_uri: str
    hash_buckets: int


class InferRangeSpec(BaseModel):
    """Score each day with that day's champion."""

    model_config = _FROZEN

    source: SourceConfig
    id_columns: tuple[str, ...] = ()
    days: tuple[InferDay, ...] = Field(min_length=1)
    concurrency: int | None = Field(None, ge=1)     # scoring tasks at a time (InferenceJobSpec)

    @model_validator(mode="after")
    def _ordered(self) -> "InferRangeSpec":
        _in_date_order([d.day for d in self.days])
        return self

    def day_spec(self, i: int) -> InferenceJobSpec:
        d = self.days[i]
        return InferenceJobSpec(source=self.source, day=d.day, model_uri=d.model_uri, model_version=d.model_version,
                                output_uri=d.output_uri, hash_buckets=d.hash_buckets, id_columns=self.id_columns,
                                concurrency=self.concurrency)
