"""The Ray Train side of training: what ``TorchTrainer`` runs on every worker.

``train_loop_per_worker(config)`` adapts Ray (context, dataset shards, checkpoints, reports,
the driver's progress box) to ``train_loop.run_worker``, which needs only an initialised
``torch.distributed`` process group.

Config keys (all JSON-able except the progress box and the callbacks):

``params``           ``TrainingParams.model_dump(mode="json")``
``feature_spec``     ``dataclasses.asdict(FeatureSpec)``
``progress_box``     the driver's ``progress_box.ProgressBox`` actor or None; rank 0 puts
                     ``{"kind": ..., ...}`` records
``progress_every_s`` seconds between "progress" records (default 5)
``steps_per_epoch``  optimizer steps per epoch (the driver knows the row count), for the linear
                     learning-rate decay over the budget (``params.final_lr_fraction``)
``equal_shards``     true when every rank's shard has exactly ``steps_per_epoch`` batches (the
                     driver's equal split): the ranks need no per-step agreement (``lockstep``)
``shuffle_buffer``   rows of local shuffle buffer in ``iter_batches`` (default 0: none)
``id_counts``        ``{sparse column: float array [table rows]}``: id counts of the training rows
                     (see ``model.IdCounts``)
``has_validation``   true when the trainer was given validation datasets (``VALID_DATASET_NAME``)

Datasets: rank ``r`` reads its own shard, ``shard_name(DATASET_NAME, r)`` (and
``shard_name(VALID_DATASET_NAME, r)``), which the driver made and Ray Train hands over unsplit.
``warm_start``       an object ref of an earlier version's weights (``ray.put`` by the driver) or None
``callbacks``        objects with any of ``on_epoch_start(rank, epoch)`` /
                     ``on_step(rank, epoch, step)``: observers, and the way tests inject faults
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import numpy as np
import torch

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.model import feature_spec_from_dict
from ads_ranking_pipelines.training.quiet import quiet_warnings

PUT_TIMEOUT_S = 30.0
DATASET_NAME = "train"
VALID_DATASET_NAME = "valid"


def shard_name(dataset: str, rank: int) -> str:
    """The name of rank ``rank``'s part of ``dataset`` in the trainer's datasets."""
    return f"{dataset}_{rank}"


class BoxProgress:
    """Puts records in the driver's progress box without ever failing training: each put is
    one actor call, answered before the next record (a ``day_end`` is in the box before rank 0
    goes on), waited on for ``PUT_TIMEOUT_S`` at most."""

    def __init__(self, box: Any) -> None:
        self.box = box
        self.dropped = 0

    def __call__(self, record: dict[str, Any]) -> None:
        import ray

        try:
            if not ray.get(self.box.put_progress.remote(record), timeout=PUT_TIMEOUT_S):
                self.dropped += 1        # the box is full: progress is best effort
        except Exception:                # the driver went away, or its box is stuck
            self.dropped += 1


def train_loop_per_worker(config: dict[str, Any]) -> None:
    """Ray Train entry point (see module docstring for ``config``)."""
    import ray.train
    import ray.train.torch

    # Here, not at the top: the job driver imports this module only to hand Ray Train this
    # function, and the training loop imports TorchRec (~2 CPU-s per process; test_imports.py).
    from ads_ranking_pipelines.training.train_loop import run_worker

    quiet_warnings()
    params = TrainingParams.model_validate(config["params"])
    feature_spec = feature_spec_from_dict(config["feature_spec"])
    ctx = ray.train.get_context()
    device = worker_device(params)
    shuffle_buffer = int(config.get("shuffle_buffer") or 0) or None
    rank = ctx.get_world_rank()
    shard = ray.train.get_dataset_shard(shard_name(DATASET_NAME, rank))
    valid = (ray.train.get_dataset_shard(shard_name(VALID_DATASET_NAME, rank))
             if config.get("has_validation") else None)
    batches, valid_batches = shard_batches(shard, params, shuffle_buffer), valid_batches_of(valid)

    def report(metrics: dict[str, Any], ckpt_dir: str) -> None:
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(ckpt_dir))

    box = config.get("progress_box")
    kwargs = dict(device=device, batches=batches, report=report,
                  valid_batches=valid_batches,
                  progress=BoxProgress(box) if box is not None and rank == 0 else None,
                  progress_every_s=float(config.get("progress_every_s", 5.0)),
                  local_world_size=ctx.get_local_world_size(), steps_per_epoch=config.get("steps_per_epoch"),
                  shard_steps=config.get("steps_per_epoch") if config.get("equal_shards") else None,
                  log=lambda m: print(m, flush=True), callbacks=config.get("callbacks") or (),
                  id_counts=config.get("id_counts"),
                  warm_start=_warm_start_state(config.get("warm_start")))
    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        run_worker(params, feature_spec, **kwargs)
        return
    with checkpoint.as_directory() as resume_dir:
        run_worker(params, feature_spec, resume_dir=resume_dir, **kwargs)


def worker_device(params: TrainingParams) -> torch.device:
    """This worker's device (its GPU, set current, or the CPU), with the torch threads it may use."""
    import ray.train.torch

    torch.set_num_threads(max(1, int(params.worker_cpus)))
    if not params.uses_gpu:
        return torch.device("cpu")
    device = ray.train.torch.get_device()
    torch.cuda.set_device(device)
    return device


def shard_batches(shard: Any, params: TrainingParams, shuffle_buffer: int | None) -> Callable[[int], Iterable]:
    """epoch -> this rank's numpy batches of ``shard`` (a Ray ``DataIterator``), reshuffled locally
    with the epoch's seed."""
    def batches(epoch: int) -> Iterable[Mapping[str, np.ndarray]]:
        return shard.iter_batches(batch_size=params.batch_size, batch_format="numpy",
                                  drop_last=False, local_shuffle_buffer_size=shuffle_buffer,
                                  local_shuffle_seed=(params.seed + epoch) if shuffle_buffer else None)
    return batches


def valid_batches_of(valid: Any) -> Callable[[], Iterable] | None:
    """() -> the numpy batches of this rank's validation part (None without one)."""
    if valid is None:
        return None
    return lambda: valid.iter_batches(batch_size=8192, batch_format="numpy", drop_last=False)


def _warm_start_state(ref: Any) -> Mapping[str, torch.Tensor] | None:
    """The earlier version's weights, put in the object store once by the driver."""
    if ref is None:
        return None
    import ray

    return ray.get(ref)
