"""``range_trainer.train_range`` on a real local Ray (2 workers, TorchRec DMP over gloo): the one
Ray Train run of the training tests, so it carries every check of what a range's training does.

A 3-day backfill on ONE worker group, each day's window sliding (after day 1 only its new day
is read), day k+1 warm started from day k's weights kept on the workers; rank 1's process dies
as day 2's second epoch starts (once, like a lost node): Ray Train restarts the group, which
resumes day 2 at the epoch its last checkpoint holds and finishes the range. Every epoch's
checkpoint holds both ranks' DCP files; each day's version is its best epoch's, exported
complete, and predicts clicks better than chance.

(It was three tests, each with its own in-process Ray and Ray Train run: ``trainer.train`` -
a single-day path production did not use, removed - the range without a fault, and this fault.)
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import time

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.ranges import TrainDay, TrainRangeSpec
from ads_ranking_pipelines.defs.train_step import RESULT_FIELDS
from ads_ranking_pipelines.training.checkpoint import TRAIN_STATE_FILE, read_train_state
from ads_ranking_pipelines.training.export import is_model_version, load_predictor, read_manifest

from .toy import write_days

pytestmark = pytest.mark.ray

DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(4)]
WORKERS = 2


class DayLog:
    def __init__(self):
        self.logs, self.records = [], []

    def log(self, message):
        self.logs.append(message)

    def metrics(self, kind, values):
        self.records.append((kind, dict(values)))


def _spec(tmp_path) -> TrainRangeSpec:
    params = TrainingParams(num_workers=WORKERS, cpus_per_worker=1, epochs=2, batch_size=256, hash_buckets=1000,
                            embedding_dim=8, dense_arch=(16,), over_arch=(16,), learning_rate=0.05, max_failures=1,
                            early_stopping_patience=0)
    return TrainRangeSpec(
        params=params, source=SourceConfig(uri=str(tmp_path / "events")), ray_storage_uri=str(tmp_path / "ray"),
        warm_start=True,
        days=tuple(TrainDay(day=d, train_days=(d - dt.timedelta(days=1), d), model_version=f"v{i}",
                            model_uri=str(tmp_path / "m" / f"v{i}"), run_name=f"dlrm-v{i}")
                   for i, d in enumerate(DAYS[1:])))


def _actors(ray) -> list[str]:
    """Class names of every actor the in-process cluster ever started (dead ones too)."""
    return [a["ActorClassName"] for a in ray._private.state.actors().values()]


def test_a_range_on_one_worker_group_survives_a_lost_worker_and_writes_every_day_complete(local_ray, tmp_path):
    rows = write_days(str(tmp_path / "events"), DAYS, rows_per_day=1500)
    spec = _spec(tmp_path)
    from ray import cloudpickle

    from ads_ranking_pipelines.training.range_trainer import train_range

    from . import faults

    cloudpickle.register_pickle_by_value(faults)    # Ray workers need not import the tests
    marker = tmp_path / "crashed"
    reporters = [DayLog() for _ in spec.days]
    t0 = time.perf_counter()
    # rank 1 dies as day 2's second epoch starts (its 4th epoch start): day 2 has 1 epoch checkpointed
    results = dict(train_range(spec, reporters.__getitem__,
                               worker_config={"callbacks": [faults.CrashOnceAtNthEpoch(1, 4, str(marker))]}))
    wall = time.perf_counter() - t0
    in_loop = sum(e["epoch_s"] + e.get("valid_s", 0.0) + e.get("checkpoint_s", 0.0)
                  for r in results.values() for e in r.epoch_history)
    print(f"3-day range with a lost worker: wall {wall:.1f}s, in-loop {in_loop:.1f}s")
    assert marker.exists() and sorted(results) == [0, 1, 2]

    _one_group_restarted_once(local_ray, results, reporters)
    for i, day in enumerate(spec.days):
        _day_is_complete(results[i], reporters[i], day, results[i - 1].model_uri if i else None)
    # the window slid: after the first day, each day read its new day only
    reads = [v["days_read"] for r in reporters for k, v in r.records if k == "dataset"]
    assert reads == [2, 1, 1], reads
    # the last day's version predicts its window's clicks better than chance
    window = rows.iloc[-2 * 1500:]               # write_days: the days' rows in date order
    auc = roc_auc_score(window["clicked"].to_numpy(), load_predictor(results[2].model_uri).score_rows(window))
    assert auc > 0.55, auc
    # the lost rank's checkpoint staging dir stayed where the cluster's scratch files go (removed
    # with the cluster's temp dir), not in /tmp
    assert glob.glob(os.path.join(os.environ["TMPDIR"], "dlrm-resume-d1-r1-*"))


def _one_group_restarted_once(ray, results: dict, reporters: list[DayLog]) -> None:
    """ONE worker group for the range (one per day would be 6 workers, 8 with the restart), the
    restart on day 2 only, which resumed at day 2's checkpointed epoch."""
    assert [results[i].worker_restarts for i in range(3)] == [0, 1, 0]
    actors = _actors(ray)
    assert actors.count("RayTrainWorker") == WORKERS * 2, actors
    # beside Ray Train's: one actor of ours, the day feed (also the progress box); every rank
    # reads its own dataset, so Ray Data splits nothing per epoch (no split coordinator)
    assert [a for a in actors if a in ("DayFeed", "ProgressBox", "_QueueActor")] == ["DayFeed"]
    assert not [a for a in actors if "SplitCoordinator" in a], actors
    assert results[1].resumed_from_epoch == 0 and results[1].epochs == 2
    assert [e["epoch"] for e in results[1].epoch_history] == [1, 2]
    assert any(k == "started" and v.get("resumed") and v["epochs_done"] == 1 for k, v in reporters[1].records)
    assert any("restarted 1 time" in m for m in reporters[1].logs), reporters[1].logs
    # day 3 starts from day 2's weights, kept on the (restarted) workers
    assert [v["source"] for k, v in reporters[2].records if k == "warm_start"] == ["memory"]


def _day_is_complete(r, reporter: DayLog, day: TrainDay, warm_from: str | None) -> None:
    """A day's version: complete, its best epoch's, its checkpoints with both ranks' files."""
    assert set(RESULT_FIELDS) <= set(r.to_dict()), sorted(set(RESULT_FIELDS) - set(r.to_dict()))
    assert r.rows == 3000 and r.train_rows == 2700 and r.epochs == 2 and np.isfinite(r.final_loss)
    assert r.samples_per_s > 0 and np.isfinite(r.valid_logloss)
    assert is_model_version(r.model_uri)
    manifest = read_manifest(r.model_uri)
    assert manifest["train_days"] == [d.isoformat() for d in day.train_days]
    assert manifest["best_epoch"] == r.best_epoch and r.best_epoch in (1, 2)
    assert manifest["warm_started_from"] == warm_from
    assert sorted(manifest["sharding_plan"]) == sorted(f"t_{c}" for c in SourceConfig().sparse_columns)
    # the day's run keeps its latest checkpoint and its best epoch's (the version's), each
    # holding both ranks' DCP files and the train state
    kept = {read_train_state(path)["epochs_done"]: path for path in r.checkpoint_paths}
    assert set(kept) == {2, r.best_epoch} and kept[r.best_epoch] == r.checkpoint_path, kept
    for path in r.checkpoint_paths:
        files = set(os.listdir(path))
        assert {".metadata", "__0_0.distcp", "__1_0.distcp", TRAIN_STATE_FILE} <= files, files
    assert ("epoch" in [k for k, _ in reporter.records]) and ("dataset" in [k for k, _ in reporter.records])
