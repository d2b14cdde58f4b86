"""Batch inference (``training.inference.score_day``): every impression scored once, by the
champion's numbers, with the day cut into row-group pieces that several tasks score at once."""

import datetime as dt
import json
import os

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ads_ranking_pipelines.config.source import SourceConfig
from ads_ranking_pipelines.contracts.jobs import InferenceJobSpec
from ads_ranking_pipelines.training.export import load_predictor, save_model_version
from ads_ranking_pipelines.training.features import FeatureSpec
from ads_ranking_pipelines.training.inference import chunk_rows, row_group_chunks
from ads_ranking_pipelines.training.model import build_model

from ads_ranking_pipelines_tests.ray_script import ray_script_env, run_ray_script
from .toy import raw_events, tiny_params

DAY = dt.date(2026, 11, 3)


def test_row_group_chunks_take_small_row_groups_together_and_cut_large_ones_in_file_order():
    sizes = [("a", [3, 3, 3, 3, 2]), ("b", [10]), ("c", []), ("d", [0]), ("e", [2, 13, 1])]
    assert row_group_chunks(sizes, 6) == [
        {"uri": "a", "row_groups": [0, 1], "offset": 0, "rows": 6},
        {"uri": "a", "row_groups": [2, 3], "offset": 0, "rows": 6},
        {"uri": "a", "row_groups": [4], "offset": 0, "rows": 2},
        {"uri": "b", "row_groups": [0], "offset": 0, "rows": 5}, {"uri": "b", "row_groups": [0], "offset": 5, "rows": 5},
        {"uri": "e", "row_groups": [0], "offset": 0, "rows": 2},
        {"uri": "e", "row_groups": [1], "offset": 0, "rows": 4}, {"uri": "e", "row_groups": [1], "offset": 4, "rows": 4},
        {"uri": "e", "row_groups": [1], "offset": 8, "rows": 5},
        {"uri": "e", "row_groups": [2], "offset": 0, "rows": 1}]
    assert chunk_rows(500_000, 2) == 62_500
    assert chunk_rows(1_000, 2) == 8192 and chunk_rows(10**9, 2) == 262_144


# Ray runs in a child process: a second in-process ray.init in one pytest process (this test,
# then the Ray Train test's fixture) timed out in CI twice.
SCORE = """
import json, os, sys, tempfile
import ray
from ads_ranking_pipelines.contracts.jobs import InferenceJobSpec
from ads_ranking_pipelines.training.inference import score_day

class Quiet:
    def __init__(self): self.logs = []
    def log(self, m): self.logs.append(m)
    def metrics(self, k, v): pass

ray.init(num_cpus=3, include_dashboard=False, _temp_dir=tempfile.mkdtemp(prefix="ri", dir="/tmp"))
out = []
for line in sys.argv[1:]:
    r = Quiet()
    out.append({**score_day(InferenceJobSpec.model_validate_json(line), r), "log": r.logs[-1]})
print(json.dumps(out))
"""


