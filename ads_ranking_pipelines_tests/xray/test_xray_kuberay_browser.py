"""X-Ray over KubeRay in a real headless Chromium, against the in-test fake API server reached
through a kubeconfig context (as from a laptop): the listing across namespaces (one of them
forbidden), a label holding markup, create through the form (with notebook support) with the
manifest shown first, a RayJob's streamed log, a notebook started and stopped with its buttons
(link with the token on the start answer only, owner in the table), and delete with its
confirmation (taking a running notebook's Service and Secret with the cluster)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import requests

from ads_ranking_pipelines.backends.base import JobSpec
from ads_ranking_pipelines.backends.kuberay import KubeRayBackend
from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.validation import resolve_request
from ads_ranking_pipelines.kuberay.labels import LABEL_OWNER
from ads_ranking_pipelines.kuberay.raycluster import build_raycluster
from ads_ranking_pipelines_tests.cli.helpers import RAY_IMAGE
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    client_for,
    write_kubeconfig,
)
from ads_ranking_pipelines_tests.xray.helpers import (
    XrayServer,
    chromium,
    chromium_path,
    screenshot,
    wait_until,
    xray_env,
)

pytestmark = pytest.mark.slow  # real processes (README: Tests)

NS = "ads-ranking"
FORBIDDEN = "team-secret"
XSS = "<script>window.__k=1</script>"


@pytest.fixture
def kube_xray(fake_apiserver: FakeKubeApiServer, tmp_path: Path):
    chromium_path()
    fake_apiserver.scenario = Scenario(log_lines=("hello from kuberay <i>x</i>",),
                                       line_interval_s=0.2)
    fake_apiserver.inject("GET", rf"/namespaces/{FORBIDDEN}/", 403, times=None,
                          message=f'rayclusters.ray.io is forbidden: User "alice" cannot list '
                                  f'resource "rayclusters" in the namespace "{FORBIDDEN}"')
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake_apiserver, context="fake")
    env = xray_env(tmp_path, KUBECONFIG=kubeconfig, ADS_RANKING_RAY_IMAGE=RAY_IMAGE)
    srv = XrayServer(env, "--context", "fake", "-n", NS, "-n", FORBIDDEN,
                     "--dagster-url", "http://dagster.example:3000", log_path=tmp_path / "xray.log")
    try:
        yield srv.wait_ready(), fake_apiserver
    finally:
        srv.stop()


def seed_markup_cluster(fake: FakeKubeApiServer) -> None:
    """Someone's cluster whose owner label holds markup (the API server would refuse such a
    label value; a label is still input X-Ray must not trust)."""
    resolved = resolve_request(ClusterRequest(name="theirs", owner="mallory", workers=1),
                               load_catalog())
    manifest = build_raycluster(resolved, run_id="8f1d6c1e-0000-4000-8000-000000000001")
    manifest["metadata"]["labels"][LABEL_OWNER] = XSS
    fake.seed(RAYCLUSTERS, manifest)


def test_kuberay_list_create_log_delete(kube_xray) -> None:
    server, fake = kube_xray
    seed_markup_cluster(fake)
    with chromium() as browser:
        page = browser.new_context(viewport={"width": 1500, "height": 1000},
                                   bypass_csp=True).new_page()
        page.set_default_timeout(30_000)
        check_listing(page, server)
        create_through_the_form(page, server, fake)
        check_created_row(page, server)
        stream_a_job_log(page, server, fake)
        start_and_stop_a_notebook(page, server, fake)
        delete_after_confirming(page, server, fake)
    assert fake.leftovers() == []


def check_listing(page, server) -> None:
    from playwright.sync_api import expect

    page.goto(server.url + "/")
    theirs = page.locator('tr[data-cluster="theirs"]')
    expect(theirs.locator("td.owner")).to_have_text(XSS)
    assert theirs.locator("td.owner script").count() == 0
    assert page.evaluate("typeof window.__k") == "undefined"
    expect(theirs.locator("a.dagster-run")).to_have_attribute(
        "href", "http://dagster.example:3000/runs/8f1d6c1e-0000-4000-8000-000000000001")
    expect(page.locator(".warning")).to_contain_text(f"KubeRay namespace {FORBIDDEN}: forbidden")
    # A cluster created without notebook support says why there is no notebook.
    page.goto(f"{server.url}/clusters/theirs?backend=kuberay&namespace={NS}")
    expect(page.locator("#notebook-unsupported")).to_contain_text("without notebook support")
    expect(page.locator("#notebook-start")).to_be_disabled()


def create_through_the_form(page, server, fake) -> None:
    """The manifest is shown before anything is sent; errors name the field."""
    from playwright.sync_api import expect

    page.goto(server.url + "/clusters/new")
    page.select_option("select[name=backend]", "kuberay")
    page.fill("input[name=name]", "alice-l4")
    page.select_option("select[name=gpu_pool]", "l4")
    page.fill("input[name=gpus_per_worker]", "9")
    page.fill("input[name=cpus_per_worker]", "8")
    page.fill("input[name=memory_per_worker]", "32Gi")
    page.click("#review")
    expect(page.locator(".form-error")).to_contain_text(
        "invalid --gpus-per-worker (gpus_per_worker) = 9")
    page.fill("input[name=gpus_per_worker]", "1")
    page.check("input[name=notebook]")
    before = len(fake.requests)
    page.click("#review")
    manifest = page.locator("#manifest")
    expect(manifest).to_contain_text("kind: RayCluster")
    expect(page.locator("#review-notebook")).to_contain_text("Notebook support: yes")
    expect(manifest).to_contain_text("secretName: alice-l4-notebook-token")
    expect(manifest).to_contain_text("nvidia.com/gpu: '1'")
    assert len(fake.requests) == before  # reviewing sends nothing
    page.click("#create")
    page.wait_for_url(re.compile(r"/clusters/alice-l4\?"))
    expect(page.locator("#cluster-status")).to_have_text("ready", timeout=30_000)
    created = fake.get(RAYCLUSTERS, NS, "alice-l4")
    assert created["metadata"]["labels"][LABEL_OWNER] == "alice"


def check_created_row(page, server) -> None:
    from playwright.sync_api import expect

    page.goto(server.url + "/")
    mine = page.locator('tr[data-cluster="alice-l4"]')
    expect(mine.locator("td.gpu-type")).to_have_text("nvidia-l4")
    expect(mine.locator("td.gpus")).to_have_text("1")
    expect(mine.locator("td.workers")).to_have_text("1/1")
    expect(mine.locator("td.status")).to_have_text("ready")
    assert "HeadPodReady" in (mine.locator("td.status").get_attribute("title") or "")
    screenshot(page, "xray-kuberay-table.png")
    api = requests.get(f"{server.url}/api/clusters?pool=l4", timeout=10).json()
    assert [c["name"] for c in api["clusters"]] == ["alice-l4"]
    assert "not-a-real-token" not in requests.get(f"{server.url}/api/clusters", timeout=10).text


def stream_a_job_log(page, server, fake) -> None:
    """A RayJob on the cluster: its submitter's log streams into the page, as text."""
    from playwright.sync_api import expect

    backend = KubeRayBackend(client_for(fake), load_catalog(), poll_interval_s=0.05)
    job = backend.submit_to_cluster(NS, "alice-l4", JobSpec(submission_id="j1",
                                                            entrypoint="python -c 1"))
    page.goto(f"{server.url}/clusters/alice-l4/jobs/{job}?backend=kuberay&namespace={NS}")
    expect(page.locator("#log")).to_contain_text("hello from kuberay <i>x</i>")
    assert page.locator("#log i").count() == 0
    expect(page.locator("#log-state")).to_contain_text("complete", timeout=30_000)


