"""Each trained day's figures are kept on the storage root, readable without Dagster."""

from __future__ import annotations

import pytest

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.train_history import history_root, read_history, record_day


def _rec(version, day, pool="local", **extra):
    return {"model_version": version, "day": day, "gpu_pool": pool, "num_workers": 1, "gpus_per_worker": 0,
            "rows": 4000, "wall_seconds": 12.5, "gpu_hours": 0.0, "worker_hours": 0.0035, "estimate": None, **extra}


def test_records_are_read_back_oldest_day_first_by_pool(tmp_path):
    layout = StorageLayout(str(tmp_path))
    record_day(layout, "m", _rec("20260311-bbbbbbbb", "2026-03-11", estimate={"wall_seconds": 10.0}))
    record_day(layout, "m", _rec("20260310-aaaaaaaa", "2026-03-10"))
    record_day(layout, "m", _rec("20260312-cccccccc", "2026-03-12", pool="l4"))
    fs.write_bytes(fs.join(history_root(layout, "m"), "broken.json"), b"{not json")
    days = read_history(layout, "m", "local")
    assert [d["model_version"] for d in days] == ["20260310-aaaaaaaa", "20260311-bbbbbbbb"]
    assert days[1]["estimate"] == {"wall_seconds": 10.0} and days[1]["wall_seconds"] == 12.5
    assert len(read_history(layout, "m")) == 3 and read_history(layout, "other") == []


def test_a_record_missing_a_field_is_refused_naming_it(tmp_path):
    rec = _rec("v", "2026-03-10")
    del rec["wall_seconds"]
    with pytest.raises(ValueError, match="history record of m lacks wall_seconds"):
        record_day(StorageLayout(str(tmp_path)), "m", rec)
