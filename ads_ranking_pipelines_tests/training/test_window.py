"""The training window read in the driver: time order, the held-out tail, one seeded shuffle,
Ray blocks that hold exactly the transformed rows."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.events.layout import MissingPartitionsError
from ads_ranking_pipelines.training.features import FeatureSpec, transform
from ads_ranking_pipelines.training.sliding_window import SlidingWindow
from ads_ranking_pipelines.training.window import hold_out, id_counts, rank_parts, shuffled

from ads_ranking_pipelines_tests.ray_script import ray_script_env, run_ray_script
from .toy import write_days

DAYS = [dt.date(2026, 11, 1), dt.date(2026, 11, 2)]


def _spec(tmp_path, days=DAYS, **params) -> TrainJobSpec:
    return TrainJobSpec(params=TrainingParams(hash_buckets=100, embedding_dim=8, **params),
                        source=SourceConfig(uri=str(tmp_path / "events")), train_days=tuple(days),
                        model_version="v1", model_uri=str(tmp_path / "m"), ray_storage_uri=str(tmp_path / "r"),
                        run_name="w")


def _arrays(n: int) -> dict[str, np.ndarray]:
    return {"dense": np.arange(2 * n, dtype=np.float32).reshape(n, 2), "sparse": np.arange(3 * n).reshape(n, 3) % 7,
            "label": (np.arange(n) % 2).astype(np.float32)}


def test_the_validation_rows_are_the_last_in_time_and_the_rest_is_shuffled_once_by_seed() -> None:
    arrays = _arrays(100)
    train, valid = hold_out(arrays, 0.1)
    assert valid is not None and len(valid["label"]) == 10 and len(train["label"]) == 90
    assert (valid["dense"][:, 0] == np.arange(180, 200, 2)).all()        # rows 90..99, in order
    a, b, c = shuffled(train, 1), shuffled(train, 1), shuffled(train, 2)
    assert all((a[k] == b[k]).all() for k in a) and not (a["dense"] == c["dense"]).all()
    assert not (a["dense"] == train["dense"]).all()
    order = (a["dense"][:, 0] // 2).astype(int)                            # every row once, rows kept whole
    assert sorted(order) == list(range(90))
    assert (a["sparse"] == train["sparse"][order]).all() and (a["label"] == train["label"][order]).all()
    assert hold_out(arrays, 0.0) == (arrays, None)
    assert hold_out(_arrays(1), 0.5)[1] is None                            # nothing left to train on


def test_id_counts_count_each_table_row() -> None:
    spec = FeatureSpec("label", ("d",), ("s0", "s1"), 5)
    sparse = np.array([[0, 4], [0, 1], [3, 1]])
    counts = id_counts(sparse, spec)
    assert counts["s0"].tolist() == [2, 0, 0, 1, 0] and counts["s1"].tolist() == [0, 2, 0, 0, 1]
    assert counts["s0"].dtype == np.float32


def test_a_window_s_arrays_are_its_days_in_order_transformed(tmp_path) -> None:
    frame = write_days(str(tmp_path / "events"), DAYS, rows_per_day=300)
    spec = _spec(tmp_path)
    fspec = FeatureSpec.from_source(spec.source, spec.params.hash_buckets)
    got, want = SlidingWindow(fspec).arrays(spec), transform(frame, fspec)
    assert all(np.array_equal(got[k], want[k]) for k in want)


def test_a_missing_day_is_named(tmp_path) -> None:
    write_days(str(tmp_path / "events"), DAYS[:1], rows_per_day=50)
    spec = _spec(tmp_path)
    with pytest.raises(MissingPartitionsError, match="2026-11-02"):
        SlidingWindow(FeatureSpec.from_source(spec.source, spec.params.hash_buckets)).arrays(spec)


# Ray runs in a child process: one in-process ``ray.init`` per pytest process (see test_inference)
LOAD = """
import sys, tempfile
import numpy as np
import ray
from ads_ranking_pipelines.contracts.jobs import TrainJobSpec
from ads_ranking_pipelines.training import window
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.training.sliding_window import SlidingWindow

