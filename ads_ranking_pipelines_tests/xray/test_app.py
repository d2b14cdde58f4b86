"""The X-Ray app in-process (Starlette's test client), no Ray: every page renders for starting
and dead clusters, the security rules hold on every route, and the JSON API answers."""

from __future__ import annotations

import datetime as dt
import json
import warnings
from pathlib import Path

import pytest
from starlette.routing import Route

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.xray.app import create_app
from ads_ranking_pipelines.xray.local_source import Starting
from ads_ranking_pipelines.xray.security import CSRF_COOKIE, SESSION_COOKIE, session_value
from ads_ranking_pipelines.xray.server import RedactTokens, UnsafeBind, check_bind
from ads_ranking_pipelines.xray.settings import KubeSettings, XraySettings

with warnings.catch_warnings():  # Starlette 1.10 suggests httpx2 for its test client
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

TOKEN = "s3cret-xray-token"


def settings_for(home: Path, host: str = "127.0.0.1", token: str | None = None) -> XraySettings:
    return XraySettings(host=host, port=8080, token=token, dagster_url="http://dagster:3000",
                        settings=Settings.from_environ({"ADS_RANKING_HOME": str(home)}),
                        default_owner="alice", kube=KubeSettings(enabled=False))


def dead_cluster(home: Path, name: str, owner: str = "bob") -> None:
    (home / "clusters").mkdir(parents=True, exist_ok=True)
    (home / "clusters" / f"{name}.json").write_text(json.dumps({
        "name": name, "owner": owner, "temp_dir": "/nonexistent/arp-x",
        "request": {"name": name, "owner": owner, "workers": 2},
        "gcs_address": "127.0.0.2:1", "dashboard_url": "http://127.0.0.1:1",
        "head_pid": 99_999_999, "worker_pids": [], "created_at": "2026-01-01T00:00:00+00:00"}))


@pytest.fixture
def app(tmp_path):
    dead_cluster(tmp_path, "old-one")
    return create_app(settings_for(tmp_path), {})


@pytest.fixture
def client(app):
    with TestClient(app, base_url="http://127.0.0.1:8080") as c:
        yield c


def csrf_of(client: TestClient) -> str:
    client.get("/")
    return client.cookies[CSRF_COOKIE]


def test_pages_render_dead_and_starting_clusters(app, client) -> None:
    source = app.state.service.local
    request = ClusterRequest(name="new-one", owner="carol", workers=1)
    source._starting["new-one"] = Starting(request, dt.datetime.now(dt.timezone.utc))
    page = client.get("/", headers={"Accept": "text/html"})
    assert page.status_code == 200
    assert 'data-cluster="old-one"' in page.text and 'data-cluster="new-one"' in page.text
    for path in ("/clusters/old-one?backend=local", "/clusters/new-one?backend=local",
                 "/clusters/old-one/delete?backend=local", "/clusters/new", "/fragments/clusters",
                 "/clusters/old-one/fragment?backend=local", "/login"):
        assert client.get(path).status_code == 200, path
    rows = {c["name"]: c for c in client.get("/api/clusters").json()["clusters"]}
    assert rows["old-one"]["status"] == "dead" and rows["new-one"]["status"] == "starting"
    assert rows["old-one"]["worker_hours"] > 0  # 2 workers since 2026-01-01
    assert client.get("/api/clusters?owner=carol").json()["clusters"][0]["name"] == "new-one"
    missing = client.get("/clusters/nope", headers={"Accept": "text/html"})
    assert missing.status_code == 404 and "no cluster named" in missing.text


def test_security_headers_and_host_check(client) -> None:
    r = client.get("/")
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-frame-options"] == "DENY" and r.headers["referrer-policy"] == "no-referrer"
    assert "HttpOnly" in r.headers["set-cookie"] and "SameSite=Strict" in r.headers["set-cookie"]
    assert client.get("/", headers={"Host": "evil.example:8080"}).status_code == 400


def post_routes(app) -> list[str]:
    paths = []
    for route in app.routes:
        if isinstance(route, Route) and "POST" in (route.methods or ()):
            paths.append(route.path.replace("{name}", "old-one"))
    return paths


def test_every_post_needs_the_csrf_token(app, client) -> None:
    paths = post_routes(app)
    assert len(paths) >= 8, paths
    token = csrf_of(client)
    for path in paths:
        if path == "/login":
            continue
        refused = client.post(path + "?backend=local", data={"confirm": "old-one"})
        assert refused.status_code == 403, path
        wrong = client.post(path + "?backend=local", data={"csrf_token": "x", "confirm": "old-one"})
        assert wrong.status_code == 403, path
    assert app.state.service.local.find("old-one") is not None  # nothing was deleted
    ok = client.post("/clusters/old-one/delete?backend=local",
                     data={"csrf_token": token, "confirm": "not-it"})
    assert ok.status_code == 400 and "nothing was deleted" in ok.text
    cross = client.post("/api/clusters/old-one/delete", headers={"X-CSRF-Token": token,
                                                                  "Origin": "http://evil.example"})
    assert cross.status_code == 403


def test_non_loopback_needs_a_token(tmp_path) -> None:
    with pytest.raises(UnsafeBind, match="--host"):
        check_bind(settings_for(tmp_path, host="0.0.0.0"))
    check_bind(settings_for(tmp_path, host="0.0.0.0", token=TOKEN))
    check_bind(settings_for(tmp_path))


def test_bearer_token_and_browser_sign_in(tmp_path) -> None:
    dead_cluster(tmp_path, "old-one")
    app = create_app(settings_for(tmp_path, host="0.0.0.0", token=TOKEN), {})
    with TestClient(app, base_url="http://10.1.2.3:8080", follow_redirects=False) as c:
        assert c.get("/api/clusters").status_code == 401
        assert c.get("/api/clusters", headers={"Authorization": "Bearer nope"}).status_code == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert c.get("/api/clusters", headers=bearer).json()["clusters"][0]["name"] == "old-one"
        # A bearer-authenticated POST needs no CSRF token (browsers never send that header).
        assert c.post("/api/clusters/nope/delete", headers=bearer).status_code == 404
        page = c.get("/", headers={"Accept": "text/html"})
        assert page.status_code == 303 and page.headers["location"].startswith("/login")
        assert c.post("/login", data={"token": "wrong", "next": "/"}).status_code == 401
        link = c.get(f"/?token={TOKEN}&owner=bob")
        assert link.status_code == 303 and link.headers["location"] == "/?owner=bob"
        assert c.cookies[SESSION_COOKIE] == session_value(TOKEN) != TOKEN
        assert c.get("/", headers={"Accept": "text/html"}).status_code == 200


def test_access_log_never_shows_the_sign_in_token() -> None:
    import logging

    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s"',
                               ("1.2.3.4", "GET", f"/?token={TOKEN}&owner=bob"), None)
    RedactTokens().filter(record)
    assert TOKEN not in record.getMessage() and "owner=bob" in record.getMessage()


def test_api_create_validates_like_the_cli(client) -> None:
    token = csrf_of(client)
    bad = client.post("/api/clusters", json={"name": "x1", "gpus_per_worker": 99},
                      headers={"X-CSRF-Token": token})
    assert bad.status_code == 400
    assert "invalid --gpus-per-worker (gpus_per_worker) = 99" in bad.json()["error"]
    assert bad.json()["fields"] == ["gpus_per_worker"]
    wrong_backend = client.post("/api/clusters", json={"backend": "kuberay"},
                                headers={"X-CSRF-Token": token})
    assert wrong_backend.status_code == 400 and "valid: local" in wrong_backend.json()["error"]
