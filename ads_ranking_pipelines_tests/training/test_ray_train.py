"""One real Ray Train run (2 workers, TorchRec DMP over gloo) through ``trainer.train``."""

import datetime as dt
import os

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.export import is_model_version, load_predictor, read_manifest
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.training.checkpoint import TRAIN_STATE_FILE, read_train_state

from .toy import write_days

pytestmark = pytest.mark.ray


class ListReporter:
    def __init__(self):
        self.logs, self.records = [], []

    def log(self, message):
        self.logs.append(message)

    def metrics(self, kind, values):
        self.records.append((kind, dict(values)))


def test_train_two_workers_checkpoints_each_epoch_resumes_and_exports(local_ray, tmp_path):
    days = [dt.date(2026, 11, 1), dt.date(2026, 11, 2)]
    events = tmp_path / "events"
    rows = write_days(str(events), days, rows_per_day=2000)
    params = TrainingParams(num_workers=2, cpus_per_worker=1, epochs=1, batch_size=256,
                            hash_buckets=1000, embedding_dim=8, dense_arch=(16,), over_arch=(16,),
                            learning_rate=0.05, max_failures=0)
    spec = TrainJobSpec(params=params, source=SourceConfig(uri=str(events)), train_days=tuple(days),
                        model_version="v1", model_uri=str(tmp_path / "models" / "v1"),
                        ray_storage_uri=str(tmp_path / "ray_results"), run_name="quest-test")
    from ads_ranking_pipelines.training.trainer import train

    # 1 epoch ...
    rep1 = ListReporter()
    first = train(spec, rep1)
    assert first.epochs == 1 and first.resumed_from_epoch == 0 and first.rows == 4000
    assert np.isfinite(first.final_loss)
    # every rank reads its own dataset: Ray Data splits nothing per epoch (no split coordinator
    # actor, whose split tasks cost the daily run 14 CPU-s on 2 cores)
    actors = {a["ActorClassName"] for a in local_ray._private.state.actors().values()}
    assert not [a for a in actors if "SplitCoordinator" in a], actors

    # ... then the same run asked for 2 epochs: Ray Train restores the run and the workers resume
    # from the epoch-1 checkpoint instead of starting over. Rank 1's process dies as epoch 2
    # starts (once), like a lost node: Ray restarts the worker group, which resumes again from
    # the last checkpoint and completes.
    spec2 = spec.model_copy(update={
        "params": params.model_copy(update={"epochs": 2, "max_failures": 1}),
        "model_version": "v2", "model_uri": str(tmp_path / "models" / "v2")})
    marker = tmp_path / "crashed"
    rep2 = ListReporter()
    from ray import cloudpickle

    from . import faults

    cloudpickle.register_pickle_by_value(faults)    # Ray workers need not import the tests
    result = train(spec2, rep2, worker_config={"callbacks": [faults.CrashOnce(1, 2, str(marker))]})
    assert marker.exists()
    assert result.epochs == 2 and result.resumed_from_epoch == 1 and result.worker_restarts == 1
    assert [e["epoch"] for e in result.epoch_history] == [2]
    assert np.isfinite(result.final_loss) and result.final_loss < first.final_loss + 0.05
    assert result.samples_per_s > 0

    # a checkpoint per epoch, each holding both ranks' DCP files and the train state
    assert len(result.checkpoint_paths) == 2
    for path, epoch in zip(sorted(result.checkpoint_paths), (1, 2)):
        files = set(os.listdir(path))
        assert {".metadata", "__0_0.distcp", "__1_0.distcp", TRAIN_STATE_FILE} <= files, files
        assert read_train_state(path)["epochs_done"] == epoch
    assert result.checkpoint_path in result.checkpoint_paths
    # the version is the epoch with the best validation loss (the last 10 % of the window)
    manifest = read_manifest(result.model_uri)
    assert result.best_epoch in (1, 2) and manifest["best_epoch"] == result.best_epoch
    assert result.train_rows == 3600 and np.isfinite(manifest["valid_logloss"])

    # every table has a home, and the manifest carries the plan
    assert sorted(result.sharding_plan) == sorted(f"t_{c}" for c in SourceConfig().sparse_columns)
    assert read_manifest(result.model_uri)["sharding_plan"] == result.sharding_plan

    # progress reached the reporter: an epoch record for epoch 2 and the dataset size
    kinds = [k for k, _ in rep2.records]
    assert ("epoch" in kinds) and ("dataset" in kinds)
    assert any("resumed from a checkpoint" in m for m in rep2.logs)
    assert any("restarted 1 time" in m for m in rep2.logs)

    # the exported version predicts clicks better than chance on the training rows
    assert is_model_version(result.model_uri)
    predictor = load_predictor(result.model_uri)
    probs = predictor.score_rows(rows)
    auc = roc_auc_score(rows["clicked"].to_numpy(), probs)
    assert auc > 0.55, auc
