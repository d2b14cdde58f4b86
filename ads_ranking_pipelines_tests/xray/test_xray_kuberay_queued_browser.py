"""X-Ray over KubeRay on a Kueue pool, in a real headless Chromium against the fake API server's
toy Kueue: a CLI RayCluster whose quota is taken and a queued Dagster run's RayJob (no cluster
yet) are listed ``queued`` with Kueue's words and position (list row and detail page); once
the quota is freed the cluster runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from ads_ranking_pipelines.backends.kuberay import KubeRayBackend
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines_tests.kuberay.cases import KUEUE_CATALOG
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    client_for,
    write_kubeconfig,
)
from ads_ranking_pipelines_tests.kuberay.kueue_cases import (
    GPU_IMAGE,
    INSUFFICIENT,
    LOCAL_QUEUE,
    NS,
    h100_request,
    one_cluster_of_quota,
    queued_run_job,
)
from ads_ranking_pipelines_tests.xray.helpers import (
    XrayServer,
    chromium,
    chromium_path,
    xray_env,
)

pytestmark = pytest.mark.slow  # real processes (README: Tests)


def test_queued_cluster_and_run_show_kueues_words_and_position(
        fake_apiserver: FakeKubeApiServer, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    chromium_path()
    one_cluster_of_quota(fake_apiserver)
    b = KubeRayBackend(client_for(fake_apiserver), load_catalog(KUEUE_CATALOG),
                       poll_interval_s=0.05)
    b.create_cluster(h100_request("alice-h100", "alice"), timeout_s=20)  # admitted: holds the quota
    b.create_cluster(h100_request("bob-h100", "bob"), wait=False)
    job = queued_run_job(b, fake_apiserver)

    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake_apiserver, context="fake")
    env = xray_env(tmp_path, KUBECONFIG=kubeconfig, ADS_RANKING_RAY_IMAGE=GPU_IMAGE,
                   ADS_RANKING_POOL_CATALOG=str(KUEUE_CATALOG))
    srv = XrayServer(env, "--context", "fake", "-n", NS, log_path=tmp_path / "xray.log")
    try:
        server = srv.wait_ready()
        with chromium() as browser:
            page = browser.new_context(viewport={"width": 1500, "height": 1000}).new_page()
            page.set_default_timeout(30_000)
            page.goto(server.url + "/")
            bob = page.locator('tr[data-cluster="bob-h100"]')
            expect(bob.locator("td.status")).to_contain_text("queued")
            expect(bob.locator(".queue-position")).to_contain_text(
                "position 1 in its LocalQueue (1 in its ClusterQueue), queued ")
            title = bob.locator("td.status").get_attribute("title") or ""
            assert title.startswith("Workload raycluster-bob-h100-") and INSUFFICIENT in title
            run = page.locator(f'tr[data-cluster="{job}"]')
            expect(run.locator("td.status")).to_contain_text("queued")
            expect(run.locator(".queue-position")).to_contain_text("position 2 in its LocalQueue")
            expect(page.locator('tr[data-cluster="alice-h100"] td.status')).to_have_text("ready")

            page.goto(f"{server.url}/clusters/bob-h100?backend=kuberay&namespace={NS}")
            expect(page.locator("#cluster-status")).to_have_text("queued")
            queue = page.locator("#cluster-queue")
            expect(queue).to_contain_text(f"LocalQueue {LOCAL_QUEUE}")
            expect(queue.locator(".queue-words")).to_contain_text(INSUFFICIENT)
            expect(queue.locator(".queue-position")).to_have_text(
                "position 1 in its LocalQueue (1 in its ClusterQueue)")
            page.goto(f"{server.url}/clusters/{job}?backend=kuberay&namespace={NS}")
            expect(page.locator("#cluster-queue")).to_contain_text("RayJob with no RayCluster yet")

            b.delete_cluster(NS, "alice-h100")  # the quota frees: bob's cluster is admitted
            page.goto(f"{server.url}/clusters/bob-h100?backend=kuberay&namespace={NS}")
            expect(page.locator("#cluster-status")).to_have_text("ready", timeout=30_000)
            assert page.locator("#cluster-queue").count() == 0
    finally:
        srv.stop()
    b.stop_job(NS, job)
    b.delete_cluster(NS, "bob-h100")
    assert fake_apiserver.leftovers() == [] and fake_apiserver.pod_names() == []
