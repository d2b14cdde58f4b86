"""DDP's gradient averaging: gathered and summed on small gloo groups, the same mean as an all-reduce."""

from __future__ import annotations

import json
import os

import pytest
import torch
import torch.distributed as dist
from torch import nn

from ads_ranking_pipelines.training import grad_sync

from .dist import run_on_gloo_group


@pytest.mark.parametrize(("backend", "world", "hook"), [
    ("gloo", 2, grad_sync.gather_mean_hook),
    ("gloo", grad_sync.GATHER_MAX_WORLD, grad_sync.gather_mean_hook),
    ("gloo", grad_sync.GATHER_MAX_WORLD + 1, grad_sync.allreduce_mean_hook),     # gathered bytes grow with ranks
    ("nccl", 2, grad_sync.allreduce_mean_hook),
])
def test_the_averaging_is_chosen_by_backend_and_ranks(backend, world, hook):
    assert grad_sync.choose(backend, world) is hook


def _grads(model: nn.Module) -> list[torch.Tensor]:
    return [p.grad.detach().clone() for p in model.parameters()]


def ddp_mean_grads(rank: int, world: int, out_dir: str) -> None:
    torch.manual_seed(0)
    local = nn.Sequential(nn.Linear(16, 33), nn.ReLU(), nn.Linear(33, 1))       # odd sizes: no even split
    ddp = nn.parallel.DistributedDataParallel(_copy(local))
    name = grad_sync.install(ddp)
    torch.manual_seed(100 + rank)                                                # each rank its own batch
    x, y = torch.randn(64, 16), torch.randn(64, 1)
    nn.functional.mse_loss(local(x), y).backward()                               # this rank's own gradient
    nn.functional.mse_loss(ddp(x), y).backward()                                 # averaged by the hook
    mine = torch.cat([g.flatten() for g in _grads(local)])
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    expected = torch.stack(every).mean(0)
    got = torch.cat([g.flatten() for g in _grads(ddp.module)])
    with open(os.path.join(out_dir, f"r{rank}.json"), "w") as f:
        json.dump({"hook": name, "max_err": float((got - expected).abs().max()),
                   "got": got.tolist(), "own_differs": bool((mine - expected).abs().max() > 1e-6)}, f)


def _copy(module: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(module)


@pytest.mark.slow
def test_gathered_gradients_are_the_ranks_mean_and_the_same_on_every_rank(tmp_path):
    run_on_gloo_group(ddp_mean_grads, str(tmp_path))
    r0, r1 = (json.loads((tmp_path / f"r{r}.json").read_text()) for r in range(2))
    assert r0["hook"] == r1["hook"] == "gather_mean_hook"
    assert r0["own_differs"] and r1["own_differs"]              # the ranks' own gradients differed
    assert r0["max_err"] < 1e-6 and r1["max_err"] < 1e-6
    assert r0["got"] == r1["got"]                               # bit for bit the same on both ranks
