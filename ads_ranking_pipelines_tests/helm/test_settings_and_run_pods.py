"""What the code location and its runs see: the settings env (read by the package's own
settings code), the pool catalog ConfigMap (loaded by the package's catalog loader), and the
run pods dagster-k8s builds from the container context the code server publishes."""

from __future__ import annotations

import json

import kubernetes_validate
import pytest
import yaml
from kubernetes_validate import utils as kv_utils

from ads_ranking_pipelines.config.pools import load_catalog
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.defs.kuberay_resource import KubeRayResource
from ads_ranking_pipelines.definitions import build_definitions
from ads_ranking_pipelines_tests.helm.chart import VALUE_SETS, env_of, merge, one, render, value_set
from ads_ranking_pipelines_tests.helm.run_pod import run_job
from ads_ranking_pipelines_tests.kuberay.pod_security import restricted_violations

IMAGE = "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0"
CODE_SETS = sorted(n for n in VALUE_SETS if n != "support-only")


def _code_server(objects: list[dict]) -> dict:
    deployment = one(objects, "Deployment", "ads-ranking-pipelines")
    return deployment["spec"]["template"]["spec"]["containers"][0]


def _catalog_file(objects: list[dict], tmp_path) -> str:
    config_map = one(objects, "ConfigMap", "ads-ranking-pipelines-pools")
    path = tmp_path / "pools.yaml"
    path.write_text(config_map["data"]["pools.yaml"], encoding="utf-8")
    return str(path)


def test_code_server_command_port_probe() -> None:
    container = _code_server(render(value_set("default")))
    assert container["args"] == ["dagster", "api", "grpc", "-h", "0.0.0.0", "-p", "3030",
                                 "-m", "ads_ranking_pipelines.definitions"]
    assert container["ports"] == [{"name": "grpc", "containerPort": 3030, "protocol": "TCP"}]
    health = ["dagster", "api", "grpc-health-check", "-p", "3030"]
    assert container["readinessProbe"]["exec"]["command"] == health
    assert container["startupProbe"]["exec"]["command"] == health
    assert "livenessProbe" not in container
    assert env_of(container)["DAGSTER_CURRENT_IMAGE"] == IMAGE


def test_settings_env_defaults() -> None:
    env = env_of(_code_server(render(value_set("default"))))
    assert {k: v for k, v in env.items() if k.startswith("ADS_RANKING_")} == {
        "ADS_RANKING_HOME": "s3://ads-ranking-prod/pipelines",
        "ADS_RANKING_BACKEND": "kuberay",
        "ADS_RANKING_POOL_CATALOG": "/etc/ads-ranking/pools.yaml",
        "ADS_RANKING_NAMESPACE": "dagster",
        "ADS_RANKING_RAY_IMAGE": IMAGE,
        "ADS_RANKING_RAY_SERVICE_ACCOUNT": "ads-ranking-pipelines-ray",
        "ADS_RANKING_DEFAULT_POOL": "local",
        "ADS_RANKING_KUBE_IN_CLUSTER": "true",
        "ADS_RANKING_RAYJOB_DELETION": "rules",
    }


def test_settings_env_gpu_pools() -> None:
    env = env_of(_code_server(render(value_set("gpu-pools"))))
    assert env["ADS_RANKING_NAMESPACE"] == "ray-jobs"
    assert env["ADS_RANKING_RAY_IMAGE"] == "registry.example.com/ads-ranking/ads-ranking-pipelines:0.1.0-gpu"
    assert env["ADS_RANKING_RAY_AUTH_SECRET"] == "ray-auth-token"
    assert env["ADS_RANKING_DEFAULT_POOL"] == "h100-80gb"
    assert env["ADS_RANKING_HOME"] == "gs://ads-ranking-prod/pipelines"


def test_catalog_mounted_where_the_env_points() -> None:
    objects = render(value_set("default"))
    container = _code_server(objects)
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["pool-catalog"]["configMap"]["name"] == "ads-ranking-pipelines-pools"
    mount = mounts["pool-catalog"]
    assert mount["readOnly"] is True
    assert env_of(container)["ADS_RANKING_POOL_CATALOG"] == f"{mount['mountPath']}/pools.yaml"


def test_default_catalog_is_the_shipped_one(tmp_path) -> None:
    """values.yaml's catalog equals config/pools.yaml, so installing the chart changes nothing."""
    assert load_catalog(_catalog_file(render(value_set("default")), tmp_path)) == load_catalog()


def test_gpu_catalog_loads_with_the_package_loader(tmp_path) -> None:
    catalog = load_catalog(_catalog_file(render(value_set("gpu-pools")), tmp_path))
    assert catalog.names() == ["h100-80gb", "l4"]
    assert catalog.default_pool == "l4"
    h100 = catalog.get("h100-80gb")
    assert h100.gpus_per_node == 8 and h100.tolerations[0].value == "present"