def start_and_stop_a_notebook(page, server, fake) -> None:
    """The buttons: start shows the link with its token once; the table shows the owner (no
    token anywhere else); stop deletes the Service and the Secret. A second notebook is left
    running for the cluster's deletion to take away."""
    from playwright.sync_api import expect

    cluster_page = f"{server.url}/clusters/alice-l4?backend=kuberay&namespace={NS}"
    page.goto(cluster_page)
    page.fill("#notebook input[name=owner]", "nora")
    page.click("#notebook-start")
    link = page.locator("#notebook-link")
    expect(link).to_have_attribute("href", re.compile(
        rf"^http://alice-l4-notebook\.{NS}\.svc:8888/lab\?token=[\w-]{{40,}}$"))
    token = link.get_attribute("href").split("token=")[1]
    expect(page.locator("#notebook-port-forward")).to_have_text(
        f"kubectl -n {NS} port-forward svc/alice-l4-notebook 8888")
    screenshot(page, "xray-kuberay-notebook-started.png")
    assert fake.names("services", NS) == ["alice-l4-notebook"]
    assert fake.names("secrets", NS) == ["alice-l4-notebook-token"]
    page.goto(server.url + "/")
    mine = page.locator('tr[data-cluster="alice-l4"]')
    expect(mine.locator(".notebook-owner")).to_have_text("nora")
    screenshot(page, "xray-kuberay-table-notebook.png")
    assert token not in page.content()
    assert token not in requests.get(f"{server.url}/api/clusters", timeout=10).text
    page.goto(cluster_page)
    expect(page.locator("#notebook-address")).to_have_text(
        f"http://alice-l4-notebook.{NS}.svc:8888/lab")
    assert token not in page.content()
    page.click("#notebook-stop")
    expect(page.locator("#notebook-start")).to_be_enabled()
    assert fake.names("services") == fake.names("secrets") == []
    assert token not in server.log()
    page.click("#notebook-start")
    expect(page.locator("#notebook-link")).to_be_visible()


def delete_after_confirming(page, server, fake) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server.url}/clusters/alice-l4?backend=kuberay&namespace={NS}")
    page.click("#delete-link")
    page.fill("#confirm-name", "alice-l4")
    page.click("#confirm-delete")
    expect(page.locator("#notice")).to_have_text("deleted kuberay cluster alice-l4")
    wait_until(lambda: fake.get(RAYCLUSTERS, NS, "alice-l4") is None, 15,
               what="RayCluster deleted")
    # Its notebook's Service and Secret went with it (ownerReferences).
    assert fake.names("services") == fake.names("secrets") == []
