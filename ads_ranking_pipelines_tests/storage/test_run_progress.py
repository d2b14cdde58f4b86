"""Each run's progress record on the storage root (``storage/run_progress.py``)."""

from __future__ import annotations

from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.run_progress import read_progress, update_progress


def test_records_merge_per_step_and_read_back_newest_first(tmp_path):
    layout = StorageLayout(str(tmp_path))
    update_progress(layout, "run-a", model="m", step="trained_model", progress={"percent": 50.0}, now=10.0)
    update_progress(layout, "run-a", model="m", links={"ray_job_id": "run-a-1"}, now=11.0)
    update_progress(layout, "run-b", model="m", step="trained_model", progress={"percent": 5.0}, now=12.0)
    update_progress(layout, "run-a", model="m", step="model_evaluation", progress={"percent": 100.0},
                    state="failed", now=13.0)
    (tmp_path / "runs" / "run-c").mkdir()                                  # a run with no record
    (tmp_path / "runs" / "run-d").mkdir()
    (tmp_path / "runs" / "run-d" / "progress.json").write_text("{not json")  # one that cannot be read
    records = read_progress(layout)
    assert [r["run_id"] for r in records] == ["run-a", "run-b"]
    a = records[0]
    assert a["steps"] == {"trained_model": {"percent": 50.0}, "model_evaluation": {"percent": 100.0}}
    assert (a["current_step"], a["state"], a["links"], a["updated_at"]) == (
        "model_evaluation", "failed", {"ray_job_id": "run-a-1"}, 13.0)
    assert read_progress(StorageLayout(str(tmp_path / "nothing"))) == []
