"""Warm start: a new version starts from an earlier version's weights instead of a random init.

The driver reads the earlier version's plain (unsharded) ``state_dict`` and checks that it fits
the model about to be trained (same keys and shapes; a changed architecture starts cold and
says why). Each worker then copies, for every entry of its sharded model's ``state_dict``, the
slice it holds: the whole tensor for replicated (dense) parameters, its shards' rows/columns
for sharded embedding tables. Optimizer state starts fresh; a resumed checkpoint wins over a
warm start.
"""

from __future__ import annotations

import io
from typing import Any, Callable, Mapping

import torch
from torch import nn

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.training.model import build_model

WEIGHTS_FILE = "weights.pt"


def read_weights(version_uri: str) -> dict[str, torch.Tensor]:
    data = fs.read_bytes(fs.join(fs.normalize(version_uri), WEIGHTS_FILE))
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def incompatibility(state: Mapping[str, torch.Tensor], model: nn.Module) -> str | None:
    """Why ``state`` cannot initialize ``model`` (None if it can)."""
    own = model.state_dict()
    missing = sorted(set(own) - set(state))
    extra = sorted(set(state) - set(own))
    if missing or extra:
        return f"parameters differ (missing {missing[:3]}, unexpected {extra[:3]})"
    for key, target in own.items():
        if tuple(state[key].shape) != tuple(target.shape):
            return f"{key} has shape {tuple(state[key].shape)}, the new model {tuple(target.shape)}"
    return None


def weights_for(version_uri: str | None, params: TrainingParams, feature_spec: FeatureSpec,
                log: Callable[[str], None]) -> dict[str, torch.Tensor] | None:
    """The weights of the version at ``version_uri`` when they fit the model of ``params`` and
    ``feature_spec`` (checked against its plain-tables build on ``meta``: the same state dict,
    and no TorchRec in the driver), else None, saying why in ``log``."""
    if not version_uri:
        return None
    state = read_weights(version_uri)
    why = incompatibility(state, build_model(params, feature_spec, device=torch.device("meta"), plain_tables=True))
    if why:
        log(f"warm start from {version_uri} skipped, training from scratch: {why}")
        return None
    log(f"warm start from {version_uri}")
    return state


def _local_slices(target: Any) -> list[tuple[torch.Tensor, tuple[slice, ...]]]:
    """(local tensor, slice of the full tensor it holds) for a plain, sharded or DTensor entry."""
    from torch.distributed._shard.sharded_tensor import ShardedTensor

    if isinstance(target, ShardedTensor):
        return [(s.tensor, tuple(slice(o, o + n) for o, n in zip(s.metadata.shard_offsets, s.metadata.shard_sizes)))
                for s in target.local_shards()]
    try:
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor._utils import compute_local_shape_and_global_offset
    except ImportError:  # pragma: no cover - older torch
        DTensor = None
    if DTensor is not None and isinstance(target, DTensor):
        shape, offset = compute_local_shape_and_global_offset(target.shape, target.device_mesh, target.placements)
        return [(target.to_local(), tuple(slice(o, o + n) for o, n in zip(offset, shape)))]
    return [(target, tuple(slice(None) for _ in target.shape))]


@torch.no_grad()
def apply(model: nn.Module, state: Mapping[str, torch.Tensor]) -> int:
    """Copy ``state`` (plain full tensors) into ``model`` (possibly sharded); returns entries set."""
    own = model.state_dict()
    for key, target in own.items():
        for local, where in _local_slices(target):
            local.copy_(state[key][where].to(local.device, local.dtype))
    model.load_state_dict(own)
    return len(own)


def _bounds(local: torch.Tensor, where: tuple[slice, ...]) -> tuple[Any, ...]:
    """Where a local slice lies in the full tensor, and its shape: what a kept slice must match."""
    return tuple((s.start, s.stop) for s in where), tuple(local.shape)


class LocalWeights:
    """One rank's slices of a model's weights, kept in memory (the best epoch of a range's day):
    the next day's model on the same worker group, sharded the same way, starts from them
    without reading the version back from storage."""

    def __init__(self, model: nn.Module) -> None:
        with torch.no_grad():
            self.slices = {key: {_bounds(local, where): local.detach().clone() for local, where in _local_slices(target)}
                           for key, target in model.state_dict().items()}

    @torch.no_grad()
    def apply(self, model: nn.Module) -> int:
        """Copy the kept slices into ``model``; returns entries set. A model sharded differently
        (a slice this rank did not keep) is an error naming the entry."""
        own = model.state_dict()
        for key, target in own.items():
            for local, where in _local_slices(target):
                kept = self.slices.get(key, {}).get(_bounds(local, where))
                if kept is None:
                    raise ValueError(f"warm start in memory: {key} slice {_bounds(local, where)} was not kept by this "
                                     f"rank (kept: {sorted(self.slices.get(key, {}))})")
                local.copy_(kept.to(local.device, local.dtype))
        model.load_state_dict(own)
        return len(own)
