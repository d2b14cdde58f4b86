"""How DDP averages the gradients of the replicated (dense) parameters, chosen per backend.

gloo's all-reduce is latency-bound at our dense gradient's size (one DDP bucket of ~20k
floats), and gathering the bucket from every rank and summing it locally was about twice as
fast between 2 CPU ranks (``benchmarks/DESIGN_MEASUREMENTS.md``, gradient averaging). So on
gloo with at most :data:`GATHER_MAX_WORLD` ranks the bucket is gathered and summed locally;
every rank adds the same tensors in rank order, so every rank ends with the same average, as
an all-reduce guarantees. NCCL, and larger gloo groups (the gathered bytes grow with the
number of ranks), keep DDP's own all-reduce.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

# Ranks up to which gathering every rank's bucket beats gloo's all-reduce (measured at 2).
GATHER_MAX_WORLD = 4

# (process group, DDP GradBucket) -> future of the averaged bucket, as DDP's comm hooks are.
CommHook = Callable[[Any, Any], torch.futures.Future]


def gather_mean_hook(process_group, bucket):  # no annotations: DDP inspects them
    """The bucket's mean over the ranks: every rank's bucket gathered, summed in rank order."""
    group = process_group if process_group is not None else dist.group.WORLD
    world = dist.get_world_size(group)
    grads = bucket.buffer()
    gathered = torch.empty(world * grads.numel(), dtype=grads.dtype, device=grads.device)
    fut = dist.all_gather_into_tensor(gathered, grads, group=group, async_op=True).get_future()

    def mean(_: torch.futures.Future) -> torch.Tensor:
        return gathered.view(world, -1).sum(0).div_(world)

    return fut.then(mean)


def allreduce_mean_hook(process_group, bucket):  # no annotations: DDP inspects them
    """DDP's default: the bucket all-reduced and divided by the number of ranks."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    return allreduce_hook(process_group, bucket)


def choose(backend: str, world: int) -> CommHook:
    """Gather-and-sum on gloo with few ranks, DDP's all-reduce otherwise."""
    return gather_mean_hook if backend == "gloo" and world <= GATHER_MAX_WORLD else allreduce_mean_hook


def comm_hook_for(process_group: Any) -> CommHook:
    group = process_group if process_group is not None else dist.group.WORLD
    return choose(str(dist.get_backend(group)), dist.get_world_size(group))


def install(model: nn.Module, wrap: Callable[[CommHook], CommHook] | None = None) -> str | None:
    """Register the gradient averaging for ``model``'s DDP (``wrap`` may time it); the hook's
    name, or None when ``model`` has no DDP (one rank)."""
    ddp = next((m for m in model.modules() if isinstance(m, nn.parallel.DistributedDataParallel)), None)
    if ddp is None:
        return None
    hook = comm_hook_for(ddp.process_group)
    ddp.register_comm_hook(ddp.process_group, wrap(hook) if wrap is not None else hook)
    return hook.__name__
