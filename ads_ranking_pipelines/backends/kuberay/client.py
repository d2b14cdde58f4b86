"""A thin client for KubeRay objects and their pods over the official ``kubernetes`` client.

What it adds to ``CustomObjectsApi`` / ``CoreV1Api``:

* **Retries.** 429 and 5xx answers, and connections that fail or time out, are retried with
  bounded exponential backoff (:class:`RetryPolicy`); a ``Retry-After`` header is honoured
  (capped). Other 4xx answers are never retried: they would fail the same way again.
* **Idempotent create.** Every object we create carries a fresh random
  ``ads-ranking.io/creation-token`` annotation. When a create answers 409 AlreadyExists we
  read the existing object: if it carries *our* token, an earlier attempt of this very call
  reached the server (the answer was lost to a timeout or a 5xx) and the object is returned as
  ours. Any other object of that name - made by someone else, or by an earlier run - is not
  touched and :class:`Conflict` is raised naming it and its owner labels. We never adopt or
  overwrite an object we did not create in this call.
* **Typed errors** (:class:`KubeError`, :class:`NotFound`, :class:`Conflict`) carrying the
  API server's ``Status`` reason and message verbatim.
* **Pod log streaming** line by line with ``follow``.

How to reach the API server is the caller's explicit choice: :meth:`KubeRayClient.from_kubeconfig`
(a laptop: a kubeconfig file and context), :meth:`KubeRayClient.in_cluster` (a pod with a
service account) or :meth:`KubeRayClient.for_host` (a URL such as ``kubectl proxy``, or a test
server). Nothing here changes the ``kubernetes`` package's global default configuration.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from ads_ranking_pipelines.backends.kuberay.errors import Conflict, KubeError, NotFound
from ads_ranking_pipelines.backends.kuberay.permissions import (
    CORE_GROUP,
    ApiPermission,
    require,
)
from ads_ranking_pipelines.backends.kuberay.retry import RetryPolicy, call_with_retries, parse_retry_after

log = logging.getLogger(__name__)

GROUP = "ray.io"
VERSION = "v1"
RAYJOBS = "rayjobs"
RAYCLUSTERS = "rayclusters"
PLURALS = (RAYJOBS, RAYCLUSTERS)
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta1"
KUEUE_VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"
CREATION_TOKEN_ANNOTATION = "ads-ranking.io/creation-token"

__all__ = [
    "CREATION_TOKEN_ANNOTATION", "Conflict", "KubeError", "KubeRayClient", "NotFound",
    "RAYCLUSTERS", "RAYJOBS", "RetryPolicy", "creation_token", "new_creation_token",
    "parse_retry_after",
]


def new_creation_token() -> str:
    return secrets.token_hex(16)


def creation_token(obj: Mapping[str, Any]) -> str | None:
    """The creation-token annotation of an object, if any."""
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(CREATION_TOKEN_ANNOTATION)


def _discard(response: Any) -> None:
    """Read and drop an unparsed answer (``_preload_content=False``: the client neither keeps
    nor debug-logs it), so its connection can serve the next request."""
    response.drain_conn()
    response.release_conn()


class KubeRayClient:
    """RayJobs, RayClusters (``ray.io/v1``, incl. the status subresource), pods and pod logs.

    ``api_client`` is a configured ``kubernetes.client.ApiClient``; use the constructors below
    to build one. ``request_timeout_s`` bounds every call except log streaming (whose read
    timeout is ``stream_read_timeout_s``).
    """

    def __init__(self, api_client: Any, *, retry: RetryPolicy | None = None,
                 request_timeout_s: float = 30.0, stream_read_timeout_s: float | None = 300.0,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        from kubernetes import client as k8s

        self.api_client = api_client
        self.retry = retry or RetryPolicy()
        self.request_timeout_s = request_timeout_s
        self.stream_read_timeout_s = stream_read_timeout_s
        self._sleep = sleep
        self._custom = k8s.CustomObjectsApi(api_client)
        self._core = k8s.CoreV1Api(api_client)

    # ---- construction: the caller picks how to reach the API server -----------------------
    @classmethod
    def from_kubeconfig(cls, *, context: str | None = None, config_file: str | None = None,
                        **kwargs: Any) -> "KubeRayClient":
        """From a kubeconfig (``config_file``; None: ``$KUBECONFIG`` or ``~/.kube/config`` as
        the kubernetes package resolves it) and ``context`` (None: its current context)."""
        from kubernetes import client as k8s, config as k8s_config

        configuration = k8s.Configuration()
        try:
            k8s_config.load_kube_config(config_file=config_file, context=context,
                                        client_configuration=configuration,
                                        persist_config=False)
        except k8s_config.ConfigException as exc:
            raise KubeError("loading kubeconfig", 0, "ConfigException", str(exc)) from exc
        return cls(k8s.ApiClient(configuration), **kwargs)

    @classmethod
    def in_cluster(cls, **kwargs: Any) -> "KubeRayClient":
        """From the pod's service account (``KUBERNETES_SERVICE_HOST`` and the mounted token)."""
        from kubernetes import client as k8s, config as k8s_config

        configuration = k8s.Configuration()
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except k8s_config.ConfigException as exc:
            raise KubeError("loading in-cluster config", 0, "ConfigException", str(exc)) from exc
        return cls(k8s.ApiClient(configuration), **kwargs)

    @classmethod
    def for_host(cls, host: str, **kwargs: Any) -> "KubeRayClient":
        """A plain URL with no credentials, e.g. ``http://127.0.0.1:8001`` (``kubectl proxy``)."""
        from kubernetes import client as k8s

        configuration = k8s.Configuration()
        configuration.host = host.rstrip("/")
        return cls(k8s.ApiClient(configuration), **kwargs)

    def close(self) -> None:
        self.api_client.close()

    def _call(self, action: str, fn: Callable[[], Any], permission: ApiPermission) -> Any:
        """Run ``fn`` under the retry policy (``retry.call_with_retries``). ``permission`` is
        the call's entry in :data:`~.permissions.PERMISSIONS` (the RBAC the call needs)."""
        return call_with_retries(action, fn, self.retry, self._sleep)

    # ---- custom objects --------------------------------------------------------------------
    def create(self, plural: str, namespace: str, body: Mapping[str, Any], *,
               token: str | None = None) -> dict[str, Any]:
        """Create ``body``; idempotent across retries (see the module docstring on 409).

        ``token`` (default: a fresh one) is written to the creation-token annotation; a caller
        that wants to recognise the object later - even after an interrupted call - makes it
        with :func:`new_creation_token` and keeps it.
        """
        body = json.loads(json.dumps(body))  # a private deep copy we may annotate
        metadata = body.setdefault("metadata", {})
        token = token or new_creation_token()
        metadata.setdefault("annotations", {})[CREATION_TOKEN_ANNOTATION] = token
        name = metadata.get("name", "?")
        action = f"create {plural}/{name} in {namespace}"
        try:
            return self._call(action, lambda: self._custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, plural, body, field_validation="Strict",
                _request_timeout=self.request_timeout_s), require(GROUP, plural, "create"))
        except Conflict as exc:
            try:
                existing = self.get(plural, namespace, name)
            except NotFound:
                raise exc from None
            annotations = (existing.get("metadata") or {}).get("annotations") or {}
            if annotations.get(CREATION_TOKEN_ANNOTATION) == token:
                log.info("%s: an earlier attempt of this call created it; using it", action)
                return existing
            labels = (existing.get("metadata") or {}).get("labels") or {}
            owner = labels.get("ads-ranking.io/owner") or labels.get("app.kubernetes.io/managed-by")
            raise Conflict(action, 409, "AlreadyExists",
                           f"{plural}/{name} already exists in {namespace} and was not created by "
                           f"this call (owner label: {owner or 'none'}); it is left untouched - "
                           "pick another name or delete it first", exc.attempts) from None

    def get(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        return self._call(f"get {plural}/{name} in {namespace}",
                          lambda: self._custom.get_namespaced_custom_object(
                              GROUP, VERSION, namespace, plural, name,
                              _request_timeout=self.request_timeout_s),
                          require(GROUP, plural, "get"))

    def get_status(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        """The object read through its ``/status`` subresource."""
        return self._call(f"get {plural}/{name}/status in {namespace}",
                          lambda: self._custom.get_namespaced_custom_object_status(
                              GROUP, VERSION, namespace, plural, name,
                              _request_timeout=self.request_timeout_s),
                          require(GROUP, f"{plural}/status", "get"))

    def list(self, plural: str, namespace: str | None, label_selector: str = "") -> list[dict[str, Any]]:
        """Objects of one namespace, or (``namespace`` None) of every namespace - which needs
        ``list`` granted cluster-wide (the chart's X-Ray ClusterRole)."""
        if namespace is None:
            result = self._call(f"list {plural} in all namespaces",
                                lambda: self._custom.list_cluster_custom_object(
                                    GROUP, VERSION, plural, label_selector=label_selector,
                                    _request_timeout=self.request_timeout_s),
                                require(GROUP, plural, "list"))
            return list(result.get("items") or [])
        result = self._call(f"list {plural} in {namespace}",
                            lambda: self._custom.list_namespaced_custom_object(
                                GROUP, VERSION, namespace, plural, label_selector=label_selector,
                                _request_timeout=self.request_timeout_s),
                            require(GROUP, plural, "list"))
        return list(result.get("items") or [])

    def delete(self, plural: str, namespace: str, name: str,
               propagation_policy: str = "Foreground") -> bool:
        """Delete; False when it was already gone. ``Foreground`` keeps the object until the
        garbage collector has removed what it owns (a RayJob's RayCluster and submitter Job)."""
        try:
            self._call(f"delete {plural}/{name} in {namespace}",
                       lambda: self._custom.delete_namespaced_custom_object(
                           GROUP, VERSION, namespace, plural, name,
                           propagation_policy=propagation_policy,
                           _request_timeout=self.request_timeout_s),
                       require(GROUP, plural, "delete"))
        except NotFound:
            return False
        return True

    def exists(self, plural: str, namespace: str, name: str) -> bool:
        try:
            self.get(plural, namespace, name)
        except NotFound:
            return False
        return True

    def wait_deleted(self, plural: str, namespace: str, name: str, timeout_s: float,
                     poll_interval_s: float = 0.5) -> bool:
        """Poll until the object is gone; False if it is still there after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            if not self.exists(plural, namespace, name):
                return True
            if time.monotonic() >= deadline:
                return False
            self._sleep(poll_interval_s)

    # ---- Kueue Workloads (read only) ---------------------------------------------------------
    def list_workloads(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        """Kueue ``Workload`` objects (``kueue.x-k8s.io/v1beta1``) of one namespace."""
        result = self._call(f"list workloads in {namespace}",
                            lambda: self._custom.list_namespaced_custom_object(
                                KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads",
                                label_selector=label_selector,
                                _request_timeout=self.request_timeout_s),
                            require(KUEUE_GROUP, "workloads", "list"))
        return list(result.get("items") or [])

    def get_workload(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call(f"get workloads/{name} in {namespace}",
                          lambda: self._custom.get_namespaced_custom_object(
                              KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", name,
                              _request_timeout=self.request_timeout_s),
                          require(KUEUE_GROUP, "workloads", "get"))

    def pending_workloads(self, namespace: str, local_queue: str) -> list[dict[str, Any]]:
        """Kueue's visibility API: the LocalQueue's pending Workloads with their positions
        (``PendingWorkloadsSummary``; a subresource, so a plain ``call_api``)."""
        path = (f"/apis/{KUEUE_VISIBILITY_GROUP}/{KUEUE_VERSION}/namespaces/{{namespace}}/"
                "localqueues/{name}/pendingworkloads")
        result = self._call(f"get localqueues/{local_queue}/pendingworkloads in {namespace}",
                            lambda: self.api_client.call_api(
                                path, "GET", {"namespace": namespace, "name": local_queue},
                                [], {"Accept": "application/json"},
                                response_types_map={200: "object"},
                                auth_settings=["BearerToken"], _return_http_data_only=True,
                                _request_timeout=self.request_timeout_s),
                            require(KUEUE_VISIBILITY_GROUP, "localqueues/pendingworkloads", "get"))
        return list((result or {}).get("items") or [])

    # ---- pods ------------------------------------------------------------------------------
    def list_pods(self, namespace: str, label_selector: str = "") -> list[dict[str, Any]]:
        """Pods as plain dicts in the API's field names (``metadata``, ``status.phase``…)."""
        result = self._call(f"list pods in {namespace}",
                            lambda: self._core.list_namespaced_pod(
                                namespace, label_selector=label_selector,
                                _request_timeout=self.request_timeout_s),
                            require(CORE_GROUP, "pods", "list"))
        return [self.api_client.sanitize_for_serialization(p) for p in result.items or []]

    def list_events(self, namespace: str, field_selector: str = "") -> list[dict[str, Any]]:
        """Core events (e.g. ``involvedObject.name=<pod>``) as plain dicts, oldest first."""
        result = self._call(f"list events in {namespace}",
                            lambda: self._core.list_namespaced_event(
                                namespace, field_selector=field_selector,
                                _request_timeout=self.request_timeout_s),
                            require(CORE_GROUP, "events", "list"))
        events = [self.api_client.sanitize_for_serialization(e) for e in result.items or []]
        return sorted(events, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime")
                                                or (e.get("metadata") or {}).get(
                                                    "creationTimestamp") or ""))

    def read_pod_log(self, namespace: str, name: str, container: str | None = None,
                     timestamps: bool = False) -> str:
        # Read raw: the generated client turns the bytes into "b'...'" when it deserializes.
        response = self._call(f"read log of pod {name} in {namespace}",
                              lambda: self._core.read_namespaced_pod_log(
                                  name, namespace, container=container, timestamps=timestamps,
                                  _preload_content=False, _request_timeout=self.request_timeout_s),
                              require(CORE_GROUP, "pods/log", "get"))
        try:
            return response.data.decode("utf-8", "replace")
        finally:
            response.release_conn()

    def stream_pod_log(self, namespace: str, name: str, container: str | None = None,
                       timestamps: bool = False, since_seconds: int | None = None) -> Iterator[str]:
        """Follow a pod's log, yielding whole lines (without the newline) until the server
        closes the stream (the container ended). Opening the stream is retried; a stream that
        breaks later raises ``urllib3`` errors for the caller to reattach."""
        kwargs: dict[str, Any] = {"container": container, "follow": True,
                                  "timestamps": timestamps}
        if since_seconds is not None:
            kwargs["since_seconds"] = max(1, int(since_seconds))
        response = self._call(f"follow log of pod {name} in {namespace}",
                              lambda: self._core.read_namespaced_pod_log(
                                  name, namespace, _preload_content=False,
                                  _request_timeout=(self.request_timeout_s,
                                                    self.stream_read_timeout_s),
                                  **kwargs),
                              require(CORE_GROUP, "pods/log", "get"))
        pending = b""
        try:
            for chunk in response.stream(amt=65536, decode_content=True):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode("utf-8", "replace").rstrip("\r")
            if pending:
                yield pending.decode("utf-8", "replace").rstrip("\r")
        finally:
            response.release_conn()

    # ---- Services and Secrets (X-Ray notebooks) --------------------------------------------
    def _core_call(self, verb: str, kind: str) -> Callable[..., Any]:
        singular = {"services": "service", "secrets": "secret"}[kind]
        return getattr(self._core, f"{verb}_namespaced_{singular}")

    def create_core(self, kind: str, namespace: str, body: Mapping[str, Any]) -> None:
        """Create a Service or Secret (``kind`` is the plural). The answer is not read: a
        Secret's would hold its data. A name taken raises :class:`Conflict`."""
        name = (body.get("metadata") or {}).get("name", "?")
        create = self._core_call("create", kind)
        response = self._call(f"create {kind}/{name} in {namespace}",
                              lambda: create(namespace, dict(body), field_validation="Strict",
                                             _preload_content=False,
                                             _request_timeout=self.request_timeout_s),
                              require(CORE_GROUP, kind, "create"))
        _discard(response)

    def delete_core(self, kind: str, namespace: str, name: str) -> bool:
        """Delete a Service or Secret; False when it was already gone. The answer (which for a
        Secret may be the object, data included) is not read."""
        delete = self._core_call("delete", kind)
        try:
            response = self._call(f"delete {kind}/{name} in {namespace}",
                                  lambda: delete(name, namespace, _preload_content=False,
                                                 _request_timeout=self.request_timeout_s),
                                  require(CORE_GROUP, kind, "delete"))
        except NotFound:
            return False
        _discard(response)
        return True

    def list_services(self, namespace: str | None, label_selector: str = "") -> list[dict[str, Any]]:
        """Services as plain dicts in the API's field names; ``namespace`` None: every
        namespace (``list`` granted cluster-wide)."""
        if namespace is None:
            call = lambda: self._core.list_service_for_all_namespaces(  # noqa: E731
                label_selector=label_selector, _request_timeout=self.request_timeout_s)
        else:
            call = lambda: self._core.list_namespaced_service(  # noqa: E731
                namespace, label_selector=label_selector, _request_timeout=self.request_timeout_s)
        result = self._call(f"list services in {namespace or 'all namespaces'}", call,
                            require(CORE_GROUP, "services", "list"))
        return [self.api_client.sanitize_for_serialization(s) for s in result.items or []]
