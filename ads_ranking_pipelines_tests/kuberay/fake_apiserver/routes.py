"""The REST paths of the fake API server: what the real ``kubernetes`` client calls for what
our code uses, answered from the object store.

* ``/apis/ray.io/v1/namespaces/{ns}/{rayjobs|rayclusters}`` - list (``labelSelector``), create
* ``/apis/ray.io/v1/namespaces/{ns}/{plural}/{name}`` - get, delete (``propagationPolicy``)
* ``/apis/ray.io/v1/namespaces/{ns}/{plural}/{name}/status`` - get
* ``/api/v1/namespaces/{ns}/pods`` (``labelSelector``), ``/pods/{name}``, ``/pods/{name}/log``
* ``/api/v1/namespaces/{ns}/events`` (``fieldSelector``)
* ``/apis/ray.io/v1/{plural}`` and ``/api/v1/{services|secrets}`` - list across namespaces
* ``/api/v1/namespaces/{ns}/{services|secrets}`` - list (``labelSelector``), create;
  ``/{name}`` - get, delete. Created objects are validated strictly with
  ``kubernetes-validate`` (the ``fieldValidation=Strict`` the client asks for); a Secret's
  ``stringData`` is merged into base64 ``data`` and dropped, as the API server does on write;
  a Service gets a ``clusterIP``. They carry ownerReferences, which the store's garbage
  collection follows when their RayCluster goes (Kubernetes' garbage collector deletes
  dependents of a deleted owner; without ``blockOwnerDeletion`` the owner does not wait).

Errors are ``Status`` objects (404 NotFound, 409 AlreadyExists, 422 Invalid, 400 BadRequest).
Every RayJob and RayCluster created is validated strictly against the KubeRay v1.7 CRDs
(:mod:`crd_schema`); an invalid one is refused with 422 and recorded in ``rejected``.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import re
import time
from typing import Any

from ads_ranking_pipelines_tests.kuberay import crd_schema
from ads_ranking_pipelines_tests.kuberay.fake_apiserver.store import (
    ObjectStore,
    _Pod,
    matches_selector,
)

KINDS = {"rayjobs": "RayJob", "rayclusters": "RayCluster"}

_CR_COLLECTION = re.compile(r"^/apis/ray\.io/v1/namespaces/([^/]+)/(rayjobs|rayclusters)$")
_CR_ITEM = re.compile(r"^/apis/ray\.io/v1/namespaces/([^/]+)/(rayjobs|rayclusters)/([^/]+)(/status)?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)(/log)?$")
_EVENTS = re.compile(r"^/api/v1/namespaces/([^/]+)/events$")
# Cluster-wide lists (every namespace), as a ClusterRole with ``list`` allows them.
_CR_ALL = re.compile(r"^/apis/ray\.io/v1/(rayjobs|rayclusters)$")
_CORE_ALL = re.compile(r"^/api/v1/(services|secrets)$")
_CORE_COLLECTION = re.compile(r"^/api/v1/namespaces/([^/]+)/(services|secrets)$")
_CORE_ITEM = re.compile(r"^/api/v1/namespaces/([^/]+)/(services|secrets)/([^/]+)$")
CORE_KINDS = {"services": "Service", "secrets": "Secret"}


def _field_match(obj: dict[str, Any], selector: str) -> bool:
    """Field selectors ``a.b=v`` (comma-separated), as events support them."""
    for term in filter(None, (t.strip() for t in selector.split(","))):
        path, _, value = term.partition("=")
        node: Any = obj
        for part in path.strip().split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if str(node) != value.strip().lstrip("="):
            return False
    return True


def _stamp(t: float) -> str:
    """RFC 3339 with nanoseconds, trailing zeros trimmed as Go's RFC3339Nano does."""
    whole = dt.datetime.fromtimestamp(t, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    frac = f"{int((t % 1) * 1e9):09d}".rstrip("0")
    return f"{whole}.{frac}Z" if frac else f"{whole}Z"


def status_body(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


def format_log_line(t: float, line: str, stamps: bool) -> str:
    return f"{_stamp(t)} {line}\n" if stamps else f"{line}\n"


class ApiRoutes(ObjectStore):
    """Part of :class:`FakeKubeApiServer`: answers one request (call with the lock held)."""

    validate: bool
    rejected: list[str]
    deleted: list[tuple[str, str, str]]
    events: list[dict[str, Any]]

    def _route(self, method: str, path: str, query: dict[str, list[str]], body: Any
               ) -> tuple[int, Any, dict[str, str]]:
        selector = (query.get("labelSelector") or [""])[0]
        if path.startswith("/apis/visibility.kueue.x-k8s.io/"):  # .kueue_visibility
            answer = self._visibility_route(method, path)  # type: ignore[attr-defined]
            if answer is not None:
                return answer
        if path.startswith("/apis/kueue.x-k8s.io/"):  # .kueue_routes (Workloads)
            answer = self._kueue_route(method, path, selector)  # type: ignore[attr-defined]
            if answer is not None:
                return answer
        all_ns = _CR_ALL.match(path) or _CORE_ALL.match(path)
        if all_ns and method == "GET":
            plural = all_ns[1]
            items = [copy.deepcopy(o) for (p, _, _), o in sorted(self.objects.items())
                     if p == plural and matches_selector(o["metadata"].get("labels") or {}, selector)]
            kind = KINDS.get(plural) or CORE_KINDS[plural]
            return 200, {"apiVersion": "ray.io/v1" if plural in KINDS else "v1",
                         "kind": kind + "List",
                         "metadata": {"resourceVersion": str(self._resource_version)},
                         "items": items}, {}
        if m := _CR_COLLECTION.match(path):
            ns, plural = m[1], m[2]
            if method == "GET":
                items = [copy.deepcopy(o) for (p, n, _), o in sorted(self.objects.items())
                         if p == plural and n == ns
                         and matches_selector(o["metadata"].get("labels") or {}, selector)]
                return 200, {"apiVersion": "ray.io/v1", "kind": KINDS[plural] + "List",
                             "metadata": {"resourceVersion": str(self._resource_version)},
                             "items": items}, {}
            if method == "POST":
                return self._create(ns, plural, body, query)
        if m := _CR_ITEM.match(path):
            ns, plural, name, sub = m[1], m[2], m[3], m[4]
            key = (plural, ns, name)
            obj = self.objects.get(key)
            if obj is None:
                return 404, status_body(404, "NotFound",
                                        f'{plural}.ray.io "{name}" not found',
                                        {"name": name, "group": "ray.io", "kind": plural}), {}
            if method == "GET":
                return 200, copy.deepcopy(obj), {}
            if method == "DELETE" and not sub:
                policy = (query.get("propagationPolicy") or [None])[0] or \
                    (body or {}).get("propagationPolicy") or "Background"
                self.deleted.append(key)
                return 200, self._schedule_delete(key, policy), {}
        if (m := _CORE_COLLECTION.match(path)) or (m := _CORE_ITEM.match(path)):
            return self._core_route(method, m[1], m[2], m[3] if m.re is _CORE_ITEM else None,
                                    selector, body)
        if m := _PODS.match(path):
            if method == "GET":
                ns = m[1]
                items = [self._pod_view(p) for (n, _), p in sorted(self.pods.items())
                         if n == ns and matches_selector(p.obj["metadata"].get("labels") or {},
                                                         selector)]
                return 200, {"apiVersion": "v1", "kind": "PodList",
                             "metadata": {"resourceVersion": str(self._resource_version)},
                             "items": items}, {}
        if (m := _EVENTS.match(path)) and method == "GET":
            fields = (query.get("fieldSelector") or [""])[0]
            items = [copy.deepcopy(e) for e in self.events
                     if e["metadata"]["namespace"] == m[1] and _field_match(e, fields)]
            return 200, {"apiVersion": "v1", "kind": "EventList",
                         "metadata": {"resourceVersion": str(self._resource_version)},
                         "items": items}, {}
        if m := _POD.match(path):
            ns, name, log_ = m[1], m[2], m[3]
            pod = self.pods.get((ns, name))
            if pod is None:
                return 404, status_body(404, "NotFound", f'pods "{name}" not found'), {}
            if method == "GET" and not log_:
                return 200, self._pod_view(pod), {}
            if method == "GET" and log_:
                if pod.obj["status"]["phase"] == "Pending":
                    container = pod.obj["spec"]["containers"][0]["name"]
                    return 400, status_body(400, "BadRequest",
                                            f'container "{container}" in pod "{name}" is waiting '
                                            "to start: ContainerCreating"), {}
                return 200, ("LOG", pod), {}
        return 404, status_body(404, "NotFound", f"the server could not find the requested "
                                f"resource ({method} {path})"), {}

    @staticmethod
    def _pod_view(pod: _Pod) -> dict[str, Any]:
        return {k: copy.deepcopy(v) for k, v in pod.obj.items() if not k.startswith("_")}

    def _create(self, ns: str, plural: str, body: Any, query: dict[str, list[str]]
                ) -> tuple[int, Any, dict[str, str]]:
        kind = KINDS[plural]
        if not isinstance(body, dict):
            return 400, status_body(400, "BadRequest", "the body is not a JSON object"), {}
        obj = copy.deepcopy(body)
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if obj.get("apiVersion") != "ray.io/v1" or obj.get("kind") != kind:
            return 400, status_body(400, "BadRequest",
                                    f"expected ray.io/v1 {kind}, got {obj.get('apiVersion')} "
                                    f"{obj.get('kind')}"), {}
        if not name or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", name):
            return 422, status_body(422, "Invalid", f'{kind}.ray.io "{name}" is invalid: '
                                    "metadata.name: Invalid value"), {}
        if meta.get("namespace", ns) != ns:
            return 400, status_body(400, "BadRequest", "the namespace of the provided object "
                                    "does not match the namespace sent on the request"), {}
        if self.validate:
            errors = crd_schema.schema_errors(obj)
            if errors:
                self.rejected.append(f"{kind} {name}: " + "; ".join(errors))
                return 422, status_body(422, "Invalid", f'{kind}.ray.io "{name}" is invalid: '
                                        + "; ".join(errors)), {}
        if (plural, ns, name) in self.objects:
            return 409, status_body(409, "AlreadyExists",
                                    f'{plural}.ray.io "{name}" already exists',
                                    {"name": name, "group": "ray.io", "kind": plural}), {}
        obj.pop("status", None)  # the status subresource ignores status on create
        meta["namespace"] = ns
        obj["metadata"] = meta
        self._stamp_new(meta)
        self.objects[(plural, ns, name)] = obj
        self.created.append((plural, ns, name))
        self.changed.notify_all()
        return 201, copy.deepcopy(obj), {}

    # ---- Services and Secrets ----------------------------------------------------------------
    def _core_route(self, method: str, ns: str, plural: str, name: str | None, selector: str,
                    body: Any) -> tuple[int, Any, dict[str, str]]:
        kind = CORE_KINDS[plural]
        if name is None and method == "GET":
            items = [copy.deepcopy(o) for (p, n, _), o in sorted(self.objects.items())
                     if p == plural and n == ns
                     and matches_selector(o["metadata"].get("labels") or {}, selector)]
            return 200, {"apiVersion": "v1", "kind": kind + "List",
                         "metadata": {"resourceVersion": str(self._resource_version)},
                         "items": items}, {}
        if name is None and method == "POST":
            return self._create_core(ns, plural, body)
        obj = self.objects.get((plural, ns, name or ""))
        if obj is None:
            return 404, status_body(404, "NotFound", f'{plural} "{name}" not found',
                                    {"name": name, "kind": plural}), {}
        if method == "GET":
            return 200, copy.deepcopy(obj), {}
        if method == "DELETE":
            self.deleted.append((plural, ns, name or ""))
            self._remove((plural, ns, name))
            return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                         "status": "Success", "details": {"name": name, "kind": plural}}, {}
        return 405, status_body(405, "MethodNotAllowed", f"{method} is not supported"), {}

    def _create_core(self, ns: str, plural: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        import kubernetes_validate

        from ads_ranking_pipelines_tests.kuberay.pod_security import kubernetes_version

        kind = CORE_KINDS[plural]
        if not isinstance(body, dict) or body.get("kind") != kind or body.get("apiVersion") != "v1":
            return 400, status_body(400, "BadRequest", f"expected a v1 {kind}"), {}
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        name = meta.get("name") or ""
        if meta.setdefault("namespace", ns) != ns:
            return 400, status_body(400, "BadRequest", "the namespace of the provided object "
                                    "does not match the namespace sent on the request"), {}
        try:
            kubernetes_validate.validate(obj, kubernetes_version(), strict=True)
        except kubernetes_validate.ValidationError as exc:
            self.rejected.append(f"{kind} {name}: {exc.message}")
            return 422, status_body(422, "Invalid", f'{kind} "{name}" is invalid: {exc.message}'), {}
        if (plural, ns, name) in self.objects:
            return 409, status_body(409, "AlreadyExists", f'{plural} "{name}" already exists',
                                    {"name": name, "kind": plural}), {}
        if kind == "Secret" and "stringData" in obj:
            data = obj.setdefault("data", {})
            for key, value in obj.pop("stringData").items():
                data[key] = base64.b64encode(value.encode()).decode()
        if kind == "Service":
            obj["spec"]["clusterIP"] = f"10.96.{len(self.created) % 250}.{len(self.objects) % 250 + 2}"
            obj["status"] = {"loadBalancer": {}}
        self._stamp_new(meta)
        self.objects[(plural, ns, name)] = obj
        self.created.append((plural, ns, name))
        self.changed.notify_all()
        return 201, copy.deepcopy(obj), {}

    # ---- log streaming -----------------------------------------------------------------------
    def log_text(self, pod: _Pod, query: dict[str, list[str]]) -> str:
        stamps = (query.get("timestamps") or ["false"])[0].lower() in ("true", "1")
        since = (query.get("sinceSeconds") or [None])[0]
        cutoff = time.time() - float(since) if since else None
        return "".join(format_log_line(t, line, stamps) for t, line in pod.lines
                       if cutoff is None or t >= cutoff)
