"""What a Ray job receives: a serialized, self-contained description of its work."""

from __future__ import annotations

import datetime as dt

from pydantic import BaseModel, ConfigDict, Field

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams


class TrainJobSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    params: TrainingParams
    source: SourceConfig            # with ``uri`` resolved
    train_days: tuple[dt.date, ...]
    model_version: str
    model_uri: str                  # where the finished version is written
    ray_storage_uri: str            # Ray Train checkpoints
    run_name: str
    code_version: str = "unknown"   # recorded in the model version's manifest
    init_model_uri: str | None = None   # warm start: an earlier version's weights (None: random init)
    cluster: dict | None = None     # the cluster request (and rendered manifest on KubeRay), recorded in the manifest


class EvalJobSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    params: TrainingParams
    source: SourceConfig
    train_days: tuple[dt.date, ...]     # for the XGBoost baseline
    eval_day: dt.date
    model_uri: str
    champion_uri: str | None = None     # current champion to compare against, if any


class InferenceJobSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: SourceConfig
    day: dt.date
    model_uri: str
    model_version: str
    output_uri: str
    hash_buckets: int
    id_columns: tuple[str, ...] = ()
    # Scoring tasks at a time: the worker CPUs the cluster was asked for. None: the CPUs Ray sees
    # when the job starts (on an autoscaling cluster that starts with 0 workers: none yet).
    concurrency: int | None = Field(None, ge=1)
