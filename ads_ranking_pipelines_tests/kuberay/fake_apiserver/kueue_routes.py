"""The Kueue REST paths of the fake API server (read-only: Workloads are Kueue's to write):

* ``/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/workloads`` - list (``labelSelector``)
* ``/apis/kueue.x-k8s.io/v1beta1/namespaces/{ns}/workloads/{name}`` - get
* ``/apis/kueue.x-k8s.io/v1beta1/workloads`` - list across namespaces
"""

from __future__ import annotations

import copy
import re
from typing import Any

from ads_ranking_pipelines_tests.kuberay.fake_apiserver.kueue_controller import API_VERSION, WORKLOADS
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.store import matches_selector

_ALL = re.compile(r"^/apis/kueue\.x-k8s\.io/v1beta1/workloads$")
_COLLECTION = re.compile(r"^/apis/kueue\.x-k8s\.io/v1beta1/namespaces/([^/]+)/workloads$")
_ITEM = re.compile(r"^/apis/kueue\.x-k8s\.io/v1beta1/namespaces/([^/]+)/workloads/([^/]+)$")
PREFIX = "/apis/kueue.x-k8s.io/"


def _view(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in obj.items() if not k.startswith("_")}


class KueueRoutes:
    """Part of :class:`FakeKubeApiServer`: answers a Kueue request (lock held)."""

    objects: dict[tuple[str, str, str], dict[str, Any]]
    _resource_version: int

    def _kueue_route(self, method: str, path: str, selector: str
                     ) -> tuple[int, Any, dict[str, str]] | None:
        """The answer, or None when ``path`` is not a Workload path this fake serves."""
        from ads_ranking_pipelines_tests.kuberay.fake_apiserver.routes import status_body

        if method != "GET":
            return None
        if (m := _COLLECTION.match(path)) or _ALL.match(path):
            ns = m[1] if m else None
            items = [_view(o) for (p, n, _), o in sorted(self.objects.items())
                     if p == WORKLOADS and ns in (None, n)
                     and matches_selector(o["metadata"].get("labels") or {}, selector)]
            return 200, {"apiVersion": API_VERSION, "kind": "WorkloadList",
                         "metadata": {"resourceVersion": str(self._resource_version)},
                         "items": items}, {}
        if m := _ITEM.match(path):
            obj = self.objects.get((WORKLOADS, m[1], m[2]))
            if obj is None:
                return 404, status_body(404, "NotFound",
                                        f'workloads.kueue.x-k8s.io "{m[2]}" not found',
                                        {"name": m[2], "group": "kueue.x-k8s.io",
                                         "kind": "workloads"}), {}
            return 200, _view(obj), {}
        return None
