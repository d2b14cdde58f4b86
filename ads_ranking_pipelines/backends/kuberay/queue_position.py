"""Where a pending Workload stands in its queue, from Kueue's visibility API
(kubernetes-sigs/kueue ``pkg/visibility``: ``visibility.kueue.x-k8s.io/v1beta1``
``localqueues/{name}/pendingworkloads``, items with ``positionInLocalQueue`` and
``positionInClusterQueue``, 0 being next).

The API is optional: an older Kueue does not serve it (404) and a namespace's RBAC may not
grant it (403). Either is no error: the position is "unknown", said once in the words.
"""

from __future__ import annotations

from dataclasses import dataclass

from ads_ranking_pipelines.backends.kuberay.client import KubeError, KubeRayClient, NotFound


@dataclass(frozen=True)
class QueuePosition:
    """Kueue's positions (0-based, as Kueue gives them), or why there are none."""

    in_local_queue: int | None = None
    in_cluster_queue: int | None = None
    unknown: str | None = None  # why Kueue gives no position (HTTP 403 / 404 ...)

    def text(self) -> str:
        """``position 2 in LocalQueue q (3 in its ClusterQueue)``, counted from 1."""
        if self.unknown or self.in_local_queue is None:
            return f"position unknown ({self.unknown or 'not in the pending list'})"
        text = f"position {self.in_local_queue + 1} in its LocalQueue"
        if self.in_cluster_queue is not None:
            text += f" ({self.in_cluster_queue + 1} in its ClusterQueue)"
        return text

    def to_json(self) -> dict[str, object]:
        return {"positionInLocalQueue": self.in_local_queue,
                "positionInClusterQueue": self.in_cluster_queue, "unknown": self.unknown}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def queue_position(client: KubeRayClient, namespace: str, local_queue: str,
                   workload: str) -> QueuePosition:
    """The Workload's position in ``local_queue``'s pending list; ``unknown`` when the API
    answers 403 / 404 or fails, or when the Workload is not listed (admitted meanwhile, or
    inadmissible)."""
    try:
        items = client.pending_workloads(namespace, local_queue)
    except NotFound:
        return QueuePosition(unknown="Kueue's visibility API is not served here: HTTP 404")
    except KubeError as exc:
        if exc.status == 403:
            return QueuePosition(unknown="no RBAC for Kueue's visibility API: HTTP 403")
        return QueuePosition(unknown=f"Kueue's visibility API failed: {exc}")
    for item in items:
        if (item.get("metadata") or {}).get("name") == workload:
            return QueuePosition(_int(item.get("positionInLocalQueue")),
                                 _int(item.get("positionInClusterQueue")))
    return QueuePosition(unknown="not in Kueue's pending list")
