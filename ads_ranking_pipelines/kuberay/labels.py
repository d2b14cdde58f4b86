"""Labels the cluster template puts on every object it renders.

Values come from people and from Dagster (owners with e-mail addresses, run ids, code
location names with dots or capitals), so each value is sanitized into a valid Kubernetes
label value: at most 63 characters of ``[A-Za-z0-9_.-]``, starting and ending alphanumeric.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

from ads_ranking_pipelines.config.validation import (
    MANAGED_LABEL_PREFIX,
    RequestError,
    ResolvedRequest,
    is_label_value,
    is_qualified_label_key,
)

# Bump when the rendered shape changes, so clusters built by an older template can be found.
TEMPLATE_VERSION = "v1"

LABEL_OWNER = MANAGED_LABEL_PREFIX + "owner"
LABEL_TEAM = MANAGED_LABEL_PREFIX + "team"
LABEL_POOL = MANAGED_LABEL_PREFIX + "pool"
LABEL_GPU_TYPE = MANAGED_LABEL_PREFIX + "gpu-type"
LABEL_TEMPLATE_VERSION = MANAGED_LABEL_PREFIX + "template-version"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_DAGSTER_RUN_ID = "dagster/run-id"
LABEL_DAGSTER_CODE_LOCATION = "dagster/code-location"

MANAGED_BY = "ads-ranking-pipelines"
# What a RayJob run on an existing cluster carries: its Ray submission id and the cluster's name.
SUBMISSION_ID_LABEL = MANAGED_LABEL_PREFIX + "submission-id"
CLUSTER_NAME_LABEL = MANAGED_LABEL_PREFIX + "cluster"
# KubeRay's own label naming a pod's or Service's RayCluster (ray-operator/controllers/ray/utils/constant.go).
RAY_CLUSTER_LABEL = "ray.io/cluster"
NO_GPU = "none"

_MAX_VALUE = 63
_INVALID_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_EDGE = re.compile(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$")


def sanitize_label_value(value: str) -> str:
    """A valid label value as close to ``value`` as possible.

    Runs of invalid characters become ``-``, non-alphanumeric ends are stripped, and values
    longer than 63 characters keep a prefix plus 8 hex characters of their SHA-256, so that
    two different long values stay different. Valid values come back unchanged.
    """
    if is_label_value(value):
        return value
    cleaned = _EDGE.sub("", _INVALID_CHARS.sub("-", value))
    if len(cleaned) > _MAX_VALUE:
        digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:8]
        head = _EDGE.sub("", cleaned[: _MAX_VALUE - len(digest) - 1])
        cleaned = f"{head}-{digest}" if head else digest
    return cleaned


def build_labels(
    resolved: ResolvedRequest,
    *,
    labels: Mapping[str, str] | None = None,
    run_id: str | None = None,
    code_location: str | None = None,
) -> dict[str, str]:
    """All labels for the objects of one request, values sanitized, keys sorted.

    Precedence, lowest first: ``request.labels``, the caller's ``labels``, then the labels
    the template owns (owner, team, pool, GPU type, template version, Dagster run). The
    request's own labels were checked by ``resolve_request``; the caller's ``labels`` keys
    are checked here (RequestError on a bad key).
    """
    request, pool = resolved.request, resolved.pool
    merged: dict[str, str] = {key: str(value) for key, value in request.labels.items()}
    for key, value in (labels or {}).items():
        if not is_qualified_label_key(key):
            raise RequestError("labels", key, "Kubernetes label keys ([prefix/]name)",
                               "not a valid label key")
        merged[key] = str(value)
    merged.update({
        LABEL_MANAGED_BY: MANAGED_BY,
        LABEL_OWNER: request.owner,
        LABEL_TEAM: request.team,
        LABEL_POOL: pool.name,
        LABEL_GPU_TYPE: pool.gpu_type or NO_GPU,
        LABEL_TEMPLATE_VERSION: TEMPLATE_VERSION,
    })
    if run_id:
        merged[LABEL_DAGSTER_RUN_ID] = run_id
    if code_location:
        merged[LABEL_DAGSTER_CODE_LOCATION] = code_location
    return {key: sanitize_label_value(merged[key]) for key in sorted(merged)}
