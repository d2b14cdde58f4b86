"""Functions run on each rank of a gloo group by test_sharding.py (must be importable by name)."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from ads_ranking_pipelines.training.batches import make_batch
from ads_ranking_pipelines.training.dense_norm import sync_dense_statistics
from ads_ranking_pipelines.training.model import build_model
from ads_ranking_pipelines.training.sharding import shard_model
from ads_ranking_pipelines.training.checkpoint import load_checkpoint, read_train_state, save_checkpoint
from ads_ranking_pipelines.training.train_loop import run_worker
from ads_ranking_pipelines.training.train_step import set_learning_rates
from ads_ranking_pipelines.training.quiet import quiet_warnings

from .toy import tiny_params, tiny_spec, toy_arrays


def _batches_of(data: dict, size: int = 64):
    """``data`` (arrays of one length) in consecutive batches of ``size`` rows."""
    for lo in range(0, len(data["label"]), size):
        yield {k: v[lo:lo + size] for k, v in data.items()}


def _local_tensors(state: dict) -> dict[str, torch.Tensor]:
    out = {}
    for k, v in state.items():
        if hasattr(v, "local_shards"):
            shards = v.local_shards()
            if shards:
                out[k] = shards[0].tensor.detach().clone()
        elif isinstance(v, torch.Tensor):
            out[k] = v.detach().clone()
    return out


def _eval_logits(sm, spec) -> torch.Tensor:
    b = make_batch(toy_arrays(128, spec, seed=99), spec.sparse_columns)
    sm.model.eval()
    with torch.no_grad():
        out = sm.model(b.dense, b.sparse)
    sm.model.train()
    return out


def _step(sm, b) -> float:
    loss = F.binary_cross_entropy_with_logits(sm.model(b.dense, b.sparse), b.label)
    sm.optimizer.zero_grad()
    loss.backward()
    sm.optimizer.step()
    return float(loss.item())


def train_save_and_reload(rank: int, world: int, out_dir: str) -> None:
    quiet_warnings()
    params, spec = tiny_params(), tiny_spec()
    sm = shard_model(build_model(params, spec, "meta"), device=torch.device("cpu"),
                     learning_rate=params.learning_rate, batch_size=params.batch_size)
    before = _local_tensors(sm.model.state_dict())
    data = toy_arrays(64 * 40, spec, seed=10 + rank)       # each rank its own rows
    losses = []
    for epoch in range(2):
        for lo in range(0, len(data["label"]), 64):
            losses.append(_step(sm, make_batch({k: v[lo:lo + 64] for k, v in data.items()},
                                               spec.sparse_columns)))
        sync_dense_statistics(sm.model)                     # as the training loop does at epoch end
    after = _local_tensors(sm.model.state_dict())
    changed = {k: float((after[k] - before[k]).abs().sum()) for k in after}
    logits = _eval_logits(sm, spec)

    local = os.path.join(out_dir, f"local_r{rank}")
    os.makedirs(local)
    save_checkpoint(sm, local, {"epochs_done": 2, "global_step": len(losses)} if rank == 0 else None)
    merged = os.path.join(out_dir, "merged")                # what Ray Train does with the ranks' dirs
    os.makedirs(merged, exist_ok=True)
    for f in os.listdir(local):
        shutil.copy(os.path.join(local, f), merged)
    dist.barrier()

    # a fresh sharded model loaded from the checkpoint behaves exactly like the trained one
    sm2 = shard_model(build_model(params.model_copy(update={"seed": 1234}), spec, "meta"),
                      device=torch.device("cpu"), learning_rate=params.learning_rate,
                      batch_size=params.batch_size)
    fresh_logits = _eval_logits(sm2, spec)
    state = load_checkpoint(sm2, merged)
    reloaded_logits = _eval_logits(sm2, spec)
    # ... including optimizer state: one more identical step keeps them identical
    b = make_batch(toy_arrays(64, spec, seed=500 + rank), spec.sparse_columns)
    l1, l2 = _step(sm, b), _step(sm2, b)
    after_step_1, after_step_2 = _eval_logits(sm, spec), _eval_logits(sm2, spec)

    torch.save({"logits": logits, "fresh": fresh_logits, "reloaded": reloaded_logits,
                "after_step": (after_step_1, after_step_2), "step_loss": (l1, l2)},
               os.path.join(out_dir, f"result_r{rank}.pt"))
    with open(os.path.join(out_dir, f"result_r{rank}.json"), "w") as f:
        json.dump({"losses": losses, "changed": changed, "state": state,
                   "plan": sm.plan_summary}, f)


def _fbgemm_modules(sm) -> list:
    """The fbgemm TBE modules holding this rank's tables (sharded modules keep them in a list)."""
    return [sub._emb_module for m in sm.model.modules() for lookup in getattr(m, "_lookups", [])
            for sub in lookup.modules() if hasattr(sub, "_emb_module")]


