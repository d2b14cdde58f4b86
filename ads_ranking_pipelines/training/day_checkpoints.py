"""A range's per-epoch checkpoints, kept in each day's own run folder of the Ray storage.

One worker group trains every day of a range (``ray_train_days``), so Ray Train's one run
folder per ``fit()`` cannot tell the days apart; the workers write each epoch's checkpoint
themselves to ``<ray storage>/<day's run_name>/checkpoint_<UTC time>_e<epoch:06d>/`` (named
like Ray Train's ``checkpoint_<time>`` folders, so in epoch order), the layout of
``checkpoint.py`` (the DCP files of every rank, then ``train_state.json`` by rank 0 once all
ranks' files are there: a folder without it is incomplete and never read). The folder of a day
is the same for a restarted worker group and for a re-launched job of the same days, so both
resume each day where its checkpoints stop. Per day the latest and the best epoch are kept.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import torch.distributed as dist

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.training.checkpoint import TRAIN_STATE_FILE

PREFIX = "checkpoint_"


def new_epoch_dir(run_dir: str, epoch: int) -> str:
    """A new folder for epoch ``epoch``'s checkpoint (rank 0 names it, every rank writes to it)."""
    return fs.join(run_dir, f"{PREFIX}{dt.datetime.now(dt.timezone.utc):%Y-%m-%d_%H-%M-%S.%f}_e{epoch:06d}")


def epoch_dir(run_dir: str, epoch: int) -> str:
    """The complete checkpoint of epoch ``epoch`` of the day (an error naming the kept ones if none)."""
    done = [d for d in complete(run_dir) if d.endswith(f"_e{epoch:06d}")]
    if not done:
        raise RuntimeError(f"no complete checkpoint of epoch {epoch} under {run_dir} (kept: {complete(run_dir)})")
    return done[-1]


def upload(local_dir: str, run_dir: str, epoch: int, rank: int) -> str:
    """Collective: every rank copies its files of ``local_dir``; rank 0 writes the train state
    last. Returns the checkpoint's folder."""
    names: list[Any] = [new_epoch_dir(run_dir, epoch) if rank == 0 else None]
    dist.broadcast_object_list(names, src=0)
    target = names[0]
    for name in sorted(os.listdir(local_dir)):
        if name != TRAIN_STATE_FILE:
            with open(os.path.join(local_dir, name), "rb") as f:
                fs.write_bytes(fs.join(target, name), f.read())
    dist.barrier()
    if rank == 0:
        with open(os.path.join(local_dir, TRAIN_STATE_FILE), "rb") as f:
            fs.write_bytes(fs.join(target, TRAIN_STATE_FILE), f.read())
    dist.barrier()
    return target


def complete(run_dir: str) -> list[str]:
    """The day's complete checkpoint folders, oldest epoch first."""
    dirs = [fs.join(run_dir, n) for n in fs.list_dir(run_dir) if n.startswith(PREFIX)]
    return [d for d in dirs if fs.exists(fs.join(d, TRAIN_STATE_FILE))]


def read_state(checkpoint_dir: str) -> dict[str, Any]:
    return fs.read_json(fs.join(checkpoint_dir, TRAIN_STATE_FILE))


def latest(run_dir: str) -> tuple[str, dict[str, Any]] | None:
    """The day's newest complete checkpoint and its train state, or None."""
    done = complete(run_dir)
    return (done[-1], read_state(done[-1])) if done else None


def is_finished(state: dict[str, Any], epochs: int) -> bool:
    """The day's training ended: the epoch budget spent, or stopped early."""
    return int(state["epochs_done"]) >= epochs or bool(state.get("stopped_early"))


def download(checkpoint_dir: str, local_dir: str) -> str:
    """Copy a checkpoint folder into ``local_dir`` (DCP reads local files); returns ``local_dir``."""
    os.makedirs(local_dir, exist_ok=True)
    for name in fs.list_dir(checkpoint_dir):
        with open(os.path.join(local_dir, name), "wb") as f:
            f.write(fs.read_bytes(fs.join(checkpoint_dir, name)))
    return local_dir


def prune(run_dir: str, best_epoch: int) -> None:
    """Delete the day's checkpoints but the latest complete one and the best epoch's (between
    checkpoints: an incomplete folder is a lost attempt's)."""
    keep = set(complete(run_dir)[-1:]) | {epoch_dir(run_dir, best_epoch)}
    for d in (fs.join(run_dir, n) for n in fs.list_dir(run_dir) if n.startswith(PREFIX)):
        if d not in keep:
            fs.delete_dir(d)
