"""A RayJob around the one cluster template: a fresh cluster per job, deleted afterwards.

``rayClusterSpec`` comes from :func:`build_raycluster_spec`, so a RayJob's cluster is the
same as a standalone RayCluster for the same request. The operator's submitter Job
(``K8sJobMode``) runs ``ray job submit`` with ``submission_id`` as the Ray job id, so a
retried submitter re-attaches instead of submitting twice.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

import yaml

from ads_ranking_pipelines.config.validation import RequestError, ResolvedRequest
from ads_ranking_pipelines.kuberay import kueue, rules
from ads_ranking_pipelines.kuberay.labels import build_labels
from ads_ranking_pipelines.kuberay.pod import submitter_pod_template
from ads_ranking_pipelines.kuberay.raycluster import API_VERSION, build_raycluster_spec

__all__ = ["DELETION_MODES", "SUBMISSION_MODE", "build_rayjob", "cleanup_fields", "rayjob_name_for"]

KIND = "RayJob"
SUBMISSION_MODE = "K8sJobMode"
# Each retry creates a new cluster; the Dagster run owns retries, so the RayJob does not.
DEFAULT_BACKOFF_LIMIT = 0
DELETION_RULES = "rules"
DELETION_SHUTDOWN = "shutdown"
DELETION_MODES = (DELETION_RULES, DELETION_SHUTDOWN)

SUBMISSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
# A RayJob name leaves room for the "-xxxxx" KubeRay appends to its RayCluster's name.
MAX_JOB_NAME = rules.MAX_RAYJOB_NAME


def rayjob_name_for(base: str, submission_id: str) -> str:
    """A RayJob name for ``submission_id`` derived from ``base`` (a DNS-1035 label):
    deterministic, so a retried submission of the same id finds its RayJob again."""
    digest = hashlib.sha256(submission_id.encode("utf-8")).hexdigest()[:8]
    head = base[: MAX_JOB_NAME - len(digest) - 1].rstrip("-") or "job"
    if not head[0].isalpha():
        head = "j" + head[: MAX_JOB_NAME - len(digest) - 2]
    return f"{head}-{digest}"


def _runtime_env_yaml(runtime_env: Mapping[str, Any] | None) -> str | None:
    if not runtime_env:
        return None
    if not isinstance(runtime_env, Mapping):
        raise RequestError("runtime_env", runtime_env, "a mapping (Ray runtime_env)", "not a mapping")
    try:
        return yaml.safe_dump(dict(runtime_env), sort_keys=True, default_flow_style=False)
    except yaml.YAMLError as exc:
        raise RequestError("runtime_env", runtime_env, "plain YAML-serializable values",
                           str(exc)) from None


def cleanup_fields(deletion: str, ttl_seconds: int) -> dict[str, Any]:
    """The RayJob fields that make the operator clean up after the job.

    ``rules`` (KubeRay >= 1.5 with the ``RayJobDeletionPolicy`` feature gate, on by default in
    v1.7): ``deletionStrategy.deletionRules`` - ``DeleteCluster`` as soon as the Ray job
    succeeds or fails or the deployment fails, ``DeleteSelf`` ``ttl_seconds`` later (the RayJob,
    its submitter Job and pods). Rules exclude ``shutdownAfterJobFinishes`` and the global
    TTL (rayjob_controller.go ``handleDeletionRules``; utils/validation.go
    ``validateDeletionRules``: TTLs non-decreasing Workers <= Cluster <= Self).

    ``shutdown`` (operators with the gate off): ``shutdownAfterJobFinishes`` with
    ``ttlSecondsAfterFinished`` deletes only the RayCluster (``handleShutdownAfterJobFinishes``)
    - the RayJob CR and its submitter stay unless the operator runs with
    ``DELETE_RAYJOB_CR_AFTER_JOB_FINISHES=true``; our garbage collector removes them.
    """
    if deletion == DELETION_SHUTDOWN:
        return {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": ttl_seconds}
    if deletion != DELETION_RULES:
        raise RequestError("rayjob_deletion", deletion, list(DELETION_MODES),
                           "how the operator cleans up after a RayJob")
    rules = []
    for condition in ({"jobStatus": "SUCCEEDED"}, {"jobStatus": "FAILED"},
                      {"jobDeploymentStatus": "Failed"}):
        rules.append({"policy": "DeleteCluster", "condition": {**condition, "ttlSeconds": 0}})
        rules.append({"policy": "DeleteSelf", "condition": {**condition, "ttlSeconds": ttl_seconds}})
    return {"shutdownAfterJobFinishes": False, "deletionStrategy": {"deletionRules": rules}}


def build_rayjob(
    resolved: ResolvedRequest,
    *,
    entrypoint: str,
    submission_id: str,
    runtime_env: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
    run_id: str | None = None,
    code_location: str | None = None,
    backoff_limit: int = DEFAULT_BACKOFF_LIMIT,
    deletion: str = DELETION_RULES,
) -> dict[str, Any]:
    """A complete RayJob manifest running ``entrypoint`` on a cluster for the resolved
    request (checked once by ``resolve_request``; not again here).

    The job fails after ``request.active_deadline_seconds``, or when it is not Running
    ``request.pre_running_deadline_seconds`` after it started. Cleanup (``deletion``, see
    :func:`cleanup_fields`): with ``rules`` the operator deletes the cluster as soon as the
    job ends and the RayJob itself ``request.ttl_seconds_after_finished`` later; with
    ``shutdown`` it deletes only the cluster (after the TTL) and the garbage collector must
    remove the RayJob. On a Kueue pool (:mod:`.kueue`) the RayJob is labelled for its
    LocalQueue, created suspended, cleans up with ``shutdown`` whatever ``deletion`` says and
    has no pre-running deadline. ``runtime_env`` is Ray's runtime_env dict
    (rendered as ``runtimeEnvYAML``); it must not carry credentials. Raises
    ``RequestError``/``RuleError`` naming the offending argument or manifest field.
    """
    request = resolved.request
    if not isinstance(entrypoint, str) or not entrypoint.strip():
        raise RequestError("entrypoint", entrypoint, "a non-empty shell command",
                           "the submitter runs it with `ray job submit`")
    if not isinstance(submission_id, str) or not SUBMISSION_ID.match(submission_id):
        raise RequestError("submission_id", submission_id,
                           "1-128 chars of [A-Za-z0-9_.:-], starting alphanumeric",
                           "becomes the Ray job id")
    all_labels = build_labels(resolved, labels=labels, run_id=run_id,
                              code_location=code_location)
    queued = resolved.pool.kueue is not None
    if queued:
        deletion = DELETION_SHUTDOWN  # the only mode a suspendable RayJob may use (kueue #3994)
    spec: dict[str, Any] = {
        "entrypoint": entrypoint,
        "jobId": submission_id,
        "submissionMode": SUBMISSION_MODE,
        "activeDeadlineSeconds": request.active_deadline_seconds,
        "preRunningDeadlineSeconds": request.pre_running_deadline_seconds,
        "backoffLimit": backoff_limit,
        **cleanup_fields(deletion, request.ttl_seconds_after_finished),
    }
    if queued:  # counted from the start: it would reap a job waiting in Kueue's queue
        del spec["preRunningDeadlineSeconds"]
    env_yaml = _runtime_env_yaml(runtime_env)
    if env_yaml is not None:
        spec["runtimeEnvYAML"] = env_yaml
    spec["rayClusterSpec"] = build_raycluster_spec(resolved, pod_labels=all_labels)
    spec["submitterPodTemplate"] = submitter_pod_template(
        image=request.image, service_account=request.service_account, labels=all_labels)
    manifest = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": request.name, "namespace": request.namespace, "labels": all_labels},
        "spec": spec,
    }
    kueue.apply_to_manifest(manifest, resolved)
    rules.check_rayjob(manifest)
    return manifest
