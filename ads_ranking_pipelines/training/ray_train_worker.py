"""The Ray Train worker's side of training, besides the loop itself (``train_loop``): this
worker's device and torch threads, its shard's batches per epoch and its validation batches,
the earlier version's weights (warm start) and the progress records rank 0 puts in the
driver's box. ``ray_train_days.train_days_per_worker`` (what ``TorchTrainer`` runs on every
worker) adapts Ray's context with them to ``train_loop.run_worker``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

import numpy as np
import torch

from ads_ranking_pipelines.config.training import TrainingParams

PUT_TIMEOUT_S = 30.0


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