def embedding_optimizer_settings(rank: int, world: int, out_dir: str) -> None:
    """Embedding lr/eps reach fbgemm; set_learning_rates moves the fused lr; norm stats agree."""
    quiet_warnings()
    params, spec = tiny_params(embedding_learning_rate=0.2, embedding_eps=0.03), tiny_spec()
    sm = shard_model(build_model(params, spec, "meta"), device=torch.device("cpu"),
                     learning_rate=params.learning_rate,
                     embedding_learning_rate=params.effective_embedding_learning_rate,
                     embedding_eps=params.embedding_eps, batch_size=params.batch_size)
    mods = _fbgemm_modules(sm)
    before = [(m.get_learning_rate(), m.optimizer_args.eps) for m in mods]
    base = [float(g["lr"]) for g in sm.optimizer.param_groups]
    set_learning_rates(sm, base, 0.25)
    data = toy_arrays(64 * 3, spec, seed=30 + rank)        # each rank its own rows
    for lo in range(0, len(data["label"]), 64):
        _step(sm, make_batch({k: v[lo:lo + 64] for k, v in data.items()}, spec.sparse_columns))
    sync_dense_statistics(sm.model)
    after = [m.get_learning_rate() for m in mods]
    dense_lrs = [float(g["lr"]) for g in sm.dense_optimizer.param_groups]
    norm = {k: v.tolist() for k, v in _local_tensors(sm.model.state_dict()).items()
            if "dense_norm" in k}
    with open(os.path.join(out_dir, f"opt_r{rank}.json"), "w") as f:
        json.dump({"before": before, "after": after, "dense_lrs": dense_lrs, "norm": norm}, f)


def run_worker_then_resume(rank: int, world: int, out_dir: str) -> None:
    """run_worker for 1 epoch, 'Ray-merge' its checkpoint, then resume to 2 epochs."""
    quiet_warnings()
    spec = tiny_spec()
    n_batches = 10 if rank == 0 else 7                      # uneven shards
    data = toy_arrays(64 * n_batches, spec, seed=20 + rank)

    def batches(epoch):
        return _batches_of(data)

    reports = []

    def report(metrics, ckpt_dir):
        merged = os.path.join(out_dir, f"ckpt_epoch{metrics['epoch']}")
        os.makedirs(merged, exist_ok=True)
        for f in os.listdir(ckpt_dir):
            shutil.copy(os.path.join(ckpt_dir, f), merged)
        reports.append(dict(metrics))
        dist.barrier()

    progress = []
    first = run_worker(tiny_params(epochs=1), spec, device=torch.device("cpu"), batches=batches,
                       report=report, progress=progress.append if rank == 0 else None,
                       progress_every_s=0.0, log=lambda m: None, steps_per_epoch=7)
    second = run_worker(tiny_params(epochs=2), spec, device=torch.device("cpu"), batches=batches,
                        report=report, resume_dir=os.path.join(out_dir, "ckpt_epoch1"),
                        progress=progress.append if rank == 0 else None, log=lambda m: None,
                        steps_per_epoch=7)
    with open(os.path.join(out_dir, f"resume_r{rank}.json"), "w") as f:
        json.dump({"first": {"start": first.start_epoch, "done": first.epochs_done,
                             "history": first.history, "step": first.global_step},
                   "second": {"start": second.start_epoch, "done": second.epochs_done,
                              "history": second.history, "step": second.global_step},
                   "reports": reports, "progress": progress}, f, default=str)


