"""The Kubernetes Job the official chart's K8sRunLauncher would create for a run of this code
location, built by dagster-k8s itself from the container context the code server publishes
(``DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT``), the launcher's own settings and the run's tags -
the same three sources, merged the way ``K8sContainerContext.create_for_run`` merges them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import kubernetes
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import DagsterK8sJobConfig, construct_dagster_k8s_job, get_user_defined_k8s_config

# What the official Dagster chart's K8sRunLauncher is configured with (its instance ConfigMap,
# Postgres Secret and service account), for release `dagster` in namespace `dagster`.
LAUNCHER = K8sContainerContext(namespace="dagster", service_account_name="dagster",
                               image_pull_policy="Always")
JOB_CONFIG = dict(dagster_home="/opt/dagster/dagster_home", instance_config_map="dagster-instance",
                  postgres_password_secret="dagster-postgresql-secret")


def run_job(container_context_json: str, image: str, tags: Mapping[str, str] | None = None,
            launcher: K8sContainerContext = LAUNCHER) -> dict[str, Any]:
    """The run worker Job (a plain dict, as the API server would receive it)."""
    context = launcher.merge(K8sContainerContext.create_from_config(json.loads(container_context_json)))
    if tags:
        context = context.merge(K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(tags)))
    job_config = DagsterK8sJobConfig(job_image=image, **JOB_CONFIG)
    job = construct_dagster_k8s_job(
        job_config=job_config, args=["dagster", "api", "execute_run", "{}"],
        job_name="dagster-run-0123456789abcdef", pod_name="dagster-run-0123456789abcdef",
        component="run_worker", user_defined_k8s_config=context.run_k8s_config,
        labels={"dagster/job": "daily_retraining"},
        env_vars=[{"name": "DAGSTER_RUN_JOB_NAME", "value": "daily_retraining"}],
    )
    body = kubernetes.client.ApiClient().sanitize_for_serialization(job)
    body["metadata"]["namespace"] = context.namespace
    return body
