"""The Ray Train side of a range: ONE worker group trains the range's days in date order.

``train_days_per_worker(config)`` is what every worker of the range's one ``TorchTrainer.fit()``
runs (``range_trainer``; a single day is a range of one). Per day it takes that day's per-rank
datasets from the driver's :class:`~ads_ranking_pipelines.training.day_feed.DayFeed`, trains the
day's epochs with ``train_loop.run_worker`` (early stopping, a checkpoint per epoch into the day's
own run folder: ``day_checkpoints``), and rank 0 puts a ``day_end`` record in the progress box, on
which the driver writes that day's model version while the workers go on with the next day. With
warm start, each next day starts from the best epoch's weights the ranks kept in memory
(``warm_start.LocalWeights``); day 1 starts from ``config["warm_start"]`` (an earlier version, put
by the driver).

A restarted worker group (Ray Train's ``FailureConfig``) or a re-launched job finds, per day,
where the day's checkpoints stop: finished days are announced again (the driver ignores a day
it has written), the first unfinished day resumes from its latest checkpoint, warm-started (if
it has none) from the version of the day before, which the driver writes (waited for).

Config keys: ``params`` (``TrainingParams.model_dump(mode="json")``), ``feature_spec``
(``dataclasses.asdict(FeatureSpec)``), ``progress_box`` (the driver's box, rank 0 puts its
records there), ``progress_every_s``, ``shuffle_buffer`` (rows of local shuffle buffer),
``callbacks`` (objects with ``on_epoch_start(rank, epoch)`` / ``on_step(rank, epoch, step)``:
observers, and the way tests inject faults), ``days`` (per day ``run_dir`` and
``model_uri``), ``feed`` (the :class:`DayFeed` handle), ``warm_start`` (ref or None),
``warm_start_days`` (each later day starts from the day before).
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training import day_checkpoints as ckpts
from ads_ranking_pipelines.training import warm_start as ws
from ads_ranking_pipelines.training.day_feed import day_entry
from ads_ranking_pipelines.training.export import is_model_version
from ads_ranking_pipelines.training.model import feature_spec_from_dict
from ads_ranking_pipelines.training.ray_train_worker import (BoxProgress, _warm_start_state, shard_batches,
                                                              valid_batches_of, worker_device)
from ads_ranking_pipelines.training.quiet import quiet_warnings

VERSION_WAIT_S = 600.0


def _first_unfinished(days: list[dict[str, Any]], params: TrainingParams, put: Any) -> int:
    """The first day whose checkpoints do not end its training; finished ones are announced."""
    for i, day in enumerate(days):
        last = ckpts.latest(day["run_dir"])
        if last is None or not ckpts.is_finished(last[1], params.epochs):
            return i
        if put:
            put({"kind": "day_end", "day_index": i})
    return len(days)


def _version_weights(uri: str) -> dict[str, Any]:
    """The weights of the version the driver writes (a restarted group's warm start)."""
    deadline = time.monotonic() + VERSION_WAIT_S
    while not is_model_version(uri):
        if time.monotonic() > deadline:
            raise RuntimeError(f"warm start: version {uri} was not written within {VERSION_WAIT_S:.0f}s")
        time.sleep(0.5)
    return ws.read_weights(uri)


def _warm_for(config: dict[str, Any], i: int, kept: ws.LocalWeights | None) -> Any:
    if i == 0:
        return _warm_start_state(config.get("warm_start"))
    if not config.get("warm_start_days"):
        return None
    return kept if kept is not None else _version_weights(config["days"][i - 1]["model_uri"])


def train_days_per_worker(config: dict[str, Any]) -> None:
    """Ray Train entry point of a range (see the module docstring)."""
    import ray.data
    import ray.train

    quiet_warnings()
    params = TrainingParams.model_validate(config["params"])
    ctx = ray.train.get_context()
    device, rank = worker_device(params), ctx.get_world_rank()
    ray.data.DataContext.get_current().execution_options.preserve_order = True
    box = config.get("progress_box")
    put = BoxProgress(box) if box is not None and rank == 0 else None
    if put:
        put({"kind": "group_started", "pid": os.getpid()})     # one per worker-group start
    days = config["days"]
    kept = None
    for i in range(_first_unfinished(days, params, put), len(days)):
        entry = day_entry(config["feed"], i)
        last_day = i == len(days) - 1
        summary = _train_day(config, params, ctx, device, i, entry, _warm_for(config, i, kept),
                             keep_best=bool(config.get("warm_start_days")) and not last_day, put=put)
        kept = summary.best_weights
        if put:
            put({"kind": "day_end", "day_index": i})


def _train_day(config: dict[str, Any], params: TrainingParams, ctx: Any, device: Any, i: int,
               entry: dict[str, Any], warm: Any, keep_best: bool, put: Any):
    import ray.train

    # Here, not at the top: the job driver imports this module only to hand Ray Train its entry
    # point, and the training loop imports TorchRec (~2 CPU-s per process; test_imports.py).
    from ads_ranking_pipelines.training.train_loop import run_worker

    rank, run_dir = ctx.get_world_rank(), config["days"][i]["run_dir"]
    valid = entry["valid"][rank].iterator() if entry["valid"] else None
    shuffle_buffer = int(config.get("shuffle_buffer") or 0) or None

    def report(metrics: dict[str, Any], ckpt_dir: str) -> None:
        ckpts.upload(ckpt_dir, run_dir, int(metrics["epoch"]), rank)
        if rank == 0:
            ckpts.prune(run_dir, int(metrics["best_epoch"]))
        ray.train.report({**metrics, "day_index": i})

    progress = (lambda record: put({**record, "day_index": i})) if put else None
    last = ckpts.latest(run_dir)
    with tempfile.TemporaryDirectory(prefix=f"dlrm-resume-d{i}-r{rank}-") as local:
        resume_dir = ckpts.download(last[0], local) if last else None
        return run_worker(
            params, feature_spec_from_dict(config["feature_spec"]), device=device,
            batches=shard_batches(entry["train"][rank].iterator(), params, shuffle_buffer),
            valid_batches=valid_batches_of(valid), report=report, resume_dir=resume_dir, progress=progress,
            progress_every_s=float(config.get("progress_every_s", 5.0)),
            local_world_size=ctx.get_local_world_size(), steps_per_epoch=entry["steps_per_epoch"],
            shard_steps=entry["steps_per_epoch"], log=lambda m: print(m, flush=True),
            callbacks=config.get("callbacks") or (), id_counts=entry["id_counts"], warm_start=warm,
            keep_best=keep_best)
