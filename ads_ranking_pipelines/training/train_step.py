"""What one training step is (after torchtitan's ``train_step`` / ``forward_backward_step``):

``forward_backward_step``  one batch: forward, loss, backward (fused embedding update)
``train_step``             learning rates for the step, ``forward_backward_step``, dense step

Both learning rates follow :func:`lr_multiplier`, a function of the global step, so a resumed
run continues the same schedule.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ads_ranking_pipelines.training.batches import Batch
from ads_ranking_pipelines.training.sharding import ShardedModel
from ads_ranking_pipelines.training.step_profile import StepProfile
from ads_ranking_pipelines.training.worker import Worker

_NO_PROFILE = StepProfile()


def forward_backward_step(sm: ShardedModel, batch: Batch, profile: StepProfile | None = None) -> torch.Tensor:
    """Forward, loss and backward of one batch; the fused embedding rows are updated in backward."""
    phase = (profile or _NO_PROFILE).phase
    with phase("forward"):
        logits = sm.model(batch.dense, batch.sparse)
        loss = F.binary_cross_entropy_with_logits(logits, batch.label)
    with phase("optimizer"):
        sm.optimizer.zero_grad()     # the fused embedding optimizer picks up its lr here
    with phase("backward"):
        loss.backward()
    return loss.detach()


def train_step(w: Worker, batch: Batch, global_step: int) -> torch.Tensor:
    """One optimizer step at ``global_step`` of the learning-rate schedule."""
    with w.profile.phase("optimizer"):
        set_learning_rates(w.sm, w.base_lrs, lr_multiplier(global_step, w.total_steps, w.params.final_lr_fraction))
    loss = forward_backward_step(w.sm, batch, w.profile)
    with w.profile.phase("optimizer"):
        w.sm.optimizer.step()        # dense Adam
    return loss


def lr_multiplier(step: int, total_steps: int | None, final_fraction: float) -> float:
    """Linear decay from 1 at step 0 to ``final_fraction`` at ``total_steps`` (and after)."""
    if not total_steps:
        return 1.0
    progress = min(1.0, max(0.0, step / total_steps))
    return 1.0 - (1.0 - final_fraction) * progress


def set_learning_rates(sm: ShardedModel, base_lrs: list[float], multiplier: float) -> None:
    """Scale every param group's start lr; fused tables read theirs at ``zero_grad``/``step``."""
    for group, base in zip(sm.optimizer.param_groups, base_lrs):
        group["lr"] = base * multiplier
