"""The sliding window of a range: one new day read per day after the first, the same rows as a
whole-window read."""

from __future__ import annotations

import datetime as dt

import numpy as np

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.events.layout import read_days
from ads_ranking_pipelines.training.features import FeatureSpec, transform
from ads_ranking_pipelines.training.sliding_window import SlidingWindow

from .toy import write_days

DAYS = [dt.date(2026, 11, 1) + dt.timedelta(days=i) for i in range(5)]


def _spec(tmp_path, days) -> TrainJobSpec:
    return TrainJobSpec(params=TrainingParams(hash_buckets=100, embedding_dim=8),
                        source=SourceConfig(uri=str(tmp_path / "events")), train_days=tuple(days),
                        model_version="v1", model_uri=str(tmp_path / "m"), ray_storage_uri=str(tmp_path / "r"),
                        run_name="w")


def test_each_later_day_reads_only_its_new_day_and_holds_the_same_rows_as_a_whole_read(tmp_path) -> None:
    write_days(str(tmp_path / "events"), DAYS, rows_per_day=300)
    feature_spec = FeatureSpec.from_source(SourceConfig(uri=str(tmp_path / "events")), 100)
    window = SlidingWindow(feature_spec)
    for i in range(3):                                  # 3 days of a backfill, 3-day windows
        spec = _spec(tmp_path, DAYS[i:i + 3])
        whole = read_days(spec.source, list(spec.train_days), columns=feature_spec.read_columns)
        got, want = window.arrays(spec), transform(whole, feature_spec)
        assert sorted(got) == sorted(want)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
    assert window.reads == [DAYS[0:3], [DAYS[3]], [DAYS[4]]]
    assert sorted(window.held) == DAYS[2:5]             # the oldest days were dropped
