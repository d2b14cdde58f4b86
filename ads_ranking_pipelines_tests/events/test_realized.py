"""A day's scores joined with the day's labels as they are now: by impression id, else by row order."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.events.layout import write_day
from ads_ranking_pipelines.events.realized import RealizedJoinError, realized_metrics
from ads_ranking_pipelines.metrics import evaluate

DAY = dt.date(2026, 3, 11)
N = 400


def _source(tmp_path, labels: np.ndarray) -> SourceConfig:
    root = tmp_path / "events"
    write_day(pa.table({"impression_id": np.arange(N, dtype=np.int64) + 7, "click": labels.astype(np.int64),
                        "d0": np.zeros(N), "c0": np.zeros(N, dtype=np.int64)}), str(root), DAY)
    return SourceConfig(kind="parquet", uri=str(root), label_column="click", dense_columns=("d0",),
                        sparse_columns=("c0",))


def _scores(tmp_path, scores: np.ndarray, with_ids: bool, parts: int = 2) -> str:
    out = tmp_path / "scores"
    out.mkdir()
    for k, rows in enumerate(np.array_split(np.arange(N), parts)):
        cols = {"impression_id": pa.array(rows + 7, pa.int64())} if with_ids else {}
        pq.write_table(pa.table({**cols, "score": pa.array(scores[rows], pa.float32())}),
                       str(out / f"part-{k:05d}.parquet"))
    (out / "_SUCCESS").write_text("{}")
    return str(out)


@pytest.mark.parametrize("with_ids", [True, False])
def test_realized_metrics_are_the_scores_against_the_labels_now(tmp_path, with_ids):
    rng = np.random.default_rng(0)
    scores = rng.uniform(0.01, 0.99, N)
    labels = (rng.uniform(size=N) < scores).astype(np.int64)
    uri = _scores(tmp_path, scores, with_ids)
    got = realized_metrics(uri, _source(tmp_path, labels), DAY)
    want = evaluate(labels, scores.astype(np.float32).astype(np.float64))
    assert got["auc"] == pytest.approx(want["auc"]) and got["logloss"] == pytest.approx(want["logloss"])
    assert got["calibration"] == pytest.approx(want["calibration"]) and got["rows"] == N
    flipped = realized_metrics(uri, _source(tmp_path, 1 - labels), DAY)          # the labels landed otherwise
    assert flipped["auc"] == pytest.approx(1 - want["auc"])


def test_scores_and_labels_that_do_not_match_are_refused_with_both_counts(tmp_path):
    labels = (np.arange(N) % 3 == 0).astype(np.int64)
    uri = _scores(tmp_path, np.full(N, 0.3), with_ids=False)
    source = _source(tmp_path, labels)
    root = tmp_path / "events"
    write_day(pa.table({"click": labels[:-5], "d0": np.zeros(N - 5), "c0": np.zeros(N - 5, dtype=np.int64)}),
              str(root), DAY)
    with pytest.raises(RealizedJoinError, match=f"{N} scored rows but the day's events have {N - 5} now"):
        realized_metrics(uri, source, DAY)


def test_unfinished_scores_are_refused(tmp_path):
    uri = _scores(tmp_path, np.full(N, 0.3), with_ids=True)
    (tmp_path / "scores" / "_SUCCESS").unlink()
    with pytest.raises(RealizedJoinError, match="no complete scores .* materialize batch_scores"):
        realized_metrics(uri, _source(tmp_path, np.arange(N) % 2), DAY)
