"""``ads-ranking cluster|job --backend kuberay`` by subprocess, against the fake API server,
reached through a kubeconfig context (the way a laptop reaches a real cluster)."""

from __future__ import annotations

import pytest

from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, RAYJOBS
from ads_ranking_pipelines_tests.cli.helpers import cli_env, ok, ok_json, run_cli
from ads_ranking_pipelines_tests.kuberay.fake_apiserver import (
    FakeKubeApiServer,
    Scenario,
    write_kubeconfig,
)

pytestmark = pytest.mark.slow  # real processes (README: Tests)

NS = "ads-ranking"


def test_kuberay_cluster_and_job_lifecycle(fake_apiserver: FakeKubeApiServer, tmp_path) -> None:
    fake_apiserver.scenario = Scenario(log_lines=("hi from the cluster",))
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake_apiserver, context="fake")
    env = cli_env(tmp_path, KUBECONFIG=kubeconfig, ADS_RANKING_BACKEND="kuberay")
    kube = ["--context", "fake"]

    created = ok_json(run_cli("cluster", "create", "--name", "alice-l4", "--gpu-pool", "l4",
                              "--workers", "1", "--gpus-per-worker", "1", "--cpus-per-worker", "8",
                              "--memory", "32Gi", *kube, "-o", "json", env=env))
    assert created[0]["status"] == "ready" and created[0]["gpu_type"] == "nvidia-l4"
    (row,) = ok_json(run_cli("cluster", "list", *kube, "-o", "json", env=env))
    assert (row["name"], row["owner"], row["pool"], row["workers_ready"], row["workers_desired"]) \
        == ("alice-l4", "tester", "l4", 1, 1)
    assert row["dashboard"] == "http://alice-l4-head-svc:8265"
    table = ok(run_cli("cluster", "list", *kube, env=env)).stdout
    assert "alice-l4" in table and "1/1" in table and "ready" in table
    described = ok_json(run_cli("cluster", "describe", "alice-l4", *kube, "-o", "json", env=env))
    assert sorted(p["node_type"] for p in described["pods"]) == ["head", "worker"]

    job_id = ok(run_cli("job", "submit", "--cluster", "alice-l4", *kube, "--",
                        "python", "-c", "print('hi')", env=env)).stdout.strip()
    rayjob = fake_apiserver.get(RAYJOBS, NS, job_id)
    assert rayjob["spec"]["clusterSelector"] == {"ray.io/cluster": "alice-l4"}
    assert rayjob["spec"]["entrypoint"] == "python -c 'print('\"'\"'hi'\"'\"')'"
    logs = ok(run_cli("job", "logs", job_id, "--follow", *kube, env=env)).stdout
    assert logs.splitlines() == ["hi from the cluster"]
    status = ok_json(run_cli("job", "status", job_id, *kube, "-o", "json", env=env))
    assert status["state"] == "SUCCEEDED"
    ok(run_cli("job", "stop", job_id, *kube, env=env))
    assert fake_apiserver.get(RAYJOBS, NS, job_id) is None

    ok(run_cli("cluster", "delete", "alice-l4", "--yes", *kube, env=env))
    assert fake_apiserver.leftovers() == [] and fake_apiserver.pod_names() == []
    missing = run_cli("cluster", "delete", "alice-l4", "--yes", *kube, env=env)
    assert missing.returncode == 1 and "not found" in missing.stderr


def test_kuberay_create_failure_exits_1_with_the_reason(fake_apiserver: FakeKubeApiServer,
                                                         tmp_path) -> None:
    fake_apiserver.scenario = Scenario(outcome="cluster_failed")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake_apiserver, context="fake")
    env = cli_env(tmp_path, KUBECONFIG=kubeconfig, ADS_RANKING_REPLICA_FAILURE_GRACE_S="0.5")
    result = run_cli("cluster", "create", "--backend", "kuberay", "--context", "fake",
                     "--name", "doomed", "--workers", "1", env=env)
    assert result.returncode == 1
    assert "exceeded quota: gpu-quota" in result.stderr
    assert fake_apiserver.leftovers() == [] and fake_apiserver.names(RAYCLUSTERS) == []
    # Invalid input never reaches the API server.
    before = len(fake_apiserver.requests)
    bad = run_cli("cluster", "create", "--backend", "kuberay", "--context", "fake",
                  "--gpu-pool", "a100-80gb", "--workers", "1", "--gpus-per-worker", "16", env=env)
    assert bad.returncode == 2 and "gpus_per_worker" in bad.stderr and "1..8" in bad.stderr
    assert len(fake_apiserver.requests) == before
    # An unreachable API server is a runtime failure.
    down = run_cli("cluster", "list", "--backend", "kuberay", "--context", "decoy", env=env)
    assert down.returncode == 1 and "Traceback" not in down.stderr


def test_kuberay_gc_collects_only_our_leftovers(fake_apiserver: FakeKubeApiServer, tmp_path) -> None:
    """``cluster gc``: a finished RayJob of ours the operator left behind (shutdown mode) is
    deleted; someone else's, and one of ours still running, are not."""
    def rayjob(name: str, labels: dict, status: dict) -> dict:
        return {"apiVersion": "ray.io/v1", "kind": "RayJob",
                "metadata": {"name": name, "namespace": NS, "labels": labels},
                "spec": {"entrypoint": "python x.py"}, "status": status}

    ours = {"app.kubernetes.io/managed-by": "ads-ranking-pipelines"}
    finished = {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED",
                "endTime": "2026-01-01T00:00:00Z"}
    fake_apiserver.seed(RAYJOBS, rayjob("ours-left", ours, finished))
    fake_apiserver.seed(RAYJOBS, rayjob("ours-running", ours, {"jobDeploymentStatus": "Running"}))
    fake_apiserver.seed(RAYJOBS, rayjob("theirs", {"team": "other"}, finished))
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", fake_apiserver, context="fake")
    env = cli_env(tmp_path, KUBECONFIG=kubeconfig, ADS_RANKING_BACKEND="kuberay")
    env.pop("DAGSTER_HOME", None)
    dry = ok(run_cli("cluster", "gc", "--dry-run", "--context", "fake", env=env))
    assert '"name": "ours-left"' in dry.stdout and '"would delete"' in dry.stdout
    assert "no Dagster instance" in dry.stderr
    assert fake_apiserver.names(RAYJOBS) == ["ours-left", "ours-running", "theirs"]
    done = ok(run_cli("cluster", "gc", "--context", "fake", env=env))
    assert '"name": "ours-left"' in done.stdout and '"action": "deleted"' in done.stdout
    assert fake_apiserver.wait_for(
        lambda: fake_apiserver.names(RAYJOBS) == ["ours-running", "theirs"], 5)
