"""Process-level settings: every environment variable the code location, the CLI and X-Ray
read, in one place, from a mapping the caller passes in.

Nothing here reads ``os.environ`` at import: ``definitions.py``, the CLI and X-Ray call
``Settings.from_environ(os.environ)`` when they build their resources.

| variable | meaning |
| --- | --- |
| ``ADS_RANKING_HOME`` | storage root: local path, ``s3://``, ``gs://`` (default ``./.ads_ranking``) |
| ``ADS_RANKING_POOL_CATALOG`` | GPU pool catalog YAML (default: the shipped one) |
| ``ADS_RANKING_DEFAULT_POOL`` | pool when none is asked for (default: the catalog's) |
| ``ADS_RANKING_BACKEND`` | ``local`` (default) or ``kuberay`` |
| ``ADS_RANKING_LOCAL_LAYOUT`` | local: ``single-node`` (default) or ``node-per-worker`` |
| ``ADS_RANKING_NAMESPACE`` | KubeRay: namespace of Ray clusters (default ``ads-ranking``) |
| ``ADS_RANKING_RAY_IMAGE`` | KubeRay: image of the Ray pods (built from the Dockerfile) |
| ``ADS_RANKING_RAY_SERVICE_ACCOUNT`` | KubeRay: ServiceAccount of the Ray pods |
| ``ADS_RANKING_RAY_AUTH_SECRET`` | KubeRay: Secret (key ``auth_token``) for Ray token auth |
| ``ADS_RANKING_SHARED_VOLUME_CLAIM`` | KubeRay: PVC mounted at ``ADS_RANKING_HOME`` in Ray pods |
| ``ADS_RANKING_RAYJOB_DELETION`` | KubeRay: ``rules`` (default) or ``shutdown`` |
| ``ADS_RANKING_REPLICA_FAILURE_GRACE_S`` | KubeRay: seconds a cluster's pod-creation failure (``ReplicaFailure``) may last while KubeRay retries (default 120) |
| ``ADS_RANKING_KUBE_IN_CLUSTER`` | ``true``: reach the API server with the pod's service account |
| ``ADS_RANKING_KUBE_CONTEXT``, ``KUBECONFIG`` | otherwise: kubeconfig context and file |
| ``ADS_RANKING_DEV_WORKING_TREE`` | development mode: ship this working tree's package to the Ray pods |
| ``ADS_RANKING_OWNER`` | owner label of clusters the CLI and X-Ray create (default ``$USER``, ``$LOGNAME``, else the account name) |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

HOME_ENV = "ADS_RANKING_HOME"
CATALOG_ENV = "ADS_RANKING_POOL_CATALOG"
BACKEND_ENV = "ADS_RANKING_BACKEND"
DEFAULT_HOME = ".ads_ranking"
BACKENDS = ("local", "kuberay")
DELETION_MODES = ("rules", "shutdown")
# How the local backend lays a cluster out on this machine: one Ray node holding every worker's
# CPUs (the default: starts in about half the time, with a third of the Ray processes), or a
# head and one Ray node per worker, as KubeRay lays out pods (a worker node that dies is replaced).
LOCAL_LAYOUT_ENV = "ADS_RANKING_LOCAL_LAYOUT"
LOCAL_LAYOUTS = ("single-node", "node-per-worker")
CONTROLLER_TIMEOUT_ENV = "ADS_RANKING_CONTROLLER_TIMEOUT_S"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


class SettingsError(ValueError):
    """A bad environment variable: names it, its value and what is valid."""

    def __init__(self, name: str, value: str, valid: str) -> None:
        self.name, self.value, self.valid = name, value, valid
        super().__init__(f"invalid {name}={value!r}; valid: {valid}")


def _choice(environ: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    value = (environ.get(name) or "").strip() or default
    if value not in choices:
        raise SettingsError(name, value, ", ".join(choices))
    return value


def _flag(environ: Mapping[str, str], name: str) -> bool:
    value = (environ.get(name) or "").strip().lower()
    if value not in _TRUE + _FALSE:
        raise SettingsError(name, value, "true or false")
    return value in _TRUE


def _seconds(environ: Mapping[str, str], name: str, default: float, minimum: float = 0.0) -> float:
    """A number of seconds >= ``minimum`` (finite), else :class:`SettingsError` naming it."""
    raw = (environ.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= minimum or value == float("inf"):
        raise SettingsError(name, raw, f"a number of seconds >= {minimum:g}")
    return value


def account_name(environ: Mapping[str, str]) -> str:
    """Who is running this: ``ADS_RANKING_OWNER``, else ``$USER`` / ``$LOGNAME``, else the
    account of this process's user id (a container's shell often sets neither variable), else
    ``uid-<n>`` (a user id the account database does not know, as OpenShift assigns)."""
    for name in ("ADS_RANKING_OWNER", "USER", "LOGNAME"):
        value = _opt(environ, name)
        if value:
            return value
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return f"uid-{os.getuid()}" if hasattr(os, "getuid") else "unknown"


def _opt(environ: Mapping[str, str], name: str) -> str | None:
    return (environ.get(name) or "").strip() or None


@dataclass(frozen=True)
class Settings:
    home: str                           # storage root URI (local path or s3://, gs://)
    pool_catalog: str | None            # override of the shipped pool catalog
    state_dir: str                      # local-backend cluster state files (a local path)
    backend: str = "local"
    default_pool: str | None = None
    namespace: str = "ads-ranking"
    ray_image: str | None = None
    ray_service_account: str | None = None
    ray_auth_secret: str | None = None
    shared_volume_claim: str | None = None
    rayjob_deletion: str = "rules"
    replica_failure_grace_s: float = 120.0
    kube_in_cluster: bool = False
    kube_context: str | None = None
    kube_config_file: str | None = None
    dev_working_tree: str | None = None
    owner: str | None = None
    local_layout: str = "single-node"
    controller_timeout_s: float = 60.0  # a run's Ray jobs stop this long after its process died

    @property
    def local_single_node(self) -> bool:
        """The local backend runs one Ray node for all workers (``ADS_RANKING_LOCAL_LAYOUT``)."""
        return self.local_layout == "single-node"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "Settings":
        """Read every setting; :class:`SettingsError` names a bad variable."""
        home = environ.get(HOME_ENV) or os.path.abspath(DEFAULT_HOME)
        local_home = home if "://" not in home else os.path.abspath(DEFAULT_HOME)
        return cls(
            home=home, pool_catalog=_opt(environ, CATALOG_ENV),
            state_dir=os.path.join(local_home, "clusters"),
            backend=_choice(environ, BACKEND_ENV, BACKENDS, "local"),
            default_pool=_opt(environ, "ADS_RANKING_DEFAULT_POOL"),
            namespace=_opt(environ, "ADS_RANKING_NAMESPACE") or "ads-ranking",
            ray_image=_opt(environ, "ADS_RANKING_RAY_IMAGE"),
            ray_service_account=_opt(environ, "ADS_RANKING_RAY_SERVICE_ACCOUNT"),
            ray_auth_secret=_opt(environ, "ADS_RANKING_RAY_AUTH_SECRET"),
            shared_volume_claim=_opt(environ, "ADS_RANKING_SHARED_VOLUME_CLAIM"),
            rayjob_deletion=_choice(environ, "ADS_RANKING_RAYJOB_DELETION", DELETION_MODES, "rules"),
            replica_failure_grace_s=_seconds(environ, "ADS_RANKING_REPLICA_FAILURE_GRACE_S", 120.0),
            kube_in_cluster=_flag(environ, "ADS_RANKING_KUBE_IN_CLUSTER"),
            kube_context=_opt(environ, "ADS_RANKING_KUBE_CONTEXT"),
            kube_config_file=_opt(environ, "KUBECONFIG"),
            dev_working_tree=_opt(environ, "ADS_RANKING_DEV_WORKING_TREE"),
            owner=account_name(environ),
            local_layout=_choice(environ, LOCAL_LAYOUT_ENV, LOCAL_LAYOUTS, "single-node"),
            controller_timeout_s=_seconds(environ, CONTROLLER_TIMEOUT_ENV, 60.0, minimum=5.0),
        )
