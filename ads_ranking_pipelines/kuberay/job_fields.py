"""The parts of a RayJob manifest that come from a :class:`JobSpec`, and the RayJob that
runs a job on an existing RayCluster (``clusterSelector``).

Environment variables of a job (``JobSpec.env_vars``, e.g. the Dagster Pipes bootstrap) are
written into the RayJob's ``runtimeEnvYAML``: they are visible to whoever can read RayJobs, so
they must not be secrets; they are never put into error messages here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.job import JobSpec
from ads_ranking_pipelines.config.validation import RequestError
from ads_ranking_pipelines.kuberay import rules
from ads_ranking_pipelines.kuberay.labels import (
    CLUSTER_NAME_LABEL,
    LABEL_DAGSTER_CODE_LOCATION,
    LABEL_DAGSTER_RUN_ID,
    LABEL_OWNER,
    RAY_CLUSTER_LABEL,
    SUBMISSION_ID_LABEL,
    sanitize_label_value,
)
from ads_ranking_pipelines.kuberay.pod import submitter_pod_template
from ads_ranking_pipelines.kuberay.raycluster import API_VERSION
from ads_ranking_pipelines.kuberay.rayjob import DELETION_RULES, SUBMISSION_MODE, rayjob_name_for


def runtime_env(job: JobSpec) -> dict[str, Any]:
    """The job's Ray runtime env: its env vars and (a remote URI only) its working dir."""
    env: dict[str, Any] = {"env_vars": {str(k): str(v) for k, v in job.env_vars.items()}}
    if job.working_dir:
        if "://" not in job.working_dir:
            raise RequestError(
                "working_dir", job.working_dir,
                "a remote URI the cluster can fetch (s3://, gs://, https://…/x.zip)",
                "a local directory is not visible to a KubeRay cluster; use the local backend",
            )
        env["working_dir"] = job.working_dir
    return env


def redacted(exc: RequestError) -> RequestError:
    """Never let env var values (Pipes bootstrap data) reach an error message."""
    if "runtime" in exc.field.lower() or "env" in exc.field.lower():
        return type(exc)(exc.field, "<redacted>", exc.valid, exc.reason)
    return exc


def add_job_fields(spec: dict[str, Any], job: JobSpec) -> None:
    """The job's entrypoint CPUs and metadata, onto a RayJob ``spec``."""
    if job.entrypoint_num_cpus:
        spec["entrypointNumCpus"] = float(job.entrypoint_num_cpus)
    if job.metadata:
        spec["metadata"] = {str(k): str(v) for k, v in job.metadata.items()}


def rayjob_for_cluster(cluster: Mapping[str, Any], job: JobSpec, *, owner: str,
                       labels: Mapping[str, str], run_id: str | None,
                       code_location: str | None, deletion: str = DELETION_RULES,
                       ttl_seconds: int = 600) -> dict[str, Any]:
    """A RayJob that runs ``job`` on the existing RayCluster ``cluster`` (``clusterSelector``):
    no cluster of its own, so nothing is shut down when it ends. With ``deletion`` ``rules``
    it carries ``DeleteSelf`` rules (``ttl_seconds`` after it ends; a selector job may not use
    DeleteCluster), but KubeRay v1.7 returns before running them for a ``clusterSelector`` job
    (rayjob_controller.go, case Complete/Failed): nothing in the operator removes it, and the
    garbage collector does. It carries the cluster's labels (not KubeRay's), then ``labels``, the
    owner, the cluster, the Dagster run id and code location and the submission id."""
    meta = cluster.get("metadata") or {}
    cluster_name, namespace = meta["name"], meta.get("namespace") or "default"
    head = ((cluster.get("spec") or {}).get("headGroupSpec") or {}).get("template") or {}
    head_spec = head.get("spec") or {}
    containers = head_spec.get("containers") or [{}]
    job_name = rayjob_name_for(cluster_name, job.submission_id)
    all_labels = {k: v for k, v in (meta.get("labels") or {}).items()
                  if not k.startswith("ray.io/")}
    all_labels.update(labels)
    all_labels.update({LABEL_OWNER: owner, CLUSTER_NAME_LABEL: cluster_name})
    if run_id:
        all_labels[LABEL_DAGSTER_RUN_ID] = run_id
    if code_location:
        all_labels[LABEL_DAGSTER_CODE_LOCATION] = code_location
    all_labels[SUBMISSION_ID_LABEL] = job.submission_id
    all_labels = {k: sanitize_label_value(str(v)) for k, v in sorted(all_labels.items())}
    image = containers[0].get("image") or ClusterRequest.model_fields["image"].default
    service_account = (head_spec.get("serviceAccountName")
                       or ClusterRequest.model_fields["service_account"].default)
    try:
        env = runtime_env(job)
        spec: dict[str, Any] = {
            "entrypoint": job.entrypoint,
            "jobId": job.submission_id,
            "submissionMode": SUBMISSION_MODE,
            "clusterSelector": {RAY_CLUSTER_LABEL: cluster_name},
            "shutdownAfterJobFinishes": False,
            "backoffLimit": 0,
        }
        if deletion == DELETION_RULES:
            spec["deletionStrategy"] = {"deletionRules": [
                {"policy": "DeleteSelf", "condition": {**cond, "ttlSeconds": ttl_seconds}}
                for cond in ({"jobStatus": "SUCCEEDED"}, {"jobStatus": "FAILED"},
                             {"jobDeploymentStatus": "Failed"})]}
        spec["runtimeEnvYAML"] = yaml.safe_dump(env, sort_keys=True, default_flow_style=False)
        add_job_fields(spec, job)
        spec["submitterPodTemplate"] = submitter_pod_template(
            image=image, service_account=service_account, labels=all_labels)
        manifest = {"apiVersion": API_VERSION, "kind": "RayJob",
                    "metadata": {"name": job_name, "namespace": namespace, "labels": all_labels},
                    "spec": spec}
        rules.check_name(job_name, kind="RayJob")
        rules.check_rayjob(manifest)
    except RequestError as exc:
        raise redacted(exc) from None
    return manifest
