"""The per-worker training loop: TorchRec DMP model, DCP checkpoints every epoch, resumable.

``train_loop_per_worker(config)`` is what Ray Train's ``TorchTrainer`` runs on every worker. It
adapts Ray (context, dataset shard, checkpoint, report) to :func:`run_worker`, which holds the
whole loop and needs only an initialised ``torch.distributed`` process group, so it can be tested
with plain ``torch.multiprocessing`` too.

Config keys (all JSON-able except the queue):

``params``         ``TrainingParams.model_dump(mode="json")``
``feature_spec``   ``dataclasses.asdict(FeatureSpec)``
``progress_queue`` a ``ray.util.queue.Queue`` or None; rank 0 puts ``{"kind": ..., ...}`` records
``progress_every_s`` seconds between "progress" records (default 5)
``steps_per_epoch`` expected optimizer steps per epoch (the driver knows the row count), for the
                   linear learning-rate decay (``params.final_lr_fraction``); absent: constant
``shuffle_buffer`` rows of local shuffle buffer in ``iter_batches`` (default 0: none)
``crash_once``     tests only: ``{"rank": r, "epoch": e, "marker": path}`` makes rank ``r`` kill its
                   own process (``os._exit``) when epoch ``e`` (1-based) starts, once (the marker
                   file records that it happened), like a lost worker node

Checkpoint layout (one directory per epoch; Ray Train merges the ranks' files into it):
``.metadata`` + ``__<rank>_0.distcp`` (DCP; model + optimizer state, embedding shards as written
by the rank that owns them) and ``train_state.json`` (rank 0: epochs done, global step, loss,
sharding plan, params, feature spec).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

import numpy as np
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.batches import make_batch
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.training.model import build_model, feature_spec_from_dict
from ads_ranking_pipelines.training.sharding import ShardedModel, shard_model
from ads_ranking_pipelines.training.warm_start import apply as apply_warm_start

TRAIN_STATE_FILE = "train_state.json"
DATASET_NAME = "train"

# (metrics, local checkpoint dir) -> None; called on every rank, once per epoch.
ReportFn = Callable[[dict[str, Any], str], None]
# epoch index (0-based) -> iterable of numpy batches {"dense", "sparse", "label"}
BatchesFn = Callable[[int], Iterable[Mapping[str, np.ndarray]]]
ProgressFn = Callable[[dict[str, Any]], None]


@dataclass
class WorkerSummary:
    rank: int
    start_epoch: int                 # 0-based index of the first epoch this call trained
    epochs_done: int                 # epochs completed in total (including resumed ones)
    global_step: int
    history: list[dict[str, Any]] = field(default_factory=list)
    plan_summary: dict[str, Any] = field(default_factory=dict)


def quiet_warnings() -> None:
    """TorchRec/DDP emit deprecation warnings per module on every rank; keep worker logs readable."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", message=".*autograd kernel was not registered.*")
    warnings.filterwarnings("ignore", message=".*torch.distributed is disabled.*")
    warnings.filterwarnings("ignore", message=".*is_fx_tracing.*")
    warnings.filterwarnings("ignore", message=".*NumPy array is not writable.*")


def checkpoint_state(sm: ShardedModel) -> dict[str, Any]:
    """The DCP state: model (sharded tables as ShardedTensor) and all optimizer state."""
    return {"model": sm.model.state_dict(), "optim": sm.optimizer.state_dict()}


def save_checkpoint(sm: ShardedModel, directory: str, train_state: dict[str, Any] | None) -> None:
    """Collective: every rank writes its own shards into ``directory`` (a local dir per rank)."""
    dcp.save(checkpoint_state(sm), checkpoint_id=directory)
    if train_state is not None:
        with open(os.path.join(directory, TRAIN_STATE_FILE), "w") as f:
            json.dump(train_state, f, indent=2, sort_keys=True, default=str)


def read_train_state(directory: str) -> dict[str, Any]:
    with open(os.path.join(directory, TRAIN_STATE_FILE)) as f:
        return json.load(f)


def load_checkpoint(sm: ShardedModel, directory: str) -> dict[str, Any]:
    """Collective: load model + optimizer state from a (merged) checkpoint dir; reshards as needed."""
    # Adam's state is lazy; create it (a zero-gradient step does not move the weights) so that
    # DCP has tensors to load into.
    sm.dense_optimizer.init_state()
    state = checkpoint_state(sm)
    dcp.load(state, checkpoint_id=directory)
    sm.model.load_state_dict(state["model"])
    sm.optimizer.load_state_dict(state["optim"])
    return read_train_state(directory)