def _score(tmp_path, *jobs):
    env = ray_script_env(tmp_path / "home", RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    out = run_ray_script(SCORE, *(j.model_dump_json() for j in jobs), env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    # no deprecated Ray Data arguments (``concurrency=`` gave way to ``compute=`` in Ray 2.51)
    assert "deprecated" not in out.stderr, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.ray
def test_a_day_in_one_file_is_scored_by_several_tasks_every_row_once(tmp_path):
    events = tmp_path / "events"
    folder = events / f"event_date={DAY.isoformat()}"
    os.makedirs(folder)
    df = raw_events(40_000, seed=3)
    df.insert(0, "impression_id", np.arange(len(df), dtype=np.int64) * 7 + 1)
    # one file, 20 row groups: Ray Data's read_parquet would read (and score) it in one task
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), folder / "part-0.parquet", row_group_size=2000)
    (folder / "_SUCCESS").touch()

    source = SourceConfig(uri=str(events))
    params = tiny_params(hash_buckets=1000)
    spec = FeatureSpec.from_source(source, params.hash_buckets)
    model_uri = str(tmp_path / "models" / "v1")
    save_model_version(model_uri, build_model(params, spec), params, spec)
    out_uri = str(tmp_path / "scores")
    job = InferenceJobSpec(source=source, day=DAY, model_uri=model_uri, model_version="v1",
                           output_uri=out_uri, hash_buckets=params.hash_buckets, id_columns=("impression_id",))
    empty_day, one_group_day = DAY + dt.timedelta(days=1), DAY + dt.timedelta(days=2)
    for day, rows in ((empty_day, df.iloc[:0]), (one_group_day, df.iloc[:20_000])):
        folder = events / f"event_date={day.isoformat()}"
        os.makedirs(folder)
        pq.write_table(pa.Table.from_pandas(rows, preserve_index=False), folder / "part-0.parquet")   # one row group
        (folder / "_SUCCESS").touch()
    stats, empty, one_group, asked = _score(
        tmp_path, job, job.model_copy(update={"day": empty_day, "output_uri": str(tmp_path / "empty")}),
        job.model_copy(update={"day": one_group_day, "output_uri": str(tmp_path / "one")}),
        job.model_copy(update={"day": one_group_day, "output_uri": str(tmp_path / "asked"), "concurrency": 1}))

    assert stats["rows"] == 40_000 and stats["tasks"] == 4       # pieces of >= 8192 rows: 5 groups of 2000
    files = [f for f in os.listdir(out_uri) if f.endswith(".parquet")]
    # one file per piece, written by the scoring task itself: no write operator after the map
    assert sorted(files) == [f"part-{i:05d}.parquet" for i in range(4)], files
    assert stats["stage_write_s"] == 0 and stats["stage_map_s"] > 0, stats
    got = pd.read_parquet(out_uri).sort_values("impression_id").reset_index(drop=True)
    assert got["impression_id"].tolist() == df["impression_id"].tolist()
    assert set(got["model_version"]) == {"v1"} and got["score"].dtype == np.float32
    want = load_predictor(model_uri).score_rows(df)
    np.testing.assert_allclose(got["score"].to_numpy(), want, rtol=1e-5, atol=1e-6)
    assert os.path.exists(os.path.join(out_uri, "_SUCCESS"))
    assert "4 tasks, 3 at a time" in stats["log"]             # as many at a time as the cluster has CPUs
    # a file of one row group is cut into slices (8192 rows a piece at most): 3 tasks, every row once
    assert one_group["rows"] == 20_000 and one_group["tasks"] == 3
    got = pd.read_parquet(tmp_path / "one").sort_values("impression_id").reset_index(drop=True)
    assert got["impression_id"].tolist() == df["impression_id"].tolist()[:20_000]
    np.testing.assert_allclose(got["score"].to_numpy(), want[:20_000], rtol=1e-5, atol=1e-6)
    # the worker CPUs the cluster was asked for, not the CPUs Ray sees when the job starts
    assert asked["rows"] == 20_000 and "3 tasks, 1 at a time" in asked["log"], asked["log"]
    # a day of 0 rows: nothing scored, nothing half-made, the marker says 0
    assert empty["rows"] == 0 and empty["tasks"] == 0
    assert os.listdir(tmp_path / "empty") == ["_SUCCESS"]


def test_row_group_sizes_reads_every_footer_in_order(tmp_path):
    from ads_ranking_pipelines.training.inference import row_group_sizes

    uris = []
    for i, (rows, group) in enumerate([(10, 4), (7, 7), (0, 5), (9, 3)]):
        uri = str(tmp_path / f"part-{i}.parquet")
        pq.write_table(pa.table({"x": np.arange(rows)}), uri, row_group_size=group)
        uris.append(uri)
    assert row_group_sizes(uris, threads=3) == [(uris[0], [4, 4, 2]), (uris[1], [7]), (uris[2], [0]),
                                                 (uris[3], [3, 3, 3])]


def test_written_rows_counts_the_parquet_files_from_their_footers(tmp_path):
    from ads_ranking_pipelines.training.inference import written_rows

    out = tmp_path / "scores"
    out.mkdir()
    for i, rows in enumerate([5, 0, 12]):
        pq.write_table(pa.table({"score": np.zeros(rows, np.float32)}), str(out / f"{i}_000000.parquet"),
                       row_group_size=4)
    (out / "_SUCCESS").write_text("{}")
    assert written_rows(str(out)) == 17
    assert written_rows(str(tmp_path / "nothing")) == 0
