"""X-Ray's KubeRay notebooks in-process (Starlette's test client) against the fake API server,
through the real ``kubernetes`` client: create a cluster with notebook support (the reviewed
manifest shows it), start a notebook (the token only in that answer), see it in the table and
the JSON listing with its owner but no token, stop it, start again and delete the cluster (the
Service and Secret go with it); a cluster without support says why and what is valid."""

from __future__ import annotations

import contextlib
import logging
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.xray.app import create_app
from ads_ranking_pipelines.xray.security import CSRF_COOKIE
from ads_ranking_pipelines.xray.settings import KubeSettings, XraySettings
from ads_ranking_pipelines_tests.cli.helpers import RAY_IMAGE
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import FakeKubeApiServer, write_kubeconfig
from ads_ranking_pipelines_tests.xray.helpers import wait_until

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

NS = "ads-ranking"


@contextlib.contextmanager
def xray_client(fake: FakeKubeApiServer, home: Path, **kube: object) -> Iterator[TestClient]:
    kubeconfig = write_kubeconfig(home / "kubeconfig", fake, context="fake")
    kube.setdefault("namespaces", (NS,))
    settings = XraySettings(
        host="127.0.0.1", port=8080, token=None, dagster_url="http://dagster:3000",
        settings=Settings.from_environ({"ADS_RANKING_HOME": str(home), "KUBECONFIG": kubeconfig,
                                        "ADS_RANKING_RAY_IMAGE": RAY_IMAGE}),
        default_owner="alice", kube=KubeSettings(enabled=True, context="fake", **kube))
    with TestClient(create_app(settings, {}), base_url="http://127.0.0.1:8080") as c:
        c.get("/")
        c.headers["X-CSRF-Token"] = c.cookies[CSRF_COOKIE]
        yield c


@pytest.fixture
def client(fake_apiserver: FakeKubeApiServer, tmp_path: Path):
    with xray_client(fake_apiserver, tmp_path) as c:
        yield c


def create(client: TestClient, fake: FakeKubeApiServer, name: str, notebook: str) -> None:
    answer = client.post("/api/clusters", json={"backend": "kuberay", "name": name,
                                                "notebook": notebook})
    assert answer.status_code == 202, answer.text
    wait_until(lambda: (fake.get(RAYCLUSTERS, NS, name) or {}).get("status", {}).get("state")
               == "ready", 10, 0.05, what=f"{name} ready")


@pytest.mark.slow
def test_notebook_start_list_stop_and_gone_with_the_cluster(
        client: TestClient, fake_apiserver: FakeKubeApiServer,
        caplog: pytest.LogCaptureFixture) -> None:
    fake = fake_apiserver
    caplog.set_level(logging.DEBUG)
    csrf = client.headers["X-CSRF-Token"]
    review = client.post("/clusters/review", data={"csrf_token": csrf, "backend": "kuberay",
                                                   "name": "nb1", "notebook": "yes"})
    assert "Notebook support: yes" in review.text and "ray.io/overwrite-container-cmd" in review.text
    create(client, fake, "nb1", "yes")

    page = client.get(f"/clusters/nb1?backend=kuberay&namespace={NS}").text
    assert 'id="notebook-start"' in page and "without restarting it" in page
    started = client.post(f"/api/clusters/nb1/notebook?backend=kuberay&namespace={NS}&owner=bob")
    assert started.status_code == 200, started.text
    assert started.headers["cache-control"] == "no-store"
    body = started.json()
    token = re.search(r"token=([\w-]+)", body["url"])[1]
    assert body["owner"] == "bob" and body["backend"] == "kuberay"
    assert body["url"] == f"http://nb1-notebook.{NS}.svc:8888/lab?token={token}"
    assert body["port_forward"] == f"kubectl -n {NS} port-forward svc/nb1-notebook 8888"
    assert fake.names("services", NS) == ["nb1-notebook"]
    assert fake.names("secrets", NS) == ["nb1-notebook-token"]

    listing = client.get("/api/clusters")
    (row,) = [c for c in listing.json()["clusters"] if c["name"] == "nb1"]
    assert row["notebook"]["owner"] == "bob"
    assert row["notebook"]["url"] == f"http://nb1-notebook.{NS}.svc:8888/lab"
    table = client.get("/").text
    assert re.search(r'data-cluster="nb1".*?notebook-owner">bob<', table, re.S)
    page = client.get(f"/clusters/nb1?backend=kuberay&namespace={NS}").text
    assert 'id="notebook-stop"' in page
    again = client.post(f"/api/clusters/nb1/notebook?backend=kuberay&namespace={NS}")
    assert again.status_code == 409 and "already runs" in again.json()["error"]
    for text in (listing.text, table, page, client.get("/api/clusters/nb1?backend=kuberay").text,
                 caplog.text, again.text):
        assert token not in text

    stopped = client.post(f"/api/clusters/nb1/notebook/stop?backend=kuberay&namespace={NS}")
    assert stopped.json() == {"cluster": "nb1", "stopped": True}
    assert fake.names("services") == fake.names("secrets") == []
    (row,) = [c for c in client.get("/api/clusters").json()["clusters"] if c["name"] == "nb1"]
    assert row["notebook"] is None

    # Through the form: the token is on that answer's page only, then the cluster goes and
    # takes its notebook's Service and Secret with it.
    answer = client.post(f"/clusters/nb1/notebook/start?backend=kuberay&namespace={NS}",
                         data={"csrf_token": csrf, "owner": "carol"})
    assert answer.status_code == 200 and 'id="notebook-link"' in answer.text
    second = re.search(r"token=([\w-]+)", answer.text)[1]
    assert second != token and answer.headers["cache-control"] == "no-store"
    assert second not in client.get(f"/clusters/nb1?backend=kuberay&namespace={NS}").text
    client.post(f"/api/clusters/nb1/delete?backend=kuberay&namespace={NS}")
    wait_until(lambda: not (fake.names("services") or fake.names("secrets")
                            or fake.names(RAYCLUSTERS)), 10, 0.05, what="all gone")
    assert second not in caplog.text
    assert fake.count("GET", r"/secrets") == 0
    assert fake.leftovers() == []


