"""The per-worker training loop: epochs until the validation slice stops improving, with a
checkpoint every epoch.

:func:`run_worker` needs only an initialised ``torch.distributed`` process group, so it runs
under Ray Train (``ray_train_days.train_days_per_worker`` adapts Ray's context, the days'
datasets, checkpoints and reports to it) and under plain ``torch.multiprocessing`` in tests. The
rooms, each short enough to read at once (after torchtitan's ``train.py``):

``worker.py``       one rank's model, optimizers and settings (``setup_worker``)
``train_step.py``   ``forward_backward_step`` and ``train_step``: what one step is
``epoch.py``        ``train_epoch`` (lockstep batches, all ranks stop together) and ``validate``
``train_loop.py``   ``run_worker``: resume, epochs, ``end_epoch`` (early stopping, checkpoint,
                    report)

Training length follows the data: after every epoch the model is scored on the validation
slice (the last part of the window in time, never trained on); training stops when
``params.early_stopping_patience`` epochs in a row did not improve the validation score
(``params.early_stopping_metric``: AUC - logloss by default) by
``params.early_stopping_min_delta``, or at the ``params.epochs`` budget. Every epoch's
checkpoint records the validation figures; the driver exports the best epoch's checkpoint.

Checkpoints (their layout, saving and loading) are in :mod:`ads_ranking_pipelines.training.checkpoint`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.checkpoint import checkpoint_bytes, load_checkpoint, save_checkpoint
from ads_ranking_pipelines.training.epoch import train_epoch, validate
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.training.selection import SELECTION_METRIC, selection_loss
from ads_ranking_pipelines.training.warm_start import LocalWeights, apply as apply_warm_start
from ads_ranking_pipelines.training.worker import ProgressFn, Worker, setup_worker

# (metrics, local checkpoint dir) -> None; called on every rank, once per epoch.
ReportFn = Callable[[dict[str, Any], str], None]
# epoch index (0-based) -> iterable of numpy batches {"dense", "sparse", "label"}
BatchesFn = Callable[[int], Iterable[Mapping[str, np.ndarray]]]


@dataclass
class LoopState:
    """What a checkpoint restores besides the weights: where the loop is, and the best so far."""

    epochs_done: int = 0
    global_step: int = 0
    best_epoch: int = 0
    best_loss: float = math.inf
    epochs_since_best: int = 0
    stopped_early: bool = False

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "LoopState":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class WorkerSummary:
    rank: int
    start_epoch: int                 # 0-based index of the first epoch this call trained
    epochs_done: int                 # epochs completed in total (including resumed ones)
    global_step: int
    best_epoch: int = 0
    stopped_early: bool = False
    history: list[dict[str, Any]] = field(default_factory=list)
    plan_summary: dict[str, Any] = field(default_factory=dict)
    best_weights: LocalWeights | None = None   # with keep_best: this rank's slices of the best epoch


def end_epoch(w: Worker, state: LoopState, metrics: dict[str, Any], report: ReportFn) -> None:
    """Early-stopping bookkeeping, then the epoch's checkpoint (collective) and report."""
    score = selection_loss(metrics, w.params.early_stopping_metric)
    state.epochs_done = int(metrics["epoch"])
    improved = score < state.best_loss - w.params.early_stopping_min_delta
    if improved:
        state.best_loss, state.best_epoch, state.epochs_since_best = score, state.epochs_done, 0
    else:
        state.epochs_since_best += 1
    patience = effective_patience(w.params, int(metrics["steps"]))
    state.stopped_early = bool(patience and state.epochs_since_best >= patience
                               and state.epochs_done < w.params.epochs)
    metrics.update({SELECTION_METRIC: score, "best_epoch": state.best_epoch,
                    "is_best": improved, "stopped_early": state.stopped_early})
    c0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix=f"dlrm-ckpt-e{state.epochs_done}-r{w.rank}-") as ckpt_dir:
        train_state = None
        if w.rank == 0:
            train_state = {**dataclasses.asdict(state), "loss": metrics["loss"], "world_size": w.world,
                           "metrics": metrics, "sharding_plan": w.sm.plan_summary,
                           "params": w.params.model_dump(mode="json"),
                           "feature_spec": dataclasses.asdict(w.feature_spec)}
        save_checkpoint(w.sm, ckpt_dir, train_state)
        metrics["checkpoint_write_s"] = round(time.perf_counter() - c0, 3)
        metrics["checkpoint_bytes_rank"] = checkpoint_bytes(ckpt_dir)
        report(metrics, ckpt_dir)
    metrics["checkpoint_s"] = round(time.perf_counter() - c0, 3)


def effective_patience(params: TrainingParams, steps_per_epoch: int) -> int:
    """``early_stopping_patience`` epochs, but at least ``early_stopping_min_steps`` steps (0: off)."""
    if not params.early_stopping_patience:
        return 0
    return max(params.early_stopping_patience,
               math.ceil(params.early_stopping_min_steps / max(1, steps_per_epoch)))


