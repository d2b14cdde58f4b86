"""The one RayCluster template: a :class:`ResolvedRequest` in, a ``ray.io/v1`` RayCluster out.

Pure: no API calls and no environment reads. The request was checked against the pool catalog
once, by :func:`~ads_ranking_pipelines.config.validation.resolve_request`; the builders trust
it and check only their output against the operator's own rules (:mod:`.rules`). The result
is a plain dict ready for ``yaml.safe_dump`` or the Kubernetes client.

Ray token authentication is on: ``authOptions.mode: token`` makes KubeRay generate a Secret
per cluster (or use ``request.auth_secret_name``, a Secret with key ``auth_token``) and
inject it into every Ray container and the RayJob submitter. The manifest only ever names
the Secret; no token is rendered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.validation import ResolvedRequest
from ads_ranking_pipelines.kuberay import kueue, rules
from ads_ranking_pipelines.kuberay.labels import TEMPLATE_VERSION, build_labels
from ads_ranking_pipelines.kuberay.pod import (
    container_security_context,
    head_pod_template,
    resource_requirements,
    worker_pod_template,
)

__all__ = ["API_VERSION", "TEMPLATE_VERSION", "build_raycluster", "build_raycluster_spec"]

API_VERSION = "ray.io/v1"
KIND = "RayCluster"
WORKER_GROUP_NAME = "workers"

# The in-tree autoscaler sidecar (only when request.autoscaling).
AUTOSCALER_CPUS = 0.5
AUTOSCALER_MEMORY = "512Mi"
AUTOSCALER_IDLE_TIMEOUT_SECONDS = 60


def _auth_options(request: ClusterRequest) -> dict[str, str]:
    auth = {"mode": "token"}
    if request.auth_secret_name:
        auth["secretName"] = request.auth_secret_name
    return auth


def _autoscaler_options() -> dict[str, Any]:
    return {
        "idleTimeoutSeconds": AUTOSCALER_IDLE_TIMEOUT_SECONDS,
        "imagePullPolicy": "IfNotPresent",
        "resources": resource_requirements(AUTOSCALER_CPUS, AUTOSCALER_MEMORY),
        "securityContext": container_security_context(),
        "upscalingMode": "Default",
    }


def _head_start_params(request: ClusterRequest) -> dict[str, str]:
    params = {"dashboard-host": "0.0.0.0"}
    if request.workers > 0 or request.autoscaling:
        # Keep tasks and actors off the head, which holds the GCS for the whole cluster.
        params["num-cpus"] = "0"
    return params


def build_raycluster_spec(resolved: ResolvedRequest, *, pod_labels: Mapping[str, str]
                          ) -> dict[str, Any]:
    """The ``spec`` of a RayCluster (also a RayJob's ``rayClusterSpec``)."""
    request = resolved.request
    if request.autoscaling:
        min_replicas, max_replicas = 0, request.workers
    else:
        min_replicas = max_replicas = request.workers
    spec: dict[str, Any] = {
        "rayVersion": request.ray_version,
        "enableInTreeAutoscaling": request.autoscaling,
        "authOptions": _auth_options(request),
    }
    if request.autoscaling:
        spec["autoscalerOptions"] = _autoscaler_options()
    spec["headGroupSpec"] = {
        "serviceType": "ClusterIP",
        "rayStartParams": _head_start_params(request),
        "template": head_pod_template(resolved, pod_labels),
    }
    spec["workerGroupSpecs"] = [{
        "groupName": WORKER_GROUP_NAME,
        "replicas": request.workers,
        "minReplicas": min_replicas,
        "maxReplicas": max_replicas,
        "numOfHosts": 1,
        "rayStartParams": {},
        "template": worker_pod_template(resolved, pod_labels),
    }]
    return spec


def build_raycluster(
    resolved: ResolvedRequest,
    *,
    labels: Mapping[str, str] | None = None,
    run_id: str | None = None,
    code_location: str | None = None,
) -> dict[str, Any]:
    """A complete RayCluster manifest for the resolved request.

    ``labels`` adds caller labels (the template's own keys win); ``run_id`` and
    ``code_location`` become ``dagster/run-id`` and ``dagster/code-location``. All values
    are sanitized into valid label values. Raises ``RuleError`` naming the manifest field
    when the result breaks an operator rule, ``RequestError`` for a bad caller label key.
    """
    all_labels = build_labels(resolved, labels=labels, run_id=run_id,
                              code_location=code_location)
    manifest = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": resolved.name, "namespace": resolved.namespace,
                     "labels": all_labels},
        "spec": build_raycluster_spec(resolved, pod_labels=all_labels),
    }
    kueue.apply_to_manifest(manifest, resolved)  # a Kueue pool: labelled, created suspended
    rules.check_raycluster(manifest)
    return manifest