def _all_reduce(t: torch.Tensor, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> torch.Tensor:
    dist.all_reduce(t, op=op)
    return t


def run_worker(
    params: TrainingParams,
    feature_spec: FeatureSpec,
    *,
    device: torch.device,
    batches: BatchesFn,
    report: ReportFn,
    resume_dir: str | None = None,
    progress: ProgressFn | None = None,
    progress_every_s: float = 5.0,
    local_world_size: int | None = None,
    log: Callable[[str], None] = print,
    on_epoch_start: Callable[[int], None] | None = None,
    steps_per_epoch: int | None = None,
    warm_start: Mapping[str, torch.Tensor] | None = None,
) -> WorkerSummary:
    """Train ``params.epochs`` epochs (minus those already in ``resume_dir``) on this rank.

    Both learning rates decay linearly with the global step, from their start values to
    ``params.final_lr_fraction`` of them at ``params.epochs * steps_per_epoch`` steps (they are a
    function of the step, so a resumed run continues the same schedule); without
    ``steps_per_epoch`` they stay constant.

    Every rank must call this with the same params. Ranks may get different numbers of batches:
    before each step all ranks agree (all-reduce MIN) whether every rank still has one, and stop
    together, so no collective ever waits for a rank that has run dry.
    """
    quiet_warnings()
    rank, world = dist.get_rank(), dist.get_world_size()
    comm_device = device if dist.get_backend() == "nccl" else torch.device("cpu")

    model = build_model(params, feature_spec, device=torch.device("meta"))
    torch.manual_seed(params.seed + rank)
    sm = shard_model(model, device=device, learning_rate=params.learning_rate,
                     embedding_learning_rate=params.effective_embedding_learning_rate,
                     embedding_eps=params.embedding_eps,
                     batch_size=params.batch_size, local_world_size=local_world_size)
    # start values of every param group (fused embedding groups and dense Adam), taken before
    # any checkpoint is loaded; the schedule scales them by lr_multiplier(global_step)
    base_lrs = [float(g["lr"]) for g in sm.optimizer.param_groups]
    total_steps = params.epochs * steps_per_epoch if steps_per_epoch else None
    if rank == 0:
        log(f"[train] sharding plan over {world} ranks:\n{sm.plan_text()}")
        if progress:
            progress({"kind": "sharding_plan", "world_size": world, "plan": json.dumps(sm.plan_summary)})

    start_epoch, global_step = 0, 0
    if warm_start is not None and not resume_dir:
        n = apply_warm_start(sm.model, warm_start)
        if rank == 0:
            log(f"[train] warm start: {n} tensors from the previous version")
    if resume_dir:
        state = load_checkpoint(sm, resume_dir)
        start_epoch, global_step = int(state["epochs_done"]), int(state["global_step"])
        if rank == 0:
            log(f"[train] resumed from {resume_dir}: {start_epoch} epoch(s) done, step {global_step}")
    if rank == 0 and progress:
        # one per worker-group start: the driver counts restarts and sees where each began
        progress({"kind": "started", "epochs_done": start_epoch, "global_step": global_step,
                  "resumed": bool(resume_dir), "world_size": world})

    summary = WorkerSummary(rank=rank, start_epoch=start_epoch, epochs_done=start_epoch,
                            global_step=global_step, plan_summary=sm.plan_summary)
    sparse_keys = list(feature_spec.sparse_columns)
    sm.model.train()

    for epoch in range(start_epoch, params.epochs):
        if on_epoch_start is not None:
            on_epoch_start(epoch + 1)
        t0 = time.perf_counter()
        last_progress = t0
        loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        seen = 0
        steps = 0
        it = iter(batches(epoch))
        while True:
            arrays = next(it, None)
            have = torch.tensor([0 if arrays is None or len(arrays["label"]) == 0 else 1],
                                dtype=torch.int32, device=comm_device)
            if int(_all_reduce(have, dist.ReduceOp.MIN).item()) == 0:
                break
            batch = make_batch(arrays, sparse_keys, device=device)
            lr_mult = lr_multiplier(global_step, total_steps, params.final_lr_fraction)
            set_learning_rates(sm, base_lrs, lr_mult)
            logits = sm.model(batch.dense, batch.sparse)
            loss = F.binary_cross_entropy_with_logits(logits, batch.label)
            sm.optimizer.zero_grad()     # the fused embedding optimizer picks up its lr here
            loss.backward()              # embedding rows are updated here (fused optimizer)
            sm.optimizer.step()          # dense Adam
            loss_sum += loss.detach().double() * batch.size
            seen += batch.size
            steps += 1
            global_step += 1
            now = time.perf_counter()
            if rank == 0 and progress and now - last_progress >= progress_every_s:
                last_progress = now
                progress({"kind": "progress", "epoch": epoch + 1, "step": global_step,
                          "epoch_step": steps, "loss": float(loss_sum.item() / max(seen, 1)),
                          "samples_per_s": round(seen * world / (now - t0), 1)})
        train_s = time.perf_counter() - t0
        totals = _all_reduce(torch.tensor([float(loss_sum.item()), float(seen), float(steps)],
                                          dtype=torch.float64, device=comm_device)).cpu()
        samples = int(totals[1].item())
        mean_loss = float(totals[0].item() / samples) if samples else float("nan")
        metrics = {
            "epoch": epoch + 1,
            "epochs": params.epochs,
            "loss": mean_loss,
            "samples": samples,
            "steps": steps,
            "global_step": global_step,
            "samples_per_s": round(samples / train_s, 1) if train_s > 0 else 0.0,
            "epoch_s": round(train_s, 3),
            "lr_multiplier": round(lr_multiplier(global_step, total_steps, params.final_lr_fraction), 4),
        }
        if samples == 0:
            raise RuntimeError(f"epoch {epoch + 1}: no training rows reached the workers")
        if not math.isfinite(mean_loss):
            raise FloatingPointError(f"epoch {epoch + 1}: loss is {mean_loss}")

        c0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=f"dlrm-ckpt-e{epoch + 1}-r{rank}-") as ckpt_dir:
            train_state = None
            if rank == 0:
                train_state = {
                    "epochs_done": epoch + 1, "global_step": global_step, "loss": mean_loss,
                    "world_size": world, "metrics": metrics, "sharding_plan": sm.plan_summary,
                    "params": params.model_dump(mode="json"),
                    "feature_spec": dataclasses.asdict(feature_spec),
                }
            save_checkpoint(sm, ckpt_dir, train_state)
            metrics["checkpoint_write_s"] = round(time.perf_counter() - c0, 3)
            metrics["checkpoint_bytes_rank"] = _dir_bytes(ckpt_dir)
            report(metrics, ckpt_dir)
        metrics["checkpoint_s"] = round(time.perf_counter() - c0, 3)
        summary.epochs_done = epoch + 1
        summary.global_step = global_step
        summary.history.append(metrics)
        if rank == 0:
            log(f"[train] epoch {epoch + 1}/{params.epochs} loss {mean_loss:.5f} "
                f"samples {samples} steps/rank {steps} {metrics['samples_per_s']:.0f} samples/s "
                f"train {train_s:.1f}s checkpoint {metrics['checkpoint_s']:.1f}s")
            if progress:
                progress({"kind": "epoch", **metrics})
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


