"""Notebooks on long-lived RayClusters through the real ``kubernetes`` client against the fake
API server: start makes a token Secret and a Service owned by the RayCluster (strictly valid,
the right selector), list shows the owner, stop and cluster deletion remove both, a cluster
without notebook support is refused with the reason, a failed start leaves nothing, and the
token is in no object but the Secret, in no log line, and never read back."""

from __future__ import annotations

import base64
import logging
import re

import pytest

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS
from ads_ranking_pipelines.backends.kuberay.notebooks import NotebookUnsupported
from ads_ranking_pipelines.backends.kuberay.permissions import NOTEBOOK_PERMISSIONS, PERMISSIONS
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines_tests.backends.kuberay_helpers import NS, assert_nothing_left, make_backend
from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import FakeKubeApiServer

NAME = "nb-cluster"
REQUEST = ClusterRequest(name=NAME, owner="alice", workers=1)


_PATH = re.compile(r"^/apis?/(?:(ray\.io)/)?v1/(?:namespaces/[^/]+/)?([a-z]+)(?:/([^/]+))?(/status|/log)?$")


def api_calls(fake: FakeKubeApiServer) -> set[tuple[str, str, str]]:
    """The (API group, resource, RBAC verb) of every request the fake answered."""
    calls = set()
    with fake.lock:
        for method, path, _ in fake.requests:
            m = _PATH.match(path)
            assert m, path
            group, resource, name, sub = m[1] or "", m[2], m[3], m[4] or ""
            verb = {"POST": "create", "DELETE": "delete"}.get(method, "get" if name else "list")
            calls.add((group, resource + sub, verb))
    return calls


def test_start_list_stop_and_delete_with_the_cluster(fake_apiserver: FakeKubeApiServer,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    fake = fake_apiserver
    caplog.set_level(logging.DEBUG)
    backend = make_backend(fake)
    backend.create_cluster(REQUEST, notebook=True)
    cluster = fake.get(RAYCLUSTERS, NS, NAME)
    crd_schema.assert_valid({k: v for k, v in cluster.items() if k != "status"}, strict=True)
    assert cluster["metadata"]["labels"]["ads-ranking.io/notebook"] == "enabled"

    started = backend.start_notebook(NS, NAME, "Bob <bob@example.com>")
    token = started.token
    assert len(token) >= 40 and token not in repr(started)
    assert started.url == f"http://{NAME}-notebook.{NS}.svc:8888/lab?token={token}"
    service = fake.get("services", NS, f"{NAME}-notebook")
    secret = fake.get("secrets", NS, f"{NAME}-notebook-token")
    owner_ref = [{"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": NAME,
                  "uid": cluster["metadata"]["uid"]}]
    assert service["metadata"]["ownerReferences"] == secret["metadata"]["ownerReferences"] == owner_ref
    assert service["spec"]["selector"] == {"ray.io/cluster": NAME, "ray.io/node-type": "head"}
    assert service["spec"]["ports"][0]["targetPort"] == "jupyter"
    assert base64.b64decode(secret["data"]["token"]).decode() == token
    # The head mounts exactly this Secret.
    volumes = cluster["spec"]["headGroupSpec"]["template"]["spec"]["volumes"]
    assert {"secretName": secret["metadata"]["name"], "optional": True, "defaultMode": 0o440,
            "items": [{"key": "token", "path": "token"}]} in [v.get("secret") for v in volumes]

    ((key, info),) = backend.list_notebooks(NS).items()
    assert key == (NS, NAME) and backend.list_notebooks(None) == {key: info}
    assert (info.cluster, info.owner) == (NAME, "Bob <bob@example.com>")
    assert token not in repr(info)
    with pytest.raises(BackendError, match="already runs on .* started by Bob"):
        backend.start_notebook(NS, NAME, "carol")

    assert backend.stop_notebook(NS, NAME) is True
    assert fake.names("services") == fake.names("secrets") == []
    assert backend.list_notebooks(NS) == {}
    assert backend.stop_notebook(NS, NAME) is False

    second = backend.start_notebook(NS, NAME, "carol")
    assert second.token != token
    assert fake.names("services", NS) == [f"{NAME}-notebook"]
    backend.delete_cluster(NS, NAME)  # the garbage collector follows the ownerReferences
    fake.wait_for(lambda: not fake.names("services") and not fake.names("secrets"))
    assert fake.names("services") == fake.names("secrets") == []

    # The token never left the Secret: not in a log line, not in another object; Secrets
    # were never read back (X-Ray has no get/list on them).
    for t in (token, second.token):
        assert t not in caplog.text
    assert fake.count("GET", r"/secrets") == 0
    # Every call made is in the RBAC tables the chart renders; Secrets only created/deleted.
    calls = api_calls(fake)
    assert calls <= {p.key for p in PERMISSIONS + NOTEBOOK_PERMISSIONS}
    assert {c for c in calls if c[1] == "secrets"} == {("", "secrets", "create"),
                                                      ("", "secrets", "delete")}
    assert_nothing_left(fake)


def test_a_cluster_without_notebook_support_is_refused_with_the_reason(
        fake_apiserver: FakeKubeApiServer) -> None:
    fake = fake_apiserver
    backend = make_backend(fake)
    backend.create_cluster(REQUEST)
    with pytest.raises(NotebookUnsupported) as err:
        backend.start_notebook(NS, NAME, "bob")
    message = str(err.value)
    assert f"invalid cluster = {NS}/{NAME}" in message
    assert "restart" in message and "Valid: a cluster created with notebook support" in message
    assert fake.names("services") == fake.names("secrets") == []
    with pytest.raises(BackendError, match=f"RayCluster {NS}/nope not found"):
        backend.start_notebook(NS, "nope", "bob")
    backend.delete_cluster(NS, NAME)
    assert_nothing_left(fake)


def test_a_failed_start_leaves_no_secret(fake_apiserver: FakeKubeApiServer) -> None:
    fake = fake_apiserver
    backend = make_backend(fake)
    backend.create_cluster(REQUEST, notebook=True)
    fake.inject("POST", r"/services$", 403, times=None, reason="Forbidden",
                message='services is forbidden: User "xray" cannot create resource "services"')
    with pytest.raises(BackendError, match=r"could not create Service .*cannot create resource"):
        backend.start_notebook(NS, NAME, "bob")
    assert fake.names("secrets") == [] and fake.names("services") == []
    assert ("secrets", NS, f"{NAME}-notebook-token") in fake.deleted
    fake.clear_faults()
    backend.delete_cluster(NS, NAME)
    assert_nothing_left(fake)