def test_the_package_reads_the_rendered_settings(tmp_path) -> None:
    """The code location built from the rendered environment (catalog path redirected to the
    rendered ConfigMap's content) is on the KubeRay backend, in the Ray namespace."""
    objects = render(value_set("gpu-pools"))
    env = {k: v for k, v in env_of(_code_server(objects)).items() if isinstance(v, str)}
    env["ADS_RANKING_POOL_CATALOG"] = _catalog_file(objects, tmp_path)
    settings = Settings.from_environ(env)
    assert settings.home == "gs://ads-ranking-prod/pipelines"
    ray_cluster = build_definitions(env).resources["ray_cluster"]
    assert isinstance(ray_cluster, KubeRayResource)
    assert ray_cluster.namespace == "ray-jobs" and ray_cluster.in_cluster
    assert ray_cluster.ray_image == env["ADS_RANKING_RAY_IMAGE"]
    assert ray_cluster.auth_secret == "ray-auth-token" and ray_cluster.rayjob_deletion == "rules"
    assert ray_cluster.catalog().names() == ["h100-80gb", "l4"]


def test_extra_env_secrets_and_volumes() -> None:
    objects = render(value_set("extra-env"))
    container = _code_server(objects)
    env = env_of(container)
    assert env["AWS_REGION"] == "us-east-1"
    assert env["AWS_SECRET_ACCESS_KEY"] == {"secretKeyRef": {"name": "s3-credentials", "key": "secret-access-key"}}
    assert container["envFrom"] == [{"configMapRef": {"name": "ads-ranking-tuning"}},
                                    {"secretRef": {"name": "s3-credentials-env"}}]
    assert {"name": "ca-bundle", "mountPath": "/etc/ssl/corporate", "readOnly": True} in container["volumeMounts"]
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]
    assert container["livenessProbe"]["periodSeconds"] == 30


def test_shared_volume_storage_is_mounted_at_home() -> None:
    objects = render(value_set("existing-service-account"))
    container = _code_server(objects)
    pod = one(objects, "Deployment", "ads-ranking-pipelines")["spec"]["template"]["spec"]
    assert {"name": "storage", "persistentVolumeClaim": {"claimName": "ads-ranking-shared"}} in pod["volumes"]
    assert {"name": "storage", "mountPath": "/mnt/ads-ranking"} in container["volumeMounts"]
    assert env_of(container)["ADS_RANKING_HOME"] == "/mnt/ads-ranking"


def test_xray_gets_the_same_settings_and_its_token_from_a_secret() -> None:
    objects = render(value_set("xray"))
    xray = one(objects, "Deployment", "ads-ranking-pipelines-xray")["spec"]["template"]["spec"]["containers"][0]
    # xray.crossNamespace (on in this value set): list every namespace, as the ClusterRole allows.
    assert xray["args"] == ["ads-ranking", "xray", "serve", "--host", "0.0.0.0", "--port", "8080",
                            "--all-namespaces"]
    plain = merge(value_set("xray"), {"xray": {"crossNamespace": False}})
    plain_xray = one(render(plain), "Deployment", "ads-ranking-pipelines-xray")
    assert plain_xray["spec"]["template"]["spec"]["containers"][0]["args"][-1] == "8080"
    assert env_of(xray)["ADS_RANKING_KUBE_IN_CLUSTER"] == "true"  # X-Ray turns KubeRay on
    env = env_of(xray)
    assert env["ADS_RANKING_XRAY_TOKEN"] == {"secretKeyRef": {"name": "xray-token", "key": "token"}}
    code_env = env_of(_code_server(objects))
    assert {k: v for k, v in env.items() if k != "ADS_RANKING_XRAY_TOKEN"} == {
        k: v for k, v in code_env.items() if k.startswith("ADS_RANKING_")}
    service = one(objects, "Service", "ads-ranking-pipelines-xray")
    assert service["spec"]["ports"][0]["port"] == 8080 and service["spec"]["type"] == "ClusterIP"


# ---- run pods --------------------------------------------------------------------------------
def _container_context(objects: list[dict]) -> str:
    return env_of(_code_server(objects))["DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT"]


@pytest.mark.parametrize("name", CODE_SETS)
def test_run_pods_valid_and_restricted(name: str) -> None:
    objects = render(value_set(name))
    job = run_job(_container_context(objects), IMAGE)
    for kube in ("1.30", kv_utils.major_minor(kv_utils.latest_version())):
        kubernetes_validate.validate(job, kube, strict=True)
    assert restricted_violations(job["spec"]["template"]["spec"]) == []