ray.init(num_cpus=1, include_dashboard=False, _temp_dir=tempfile.mkdtemp(prefix="rw", dir="/tmp"))
window.BLOCK_ROWS = 128                         # several blocks from a small window
spec = TrainJobSpec.model_validate_json(sys.argv[1])
fspec = FeatureSpec.from_source(spec.source, spec.params.hash_buckets)
w = SlidingWindow(fspec, with_id_counts=True).advance(spec)
parts = {f"{name}{r}_{k}": v for name, sets in (("train", w.train), ("valid", w.valid))
         for r, ds in enumerate(sets) for k, v in ds.take_batch(10_000, batch_format="numpy").items()}
empty = window.to_dataset({"label": np.zeros(0, np.float32), "sparse": np.zeros((0, 3), np.int64)})
np.savez(sys.argv[2], rows=w.rows, train_rows=w.train_rows, empty_rows=empty.count(),
         blocks=[[ds.num_blocks() for ds in w.train], [ds.num_blocks() for ds in w.valid]],
         **parts, **{f"count_{k}": v for k, v in w.id_counts.items()})
"""


def test_rank_parts_are_contiguous_and_equal_and_leave_out_the_remainder() -> None:
    arrays = _arrays(101)
    parts = rank_parts(arrays, 3)
    assert [len(p["label"]) for p in parts] == [33, 33, 33]
    assert all(np.array_equal(p[k], arrays[k][33 * r:33 * (r + 1)]) for r, p in enumerate(parts) for k in arrays)
    assert [len(p["label"]) for p in rank_parts(_arrays(1), 2)] == [0, 0]
    with pytest.raises(ValueError, match="ranks must be at least 1, got 0"):
        rank_parts(arrays, 0)


@pytest.mark.slow
def test_the_window_datasets_hold_every_row_once_one_dataset_per_rank(tmp_path) -> None:
    frame = write_days(str(tmp_path / "events"), DAYS, rows_per_day=500)
    spec = _spec(tmp_path, validation_fraction=0.2, seed=5, num_workers=2)
    fspec = FeatureSpec.from_source(spec.source, spec.params.hash_buckets)
    out = tmp_path / "window.npz"
    run = run_ray_script(LOAD, spec.model_dump_json(), str(out), env=ray_script_env(tmp_path))
    assert run.returncode == 0, run.stderr[-3000:]
    got = np.load(out)
    assert (int(got["rows"]), int(got["train_rows"])) == (1000, 800)
    assert got["blocks"].tolist() == [[4, 4], [1, 1]]          # 400 training rows a rank, blocks of 128
    assert int(got["empty_rows"]) == 0
    want = transform(frame, fspec)
    # the last rows, in order, dealt out: rank 0 the first half
    assert all(np.array_equal(got[f"valid{r}_{k}"], want[k][800 + 100 * r:900 + 100 * r]) for r in (0, 1) for k in want)
    expected = shuffled({k: v[:800] for k, v in want.items()}, 5)
    assert all(np.array_equal(got[f"train{r}_{k}"], expected[k][400 * r:400 * (r + 1)]) for r in (0, 1) for k in expected)
    counts = id_counts(expected["sparse"], fspec)
    assert all(np.array_equal(got[f"count_{f}"], counts[f]) for f in fspec.sparse_columns)


# A node with no CPU, as the head the driver runs on when there are worker nodes: any task would wait.
NO_TASKS = """
import sys, tempfile
import numpy as np
import ray
from ads_ranking_pipelines.training import window

ray.init(num_cpus=0, include_dashboard=False, _temp_dir=tempfile.mkdtemp(prefix="rw", dir="/tmp"))
window.BLOCK_ROWS = 128
ds = window.to_dataset({"label": np.zeros(300, np.float32), "sparse": np.ones((300, 3), np.int64)})
print(ds.num_blocks(), ds.count(), flush=True)
"""


@pytest.mark.slow
def test_a_window_dataset_is_made_without_a_ray_task(tmp_path) -> None:
    """The driver's datasets must not wait for a task (a new worker process) to read their
    blocks' metadata: on a node without CPUs it never runs."""
    out = run_ray_script(NO_TASKS, env=ray_script_env(tmp_path), timeout=120)
    assert out.stdout.split() == ["3", "300"], out.stderr[-3000:]
