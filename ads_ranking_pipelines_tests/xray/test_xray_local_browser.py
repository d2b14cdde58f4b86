"""X-Ray in a real headless Chromium over one real local Ray cluster, created through the
create form and shared by the tests of this module (they run in file order): the table, the
dashboard link, a streamed job log, a run's progress on the Runs page, inert markup, the create form's validation, a notebook,
and delete with its confirmation."""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest
import requests

from ads_ranking_pipelines.backends.base import JobSpec
from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.processes import pids_mentioning
from ads_ranking_pipelines.backends.ray_job_api import RayJobApi
from ads_ranking_pipelines_tests.processes import wait_no_processes
from ads_ranking_pipelines_tests.xray.helpers import (
    XrayServer,
    chromium,
    chromium_path,
    screenshot,
    wait_until,
    xray_env,
)

pytestmark = pytest.mark.ray

NAME = "xr-local"
XSS_OWNER = "<script>window.__x=1</script><img src=x onerror=window.__x=2>"
TIMINGS: dict[str, float] = {}  # printed at the end (pytest -s): what the browser waited for


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    chromium_path()  # skip before starting anything when there is no browser
    return tmp_path_factory.mktemp("xray-local")


@pytest.fixture(scope="module")
def server(home: Path):
    srv = XrayServer(xray_env(home), "--no-kuberay", log_path=home / "xray.log")
    try:
        yield srv.wait_ready()
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def page(server: XrayServer):
    with chromium() as browser:
        # bypass_csp: the test's own probes evaluate JavaScript, and inert markup must be
        # inert because it is escaped, not only because the CSP forbids inline script.
        context = browser.new_context(viewport={"width": 1500, "height": 1000}, bypass_csp=True)
        pg = context.new_page()
        pg.set_default_timeout(30_000)
        yield pg
        context.close()


def state_dir(home: Path) -> Path:
    return home / "clusters"


@pytest.fixture(scope="module")
def cluster(home: Path, server: XrayServer, page) -> LocalRayCluster:
    """The module's cluster, made by filling in the create form."""
    from playwright.sync_api import expect

    try:
        page.goto(f"{server.url}/clusters/new")
        page.fill("input[name=name]", NAME)
        page.fill("input[name=workers]", "1")
        page.click("#review")
        expect(page.locator("h1")).to_contain_text(f"Create local cluster {NAME}")
        started = time.monotonic()
        page.click("#create")
        page.wait_for_url(re.compile(rf"/clusters/{NAME}\?"))
        status = page.locator("#cluster-status")
        expect(status).to_have_text(re.compile("running|failed"), timeout=600_000)
        assert status.inner_text() == "running", page.locator("dd").nth(1).inner_text()
        expect(page.locator("#cluster-workers")).to_have_text("1/1", timeout=120_000)
        TIMINGS["create (form submit to 1/1 workers shown)"] = time.monotonic() - started
        found = LocalRayCluster.find(NAME, state_dir(home))
        assert found is not None and found.alive()
        yield found
    finally:
        leftover = LocalRayCluster.find(NAME, state_dir(home))
        if leftover is not None:
            leftover.stop()
        print("X-Ray browser timings (s):", {k: round(v, 1) for k, v in TIMINGS.items()})


def row(page, name: str = NAME):
    return page.locator(f'tr[data-cluster="{name}"]')


def test_table_lists_the_cluster_with_owner_and_pool(page, server, cluster) -> None:
    from playwright.sync_api import expect

    page.goto(server.url + "/")
    r = row(page)
    expect(r.locator("td.owner")).to_have_text("alice")
    expect(r.locator("td.pool")).to_have_text("local")
    expect(r.locator("td.gpu-type")).to_have_text("none")
    expect(r.locator("td.workers")).to_have_text("1/1")
    expect(r.locator("td.status")).to_have_text("running")
    screenshot(page, "xray-table.png")
    # The table refreshes itself without reloading the page.
    page.evaluate("window.__marker = 42")
    before = page.inner_text("#refreshed")
    page.wait_for_function(f"document.getElementById('refreshed').textContent !== {before!r}",
                           timeout=30_000)
    assert page.evaluate("window.__marker") == 42
    expect(r.locator("td.owner")).to_have_text("alice")
    # Filters: by owner through the form, by pool and status through the URL.
    page.fill("input[name=owner]", "bob")
    page.click(".filters button")
    expect(row(page)).to_have_count(0)
    expect(page.locator("td.empty")).to_contain_text("match these filters")
    for query, count in (("owner=ali", 1), ("pool=l4", 0), ("status=running", 1), ("status=dead", 0)):
        page.goto(f"{server.url}/?{query}")
        expect(row(page)).to_have_count(count)
    # The JSON API has the same row; no page or answer shows the Ray auth token.
    data = requests.get(f"{server.url}/api/clusters", timeout=10).json()
    (api_row,) = [c for c in data["clusters"] if c["name"] == NAME]
    assert (api_row["owner"], api_row["pool"], api_row["workers"]) == ("alice", "local", "1/1")
    assert api_row["worker_hours"] >= 0 and api_row["gpu_hours"] == 0
    token = cluster.token_file.read_text().strip()
    for path in ("/", "/api/clusters", f"/clusters/{NAME}", f"/api/clusters/{NAME}"):
        assert token not in requests.get(server.url + path, timeout=10).text, path


