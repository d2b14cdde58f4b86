"""X-Ray shows each trained day's estimate beside its actual time (page and API)."""

from __future__ import annotations

import warnings

from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.train_history import record_day
from ads_ranking_pipelines.xray.app import create_app
from ads_ranking_pipelines_tests.xray.test_app import settings_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


def _record(home, model, version, day, seconds, estimate):
    record_day(StorageLayout(str(home)), model, {
        "model_version": version, "day": day, "gpu_pool": "local", "num_workers": 1, "gpus_per_worker": 0,
        "rows": 4000, "wall_seconds": seconds, "gpu_hours": 0.0, "worker_hours": seconds / 3600,
        "estimate": {"wall_seconds": estimate, "gpu_hours": 0.0} if estimate else None})


def test_estimate_vs_actual_per_trained_day_on_the_page_and_the_api(tmp_path):
    _record(tmp_path, "quest_ranker", "20260310-aaaaaaaa", "2026-03-10", 84.4, None)
    _record(tmp_path, "quest_ranker", "20260312-bbbbbbbb", "2026-03-12", 60.0, 75.0)
    _record(tmp_path, "other<b>", "20260311-cccccccc", "2026-03-11", 10.0, 8.0)
    with TestClient(create_app(settings_for(tmp_path), {}), base_url="http://127.0.0.1:8080") as client:
        days = client.get("/api/estimates?model=quest_ranker").json()["days"]
        assert [d["model_version"] for d in days] == ["20260312-bbbbbbbb", "20260310-aaaaaaaa"]
        assert days[0]["estimated_wall_seconds"] == 75.0 and days[0]["wall_seconds"] == 60.0
        assert days[0]["error_pct"] == -20.0 and days[1]["estimated_wall_seconds"] is None
        assert len(client.get("/api/estimates").json()["days"]) == 3
        page = client.get("/estimates", headers={"Accept": "text/html"})
        assert page.status_code == 200
        row = page.text.split('data-version="20260312-bbbbbbbb"')[1].split("</tr>")[0]
        assert "<td>75.0</td>" in row and "<td>60.0</td>" in row and "<td>-20.0%</td>" in row
        assert "none (no history then)" in page.text
        assert "other&lt;b&gt;" in page.text and "other<b>" not in page.text      # escaped
        assert 'href="/estimates"' in client.get("/", headers={"Accept": "text/html"}).text
