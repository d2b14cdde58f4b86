"""One epoch's passes on a rank: training over its shard (:func:`train_epoch`, in lockstep:
all ranks stop together) and the validation pass (:func:`validate`, gathered from every rank).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any, Iterable, Mapping

import numpy as np
import torch
import torch.distributed as dist

from ads_ranking_pipelines.metrics import MetricError, auc, logloss
from ads_ranking_pipelines.training.dense_norm import sync_dense_statistics
from ads_ranking_pipelines.training.lockstep import lockstep
from ads_ranking_pipelines.training.step_profile import thread_counts
from ads_ranking_pipelines.training.train_step import lr_multiplier, train_step
from ads_ranking_pipelines.training.worker import Worker


def _all_reduce(t: torch.Tensor, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
    dist.all_reduce(t, op=op)
    return t


def train_epoch(w: Worker, batches: Iterable[Mapping[str, np.ndarray]], epoch: int,
                global_step: int) -> dict[str, Any]:
    """One epoch over this rank's shard from ``global_step``; returns the epoch's metrics (all
    ranks together), ``global_step`` the step after its last."""
    w.profile.take(0.0)          # from zero: validation forwards do not count
    t0 = last_progress = time.perf_counter()
    loss_sum = torch.zeros((), dtype=torch.float64, device=w.device)
    seen = steps = 0
    w.sm.model.train()
    for batch in lockstep(w, batches, w.shard_steps):
        w.call("on_step", epoch=epoch + 1, step=global_step)
        loss = train_step(w, batch, global_step)
        loss_sum += loss.double() * batch.size
        seen += batch.size
        steps += 1
        global_step += 1
        now = time.perf_counter()
        if w.rank == 0 and w.progress and now - last_progress >= w.progress_every_s:
            last_progress = now
            w.progress({"kind": "progress", "epoch": epoch + 1, "epochs": w.params.epochs, "step": global_step,
                        "epoch_step": steps, "epoch_steps": w.shard_steps,
                        "loss": float(loss_sum.item() / max(seen, 1)),
                        "samples_per_s": round(seen * w.world / (now - t0), 1)})
    sync_dense_statistics(w.sm.model)   # the epoch's batch statistics, before validation and the checkpoint
    train_s = time.perf_counter() - t0
    totals = _all_reduce(torch.tensor([float(loss_sum.item()), float(seen), float(steps)],
                                      dtype=torch.float64, device=w.comm_device)).cpu()
    samples = int(totals[1].item())
    if samples == 0:
        raise RuntimeError(f"epoch {epoch + 1}: no training rows reached the workers")
    mean_loss = float(totals[0].item() / samples)
    if not math.isfinite(mean_loss):
        raise FloatingPointError(f"epoch {epoch + 1}: loss is {mean_loss}")
    return {"epoch": epoch + 1, "epochs": w.params.epochs, "loss": mean_loss, "samples": samples,
            "steps": steps, "global_step": global_step,
            "samples_per_s": round(samples / train_s, 1) if train_s > 0 else 0.0,
            "epoch_s": round(train_s, 3),
            "lr_multiplier": round(lr_multiplier(global_step, w.total_steps, w.params.final_lr_fraction), 4),
            **profile_metrics(w, train_s)}


def profile_metrics(w: Worker, epoch_s: float) -> dict[str, Any]:
    """With ``params.profile_steps``: this epoch's per-phase seconds (``step_profile``) and the
    threads every rank uses (collective)."""
    if not w.profile.enabled:
        return {}
    threads: list[Any] = [None] * w.world
    dist.all_gather_object(threads, thread_counts())
    return {**w.profile.take(epoch_s), "profile_threads": json.dumps(threads, sort_keys=True)}


@torch.no_grad()
def validate(w: Worker, batches: Iterable[Mapping[str, np.ndarray]]) -> dict[str, float]:
    """Logloss and AUC of the model on the validation slice, over the rows of every rank, and the
    seconds the pass took (``valid_s``)."""
    t0 = time.perf_counter()
    w.sm.model.eval()
    probs, labels = [], []
    try:
        for batch in lockstep(w, batches):
            probs.append(torch.sigmoid(w.sm.model(batch.dense, batch.sparse)).double().cpu().numpy())
            labels.append(batch.label.double().cpu().numpy())
    finally:
        w.sm.model.train()
    mine = (np.concatenate(probs) if probs else np.zeros(0), np.concatenate(labels) if labels else np.zeros(0))
    gathered: list[Any] = [None] * w.world
    dist.all_gather_object(gathered, mine)
    p = np.concatenate([g[0] for g in gathered])
    y = np.concatenate([g[1] for g in gathered])
    if y.size == 0:
        return {}
    out = {"valid_rows": float(y.size), "valid_logloss": logloss(y, p)}
    try:
        out["valid_auc"] = auc(y, p)
    except MetricError:
        pass
    out["valid_s"] = round(time.perf_counter() - t0, 3)
    return out
