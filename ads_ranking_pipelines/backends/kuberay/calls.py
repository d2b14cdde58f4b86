"""API calls of the KubeRay backend, with their failures worded as :class:`BackendError`.

Each helper is the one place a kind of call (read a status, create, wait until deleted,
delete what we created) turns the client's ``NotFound`` / ``Conflict`` / ``KubeError`` into
the message a user sees.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.kuberay.client import (
    RAYCLUSTERS,
    RAYJOBS,
    Conflict,
    KubeError,
    KubeRayClient,
    NotFound,
    creation_token,
)

log = logging.getLogger(__name__)

KINDS = {RAYJOBS: "RayJob", RAYCLUSTERS: "RayCluster"}


def read_status(client: KubeRayClient, plural: str, namespace: str, name: str, *,
                missing: str) -> dict[str, Any]:
    """The object with its status; ``missing`` says what a 404 means (``"<Kind> ns/name
    <missing>"``)."""
    kind = KINDS[plural]
    try:
        return client.get_status(plural, namespace, name)
    except NotFound:
        raise BackendError(f"{kind} {namespace}/{name} {missing}") from None
    except KubeError as exc:
        raise BackendError(f"cannot read {kind} {namespace}/{name}: {exc}") from exc


def create(client: KubeRayClient, plural: str, namespace: str, manifest: Mapping[str, Any], *,
           what: str, token: str | None = None,
           on_conflict: Callable[[], None] | None = None) -> dict[str, Any]:
    """Create ``manifest``. A 409 (a name taken by someone else's object) is the API server's
    explanation verbatim, after ``on_conflict``; any other failure says it could not create
    ``what``."""
    try:
        return client.create(plural, namespace, manifest, token=token)
    except Conflict as exc:
        if on_conflict is not None:
            on_conflict()
        raise BackendError(str(exc)) from None
    except KubeError as exc:
        raise BackendError(f"could not create {what}: {exc}") from exc


def await_deleted(client: KubeRayClient, plural: str, namespace: str, name: str, *,
                  timeout_s: float, poll_interval_s: float, what: str | None = None) -> None:
    """Wait until a deleted object is gone; BackendError when it is still there after
    ``timeout_s``. ``what`` names it in that message (default ``"<Kind> ns/name"``)."""
    if not client.wait_deleted(plural, namespace, name, timeout_s, poll_interval_s):
        what = what or f"{KINDS[plural]} {namespace}/{name}"
        raise BackendError(f"{what} still exists {timeout_s:.0f}s after deleting it")


def delete_if_token(client: KubeRayClient, plural: str, namespace: str, name: str,
                    token: str | None) -> bool:
    """Delete ``name`` only if it carries our creation ``token``."""
    try:
        obj = client.get(plural, namespace, name)
    except NotFound:
        return False
    if token is None or creation_token(obj) != token:
        log.warning("%s %s/%s was not created by this session; leaving it", plural, namespace,
                    name)
        return False
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return True
    return client.delete(plural, namespace, name)
