"""Every rank's batches of one pass, stopping together: no collective may wait for a rank that ran dry.

Two ways to agree on the number of steps:

* **known in advance** (``steps``): the driver deals the training set out in equal shards
  (``window.rank_parts``), so every rank has the same number of batches per epoch and the
  driver knows it. No collective per step; a shard that does not have exactly ``steps``
  batches fails the attempt at once, naming both counts (Ray Train ends the whole group).
* **agreed each step** (``steps=None``): before each step the ranks all-reduce MIN whether each
  still has a batch (a tiny collective per step: for shards of unknown or unequal length).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ads_ranking_pipelines.training.batches import Batch, make_batch


def _empty(arrays: Mapping[str, np.ndarray] | None) -> bool:
    return arrays is None or len(arrays["label"]) == 0


def counted(w: Any, batches: Iterable[Mapping[str, np.ndarray]], steps: int) -> Iterator[Batch]:
    """Exactly ``steps`` batches of this rank's equal shard (``w`` is a ``worker.Worker``)."""
    it, phase = iter(batches), w.profile.phase
    for i in range(steps):
        with phase("input_wait"):
            arrays = next(it, None)
        if _empty(arrays):
            raise RuntimeError(f"rank {w.rank}: its shard ended after {i} batches, but every shard should have "
                               f"{steps} (equal shards of the training set); the ranks would fall out of step")
        with phase("to_tensors"):
            batch = make_batch(arrays, w.sparse_keys, device=w.device)
        yield batch
    if not _empty(next(it, None)):
        raise RuntimeError(f"rank {w.rank}: its shard has more than the {steps} batches every shard should have "
                           "(equal shards of the training set); the ranks would fall out of step")


def agreed(w: Any, batches: Iterable[Mapping[str, np.ndarray]]) -> Iterator[Batch]:
    """This rank's batches for as long as *every* rank still has one (one all-reduce per step)."""
    it, phase = iter(batches), w.profile.phase
    while True:
        with phase("input_wait"):
            arrays = next(it, None)
        with phase("batch_allreduce"):
            have = torch.tensor([0 if _empty(arrays) else 1], dtype=torch.int32, device=w.comm_device)
            dist.all_reduce(have, op=dist.ReduceOp.MIN)
            if int(have.item()) == 0:
                return
        with phase("to_tensors"):
            batch = make_batch(arrays, w.sparse_keys, device=w.device)
        yield batch


def lockstep(w: Any, batches: Iterable[Mapping[str, np.ndarray]], steps: int | None = None) -> Iterator[Batch]:
    """This rank's batches, every rank taking the same number: ``steps`` if known, else agreed per step."""
    return counted(w, batches, steps) if steps is not None else agreed(w, batches)
