"""The range training job on a real local Ray: a 3-day backfill on ONE Ray Train worker group."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.ranges import TrainDay, TrainRangeSpec
from ads_ranking_pipelines.defs.train_step import RESULT_FIELDS
from ads_ranking_pipelines.ray_jobs.train import body
from ads_ranking_pipelines.training.export import is_model_version, read_manifest
from ads_ranking_pipelines_tests.training.toy import write_days

pytestmark = pytest.mark.ray

DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(4)]
WORKERS = 2


class ListReporter:
    def __init__(self):
        self.logs, self.records = [], []

    def log(self, message):
        self.logs.append(message)

    def metrics(self, kind, values):
        self.records.append((kind, dict(values)))


def _spec(tmp_path) -> TrainRangeSpec:
    params = TrainingParams(num_workers=WORKERS, cpus_per_worker=1, epochs=2, batch_size=256, hash_buckets=1000,
                            embedding_dim=8, dense_arch=(16,), over_arch=(16,), learning_rate=0.05, max_failures=0)
    models = tmp_path / "models"
    return TrainRangeSpec(
        params=params, source=SourceConfig(uri=str(tmp_path / "events")), ray_storage_uri=str(tmp_path / "ray"),
        warm_start=True,
        days=tuple(TrainDay(day=d, train_days=(d - dt.timedelta(days=1), d), model_version=f"v{i}",
                            model_uri=str(models / f"v{i}"), run_name=f"dlrm-v{i}")
                   for i, d in enumerate(DAYS[1:])))


def _train_worker_actors(ray) -> list[dict]:
    """Every Ray Train worker actor the cluster ever started (dead ones too): one per rank and group."""
    return [a for a in ray._private.state.actors().values() if "RayTrainWorker" in a["ActorClassName"]]


def test_a_3_day_backfill_trains_on_one_worker_group_one_complete_version_per_day(local_ray, tmp_path):
    write_days(str(tmp_path / "events"), DAYS, rows_per_day=1500)
    spec = _spec(tmp_path)
    reporter = ListReporter()
    t0 = time.perf_counter()
    results = list(body(spec, reporter))
    wall = time.perf_counter() - t0
    # the P5t figure: the job's wall per day over the in-loop training time per day
    in_loop = sum(e["epoch_s"] + e.get("valid_s", 0.0) + e.get("checkpoint_s", 0.0)
                  for r in results for e in r["epoch_history"])
    print(f"3-day range: wall {wall:.1f}s (per day {[r['wall_seconds'] for r in results]}), in-loop "
          f"{in_loop:.1f}s, wall / in-loop {wall / max(in_loop, 1e-9):.2f}")

    # ONE worker group for the 3 days (today's code started one per day: 3 groups, 6 actors)
    assert len(_train_worker_actors(local_ray)) == WORKERS, _train_worker_actors(local_ray)
    # and one actor of ours beside it: the day feed, which is the progress box too (a
    # ray.util.queue.Queue was a second actor, ~2 CPU-s of a new worker process a run)
    ours = [a["ActorClassName"] for a in local_ray._private.state.actors().values()
            if a["ActorClassName"] in ("DayFeed", "ProgressBox", "_QueueActor")]
    assert ours == ["DayFeed"], ours
    assert [r["day"] for r in results] == [d.isoformat() for d in DAYS[1:]]
    for i, r in enumerate(results):
        assert set(RESULT_FIELDS) <= set(r), sorted(set(RESULT_FIELDS) - set(r))
        assert r["rows"] == 3000 and r["epochs"] == 2 and r["worker_restarts"] == 0
        assert is_model_version(r["model_uri"])
        manifest = read_manifest(r["model_uri"])
        assert manifest["best_epoch"] == r["best_epoch"] and manifest["train_days"] == [
            d.isoformat() for d in spec.days[i].train_days]
        # day k+1 starts from day k's weights (kept on the workers), day 1 from scratch
        assert manifest["warm_started_from"] == (results[i - 1]["model_uri"] if i else None)
        assert r["warm_start_from"] == manifest["warm_started_from"]
    # the window slid: after the first day, each day read its new day only
    reads = [v["days_read"] for k, v in reporter.records if k == "dataset"]
    assert reads == [2, 1, 1], reads
    warm = [(v["day"], v["source"]) for k, v in reporter.records if k == "warm_start"]
    assert warm == [(d.isoformat(), "memory") for d in DAYS[2:]], warm
