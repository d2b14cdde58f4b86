"""``range_trainer.train_range`` on a real local Ray: a worker lost mid-range restarts the group,
which resumes at the day (and epoch) where it stopped."""

from __future__ import annotations

import datetime as dt
import glob
import os

import pytest

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.ranges import TrainDay, TrainRangeSpec
from ads_ranking_pipelines.training.export import is_model_version, read_manifest

from .toy import write_days

pytestmark = pytest.mark.ray

DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(3)]


class DayLog:
    def __init__(self):
        self.logs, self.records = [], []

    def log(self, message):
        self.logs.append(message)

    def metrics(self, kind, values):
        self.records.append((kind, dict(values)))


def test_a_worker_lost_on_day_2_restarts_the_group_which_resumes_day_2_and_finishes_the_range(local_ray, tmp_path):
    write_days(str(tmp_path / "events"), DAYS, rows_per_day=1500)
    params = TrainingParams(num_workers=2, cpus_per_worker=1, epochs=2, batch_size=256, hash_buckets=1000,
                            embedding_dim=8, dense_arch=(16,), over_arch=(16,), learning_rate=0.05, max_failures=1,
                            early_stopping_patience=0)
    spec = TrainRangeSpec(
        params=params, source=SourceConfig(uri=str(tmp_path / "events")), ray_storage_uri=str(tmp_path / "ray"),
        warm_start=True,
        days=tuple(TrainDay(day=d, train_days=(d,), model_version=f"v{i}", model_uri=str(tmp_path / "m" / f"v{i}"),
                            run_name=f"dlrm-v{i}") for i, d in enumerate(DAYS)))
    from ray import cloudpickle

    from ads_ranking_pipelines.training.range_trainer import train_range

    from . import faults

    cloudpickle.register_pickle_by_value(faults)
    marker = tmp_path / "crashed"
    reporters = [DayLog() for _ in DAYS]
    # rank 1 dies as day 2's second epoch starts (its 4th epoch start): day 2 has 1 epoch checkpointed
    results = dict(train_range(spec, reporters.__getitem__,
                               worker_config={"callbacks": [faults.CrashOnceAtNthEpoch(1, 4, str(marker))]}))
    assert marker.exists()
    assert sorted(results) == [0, 1, 2]
    assert [results[i].worker_restarts for i in range(3)] == [0, 1, 0]
    assert results[1].resumed_from_epoch == 0 and results[1].epochs == 2
    # the restarted group trained day 2's second epoch only, then day 3 (warm from day 2, in memory)
    assert [e["epoch"] for e in results[1].epoch_history] == [1, 2]
    assert any(k == "started" and v.get("resumed") and v["epochs_done"] == 1 for k, v in reporters[1].records)
    assert [v["source"] for k, v in reporters[2].records if k == "warm_start"] == ["memory"]
    for i in range(3):
        assert is_model_version(results[i].model_uri)
        assert read_manifest(results[i].model_uri)["warm_started_from"] == (results[i - 1].model_uri if i else None)
    workers = [a for a in local_ray._private.state.actors().values() if "RayTrainWorker" in a["ActorClassName"]]
    assert len(workers) == 4          # two groups of 2: the first, and the one restarted once
    # the lost rank's checkpoint staging dir stayed where the cluster's scratch files go (removed
    # with the cluster's temp dir), not in /tmp
    assert glob.glob(os.path.join(os.environ["TMPDIR"], "dlrm-resume-d1-r1-*"))
