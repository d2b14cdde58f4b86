"""One rank's training state: the sharded model, its optimizers and what its steps need.

:func:`setup_worker` builds it on an initialised ``torch.distributed`` process group; the step
(``train_step.py``), the epoch passes (``epoch.py``) and the loop (``train_loop.py``) take it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
import torch.distributed as dist

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.training.model import build_model, set_id_counts
from ads_ranking_pipelines.training.quiet import quiet_warnings
from ads_ranking_pipelines.training.sharding import ShardedModel, shard_model
from ads_ranking_pipelines.training.step_profile import StepProfile

ProgressFn = Callable[[dict[str, Any]], None]


@dataclass
class Worker:
    """Everything one rank's steps need."""

    params: TrainingParams
    feature_spec: FeatureSpec
    sm: ShardedModel
    device: torch.device
    comm_device: torch.device
    rank: int
    world: int
    base_lrs: list[float]
    total_steps: int | None
    log: Callable[[str], None]
    progress: ProgressFn | None
    progress_every_s: float
    callbacks: Sequence[Any] = ()
    profile: StepProfile = field(default_factory=StepProfile)     # params.profile_steps
    shard_steps: int | None = None    # batches in every rank's (equal) shard per epoch, if known

    @property
    def sparse_keys(self) -> list[str]:
        return list(self.feature_spec.sparse_columns)

    def call(self, hook: str, **kwargs: Any) -> None:
        for cb in self.callbacks:
            fn = getattr(cb, hook, None)
            if fn is not None:
                fn(rank=self.rank, **kwargs)


def setup_worker(params: TrainingParams, feature_spec: FeatureSpec, *, device: torch.device,
                 local_world_size: int | None, steps_per_epoch: int | None, log: Callable[[str], None],
                 progress: ProgressFn | None, progress_every_s: float, callbacks: Sequence[Any],
                 id_counts: Mapping[str, np.ndarray] | None = None, shard_steps: int | None = None) -> Worker:
    """Build and shard the model and its optimizers on this rank."""
    quiet_warnings()
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build_model(params, feature_spec, device=torch.device("meta"))
    torch.manual_seed(params.seed + rank)
    profile = StepProfile(params.profile_steps)
    sm = shard_model(model, device=device, learning_rate=params.learning_rate,
                     embedding_learning_rate=params.effective_embedding_learning_rate,
                     embedding_eps=params.embedding_eps, dense_weight_decay=params.dense_weight_decay,
                     batch_size=params.batch_size, local_world_size=local_world_size,
                     comm_hook_wrap=profile.timed_hook if profile.enabled else None)
    if id_counts:
        set_id_counts(sm.model, id_counts)
    # start values of every param group, taken before any checkpoint is loaded; the schedule
    # scales them by lr_multiplier(global_step)
    base_lrs = [float(g["lr"]) for g in sm.optimizer.param_groups]
    profile.attach(sm.model)
    return Worker(params=params, feature_spec=feature_spec, sm=sm, device=device,
                  comm_device=device if dist.get_backend() == "nccl" else torch.device("cpu"),
                  rank=rank, world=world, base_lrs=base_lrs,
                  total_steps=params.epochs * steps_per_epoch if steps_per_epoch else None,
                  log=log, progress=progress, progress_every_s=progress_every_s, callbacks=tuple(callbacks),
                  profile=profile, shard_steps=shard_steps)
