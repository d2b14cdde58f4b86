"""The per-worker training loop: TorchRec DMP model, validation and a checkpoint every epoch.

:func:`run_worker` needs only an initialised ``torch.distributed`` process group, so it runs
under Ray Train (``ray_train_worker.train_loop_per_worker`` adapts Ray's context, dataset
shards, checkpoints and reports to it) and under plain ``torch.multiprocessing`` in tests. The loop is built from short steps (after torchtitan's
``train_step`` / ``forward_backward_step``):

``forward_backward_step``  one batch: forward, loss, backward (fused embedding update)
``train_step``             learning rates for the step, ``forward_backward_step``, dense step
``train_epoch``            lockstep batches of one epoch (all ranks stop together)
``validate``               loss and AUC on the validation slice (gathered from every rank)
``end_epoch``              early-stopping bookkeeping, checkpoint, report

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
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.batches import Batch
from ads_ranking_pipelines.training.checkpoint import checkpoint_bytes, load_checkpoint, save_checkpoint
from ads_ranking_pipelines.training.lockstep import lockstep
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.metrics import MetricError, auc, logloss
from ads_ranking_pipelines.training.dense_norm import sync_dense_statistics
from ads_ranking_pipelines.training.model import build_model, set_id_counts
from ads_ranking_pipelines.training.sharding import ShardedModel, shard_model
from ads_ranking_pipelines.training.step_profile import StepProfile, thread_counts
from ads_ranking_pipelines.training.warm_start import apply as apply_warm_start

SELECTION_METRIC = "selection_loss"      # params.early_stopping_metric as a loss (see selection_loss)
_NO_PROFILE = StepProfile()

# (metrics, local checkpoint dir) -> None; called on every rank, once per epoch.
ReportFn = Callable[[dict[str, Any], str], None]
# epoch index (0-based) -> iterable of numpy batches {"dense", "sparse", "label"}
BatchesFn = Callable[[int], Iterable[Mapping[str, np.ndarray]]]
ProgressFn = Callable[[dict[str, Any]], None]


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


def quiet_warnings() -> None:
    """TorchRec/DDP emit deprecation warnings per module on every rank; keep worker logs readable."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*autograd kernel was not registered.*")
    warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
    warnings.filterwarnings("ignore", message=".*is_fx_tracing.*")
    warnings.filterwarnings("ignore", message=".*NumPy array is not writable.*")


def _all_reduce(t: torch.Tensor, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
    dist.all_reduce(t, op=op)
    return t


# ---- steps -------------------------------------------------------------------------------------

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


def train_epoch(w: Worker, batches: Iterable[Mapping[str, np.ndarray]], epoch: int,
                state: LoopState) -> dict[str, Any]:
    """One epoch over this rank's shard; returns the epoch's metrics (all ranks together)."""
    w.profile.take(0.0)          # from zero: validation forwards do not count
    t0 = last_progress = time.perf_counter()
    loss_sum = torch.zeros((), dtype=torch.float64, device=w.device)
    seen = steps = 0
    w.sm.model.train()
    for batch in lockstep(w, batches, w.shard_steps):
        w.call("on_step", epoch=epoch + 1, step=state.global_step)
        loss = train_step(w, batch, state.global_step)
        loss_sum += loss.double() * batch.size
        seen += batch.size
        steps += 1
        state.global_step += 1
        now = time.perf_counter()
        if w.rank == 0 and w.progress and now - last_progress >= w.progress_every_s:
            last_progress = now
            w.progress({"kind": "progress", "epoch": epoch + 1, "step": state.global_step, "epoch_step": steps,
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
            "steps": steps, "global_step": state.global_step,
            "samples_per_s": round(samples / train_s, 1) if train_s > 0 else 0.0,
            "epoch_s": round(train_s, 3),
            "lr_multiplier": round(lr_multiplier(state.global_step, w.total_steps, w.params.final_lr_fraction), 4),
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


def selection_loss(metrics: Mapping[str, Any], metric: str) -> float:
    """What early stopping minimizes: the validation ``metric`` as a loss (training loss without
    a validation slice)."""
    if "valid_logloss" not in metrics:
        return float(metrics["loss"])
    ll, auc_ = float(metrics["valid_logloss"]), metrics.get("valid_auc")
    if metric == "logloss" or auc_ is None:
        return ll
    return -float(auc_) if metric == "auc" else ll - float(auc_)


def _log_epoch(w: Worker, metrics: dict[str, Any]) -> None:
    valid = (f" valid logloss {metrics['valid_logloss']:.5f} auc {metrics.get('valid_auc', float('nan')):.4f}"
             if "valid_logloss" in metrics else "")
    w.log(f"[train] epoch {metrics['epoch']}/{w.params.epochs} loss {metrics['loss']:.5f}{valid} "
          f"(best epoch {metrics['best_epoch']}) samples {metrics['samples']} steps/rank {metrics['steps']} "
          f"{metrics['samples_per_s']:.0f} samples/s train {metrics['epoch_s']:.1f}s "
          f"checkpoint {metrics['checkpoint_s']:.1f}s" + (" -> early stop" if metrics["stopped_early"] else ""))
    if w.progress:
        w.progress({"kind": "epoch", **metrics})


# ---- the loop ----------------------------------------------------------------------------------

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
    warm_start: Mapping[str, torch.Tensor] | None = None,
    shard_steps: int | None = None,
) -> WorkerSummary:
    """Train until the validation slice stops improving or the epoch budget is spent.

    Every rank must call this with the same params. Both learning rates decay linearly with the
    global step, from their start values to ``params.final_lr_fraction`` of them at
    ``params.epochs * steps_per_epoch`` steps (a function of the step, so a resumed run continues
    the same schedule); without ``steps_per_epoch`` they stay constant. ``shard_steps``: every
    rank's shard has exactly this many batches per epoch (``lockstep``: no collective per step).
    """
    w = setup_worker(params, feature_spec, device=device, local_world_size=local_world_size,
                     steps_per_epoch=steps_per_epoch, log=log, progress=progress,
                     progress_every_s=progress_every_s, callbacks=callbacks, id_counts=id_counts,
                     shard_steps=shard_steps)
    if warm_start is not None and not resume_dir:
        n = apply_warm_start(w.sm.model, warm_start)
        if w.rank == 0:
            log(f"[train] warm start: {n} tensors from the previous version")
    state = _resume(w, resume_dir)
    summary = WorkerSummary(rank=w.rank, start_epoch=state.epochs_done, epochs_done=state.epochs_done,
                            global_step=state.global_step, plan_summary=w.sm.plan_summary)
    while state.epochs_done < params.epochs and not state.stopped_early:
        epoch = state.epochs_done
        w.call("on_epoch_start", epoch=epoch + 1)
        metrics = train_epoch(w, batches(epoch), epoch, state)
        if valid_batches is not None:
            metrics.update(validate(w, valid_batches()))
        end_epoch(w, state, metrics, report)
        summary.history.append(metrics)
        if w.rank == 0:
            _log_epoch(w, metrics)
    summary.epochs_done, summary.global_step = state.epochs_done, state.global_step
    summary.best_epoch, summary.stopped_early = state.best_epoch, state.stopped_early
    return summary


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