class EpochRecorder:
    """A train-loop callback that records the epochs it saw start."""

    def __init__(self):
        self.epochs = []

    def on_epoch_start(self, rank, epoch):
        self.epochs.append(epoch)


def early_stopping(rank: int, world: int, out_dir: str, patience: int) -> None:
    """Labels of pure noise: the model can only memorize, so validation loss soon gets worse."""
    quiet_warnings()
    spec = tiny_spec()
    rng = np.random.default_rng(100 + rank)
    data = toy_arrays(64 * 6, spec, seed=30 + rank)
    data["label"] = (rng.random(len(data["label"])) < 0.5).astype(np.float32)
    valid = toy_arrays(64 * 2, spec, seed=40 + rank)
    valid["label"] = (rng.random(len(valid["label"])) < 0.5).astype(np.float32)

    def batches(epoch):
        return _batches_of(data)

    def valid_batches():
        yield valid

    reports = []

    def report(metrics, ckpt_dir):
        reports.append({**metrics, "state": read_train_state(ckpt_dir) if rank == 0 else None})

    recorder = EpochRecorder()
    summary = run_worker(tiny_params(epochs=30, early_stopping_patience=patience, early_stopping_min_steps=0,
                                     learning_rate=0.05,
                                     embedding_learning_rate=0.5),
                         spec, device=torch.device("cpu"), batches=batches, report=report,
                         valid_batches=valid_batches, log=lambda m: None, callbacks=[recorder])
    with open(os.path.join(out_dir, f"early_r{rank}_p{patience}.json"), "w") as f:
        json.dump({"done": summary.epochs_done, "best": summary.best_epoch, "stopped": summary.stopped_early,
                   "reports": reports, "epochs_started": recorder.epochs}, f, default=str)


def profiled_epochs(rank: int, world: int, out_dir: str, profile: bool) -> None:
    """Two epochs of run_worker with or without ``profile_steps``; rank 0 writes its epoch metrics."""
    quiet_warnings()
    spec = tiny_spec()
    data = toy_arrays(64 * 5, spec, seed=50 + rank)

    def batches(epoch):
        return _batches_of(data)

    def valid_batches():
        yield toy_arrays(64, spec, seed=60 + rank)

    summary = run_worker(tiny_params(epochs=2, early_stopping_patience=0, profile_steps=profile), spec,
                         device=torch.device("cpu"), batches=batches, report=lambda m, d: None,
                         valid_batches=valid_batches, log=lambda m: None)
    if rank == 0:
        with open(os.path.join(out_dir, f"profile_{profile}.json"), "w") as f:
            json.dump(summary.history, f, default=str)


def equal_shards(rank: int, world: int, out_dir: str, shard_steps) -> None:
    """Two epochs over equal shards (5 batches per rank), with the step count known or agreed per step."""
    quiet_warnings()
    spec = tiny_spec()
    data = toy_arrays(64 * 5, spec, seed=70 + rank)

    def batches(epoch):
        return _batches_of(data)

    summary = run_worker(tiny_params(epochs=2, early_stopping_patience=0, profile_steps=True), spec,
                         device=torch.device("cpu"), batches=batches, report=lambda m, d: None,
                         log=lambda m: None, steps_per_epoch=5, shard_steps=shard_steps)
    if rank == 0:
        with open(os.path.join(out_dir, f"equal_{shard_steps}.json"), "w") as f:
            json.dump(summary.history, f, default=str)
