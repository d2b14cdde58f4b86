"""Training parameters: the part of a run's config that reaches the Ray workers."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ads_ranking_pipelines.config.cluster import CPU_POOL_WORKER_CPUS

MODEL_NAME_PATTERN = r"^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$"


class TrainingParams(BaseModel):
    """Hyper-parameters and resources of one training run.

    Frozen and JSON-serializable: the Dagster run config is turned into one of these before
    anything starts, and the Ray job receives it as JSON.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    model_name: str = Field("quest_ranker", pattern=MODEL_NAME_PATTERN,
                            description="Model family; versions are stored under this name.")
    dataset_window_days: int = Field(3, ge=1, le=90,
                                     description="Days of events before the partition day to train on.")
    gpu_pool: str = Field("local", min_length=1, description="Pool name from the GPU pool catalog.")
    num_workers: int = Field(2, ge=1, le=256, description="Ray Train workers (embedding shards).")
    gpus_per_worker: int = Field(0, ge=0, le=8, description="GPUs per worker; 0 trains on CPU with gloo.")
    cpus_per_worker: float | None = Field(
        None, gt=0, le=256,
        description="CPUs per training worker (its pod, its Ray Train reservation and torch "
                    "threads). Unset: on a GPU pool a share of the node per GPU (node CPUs less "
                    "headroom / GPUs per node x gpus_per_worker), on a CPU pool 1.")
    epochs: int = Field(20, ge=1, le=100,
                        description="Budget: the most epochs. Training stops earlier once the validation "
                                    "slice stops improving (early_stopping_patience).")
    validation_fraction: float = Field(
        0.1, ge=0.0, le=0.5,
        description="Last part (in time) of the window held out to pick the epoch to keep and to stop "
                    "training; 0: no validation (train the whole budget, keep the last epoch).")
    early_stopping_patience: int = Field(
        2, ge=0, le=100,
        description="Stop after this many epochs in a row without a better validation score "
                    "(0: train the whole budget). The best epoch's checkpoint is the model version.")
    early_stopping_min_steps: int = Field(
        32, ge=0, le=1_000_000,
        description="Patience is at least this many optimizer steps: on small windows (a few steps per "
                    "epoch) training waits more epochs before it stops.")
    early_stopping_min_delta: float = Field(
        1e-4, ge=0.0, le=1.0, description="Smallest improvement of the validation score that counts as better.")
    early_stopping_metric: Literal["auc_logloss", "logloss", "auc"] = Field(
        "auc_logloss", description="Validation score that picks the epoch and stops training: logloss, "
                                   "AUC, or AUC - logloss (FuxiCTR's default monitor: ranking and calibration).")
    batch_size: int = Field(1024, ge=16, le=262144, description="Per-worker batch size.")
    learning_rate: float = Field(0.01, gt=0, le=1.0,
                                 description="Adam learning rate of the dense (MLP) parameters.")
    embedding_learning_rate: float | None = Field(
        None, gt=0, le=10.0,
        description="Row-wise Adagrad learning rate of the embedding tables; unset: learning_rate.")
    embedding_eps: float = Field(
        0.01, gt=0, le=1.0,
        description="Floor of the row-wise Adagrad denominator (lr * g / (sqrt(sum g^2) + eps)). "
                    "Near 0, an id's first update is a full lr step whatever its gradient, so ids "
                    "seen a few times memorize their labels; larger, rare rows move like SGD with "
                    "lr / eps while frequent rows still get Adagrad. A row's gradient scales as "
                    "1 / batch_size: the default suits batch_size ~1024, scale it with 1 / batch_size.")
    dense_weight_decay: float = Field(
        0.0, ge=0.0, le=1.0, description="Decoupled weight decay (AdamW) of the dense (MLP) parameters.")
    final_lr_fraction: float = Field(
        0.1, ge=0.0, le=1.0,
        description="Both learning rates decay linearly over the run to this fraction of their "
                    "start value (1.0: constant). Keeps the last steps from moving the "
                    "calibration.")
    embedding_dim: int = Field(16, ge=4, le=512, description="Embedding width; a multiple of 4.")
    hash_buckets: int = Field(100_000, ge=16, le=50_000_000,
                              description="Upper bound on rows of each embedding table.")
    dense_arch: tuple[int, ...] = Field((64, 32), min_length=1, description="Bottom MLP widths.")
    over_arch: tuple[int, ...] = Field((64, 32), min_length=1, description="Top MLP widths (a 1-unit head is appended).")
    concat_embeddings: bool = Field(
        True, description="Feed the embeddings themselves to the top MLP beside their pairwise dot products.")
    wide: bool = Field(
        True, description="Add a linear (wide) part over the dense inputs and embeddings to the logit.")
    min_id_count: int = Field(
        2, ge=1, le=1_000_000,
        description="Ids seen fewer times in the training window share one 'rare id' row of their "
                    "table (1: off). Rare ids cannot memorize their labels, and ids new on the "
                    "evaluated day get a trained row.")
    count_features: bool = Field(
        True, description="Add log(1 + training-window count) of every sparse id as a dense input.")
    dense_normalization: bool = Field(
        True, description="Standardize the dense inputs (batch statistics in training, their "
                          "running average in the saved model) before the bottom MLP.")
    seed: int = Field(0, ge=0, le=2**31 - 1)
    max_failures: int = Field(2, ge=0, le=20, description="Worker failures Ray Train recovers from, per run.")
    profile_steps: bool = Field(
        False, description="Record where training steps spend their time (input wait, embedding "
                           "all-to-all, forward, backward, gradient all-reduce, optimizer) in every "
                           "epoch's metrics as profile_<phase>_s, and the threads each worker uses.")

    @field_validator("embedding_dim")
    @classmethod
    def _multiple_of_four(cls, v: int) -> int:
        if v % 4:
            raise ValueError(f"embedding_dim must be a multiple of 4 (fbgemm kernels), got {v}")
        return v

    @field_validator("dense_arch", "over_arch")
    @classmethod
    def _positive_widths(cls, v: tuple[int, ...]) -> tuple[int, ...]:
        bad = [w for w in v if w < 1 or w > 16384]
        if bad:
            raise ValueError(f"layer widths must be between 1 and 16384, got {list(v)}")
        return v

    def with_cluster_cpus(self, cpus: float | None) -> TrainingParams:
        """These params with an unset ``cpus_per_worker`` taken from the run's resolved cluster
        request (``ResolvedRequest.request.cpus_per_worker``); a set value is kept."""
        if self.cpus_per_worker is not None or cpus is None:
            return self
        return self.model_copy(update={"cpus_per_worker": float(cpus)})

    @property
    def worker_cpus(self) -> float:
        """CPUs a Ray Train worker reserves: ``cpus_per_worker`` once resolved, else (a trainer
        started outside the pipeline on a CPU cluster) the CPU-pool default."""
        return self.cpus_per_worker if self.cpus_per_worker is not None else CPU_POOL_WORKER_CPUS

    @property
    def uses_gpu(self) -> bool:
        return self.gpus_per_worker > 0

    @property
    def effective_embedding_learning_rate(self) -> float:
        return (self.embedding_learning_rate if self.embedding_learning_rate is not None
                else self.learning_rate)