def _dir_bytes(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))


class _QueueProgress:
    """Puts records on a ``ray.util.queue.Queue`` without ever blocking or failing training."""

    def __init__(self, queue: Any) -> None:
        self.queue = queue
        self.dropped = 0

    def __call__(self, record: dict[str, Any]) -> None:
        try:
            self.queue.put(record, block=False)
        except Exception:  # Full, or the driver went away: progress is best effort
            self.dropped += 1


def train_loop_per_worker(config: dict[str, Any]) -> None:
    """Ray Train entry point (see module docstring for ``config``)."""
    import ray.train
    import ray.train.torch

    quiet_warnings()
    params = TrainingParams.model_validate(config["params"])
    feature_spec = feature_spec_from_dict(config["feature_spec"])
    ctx = ray.train.get_context()
    if params.uses_gpu:
        device = ray.train.torch.get_device()
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    torch.set_num_threads(max(1, int(params.worker_cpus)))

    shard = ray.train.get_dataset_shard(DATASET_NAME)
    shuffle_buffer = int(config.get("shuffle_buffer") or 0) or None

    def batches(epoch: int) -> Iterable[Mapping[str, np.ndarray]]:
        return shard.iter_batches(batch_size=params.batch_size, batch_format="numpy",
                                  drop_last=False, local_shuffle_buffer_size=shuffle_buffer,
                                  local_shuffle_seed=(params.seed + epoch) if shuffle_buffer else None)

    def report(metrics: dict[str, Any], ckpt_dir: str) -> None:
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(ckpt_dir))

    queue = config.get("progress_queue")
    progress = _QueueProgress(queue) if queue is not None and ctx.get_world_rank() == 0 else None

    checkpoint = ray.train.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as resume_dir:
            _run(params, feature_spec, device, batches, report, resume_dir, progress, config, ctx)
    else:
        _run(params, feature_spec, device, batches, report, None, progress, config, ctx)


def _warm_start_state(ref: Any) -> Mapping[str, torch.Tensor] | None:
    """The earlier version's weights, put in the object store once by the driver."""
    if ref is None:
        return None
    import ray

    return ray.get(ref)


def _crash_hook(spec: Mapping[str, Any] | None, rank: int) -> Callable[[int], None] | None:
    if not spec or int(spec["rank"]) != rank:
        return None

    def hook(epoch: int) -> None:
        if epoch == int(spec["epoch"]) and not os.path.exists(spec["marker"]):
            with open(spec["marker"], "w") as f:
                f.write(f"rank {rank} exited at the start of epoch {epoch}\n")
            print(f"[train] crash_once: rank {rank} exits at the start of epoch {epoch}", flush=True)
            os._exit(1)
    return hook


def _run(params, feature_spec, device, batches, report, resume_dir, progress, config, ctx) -> None:
    run_worker(params, feature_spec, device=device, batches=batches, report=report,
               resume_dir=resume_dir, progress=progress,
               progress_every_s=float(config.get("progress_every_s", 5.0)),
               local_world_size=ctx.get_local_world_size(),
               steps_per_epoch=config.get("steps_per_epoch"),
               warm_start=_warm_start_state(config.get("warm_start")),
               log=lambda m: print(m, flush=True),
               on_epoch_start=_crash_hook(config.get("crash_once"), ctx.get_world_rank()))
