"""Shard a model built by ``model.py`` with TorchRec ``DistributedModelParallel``.

* The embedding tables are planned by ``EmbeddingShardingPlanner`` over a ``Topology`` of the
  process group (``compute_device`` "cpu" or "cuda"; on CPU fbgemm offers table-wise and
  column-wise, on GPU also row-wise and friends). ``collective_plan`` makes rank 0 plan and
  broadcast, so every rank shards identically.
* The embedding optimizer is fused into the backward pass (``apply_optimizer_in_backward``):
  fbgemm updates only the looked-up rows, inside the backward kernel; no dense gradient for the
  tables is ever materialised. Row-wise Adagrad by default, with its own learning rate and
  ``eps`` (see ``TrainingParams.embedding_eps``: the denominator floor that keeps rarely seen
  rows from taking full-size steps). Weight decay is not offered: fbgemm's CPU kernel of
  row-wise Adagrad ignores ``weight_decay`` (checked with fbgemm-gpu-cpu 1.8), so it would
  regularize on GPU only.
* Everything else (MLPs) is replicated and wrapped in DDP by DMP; those parameters get Adam via
  a ``KeyedOptimizerWrapper``. ``CombinedOptimizer`` joins the two, so one ``state_dict`` covers
  all optimizer state (keys are parameter FQNs, which is what DCP needs).

Requires an initialised default process group (or one passed in).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.model_parallel import DistributedModelParallel
from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
from torchrec.distributed.types import ShardingEnv, ShardingPlan
from torchrec.optim.apply_optimizer_in_backward import apply_optimizer_in_backward
from torchrec.optim.keyed import CombinedOptimizer, KeyedOptimizerWrapper
from torchrec.optim.optimizers import in_backward_optimizer_filter
from torchrec.optim.rowwise_adagrad import RowWiseAdagrad

from ads_ranking_pipelines.training import grad_sync
from ads_ranking_pipelines.training.plan_summary import format_plan

EMBEDDING_OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "rowwise_adagrad": RowWiseAdagrad,
    "adagrad": torch.optim.Adagrad,
    "sgd": torch.optim.SGD,
}


@dataclass
class ShardedModel:
    model: DistributedModelParallel
    optimizer: CombinedOptimizer          # fused embedding optimizer + dense Adam
    dense_optimizer: KeyedOptimizerWrapper
    plan: ShardingPlan
    plan_summary: dict[str, dict[str, Any]]

    def plan_text(self) -> str:
        return format_plan(self.plan_summary)


def compute_device_type(device: torch.device) -> str:
    return "cuda" if device.type == "cuda" else "cpu"


def shard_model(
    model: nn.Module,
    *,
    device: torch.device,
    learning_rate: float,
    embedding_learning_rate: float | None = None,
    embedding_optimizer: str = "rowwise_adagrad",
    embedding_eps: float = 1e-8,
    dense_weight_decay: float = 0.0,
    batch_size: int | None = None,
    local_world_size: int | None = None,
    process_group: dist.ProcessGroup | None = None,
    plan: ShardingPlan | None = None,
    comm_hook_wrap: Callable[[Any], Any] | None = None,
) -> ShardedModel:
    """Wrap ``model`` (ideally built on the meta device) in DMP and build its optimizers.

    Must be called on every rank of the process group with the same arguments. DDP averages
    the dense gradients with ``grad_sync``'s hook for the backend (``comm_hook_wrap`` may wrap
    it, e.g. to time it).
    """
    pg = process_group if process_group is not None else dist.GroupMember.WORLD
    if pg is None:
        raise RuntimeError("shard_model needs an initialised torch.distributed process group")
    world_size = dist.get_world_size(pg)
    emb_lr = embedding_learning_rate if embedding_learning_rate is not None else learning_rate
    try:
        emb_opt_cls = EMBEDDING_OPTIMIZERS[embedding_optimizer]
    except KeyError:
        raise ValueError(f"unknown embedding optimizer {embedding_optimizer!r}; "
                         f"one of {sorted(EMBEDDING_OPTIMIZERS)}") from None

    # Tell the sharder which optimizer to fuse into the backward kernels of the tables.
    ebc_params = [p for n, p in model.named_parameters() if _is_embedding_param(n)]
    opt_kwargs: dict[str, Any] = {"lr": emb_lr}
    if emb_opt_cls is not torch.optim.SGD:
        opt_kwargs["eps"] = float(embedding_eps)
    apply_optimizer_in_backward(emb_opt_cls, ebc_params, opt_kwargs)

    sharders = [EmbeddingBagCollectionSharder()]
    if plan is None:
        planner = EmbeddingShardingPlanner(
            topology=Topology(
                world_size=world_size,
                local_world_size=local_world_size or world_size,
                compute_device=compute_device_type(device),
            ),
            batch_size=batch_size,
            debug=False,
        )
        plan = planner.collective_plan(model, sharders, pg)

    dmp = DistributedModelParallel(
        module=model,
        env=ShardingEnv.from_process_group(pg),
        device=device,
        plan=plan,
        sharders=sharders,
    )
    grad_sync.install(dmp, comm_hook_wrap)
    dense_params = dict(in_backward_optimizer_filter(dmp.named_parameters()))
    dense_opt = KeyedOptimizerWrapper(
        dense_params, lambda ps: torch.optim.AdamW(ps, lr=learning_rate, weight_decay=dense_weight_decay))
    optimizer = CombinedOptimizer([("fused", dmp.fused_optimizer), ("dense", dense_opt)])
    return ShardedModel(model=dmp, optimizer=optimizer, dense_optimizer=dense_opt, plan=plan,
                        plan_summary=summarize_plan(plan))


def _is_embedding_param(name: str) -> bool:
    return name.startswith("ebc.")


def summarize_plan(plan: ShardingPlan) -> dict[str, dict[str, Any]]:
    """``{table: {"module", "sharding_type", "compute_kernel", "ranks", "shards": [...]}}``.

    ``shards`` lists ``{"rank", "offsets", "sizes"}`` per shard (rows x columns of the table).
    """
    out: dict[str, dict[str, Any]] = {}
    for module_path, module_plan in sorted(plan.plan.items()):
        for table, ps in sorted(module_plan.items()):   # type: ignore[union-attr]
            shards = []
            spec = getattr(ps, "sharding_spec", None)
            for md in getattr(spec, "shards", None) or []:
                placement = str(md.placement)            # e.g. "rank:1/cpu"
                rank = int(placement.split("rank:")[1].split("/")[0]) if "rank:" in placement else None
                shards.append({"rank": rank, "offsets": list(md.shard_offsets),
                               "sizes": list(md.shard_sizes)})
            ranks = sorted({s["rank"] for s in shards if s["rank"] is not None}) or list(ps.ranks or [])
            out[table] = {
                "module": module_path,
                "sharding_type": str(ps.sharding_type),
                "compute_kernel": str(ps.compute_kernel),
                "ranks": ranks,
                "shards": shards,
            }
    return out
