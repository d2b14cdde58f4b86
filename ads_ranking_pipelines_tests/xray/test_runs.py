"""X-Ray shows how far each run is (page and API): its step, percent done, ETA, days, and links
to the Dagster run and the Ray job; a run whose cluster is gone says where its logs are."""

from __future__ import annotations

import time
import warnings

from ads_ranking_pipelines.defs.progress import plain_links, ray_links
from ads_ranking_pipelines.planning.progress import ProgressTracker
from ads_ranking_pipelines.storage.layout import StorageLayout
from ads_ranking_pipelines.storage.run_progress import update_progress
from ads_ranking_pipelines.xray.app import create_app
from ads_ranking_pipelines_tests.xray.test_app import settings_for

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

RUN = "0123abcd-1111-2222-3333-444455556666"


def _record(home, run_id, dashboard, now):
    layout = StorageLayout(str(home))
    tracker = ProgressTracker("trained_model", ["2026-03-10", "2026-03-11"], started=now - 30, tell_every_s=0)
    p = tracker.observe({"kind": "epoch", "values": {"day": "2026-03-11", "epoch": 2, "epochs": 4}}, now)
    update_progress(layout, run_id, model="quest_ranker", step="trained_model", progress=p.record(), now=now)
    update_progress(layout, run_id, model="quest_ranker", now=now,
                    links=plain_links(ray_links(dashboard, f"run-{run_id[:8]}-abc", run_id, "arp-x")))


def test_a_running_backfill_shows_its_step_percent_eta_and_links(tmp_path):
    now = time.time()
    _record(tmp_path, RUN, "http://127.0.0.1:8265", now)
    _record(tmp_path, "ffff0000-kube", None, now - 60)            # KubeRay: no dashboard reachable
    with TestClient(create_app(settings_for(tmp_path), {}), base_url="http://127.0.0.1:8080") as client:
        runs = client.get("/api/runs").json()["runs"]
        assert [r["run_id"] for r in runs] == [RUN, "ffff0000-kube"]
        r = runs[0]
        assert (r["step"], r["percent"], r["days_done"], r["days_total"], r["day"], r["epoch"]) == (
            "trained_model", 75.0, 0, 2, "2026-03-11", 2)
        assert r["eta"] == "10s" and r["ray_dashboard"] == "http://127.0.0.1:8265"
        assert r["ray_job_logs"] == f"http://127.0.0.1:8265/#/jobs/run-{RUN[:8]}-abc"
        assert runs[1]["ray_dashboard"] is None and runs[1]["ray_job_logs"] is None
        page = client.get("/runs", headers={"Accept": "text/html"})
        assert page.status_code == 200
        row = page.text.split(f'data-run="{RUN}"')[1].split("</tr>")[0]
        assert '<td class="percent">75.0%</td>' in row and '<td class="eta">10s</td>' in row
        assert f'href="http://127.0.0.1:8265/#/jobs/run-{RUN[:8]}-abc"' in row and "epoch 2/4" in row
        assert "every line its driver printed is in this run&#39;s Dagster event log" in row
        assert 'href="/runs"' in client.get("/", headers={"Accept": "text/html"}).text


def test_no_run_yet_says_where_progress_comes_from(tmp_path):
    with TestClient(create_app(settings_for(tmp_path), {}), base_url="http://127.0.0.1:8080") as client:
        assert client.get("/api/runs").json() == {"runs": []}
        assert "No run has reported progress yet" in client.get("/runs", headers={"Accept": "text/html"}).text
