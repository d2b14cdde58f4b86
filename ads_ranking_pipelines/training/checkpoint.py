"""Per-epoch training checkpoints: write, load and read back the loop's state.

Layout (one directory per epoch; Ray Train merges the ranks' files into it):
``.metadata`` + ``__<rank>_0.distcp`` (DCP; model + optimizer state, embedding shards as written
by the rank that owns them) and ``train_state.json`` (rank 0: loop state, metrics, sharding
plan, params, feature spec).

:func:`save_checkpoint` and :func:`load_checkpoint` are collectives (every rank calls them);
:func:`read_train_state` reads the JSON alone, e.g. in the driver choosing the best epoch.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import torch.distributed.checkpoint as dcp

if TYPE_CHECKING:
    from ads_ranking_pipelines.training.sharding import ShardedModel

TRAIN_STATE_FILE = "train_state.json"


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


def checkpoint_bytes(directory: str) -> int:
    """Bytes of the files in this rank's checkpoint ``directory``."""
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