def test_cluster_without_notebook_support_explains(client: TestClient,
                                                   fake_apiserver: FakeKubeApiServer) -> None:
    fake = fake_apiserver
    create(client, fake, "plain", "")
    page = client.get(f"/clusters/plain?backend=kuberay&namespace={NS}").text
    assert 'id="notebook-unsupported"' in page and "restart" in page
    refused = client.post(f"/api/clusters/plain/notebook?backend=kuberay&namespace={NS}")
    assert refused.status_code == 409
    assert refused.json()["error"].startswith(f"invalid cluster = {NS}/plain: it was created "
                                              "without notebook support")
    assert "Valid: a cluster created with notebook support" in refused.json()["error"]
    bad = client.post("/api/clusters", json={"backend": "kuberay", "name": "x", "notebook": "maybe"})
    assert bad.status_code == 400
    assert bad.json() == {"error": "invalid notebook = 'maybe'; valid: yes, no", "fields": ["notebook"]}
    assert fake.names("services") == fake.names("secrets") == []
    client.post(f"/api/clusters/plain/delete?backend=kuberay&namespace={NS}")
    wait_until(lambda: not fake.names(RAYCLUSTERS), 10, 0.05, what="deleted")


def test_all_namespaces_lists_every_namespace_with_a_namespace_filter(
        fake_apiserver: FakeKubeApiServer, tmp_path: Path) -> None:
    """``--all-namespaces`` (the chart's xray.crossNamespace): one cluster-wide list of
    RayClusters and of notebook Services; the table filters by namespace; creating stays in
    the configured namespace."""
    from ads_ranking_pipelines_tests.backends.kuberay_helpers import make_backend

    fake = fake_apiserver
    backend = make_backend(fake)
    for ns, name in (("team-a", "a1"), (NS, "b1")):
        backend.create_cluster(ClusterRequest(name=name, owner="ann", workers=1, namespace=ns),
                               notebook=True)
    backend.start_notebook("team-a", "a1", "ann")
    with xray_client(fake, tmp_path, all_namespaces=True) as c:
        listing = c.get("/api/clusters").json()
        assert sorted((r["namespace"], r["name"]) for r in listing["clusters"]) == [
            (NS, "b1"), ("team-a", "a1")]
        assert listing["notes"] == []
        (a1,) = [r for r in listing["clusters"] if r["name"] == "a1"]
        assert a1["notebook"]["owner"] == "ann"
        only_a = c.get("/api/clusters?namespace=team-a").json()["clusters"]
        assert [r["name"] for r in only_a] == ["a1"]
        page = c.get("/?namespace=team-a").text
        assert '<option value="team-a" selected>' in page and 'data-cluster="b1"' not in page
        assert c.get("/api/clusters?namespace=local").json()["clusters"] == []
    fake.inject("GET", r"^/apis/ray\.io/v1/rayclusters$", 403, times=None, reason="Forbidden",
                message='rayclusters.ray.io is forbidden: User "xray" cannot list resource '
                        '"rayclusters" at the cluster scope')
    with xray_client(fake, tmp_path, all_namespaces=True) as c:
        (note,) = c.get("/api/clusters").json()["notes"]
        assert note.startswith("KubeRay (all namespaces): forbidden") and "xray.crossNamespace" in note
    fake.clear_faults()
    assert fake.count("GET", r"^/apis/ray\.io/v1/rayclusters$") >= 1  # cluster-wide, not per ns
    assert fake.count("GET", r"/namespaces/team-a/rayclusters$") == 0
    for ns, name in (("team-a", "a1"), (NS, "b1")):
        backend.delete_cluster(ns, name)
    assert fake.leftovers() == []
