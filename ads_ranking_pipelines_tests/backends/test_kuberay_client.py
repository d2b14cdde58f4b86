"""KubeRayClient: the real ``kubernetes`` client against the in-test API server.

Retries on 429/5xx/failed connections (Retry-After honoured), never on other 4xx; idempotent
create (409 on our own object is success, on anyone else's a clear Conflict); pod logs
streamed line by line.
"""

from __future__ import annotations

import copy
import threading
import time

import pytest

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.validation import resolve_request
from ads_ranking_pipelines.backends.kuberay.client import (
    CREATION_TOKEN_ANNOTATION,
    RAYCLUSTERS,
    RAYJOBS,
    Conflict,
    KubeError,
    KubeRayClient,
    NotFound,
    RetryPolicy,
    parse_retry_after,
)
from ads_ranking_pipelines.kuberay.raycluster import build_raycluster
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    client_for,
    fast_retry,
    matches_selector,
    write_kubeconfig,
)

NS = "ads-ranking"
CATALOG = load_catalog()
CLUSTERS_PATH = r"/rayclusters$"


def cluster_manifest(name: str = "ranker", **labels: str) -> dict:
    return build_raycluster(resolve_request(ClusterRequest(name=name, owner="tester", workers=1),
                                            CATALOG), labels=labels or None)


