"""Every Kubernetes API permission the KubeRay backend uses, in one table.

:class:`~ads_ranking_pipelines.backends.kuberay.client.KubeRayClient` names one of these
entries on each API call it makes (:func:`require` refuses an entry that is not here), so the
table is exactly what the backend calls. The Helm chart's Role is rendered from the same list
(:func:`rbac_rules`) and a test compares the two, so the chart can neither miss a verb the
backend needs nor grant one it does not use.

:data:`NOTEBOOK_PERMISSIONS` are the calls only X-Ray's notebooks make (a Service and a token
Secret per notebook). The chart grants them in a second Role bound to X-Ray's service account
alone, so the code location (Dagster runs) never holds any verb on Secrets. Secrets get
``create`` and ``delete`` only - no ``get``, ``list`` or ``watch``: X-Ray never reads a Secret
back (the token is shown once, in the answer to the start call), and without read verbs its
account cannot read any other Secret of the namespace either.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

RAY_GROUP = "ray.io"
CORE_GROUP = ""
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"


@dataclass(frozen=True, order=True)
class ApiPermission:
    """One RBAC permission: API group ("" is the core group), resource (with subresource as
    ``rayjobs/status``) and verb."""

    group: str
    resource: str
    verb: str
    why: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.group, self.resource, self.verb)


PERMISSIONS: tuple[ApiPermission, ...] = (
    # RayJobs: one per submitted job; KubeRay makes its cluster and submitter Job.
    ApiPermission(RAY_GROUP, "rayjobs", "create", "submit a job (a RayJob per job)"),
    ApiPermission(RAY_GROUP, "rayjobs", "get", "find a RayJob again; idempotent create"),
    ApiPermission(RAY_GROUP, "rayjobs", "list", "jobs of a cluster; garbage collection"),
    ApiPermission(RAY_GROUP, "rayjobs", "delete", "stop a job; teardown; garbage collection"),
    ApiPermission(RAY_GROUP, "rayjobs/status", "get", "follow a job's deployment and Ray status"),
    # RayClusters: long-lived clusters of the CLI / X-Ray; a RayJob's cluster when tearing down.
    ApiPermission(RAY_GROUP, "rayclusters", "create", "cluster create"),
    ApiPermission(RAY_GROUP, "rayclusters", "get", "cluster describe; submit to a cluster"),
    ApiPermission(RAY_GROUP, "rayclusters", "list", "cluster list; teardown; garbage collection"),
    ApiPermission(RAY_GROUP, "rayclusters", "delete", "cluster delete; teardown"),
    ApiPermission(RAY_GROUP, "rayclusters/status", "get", "wait for readiness and failures"),
    # Pods: the submitter pod's log is the driver log; Ray pods tell why a cluster is stuck.
    ApiPermission(CORE_GROUP, "pods", "list", "submitter and Ray pods (scheduling failures)"),
    ApiPermission(CORE_GROUP, "pods/log", "get", "stream the driver log into Dagster"),
    ApiPermission(CORE_GROUP, "events", "list", "the scheduler's words for a pending pod"),
)

# X-Ray notebooks on KubeRay (backends/kuberay/notebooks.py): a separate Role, X-Ray only.
NOTEBOOK_PERMISSIONS: tuple[ApiPermission, ...] = (
    ApiPermission(CORE_GROUP, "services", "create", "notebook start: the Service to Jupyter on the head"),
    ApiPermission(CORE_GROUP, "services", "list", "which clusters have a notebook, and its owner"),
    ApiPermission(CORE_GROUP, "services", "delete", "notebook stop"),
    ApiPermission(CORE_GROUP, "secrets", "create", "notebook start: Jupyter's token (never read back)"),
    ApiPermission(CORE_GROUP, "secrets", "delete", "notebook stop"),
)

# Pools shared through Kueue (backends/kuberay/queueing.py): read a queued RayJob's or
# RayCluster's Workload for Kueue's words, and its position from Kueue's visibility API
# (queue_position.py). Granted by the chart only with kueue.enabled; never a write verb.
KUEUE_PERMISSIONS: tuple[ApiPermission, ...] = (
    ApiPermission(KUEUE_GROUP, "workloads", "list",
                  "find a queued RayJob's or RayCluster's Workload"),
    ApiPermission(KUEUE_GROUP, "workloads", "get", "follow its admission (Kueue's words)"),
    ApiPermission(KUEUE_VISIBILITY_GROUP, "localqueues/pendingworkloads", "get",
                  "its position in the queue (Kueue's visibility API)"),
)

_BY_KEY = {p.key: p for p in PERMISSIONS + NOTEBOOK_PERMISSIONS + KUEUE_PERMISSIONS}


def require(group: str, resource: str, verb: str) -> ApiPermission:
    """The table's entry for this call; ``LookupError`` when the table does not list it (a
    call added to the client without its permission)."""
    try:
        return _BY_KEY[(group, resource, verb)]
    except KeyError:
        raise LookupError(f"API call {verb} {resource} ({group or 'core'}) is not in "
                          "backends/kuberay/permissions.py PERMISSIONS, "
                          "NOTEBOOK_PERMISSIONS or KUEUE_PERMISSIONS") from None


def rbac_rules(permissions: Iterable[ApiPermission] = PERMISSIONS) -> list[dict[str, list[str]]]:
    """RBAC ``rules`` granting exactly ``permissions``: one rule per (group, resource), sorted,
    as a Role's ``rules`` field."""
    grouped: dict[tuple[str, str], set[str]] = {}
    for p in permissions:
        grouped.setdefault((p.group, p.resource), set()).add(p.verb)
    return [{"apiGroups": [group], "resources": [resource], "verbs": sorted(verbs)}
            for (group, resource), verbs in sorted(grouped.items())]