def test_run_pod_carries_the_location_settings() -> None:
    objects = render(value_set("extra-env"))
    job = run_job(_container_context(objects), IMAGE)
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert job["metadata"]["namespace"] == "dagster"
    assert pod["serviceAccountName"] == "ads-ranking-pipelines"  # not the launcher's own account
    assert pod.get("automountServiceAccountToken", True) is True  # the run calls the API server
    env = env_of(container)
    code_env = env_of(_code_server(objects))
    for key in ("ADS_RANKING_HOME", "ADS_RANKING_BACKEND", "ADS_RANKING_NAMESPACE", "ADS_RANKING_RAY_IMAGE",
                "ADS_RANKING_RAY_SERVICE_ACCOUNT", "ADS_RANKING_DEFAULT_POOL", "ADS_RANKING_KUBE_IN_CLUSTER",
                "ADS_RANKING_POOL_CATALOG", "AWS_REGION"):
        assert env[key] == code_env[key], key
    assert env["AWS_SECRET_ACCESS_KEY"]["secretKeyRef"] == {"name": "s3-credentials", "key": "secret-access-key"}
    assert {"secretRef": {"name": "s3-credentials-env"}} in container["envFrom"]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {"memory": "8Gi"}}
    assert job["spec"]["template"]["metadata"]["labels"]["cost-center"] == "ads-ranking"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/etc/ads-ranking"]]["configMap"]["name"] == "ads-ranking-pipelines-pools"
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert "emptyDir" in volumes[mounts["/opt/dagster/dagster_home/storage"]]
    assert env["DAGSTER_HOME"] == "/opt/dagster/dagster_home"  # its storage/ is the writable emptyDir
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]


def test_run_tags_resize_a_run_pod_and_it_stays_restricted() -> None:
    """A run tagged `dagster-k8s/config` (README) gets its resources; the pod stays restricted."""
    tags = {"dagster-k8s/config": json.dumps({"container_config": {"resources": {
        "requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "16Gi"}}}})}
    job = run_job(_container_context(render(value_set("default"))), IMAGE, tags)
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"memory": "16Gi"}}
    assert restricted_violations(job["spec"]["template"]["spec"]) == []


def test_container_context_off_passes_nothing_to_runs() -> None:
    objects = render(merge(value_set("default"), {"codeLocation": {"includeConfigInLaunchedRuns": {"enabled": False}}}))
    assert "DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT" not in env_of(_code_server(objects))


def test_pool_catalog_change_restarts_the_code_server() -> None:
    def checksum(values: dict) -> str:
        pod = one(render(values), "Deployment")["spec"]["template"]
        return pod["metadata"]["annotations"]["checksum/pool-catalog"]

    base = value_set("default")
    changed = merge(base, {"poolCatalog": yaml.safe_load("{default_pool: local, pools: [{name: local, "
                                                         "local: true, cpus_per_node: 4, "
                                                         "memory_per_node: 16Gi, max_workers: 2}]}")})
    assert checksum(base) != checksum(changed)


def test_probes_follow_the_official_conventions() -> None:
    """`enabled: false` switches a probe off; an own handler replaces the health check."""
    values = merge(value_set("default"), {"codeLocation": {
        "readinessProbe": {"enabled": False},
        "startupProbe": {"tcpSocket": {"port": "grpc"}, "periodSeconds": 5}}})
    container = _code_server(render(values))
    assert "readinessProbe" not in container
    # Helm merges the override onto the chart's default probe settings.
    assert container["startupProbe"] == {"tcpSocket": {"port": "grpc"}, "periodSeconds": 5,
                                         "timeoutSeconds": 10, "failureThreshold": 30}


def test_shared_volume_storage_reaches_the_ray_pods_through_the_settings(tmp_path) -> None:
    """storage.home as a path on a shared volume: the code location gets the claim's name,
    so the cluster template mounts it at the same path in every Ray pod."""
    values = merge(value_set("default"), {"storage": {
        "home": "/mnt/ads-ranking", "sharedVolume": {"claimName": "ads-ranking-data"}},
        "kuberay": {"rayjobDeletion": "shutdown"}})
    env = {k: v for k, v in env_of(_code_server(render(values))).items() if isinstance(v, str)}
    assert env["ADS_RANKING_SHARED_VOLUME_CLAIM"] == "ads-ranking-data"
    assert env["ADS_RANKING_RAYJOB_DELETION"] == "shutdown"
    env["ADS_RANKING_POOL_CATALOG"] = ""
    ray_cluster = build_definitions(env).resources["ray_cluster"]
    fields = ray_cluster.request_fields()
    assert (fields["shared_volume_claim"], fields["shared_volume_path"]) == (
        "ads-ranking-data", "/mnt/ads-ranking")