class Sleeps:
    """A ``sleep`` that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def test_create_get_status_list_delete(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang")
    client = client_for(fake_apiserver)
    created = client.create(RAYCLUSTERS, NS, cluster_manifest("ranker-a", team="a"))
    client.create(RAYCLUSTERS, NS, cluster_manifest("ranker-b"))
    assert created["metadata"]["uid"]
    assert created["metadata"]["annotations"][CREATION_TOKEN_ANNOTATION]
    assert client.get(RAYCLUSTERS, NS, "ranker-a")["spec"] == created["spec"]
    fake_apiserver.wait_for(lambda: (fake_apiserver.get(RAYCLUSTERS, NS, "ranker-a") or {})
                            .get("status"))
    assert "desiredWorkerReplicas" in client.get_status(RAYCLUSTERS, NS, "ranker-a")["status"]
    assert [o["metadata"]["name"] for o in client.list(RAYCLUSTERS, NS)] == ["ranker-a", "ranker-b"]
    assert [o["metadata"]["name"] for o in client.list(RAYCLUSTERS, NS, "team=a")] == ["ranker-a"]
    assert client.list(RAYCLUSTERS, "elsewhere") == []
    pods = client.list_pods(NS, "ray.io/cluster=ranker-a")
    assert {p["metadata"]["labels"]["ray.io/node-type"] for p in pods} == {"head", "worker"}
    assert client.delete(RAYCLUSTERS, NS, "ranker-a") is True
    assert client.wait_deleted(RAYCLUSTERS, NS, "ranker-a", timeout_s=5, poll_interval_s=0.02)
    assert client.list_pods(NS, "ray.io/cluster=ranker-a") == []  # owned pods went with it
    assert client.delete(RAYCLUSTERS, NS, "ranker-a") is False  # already gone: not an error
    with pytest.raises(NotFound):
        client.get(RAYCLUSTERS, NS, "ranker-a")
    client.delete(RAYCLUSTERS, NS, "ranker-b")
    assert client.wait_deleted(RAYCLUSTERS, NS, "ranker-b", timeout_s=5, poll_interval_s=0.02)


def test_transient_500_and_429_are_retried_then_succeed(fake_apiserver: FakeKubeApiServer) -> None:
    sleeps = Sleeps()
    client = client_for(fake_apiserver, sleep=sleeps)
    fake_apiserver.inject("POST", CLUSTERS_PATH, 500, times=2)
    fake_apiserver.inject("POST", CLUSTERS_PATH, 429, times=1, headers={"Retry-After": "1"})
    client.create(RAYCLUSTERS, NS, cluster_manifest())
    assert fake_apiserver.count("POST", CLUSTERS_PATH) == 4
    # Exponential backoff for the 500s, then exactly what Retry-After asked for.
    assert sleeps.delays == [0.005, 0.01, 1.0]
    fake_apiserver.inject("GET", r"/rayclusters/ranker$", 503, times=2)
    assert client.get(RAYCLUSTERS, NS, "ranker")["metadata"]["name"] == "ranker"
    client.delete(RAYCLUSTERS, NS, "ranker")
    client.wait_deleted(RAYCLUSTERS, NS, "ranker", 5, 0.02)


def test_retry_after_is_capped_and_backoff_bounded() -> None:
    policy = RetryPolicy(initial_delay_s=0.5, multiplier=2, max_delay_s=3, jitter=0,
                         max_retry_after_s=10)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert policy.delay(1, retry_after_s=120) == 10
    assert parse_retry_after("7") == 7
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == pytest.approx(10)
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_persistent_500_fails_clearly_after_bounded_attempts(fake_apiserver: FakeKubeApiServer) -> None:
    client = client_for(fake_apiserver, retry=fast_retry(max_attempts=4))
    fake_apiserver.inject("POST", CLUSTERS_PATH, 500, times=None,
                          message="etcdserver: request timed out")
    with pytest.raises(KubeError) as info:
        client.create(RAYCLUSTERS, NS, cluster_manifest())
    assert fake_apiserver.count("POST", CLUSTERS_PATH) == 4
    assert info.value.status == 500 and info.value.attempts == 4
    assert "etcdserver: request timed out" in str(info.value)
    assert "create rayclusters/ranker" in str(info.value)
    assert fake_apiserver.names(RAYCLUSTERS) == []


@pytest.mark.parametrize("status", [400, 401, 403, 422])
def test_other_4xx_are_not_retried(fake_apiserver: FakeKubeApiServer, status: int) -> None:
    client = client_for(fake_apiserver)
    fake_apiserver.inject("POST", CLUSTERS_PATH, status, times=None, message="no, and never")
    with pytest.raises(KubeError) as info:
        client.create(RAYCLUSTERS, NS, cluster_manifest())
    assert fake_apiserver.count("POST", CLUSTERS_PATH) == 1
    assert info.value.status == status and "no, and never" in str(info.value)


def test_schema_violations_are_refused_by_the_fake_and_not_retried(
        fake_apiserver: FakeKubeApiServer) -> None:
    client = client_for(fake_apiserver)
    manifest = cluster_manifest()
    manifest["spec"]["workerGroupSpecs"][0]["maxReplica"] = 3  # a typo the strict check catches
    with pytest.raises(KubeError) as info:
        client.create(RAYCLUSTERS, NS, manifest)
    assert info.value.status == 422 and "maxReplica" in str(info.value)
    assert fake_apiserver.count("POST", CLUSTERS_PATH) == 1
    assert fake_apiserver.names(RAYCLUSTERS) == []
    fake_apiserver.rejected.clear()


def test_409_for_someone_elses_object_is_a_clear_conflict(fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang")
    foreign = cluster_manifest()
    foreign["metadata"]["labels"]["ads-ranking.io/owner"] = "somebody-else"
    fake_apiserver.seed(RAYCLUSTERS, foreign)
    before = fake_apiserver.get(RAYCLUSTERS, NS, "ranker")
    client = client_for(fake_apiserver)
    with pytest.raises(Conflict) as info:
        client.create(RAYCLUSTERS, NS, cluster_manifest())
    assert info.value.status == 409
    assert "already exists" in str(info.value) and "somebody-else" in str(info.value)
    assert fake_apiserver.count("POST", CLUSTERS_PATH) == 1  # a conflict is not retried
    after = fake_apiserver.get(RAYCLUSTERS, NS, "ranker")
    assert after["metadata"]["uid"] == before["metadata"]["uid"]  # untouched
    assert fake_apiserver.count("DELETE", r".") == 0


def test_a_create_whose_answer_was_lost_is_recognised_as_ours(
        fake_apiserver: FakeKubeApiServer) -> None:
    fake_apiserver.scenario = Scenario(outcome="hang")
    client = client_for(fake_apiserver)
    # The server stores the object, then answers 500; the retry gets 409 for our own object.
    fake_apiserver.inject("POST", CLUSTERS_PATH, 500, times=1, after_effect=True)
    obj = client.create(RAYCLUSTERS, NS, cluster_manifest())
    assert obj["metadata"]["name"] == "ranker"
    assert fake_apiserver.count("POST", CLUSTERS_PATH) == 2
    assert fake_apiserver.names(RAYCLUSTERS) == ["ranker"]
    assert fake_apiserver.created.count((RAYCLUSTERS, NS, "ranker")) == 1
    client.delete(RAYCLUSTERS, NS, "ranker")
    assert client.wait_deleted(RAYCLUSTERS, NS, "ranker", 5, 0.02)


def test_connection_refused_is_retried_then_reported() -> None:
    fake = FakeKubeApiServer().start()
    url = fake.url
    fake.stop()
    sleeps = Sleeps()
    client = KubeRayClient.for_host(url, retry=fast_retry(max_attempts=3), sleep=sleeps,
                                    request_timeout_s=2)
    with pytest.raises(KubeError) as info:
        client.list(RAYJOBS, NS)
    assert info.value.status == 0 and info.value.attempts == 3
    assert len(sleeps.delays) == 2


def test_pod_log_is_streamed_while_it_is_written(fake_apiserver: FakeKubeApiServer) -> None:
    lines = tuple(f"line {i}" for i in range(20))
    fake_apiserver.scenario = Scenario(log_lines=lines, line_interval_s=0.03)
    client = client_for(fake_apiserver)
    from ads_ranking_pipelines.kuberay.rayjob import build_rayjob

    job = build_rayjob(resolve_request(ClusterRequest(name="streamer", owner="t", workers=0), CATALOG),
                       entrypoint="python x.py", submission_id="s1")
    client.create(RAYJOBS, NS, job)
    assert fake_apiserver.wait_for(lambda: any(
        p["metadata"]["labels"].get("job-name") == "streamer" and p["status"]["phase"] == "Running"
        for p in client.list_pods(NS, "job-name=streamer")), timeout_s=5)
    (pod,) = client.list_pods(NS, "job-name=streamer")
    received: list[tuple[float, str]] = []
    for line in client.stream_pod_log(NS, pod["metadata"]["name"]):
        received.append((time.monotonic(), line))
    # The raw pod log: the submitter's own lines (submit's, the banner) around the driver log.
    got = [line for _, line in received]
    start = got.index("line 0")
    assert got[start:start + len(lines)] == list(lines)
    assert "Job submission server address" in got[start - 1]
    # Streamed, not buffered: the lines arrived spread over the time they were written.
    assert received[start + len(lines) - 1][0] - received[start][0] > 0.3
    text = client.read_pod_log(NS, pod["metadata"]["name"])
    assert text.splitlines() == got
    stamped = client.read_pod_log(NS, pod["metadata"]["name"], timestamps=True).splitlines()
    assert stamped[start].endswith(" line 0") and stamped[start][:4].isdigit()
    client.delete(RAYJOBS, NS, "streamer")
    assert client.wait_deleted(RAYJOBS, NS, "streamer", 5, 0.02)
    assert fake_apiserver.leftovers() == [] and fake_apiserver.pod_names() == []


def test_from_kubeconfig_uses_the_named_context_and_leaves_globals_alone(
        fake_apiserver: FakeKubeApiServer, tmp_path) -> None:
    from kubernetes import client as k8s

    before = copy.deepcopy(k8s.Configuration.get_default_copy().host)
    path = write_kubeconfig(tmp_path / "kubeconfig", fake_apiserver, context="fake")
    client = KubeRayClient.from_kubeconfig(context="fake", config_file=path, retry=fast_retry())
    assert client.list(RAYJOBS, NS) == []
    assert client.api_client.configuration.host == fake_apiserver.url
    assert k8s.Configuration.get_default_copy().host == before
    with pytest.raises(KubeError, match="context"):
        KubeRayClient.from_kubeconfig(context="no-such-context", config_file=path)


def test_in_cluster_outside_a_pod_fails_clearly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeError, match="in-cluster"):
        KubeRayClient.in_cluster()


@pytest.mark.parametrize("selector,expected", [
    ("a=1", True), ("a==1", True), ("a!=1", False), ("a=2", False), ("a", True), ("!a", False),
    ("b", False), ("!b", True), ("a in (1,2)", True), ("a notin (1,2)", False),
    ("a=1,c=3", True), ("a=1,c=4", False), ("", True),
])
def test_fake_label_selectors(selector: str, expected: bool) -> None:
    assert matches_selector({"a": "1", "c": "3"}, selector) is expected


def test_the_fake_serves_concurrent_requests(fake_apiserver: FakeKubeApiServer) -> None:
    client = client_for(fake_apiserver)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(5):
                client.list(RAYJOBS, NS, f"x={i}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