def _log_epoch(w: Worker, metrics: dict[str, Any]) -> None:
    valid = (f" valid logloss {metrics['valid_logloss']:.5f} auc {metrics.get('valid_auc', float('nan')):.4f}"
             if "valid_logloss" in metrics else "")
    w.log(f"[train] epoch {metrics['epoch']}/{w.params.epochs} loss {metrics['loss']:.5f}{valid} "
          f"(best epoch {metrics['best_epoch']}) samples {metrics['samples']} steps/rank {metrics['steps']} "
          f"{metrics['samples_per_s']:.0f} samples/s train {metrics['epoch_s']:.1f}s "
          f"checkpoint {metrics['checkpoint_s']:.1f}s" + (" -> early stop" if metrics["stopped_early"] else ""))
    if w.progress:
        w.progress({"kind": "epoch", **metrics})


def _resume(w: Worker, resume_dir: str | None) -> LoopState:
    state = LoopState()
    if resume_dir:
        state = LoopState.from_dict(load_checkpoint(w.sm, resume_dir))
        if w.rank == 0:
            w.log(f"[train] resumed from {resume_dir}: {state.epochs_done} epoch(s) done, "
                  f"step {state.global_step}, best epoch {state.best_epoch}")
    if w.rank == 0:
        w.log(f"[train] sharding plan over {w.world} ranks:\n{w.sm.plan_text()}")
        if w.progress:
            w.progress({"kind": "sharding_plan", "world_size": w.world, "plan": json.dumps(w.sm.plan_summary)})
            # one per worker-group start: the driver counts restarts and sees where each began
            w.progress({"kind": "started", "epochs_done": state.epochs_done, "global_step": state.global_step,
                        "resumed": bool(resume_dir), "world_size": w.world})
    return state


def run_worker(
    params: TrainingParams,
    feature_spec: FeatureSpec,
    *,
    device: torch.device,
    batches: BatchesFn,
    report: ReportFn,
    valid_batches: Callable[[], Iterable[Mapping[str, np.ndarray]]] | None = None,
    resume_dir: str | None = None,
    progress: ProgressFn | None = None,
    progress_every_s: float = 5.0,
    local_world_size: int | None = None,
    log: Callable[[str], None] = print,
    callbacks: Sequence[Any] = (),
    steps_per_epoch: int | None = None,
    id_counts: Mapping[str, np.ndarray] | None = None,
    warm_start: Mapping[str, torch.Tensor] | LocalWeights | None = None,
    shard_steps: int | None = None,
    keep_best: bool = False,
) -> WorkerSummary:
    """Train until the validation slice stops improving or the epoch budget is spent.

    Every rank must call this with the same params. Both learning rates decay linearly with the
    global step, from their start values to ``params.final_lr_fraction`` of them at
    ``params.epochs * steps_per_epoch`` steps (a function of the step, so a resumed run continues
    the same schedule); without ``steps_per_epoch`` they stay constant. ``shard_steps``: every
    rank's shard has exactly this many batches per epoch (``lockstep``: no collective per step).
    ``warm_start``: full weights (an earlier version) or this rank's slices kept in memory
    (``LocalWeights``); ``keep_best``: keep the best epoch's slices in ``summary.best_weights``
    (None when the best epoch was trained before a resume).
    """
    w = setup_worker(params, feature_spec, device=device, local_world_size=local_world_size,
                     steps_per_epoch=steps_per_epoch, log=log, progress=progress,
                     progress_every_s=progress_every_s, callbacks=callbacks, id_counts=id_counts,
                     shard_steps=shard_steps)
    if warm_start is not None and not resume_dir:
        in_memory = isinstance(warm_start, LocalWeights)
        n = warm_start.apply(w.sm.model) if in_memory else apply_warm_start(w.sm.model, warm_start)
        if w.rank == 0:
            log(f"[train] warm start: {n} tensors from the previous "
                + ("day's best epoch (in memory)" if in_memory else "version"))
            if progress:
                progress({"kind": "warm_start", "source": "memory" if in_memory else "version", "tensors": n})
    state = _resume(w, resume_dir)
    summary = WorkerSummary(rank=w.rank, start_epoch=state.epochs_done, epochs_done=state.epochs_done,
                            global_step=state.global_step, plan_summary=w.sm.plan_summary)
    while state.epochs_done < params.epochs and not state.stopped_early:
        epoch = state.epochs_done
        w.call("on_epoch_start", epoch=epoch + 1)
        metrics = train_epoch(w, batches(epoch), epoch, state.global_step)
        state.global_step = int(metrics["global_step"])
        if valid_batches is not None:
            metrics.update(validate(w, valid_batches()))
        end_epoch(w, state, metrics, report)
        if keep_best and metrics["is_best"]:
            summary.best_weights = LocalWeights(w.sm.model)
        summary.history.append(metrics)
        if w.rank == 0:
            _log_epoch(w, metrics)
    summary.epochs_done, summary.global_step = state.epochs_done, state.global_step
    summary.best_epoch, summary.stopped_early = state.best_epoch, state.stopped_early
    return summary


