"""The documented mapping between this chart and the official Dagster charts (README "Install"),
used to check the example values files in ``helm/ads-ranking-pipelines/examples/``.

No copy of the official charts is available offline, so these functions state the two facts the
examples rely on, as the official chart (1.13) documents them:

* a ``dagster-user-deployments`` entry runs ``dagster api grpc -h 0.0.0.0 -p <port>
  <dagsterApiGrpcArgs...>`` and, with ``includeConfigInLaunchedRuns``, publishes a container
  context made of the entry's env, envConfigMaps, envSecrets, volumes, volumeMounts, labels,
  resources, the chart's service account and the release namespace
  (its ``dagsterUserDeployments.k8sContainerContext`` helper);
* ``runLauncher.config.k8sRunLauncher.runK8sConfig`` becomes the launcher's ``run_k8s_config``
  (camelCase section names to snake_case).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import UserDefinedDagsterK8sConfig

RUN_K8S_SECTIONS = {"containerConfig": "container_config", "podSpecConfig": "pod_spec_config",
                    "podTemplateSpecMetadata": "pod_template_spec_metadata",
                    "jobSpecConfig": "job_spec_config", "jobMetadata": "job_metadata"}


def grpc_args(entry: Mapping[str, Any]) -> list[str]:
    return ["dagster", "api", "grpc", "-h", "0.0.0.0", "-p", str(entry["port"]), *entry["dagsterApiGrpcArgs"]]


def image(entry: Mapping[str, Any]) -> str:
    return f"{entry['image']['repository']}:{entry['image']['tag']}"


def entry_container_context(values: Mapping[str, Any], entry: Mapping[str, Any], namespace: str) -> str:
    """The container context JSON the official chart publishes for ``entry``."""
    k8s: dict[str, Any] = {
        "image_pull_policy": entry["image"]["pullPolicy"],
        "env_config_maps": [c["name"] for c in entry.get("envConfigMaps") or ()],
        "env_secrets": [s["name"] for s in entry.get("envSecrets") or ()],
        "volume_mounts": entry.get("volumeMounts") or [],
        "volumes": entry.get("volumes") or [],
        "labels": entry.get("labels") or {},
        "resources": entry.get("resources") or {},
        "namespace": namespace,
        "service_account_name": values["serviceAccount"]["name"],
        "env": entry.get("env") or [],
    }
    return json.dumps({"k8s": k8s})


def launcher_context(dagster_values: Mapping[str, Any], namespace: str,
                     service_account: str = "dagster") -> K8sContainerContext:
    """What the official Dagster chart's K8sRunLauncher contributes to every run."""
    config = dagster_values["runLauncher"]["config"]["k8sRunLauncher"]
    run_k8s = {RUN_K8S_SECTIONS[k]: v for k, v in (config.get("runK8sConfig") or {}).items()}
    return K8sContainerContext(
        namespace=config.get("jobNamespace") or namespace, service_account_name=service_account,
        image_pull_policy=config.get("imagePullPolicy"),
        run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(run_k8s),
    )
