"""Kueue's visibility API on the fake API server (kubernetes-sigs/kueue ``pkg/visibility``,
``visibility.kueue.x-k8s.io/v1beta1``, an aggregated API Kueue serves itself), read only:

* ``/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/{ns}/localqueues/{name}/pendingworkloads``
  (``pkg/visibility/api/rest/pending_workloads_lq.go``)
* ``/apis/visibility.kueue.x-k8s.io/v1beta1/clusterqueues/{name}/pendingworkloads``
  (``pkg/visibility/api/rest/pending_workloads_cq.go``)

Both answer a ``PendingWorkloadsSummary``: the Workloads waiting for quota in the order the
scheduler takes them (``queue.Manager.PendingWorkloadsInfo``), each with its ``priority``,
``localQueueName``, ``positionInClusterQueue`` and ``positionInLocalQueue`` (0 is next). A
LocalQueue or ClusterQueue the toy Kueue does not know is 404. Without RBAC the real API server
answers 403: tests inject that (``fake.inject("GET", "pendingworkloads", 403, times=None)``).
"""

from __future__ import annotations

import re
from typing import Any

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_controller import (
    WORKLOADS,
    KueueQueue,
    cluster_queue_of,
    pending_in_order,
)

PREFIX = "/apis/visibility.kueue.x-k8s.io/"
VISIBILITY_API = "visibility.kueue.x-k8s.io/v1beta1"
_LQ = re.compile(r"^/apis/visibility\.kueue\.x-k8s\.io/v1beta1/namespaces/([^/]+)/localqueues/"
                 r"([^/]+)/pendingworkloads$")
_CQ = re.compile(r"^/apis/visibility\.kueue\.x-k8s\.io/v1beta1/clusterqueues/([^/]+)/"
                 r"pendingworkloads$")


def _item(wl: dict[str, Any], in_cq: int, in_lq: int) -> dict[str, Any]:
    """``pkg/visibility/api/rest/utils.go`` ``newPendingWorkload``."""
    meta = wl["metadata"]
    return {"metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "creationTimestamp": meta.get("creationTimestamp"),
                         "ownerReferences": meta.get("ownerReferences") or []},
            "priority": wl["spec"]["priority"], "localQueueName": wl["spec"]["queueName"],
            "positionInClusterQueue": in_cq, "positionInLocalQueue": in_lq}


def _summary(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": VISIBILITY_API, "kind": "PendingWorkloadsSummary",
            "metadata": {"creationTimestamp": None}, "items": items}


class KueueVisibilityRoutes:
    """Part of :class:`FakeKubeApiServer`: answers a visibility request (lock held)."""

    objects: dict[tuple[str, str, str], dict[str, Any]]
    kueue_queues: dict[str, KueueQueue]

    def _pending(self, cluster_queue: str) -> list[dict[str, Any]]:
        """``PendingWorkloadsInfo``: every pending Workload of the ClusterQueue's LocalQueues
        (one ClusterQueue per LocalQueue unless ``KueueQueue.cluster_queue`` shares one),
        with both positions."""
        local_queues = {lq for lq, q in self.kueue_queues.items()
                        if cluster_queue_of(q, lq) == cluster_queue}
        workloads = [w for (p, _, _), w in self.objects.items()
                     if p == WORKLOADS and w["spec"]["queueName"] in local_queues]
        seen: dict[tuple[str, str], int] = {}
        items = []
        for index, wl in enumerate(pending_in_order(workloads)):
            lq = (wl["metadata"]["namespace"], wl["spec"]["queueName"])
            items.append(_item(wl, index, seen.get(lq, 0)))
            seen[lq] = seen.get(lq, 0) + 1
        return items

    def _visibility_route(self, method: str, path: str) -> tuple[int, Any, dict[str, str]] | None:
        from ads_ranking_pipelines_tests.kuberay.fake_apiserver.routes import status_body

        if method != "GET":
            return None
        if m := _LQ.match(path):
            queue = self.kueue_queues.get(m[2])
            if queue is None:
                return 404, status_body(404, "NotFound", f'localqueues.visibility.kueue.x-k8s.io '
                                        f'"{m[2]}" not found'), {}
            items = [i for i in self._pending(cluster_queue_of(queue, m[2]))
                     if i["localQueueName"] == m[2] and i["metadata"]["namespace"] == m[1]]
            return 200, _summary(items), {}
        if m := _CQ.match(path):
            if m[1] not in {cluster_queue_of(q, lq) for lq, q in self.kueue_queues.items()}:
                return 404, status_body(404, "NotFound", f'clusterqueues.visibility.kueue.x-k8s.io '
                                        f'"{m[1]}" not found'), {}
            return 200, _summary(self._pending(m[1])), {}
        return None
