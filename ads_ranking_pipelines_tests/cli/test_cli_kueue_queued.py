"""``ads-ranking cluster list|describe`` and ``job status`` on a Kueue pool, by subprocess
against the fake API server's toy Kueue: a CLI RayCluster whose quota is taken is ``queued``
with Kueue's words, position and time queued (table and ``-o json``), then runs once the
quota is freed; a queued RayJob prints QUEUED with the same words."""

from __future__ import annotations

import pytest

from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS
from ads_ranking_pipelines_tests.cli.helpers import cli_env, ok, ok_json, run_cli
from ads_ranking_pipelines_tests.kuberay.cases import KUEUE_CATALOG
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    write_kubeconfig,
)
from ads_ranking_pipelines_tests.kuberay.kueue_cases import (
    GPU_IMAGE,
    INSUFFICIENT,
    LOCAL_QUEUE,
    NS,
    one_cluster_of_quota,
    queued_run_job,
)

pytestmark = pytest.mark.slow  # real processes (README: Tests)


def _kueue_env(fake: FakeKubeApiServer, tmp_path) -> dict[str, str]:
    one_cluster_of_quota(fake)
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake, context="fake")
    return cli_env(tmp_path, KUBECONFIG=kubeconfig, ADS_RANKING_BACKEND="kuberay",
                   ADS_RANKING_POOL_CATALOG=str(KUEUE_CATALOG), ADS_RANKING_RAY_IMAGE=GPU_IMAGE)


def _create(name: str, kube: list[str], env: dict[str, str]) -> None:
    ok(run_cli("cluster", "create", "--name", name, "--gpu-pool", "h100-80gb", "--workers", "1",
               "--gpus-per-worker", "8", *kube, "--no-wait", "-o", "json", env=env))


def test_queued_cli_cluster_is_listed_and_described_with_kueues_words_then_runs(
        fake_apiserver: FakeKubeApiServer, tmp_path) -> None:
    env = _kueue_env(fake_apiserver, tmp_path)
    kube = ["--context", "fake"]
    _create("alice-h100", kube, env)
    assert fake_apiserver.wait_for(lambda: (fake_apiserver.get(RAYCLUSTERS, NS, "alice-h100")
                                            or {}).get("status", {}).get("state") == "ready", 20)
    _create("bob-h100", kube, env)
    assert fake_apiserver.wait_for(lambda: (fake_apiserver.get(RAYCLUSTERS, NS, "bob-h100")
                                            or {}).get("status", {}).get("state") == "suspended", 20)

    rows = {r["name"]: r for r in ok_json(run_cli("cluster", "list", *kube, "-o", "json", env=env))}
    assert rows["alice-h100"]["status"] == "ready" and rows["alice-h100"]["queue"] is None
    bob = rows["bob-h100"]
    assert bob["status"] == "queued" and bob["kind"] == "RayCluster"
    assert bob["queue"]["local_queue"] == LOCAL_QUEUE and INSUFFICIENT in bob["queue"]["words"]
    assert bob["queue"]["position"]["positionInLocalQueue"] == 0
    assert bob["queue"]["position_text"] == "position 1 in its LocalQueue (1 in its ClusterQueue)"
    assert isinstance(bob["queue"]["seconds_queued"], int)
    table = ok(run_cli("cluster", "list", *kube, env=env)).stdout
    (line,) = [ln for ln in table.splitlines() if ln.startswith("bob-h100: queued")]
    assert "RayCluster: Workload raycluster-bob-h100-" in line and INSUFFICIENT in line
    assert "position 1 in its LocalQueue" in line and "(queued " in line

    described = ok_json(run_cli("cluster", "describe", "bob-h100", *kube, "-o", "json", env=env))
    assert described["status"] == "queued" and described["pods"] == []
    assert INSUFFICIENT in described["queue"]["summary"]
    assert "position 1 in its LocalQueue" in described["queue"]["summary"]
    yaml_text = ok(run_cli("cluster", "describe", "bob-h100", *kube, env=env)).stdout
    assert "status: queued" in yaml_text and "position 1 in its LocalQueue" in yaml_text

    # The quota is freed: Kueue admits bob's cluster, KubeRay makes its pods, it gets ready.
    ok(run_cli("cluster", "delete", "alice-h100", "--yes", *kube, env=env))
    assert fake_apiserver.wait_for(lambda: (fake_apiserver.get(RAYCLUSTERS, NS, "bob-h100")
                                            or {}).get("status", {}).get("state") == "ready", 20)
    (row,) = ok_json(run_cli("cluster", "list", *kube, "-o", "json", env=env))
    assert (row["name"], row["status"], row["queue"], row["workers_ready"]) == \
        ("bob-h100", "ready", None, 1)
    ok(run_cli("cluster", "delete", "bob-h100", "--yes", *kube, env=env))
    assert fake_apiserver.leftovers() == [] and fake_apiserver.pod_names() == []
    assert fake_apiserver.names("workloads") == []


def test_queued_rayjob_is_a_queued_row_and_job_status_prints_queued_with_kueues_words(
        fake_apiserver: FakeKubeApiServer, tmp_path) -> None:
    from ads_ranking_pipelines.backends.kuberay import KubeRayBackend
    from ads_ranking_pipelines.config.pools import load_catalog
    from ads_ranking_pipelines_tests.kuberay.fake_apiserver import client_for

    env = _kueue_env(fake_apiserver, tmp_path)
    kube = ["--context", "fake"]
    _create("alice-h100", kube, env)
    # A Dagster run's RayJob on the same pool (what a session creates): queued, no cluster.
    b = KubeRayBackend(client_for(fake_apiserver), load_catalog(KUEUE_CATALOG))
    job = queued_run_job(b, fake_apiserver)

    status = ok_json(run_cli("job", "status", job, *kube, "-o", "json", env=env))
    assert status["state"] == "QUEUED"
    assert status["message"].startswith(f"Workload rayjob-{job}-")
    assert INSUFFICIENT in status["message"] and "position 1 in its LocalQueue" in status["message"]
    assert "(queued " in status["message"]
    text = ok(run_cli("job", "status", job, *kube, env=env)).stdout
    assert text.startswith("QUEUED\tWorkload rayjob-") and INSUFFICIENT in text
    rows = {r["name"]: r for r in ok_json(run_cli("cluster", "list", *kube, "-o", "json", env=env))}
    assert rows[job]["kind"] == "RayJob" and rows[job]["status"] == "queued"
    assert rows[job]["owner"] == "dagster" and rows[job]["pool"] == "h100-80gb"
    described = ok_json(run_cli("cluster", "describe", job, *kube, "-o", "json", env=env))
    assert described["kind"] == "RayJob" and described["status"] == "queued"
    assert INSUFFICIENT in described["queue"]["words"]
    ok(run_cli("job", "stop", job, *kube, env=env))
    ok(run_cli("cluster", "delete", "alice-h100", "--yes", *kube, env=env))
    assert fake_apiserver.leftovers() == [] and fake_apiserver.pod_names() == []
