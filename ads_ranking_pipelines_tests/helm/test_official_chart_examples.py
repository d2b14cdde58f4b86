"""The examples for the official Dagster charts agree with this chart: the
dagster-user-deployments entry is exactly the code server this chart renders (so both install
paths run the same pod), it points at objects the chart renders with codeLocation.enabled=false,
the Dagster chart's workspace points at this chart's Service, and the run pods of both paths
are valid and restricted."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from ads_ranking_pipelines_tests.helm.chart import EXAMPLES, chart, NAMESPACE, RELEASE, env_of, one, render, value_set
from ads_ranking_pipelines_tests.helm.official_chart import (
    entry_container_context,
    grpc_args,
    image,
    launcher_context,
)
from ads_ranking_pipelines_tests.helm.run_pod import run_job
from ads_ranking_pipelines_tests.kuberay.pod_security import restricted_violations

SET_BY_THE_OFFICIAL_CHART = {"DAGSTER_CURRENT_IMAGE", "DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT"}


def _load(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def user_deployments() -> dict:
    return _load("dagster-user-deployments-values.yaml")


@pytest.fixture(scope="module")
def dagster() -> dict:
    return _load("dagster-values.yaml")


@pytest.fixture(scope="module")
def ours() -> dict:
    """This chart's code-server pod for the values the examples are written for."""
    deployment = one(render(value_set("default")), "Deployment")
    return deployment["spec"]["template"]["spec"]


def test_entry_runs_the_pod_this_chart_renders(user_deployments: dict, ours: dict) -> None:
    (entry,) = user_deployments["deployments"]
    container = ours["containers"][0]
    assert image(entry) == container["image"]
    assert entry["image"]["pullPolicy"] == container["imagePullPolicy"]
    assert grpc_args(entry) == container["args"]
    assert entry["env"] == [e for e in container["env"] if e["name"] not in SET_BY_THE_OFFICIAL_CHART]
    assert entry["volumes"] == ours["volumes"]
    assert entry["volumeMounts"] == container["volumeMounts"]
    assert entry["resources"] == container["resources"]
    assert entry["podSecurityContext"] == ours["securityContext"]
    assert entry["securityContext"] == container["securityContext"]
    for probe in ("readinessProbe", "startupProbe"):
        rendered = dict(container[probe])
        assert rendered.pop("exec")["command"] == ["dagster", "api", "grpc-health-check", "-p", "3030"]
        assert {k: v for k, v in entry[probe].items() if k != "enabled"} == rendered


def test_entry_uses_what_the_support_only_release_renders(user_deployments: dict) -> None:
    objects = render(value_set("support-only"))
    account = user_deployments["serviceAccount"]
    assert account["create"] is False
    one(objects, "ServiceAccount", account["name"])
    assert {s["name"] for s in one(objects, "RoleBinding")["subjects"]} == {account["name"]}
    (entry,) = user_deployments["deployments"]
    config_maps = [v["configMap"]["name"] for v in entry["volumes"] if "configMap" in v]
    for name in config_maps:
        one(objects, "ConfigMap", name)
    env = {e["name"]: e["value"] for e in entry["env"]}
    one(objects, "ServiceAccount", env["ADS_RANKING_RAY_SERVICE_ACCOUNT"])


def test_workspace_points_at_this_charts_service(dagster: dict) -> None:
    service = one(render(value_set("default")), "Service")
    (server,) = dagster["dagsterWebserver"]["workspace"]["servers"]
    assert server["host"] == f"{service['metadata']['name']}.{NAMESPACE}.svc"
    assert server["port"] == service["spec"]["ports"][0]["port"]
    assert dagster["dagster-user-deployments"] == {"enabled": True, "enableSubchart": False}
    assert dagster["runLauncher"]["type"] == "K8sRunLauncher"
    assert dagster["global"]["dagsterHome"] == chart().values["runPods"]["dagsterHome"]


def test_run_queue_limits_name_catalog_pools(dagster: dict) -> None:
    pools = {p["name"] for p in chart().values["poolCatalog"]["pools"]}
    limits = dagster["concurrency"]["runs"]["tagConcurrencyLimits"]
    named = {lim["value"] for lim in limits if lim["key"] == "ads-ranking/gpu-pool" and isinstance(lim["value"], str)}
    assert named and named <= pools
    assert "tagConcurrencyLimits" not in (dagster["dagsterDaemon"]["runCoordinator"].get("config") or {}).get(
        "queuedRunCoordinator", {})  # the official chart refuses both


def _check_run_pod(job: dict) -> dict:
    for kube in ("1.30", "1.37"):
        kubernetes_validate.validate(job, kube, strict=True)
    pod = job["spec"]["template"]["spec"]
    assert restricted_violations(pod) == []
    return pod


def test_standalone_run_pod_with_the_dagster_chart_launcher(dagster: dict) -> None:
    container = one(render(value_set("default")), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    context = env_of(container)["DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT"]
    pod = _check_run_pod(run_job(context, container["image"], launcher=launcher_context(dagster, NAMESPACE)))
    assert pod["serviceAccountName"] == RELEASE
    run_container = pod["containers"][0]
    assert run_container["securityContext"]["readOnlyRootFilesystem"] is True
    assert run_container["resources"] == chart().values["runPods"]["resources"]


def test_official_path_run_pod(dagster: dict, user_deployments: dict) -> None:
    (entry,) = user_deployments["deployments"]
    context = entry_container_context(user_deployments, entry, NAMESPACE)
    pod = _check_run_pod(run_job(context, image(entry), launcher=launcher_context(dagster, NAMESPACE)))
    assert pod["serviceAccountName"] == user_deployments["serviceAccount"]["name"]
    env = env_of(pod["containers"][0])
    assert env["ADS_RANKING_BACKEND"] == "kuberay" and env["ADS_RANKING_KUBE_IN_CLUSTER"] == "true"