def test_dashboard_link_answers(page, server, cluster) -> None:
    page.goto(server.url + "/")
    href = row(page).locator("a.dashboard").get_attribute("href")
    assert href == cluster.state.dashboard_url
    response = page.goto(href)
    assert response is not None and response.ok, response and response.status
    assert requests.get(f"{href}/api/version", headers=cluster.auth_headers(), timeout=10).ok


def test_job_log_view_streams_what_the_job_printed(page, server, cluster) -> None:
    from playwright.sync_api import expect

    code = ("import time; print('xray-line-1 <b>not bold</b>', flush=True); time.sleep(3); "
            "print('xray-line-2', flush=True)")
    api = RayJobApi(cluster.state.dashboard_url, headers=cluster.auth_headers())
    job_id = api.submit(JobSpec(submission_id="xray-job-1",
                                entrypoint=f'{sys.executable} -c "{code}"'))
    page.goto(f"{server.url}/clusters/{NAME}?backend=local")
    page.click(f'tr[data-job="{job_id}"] a')
    page.wait_for_url(re.compile(rf"/jobs/{job_id}"))
    log = page.locator("#log")
    expect(log).to_contain_text("xray-line-1 <b>not bold</b>", timeout=60_000)
    assert log.locator("b").count() == 0
    expect(log).to_contain_text("xray-line-2", timeout=60_000)
    expect(page.locator("#log-state")).to_have_text("complete (SUCCEEDED)", timeout=60_000)
    page.goto(f"{server.url}/clusters/{NAME}?backend=local")
    job_row = page.locator(f'tr[data-job="{job_id}"]')
    expect(job_row.locator("td.status")).to_have_text("SUCCEEDED")
    duration = float(job_row.locator("td.num").inner_text().split()[0])
    assert duration >= 3.0
    screenshot(page, "xray-cluster.png")


def test_runs_page_shows_a_runs_progress_and_its_job_on_the_clusters_dashboard(page, server, cluster, home) -> None:
    """A run's progress record (as a Ray step writes it) on the Runs page, reached from the nav:
    its step, percent, ETA and day; its links lead to this cluster's dashboard and job page."""
    from playwright.sync_api import expect

    from ads_ranking_pipelines.defs.progress import plain_links, ray_links
    from ads_ranking_pipelines.planning.progress import ProgressTracker
    from ads_ranking_pipelines.storage.layout import StorageLayout
    from ads_ranking_pipelines.storage.run_progress import update_progress

    run_id, now = "0badc0de-1111-2222-3333-444455556666", time.time()
    layout = StorageLayout(str(home))
    tracker = ProgressTracker("trained_model", ["2026-03-10", "2026-03-11"], started=now - 30, tell_every_s=0)
    progress = tracker.observe({"kind": "epoch", "values": {"day": "2026-03-11", "epoch": 2, "epochs": 4}}, now)
    update_progress(layout, run_id, model="quest_ranker", step="trained_model", progress=progress.record(), now=now)
    update_progress(layout, run_id, model="quest_ranker", now=now,
                    links=plain_links(ray_links(cluster.state.dashboard_url, "xray-job-1", run_id, NAME)))
    page.goto(server.url + "/")
    page.click('nav a[href="/runs"]')
    page.wait_for_url(re.compile(r"/runs$"))
    r = page.locator(f'tr[data-run="{run_id}"]')
    expect(r.locator("td.percent")).to_have_text("75.0%")
    expect(r).to_contain_text("trained_model")
    expect(r).to_contain_text("2026-03-11, epoch 2/4")
    assert r.locator("td.eta").inner_text() not in ("", "?")
    assert r.locator("a.dashboard").get_attribute("href") == cluster.state.dashboard_url
    job_href = r.locator("a.joblogs").get_attribute("href")
    assert job_href == f"{cluster.state.dashboard_url}/#/jobs/xray-job-1"
    response = page.goto(job_href)
    assert response is not None and response.ok, response and response.status
    screenshot(page, "xray-runs.png")


