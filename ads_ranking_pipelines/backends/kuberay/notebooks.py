"""Notebooks on long-lived RayClusters: start (a token Secret and a Service, both owned by the
RayCluster), list (which cluster has one, started by whom) and stop (delete both).

Only clusters created with notebook support (``kuberay/notebook.py`` ``with_notebook``: the
head runs a supervisor that starts Jupyter once the Secret's file appears) can get one; for any
other cluster :class:`NotebookUnsupported` says why and what to do. The token is made here, sent
to the API server inside the Secret and handed back once in :class:`StartedNotebook` - it is
never logged, never put into an error message, never read back (no ``get`` on Secrets).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.kuberay.client import RAYCLUSTERS, Conflict, KubeError, NotFound
from ads_ranking_pipelines.backends.kuberay.context import KubeRayContext
from ads_ranking_pipelines.backends.kuberay.status import owned
from ads_ranking_pipelines.kuberay import notebook as nb
from ads_ranking_pipelines.kuberay.labels import LABEL_MANAGED_BY, MANAGED_BY

T = TypeVar("T")
SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY},{nb.LABEL_COMPONENT}={nb.COMPONENT}"


class NotebookConflict(BackendError):
    """The notebook cannot start in the cluster's present state (one runs already, a Secret
    was left behind, the cluster is being deleted)."""


class NotebookUnsupported(NotebookConflict):
    """The cluster was created without notebook support."""


@dataclass(frozen=True)
class NotebookInfo:
    """A running notebook as anyone who may list Services sees it: no token."""

    cluster: str
    namespace: str
    owner: str
    started_at: str
    service: str

    @property
    def url(self) -> str:
        """Inside the Kubernetes cluster (Jupyter asks for the token)."""
        return nb.in_cluster_url(self.namespace, self.cluster)

    @property
    def port_forward(self) -> str:
        return nb.port_forward_command(self.namespace, self.cluster)


@dataclass(frozen=True)
class StartedNotebook:
    """What the start call answers - the only place the token ever appears."""

    info: NotebookInfo
    token: str = field(repr=False)

    @property
    def url(self) -> str:
        """The in-cluster address with the token."""
        return f"{self.info.url}?token={self.token}"

    @property
    def local_url(self) -> str:
        """The address after ``kubectl port-forward`` (:attr:`NotebookInfo.port_forward`)."""
        return f"http://127.0.0.1:{nb.NOTEBOOK_PORT}/lab?token={self.token}"


def unsupported_message(namespace: str, name: str) -> str:
    return (f"invalid cluster = {namespace}/{name}: it was created without notebook support "
            f"(label {nb.LABEL_NOTEBOOK}={nb.NOTEBOOK_ENABLED} absent). Jupyter runs on the Ray "
            "head, and adding it to a running cluster would change the head pod - KubeRay would "
            "not restart it, or (upgradeStrategy Recreate) would restart every pod and end the "
            "cluster's jobs. Valid: a cluster created with notebook support (X-Ray's create form: "
            "'Notebook support' ticked, or `ads-ranking cluster create --notebook`)")


class KubeRayNotebooks:
    """Notebooks over one :class:`KubeRayContext`."""

    def __init__(self, ctx: KubeRayContext) -> None:
        self.ctx = ctx

    @staticmethod
    def _api(what: str, call: Callable[[], T]) -> T:
        try:
            return call()
        except KubeError as exc:
            raise BackendError(f"could not {what}: {exc}") from None

    def list(self, namespace: str | None) -> dict[tuple[str, str], NotebookInfo]:
        """The running notebooks of ``namespace`` (None: of every namespace) by
        ``(namespace, cluster name)``."""
        services = self._api(f"list notebook Services in {namespace or 'all namespaces'}",
                             lambda: self.ctx.client.list_services(namespace, SELECTOR))
        found = {}
        for svc in services:
            meta = svc.get("metadata") or {}
            cluster = (meta.get("labels") or {}).get(nb.CLUSTER_NAME_LABEL)
            if not cluster or meta.get("name") != nb.service_name(cluster):
                continue
            notes = meta.get("annotations") or {}
            found[(meta.get("namespace") or namespace or "", cluster)] = NotebookInfo(
                cluster=cluster, namespace=meta.get("namespace") or namespace or "",
                service=meta["name"],
                owner=notes.get(nb.ANNOTATION_OWNER, "unknown"),
                started_at=notes.get(nb.ANNOTATION_STARTED_AT) or str(meta.get("creationTimestamp") or ""))
        return found

    def _cluster(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            obj = self.ctx.client.get(RAYCLUSTERS, namespace, name)
        except NotFound:
            raise BackendError(f"RayCluster {namespace}/{name} not found") from None
        except KubeError as exc:
            raise BackendError(f"cannot read RayCluster {namespace}/{name}: {exc}") from None
        if not owned(obj):
            raise BackendError(f"RayCluster {namespace}/{name} is not managed by {MANAGED_BY} "
                               f"(label {LABEL_MANAGED_BY}); not touching its notebooks")
        return obj

    def start(self, namespace: str, name: str, owner: str) -> StartedNotebook:
        """Create the token Secret, then the Service; when the Service fails the Secret is
        deleted again. Jupyter starts on the head once the kubelet has projected the Secret."""
        cluster = self._cluster(namespace, name)
        if (cluster.get("metadata") or {}).get("deletionTimestamp"):
            raise NotebookConflict(f"RayCluster {namespace}/{name} is being deleted")
        if not nb.has_notebook_support(cluster):
            raise NotebookUnsupported(unsupported_message(namespace, name))
        running = self.list(namespace).get((namespace, name))
        if running is not None:
            raise NotebookConflict(f"a notebook already runs on {namespace}/{name}, started by "
                               f"{running.owner} at {running.started_at}; its token was shown "
                               "once, to whoever started it. Stop it and start a new one for a "
                               "new link")
        token = secrets.token_urlsafe(32)
        started_at = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
        secret_name = nb.secret_name(name)
        try:
            self.ctx.client.create_core("secrets", namespace, nb.notebook_secret(cluster, token))
        except Conflict:
            raise NotebookConflict(f"Secret {namespace}/{secret_name} already exists (left by an "
                               "interrupted start or stop); stop the notebook to remove it, "
                               "then start again") from None
        except KubeError as exc:
            raise BackendError(f"could not create Secret {namespace}/{secret_name}: {exc}") from None
        service = nb.notebook_service(cluster, owner=owner, started_at=started_at)
        try:
            self.ctx.client.create_core("services", namespace, service)
        except BaseException as exc:
            with contextlib.suppress(KubeError):  # nothing half-made is left
                self.ctx.client.delete_core("secrets", namespace, secret_name)
            if isinstance(exc, KubeError):
                raise BackendError(f"could not create Service {namespace}/"
                                   f"{service['metadata']['name']}: {exc}") from None
            raise
        info = NotebookInfo(cluster=name, namespace=namespace, owner=owner,
                            started_at=started_at, service=service["metadata"]["name"])
        return StartedNotebook(info, token)

    def stop(self, namespace: str, name: str) -> bool:
        """Delete the cluster's notebook Service and token Secret; False when neither existed."""
        self._cluster(namespace, name)
        client, deleted = self.ctx.client, False
        if (namespace, name) in self.list(namespace):  # only a Service with our labels
            service = nb.service_name(name)
            deleted |= self._api(f"delete Service {namespace}/{service}",
                                 lambda: client.delete_core("services", namespace, service))
        secret = nb.secret_name(name)
        deleted |= self._api(f"delete Secret {namespace}/{secret}",
                             lambda: client.delete_core("secrets", namespace, secret))
        return deleted