def test_markup_in_an_owner_renders_inert(page, server, cluster, home) -> None:
    from playwright.sync_api import expect

    state = {"name": "xss-owner", "owner": XSS_OWNER, "temp_dir": "/nonexistent/arp-xss",
             "request": {"name": "xss-owner", "owner": XSS_OWNER, "workers": 1},
             "gcs_address": "127.0.0.2:1", "dashboard_url": "http://127.0.0.1:1",
             "head_pid": 99_999_999, "worker_pids": [], "created_at": "2026-01-01T00:00:00+00:00"}
    path = state_dir(home) / "xss-owner.json"
    path.write_text(json.dumps(state))
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(server.url + "/")
        owner = row(page, "xss-owner").locator("td.owner")
        expect(owner).to_have_text(XSS_OWNER)
        assert owner.locator("script, img").count() == 0
        before = page.inner_text("#refreshed")
        page.wait_for_function(f"document.getElementById('refreshed').textContent !== {before!r}",
                               timeout=30_000)  # a refresh inserts the rows again
        expect(owner).to_have_text(XSS_OWNER)
        page.goto(f"{server.url}/clusters/xss-owner?backend=local")
        expect(page.locator("#cluster-owner")).to_have_text(XSS_OWNER)
        assert page.evaluate("typeof window.__x") == "undefined" and dialogs == []
        assert page.locator("main script, main img").count() == 0
    finally:
        path.unlink()


def test_create_form_refuses_99_gpus_naming_the_field(page, server, cluster, home) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server.url}/clusters/new")
    page.fill("input[name=name]", "xr-bad")
    page.fill("input[name=gpus_per_worker]", "99")
    page.click("#review")
    error = page.locator(".form-error")
    expect(error).to_contain_text("invalid --gpus-per-worker (gpus_per_worker) = 99")
    expect(page.locator("input[name=gpus_per_worker]")).to_have_class("invalid")
    expect(page.locator("input[name=gpus_per_worker]")).to_have_value("99")
    # A GPU pool on the local backend names the pool.
    page.select_option("select[name=gpu_pool]", "l4")
    page.fill("input[name=gpus_per_worker]", "1")
    page.click("#review")
    expect(page.locator(".form-error")).to_contain_text("invalid --gpu-pool (gpu_pool) = 'l4'")
    assert not (state_dir(home) / "xr-bad.json").exists()
    names = [c["name"] for c in requests.get(f"{server.url}/api/clusters", timeout=10).json()["clusters"]]
    assert "xr-bad" not in names


def test_notebook_starts_answers_with_its_token_and_stops(page, server, cluster, home) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server.url}/clusters/{NAME}?backend=local")
    page.fill("#notebook input[name=owner]", "nora")
    started = time.monotonic()
    page.click("#notebook-start")
    link = page.locator("#notebook-link")
    expect(link).to_be_visible(timeout=120_000)
    TIMINGS["notebook start (click to link)"] = time.monotonic() - started
    url = link.get_attribute("href")
    base = url.split("lab?")[0]
    token = url.split("token=")[1]
    assert base.startswith("http://127.0.0.1:")
    assert requests.get(url, timeout=10).status_code == 200
    assert requests.get(f"{base}api/status", headers={"Authorization": f"token {token}"},
                        timeout=10).status_code == 200
    assert requests.get(f"{base}api/status", timeout=10).status_code == 403
    nb_state = json.loads((home / "notebooks" / f"{NAME}.json").read_text())
    environ = Path(f"/proc/{nb_state['pid']}/environ").read_bytes()
    assert f"RAY_ADDRESS={cluster.state.gcs_address}".encode() in environ.split(b"\0")
    assert token.encode() not in Path(f"/proc/{nb_state['pid']}/cmdline").read_bytes()
    page.goto(server.url + "/")
    expect(row(page).locator(".notebook-owner")).to_have_text("nora")
    screenshot(page, "xray-table-notebook.png")
    page.goto(f"{server.url}/clusters/{NAME}?backend=local")
    page.click("#notebook-stop")
    expect(page.locator("#notebook-start")).to_be_visible()
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{base}api/status", timeout=5)
    assert not Path(f"/proc/{nb_state['pid']}").exists() or \
        Path(f"/proc/{nb_state['pid']}/stat").read_text().split(")")[-1].split()[0] == "Z"


def test_delete_asks_then_removes_the_cluster_and_its_processes(page, server, cluster, home) -> None:
    from playwright.sync_api import expect

    temp_dir = cluster.state.temp_dir
    pids = [cluster.state.head_pid, *cluster.state.worker_pids]
    assert pids_mentioning(temp_dir)
    page.goto(f"{server.url}/clusters/{NAME}?backend=local")
    page.click("#delete-link")
    page.fill("#confirm-name", "not-it")
    page.click("#confirm-delete")
    expect(page.locator("#form-error")).to_contain_text("nothing was deleted")
    assert cluster.alive()
    page.fill("#confirm-name", NAME)
    started = time.monotonic()
    page.click("#confirm-delete")
    page.wait_for_url(re.compile(r"/\?notice="), timeout=120_000)
    TIMINGS["delete (confirm to table)"] = time.monotonic() - started
    expect(page.locator("#notice")).to_have_text(f"deleted local cluster {NAME}")
    expect(row(page)).to_have_count(0)
    assert not (state_dir(home) / f"{NAME}.json").exists()
    assert wait_no_processes(temp_dir, timeout_s=15) == []
    assert not any(os.path.exists(f"/proc/{p}/cmdline") and Path(f"/proc/{p}/cmdline").read_bytes()
                   for p in pids)
    wait_until(lambda: not os.path.exists(temp_dir), 10, what="temp dir removed")
