"""Process-level settings: every environment variable the code location, the CLI and X-Ray
read, in one place, from a mapping the caller passes in.

Nothing here reads ``os.environ`` at import: ``definitions.py``, the CLI and X-Ray call
``Settings.from_environ(os.environ)`` when they build their resources. Pydantic validates the
mapping (each field's ``validation_alias`` is its variable); a bad value is a
:class:`SettingsError` naming the variable, its value and what is valid.

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
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

HOME_ENV = "ADS_RANKING_HOME"
CATALOG_ENV = "ADS_RANKING_POOL_CATALOG"
BACKEND_ENV = "ADS_RANKING_BACKEND"
DEFAULT_HOME = ".ads_ranking"
Backend = Literal["local", "kuberay"]
DeletionMode = Literal["rules", "shutdown"]
# How the local backend lays a cluster out on this machine: one Ray node holding every worker's
# CPUs (the default: starts in about half the time, with a third of the Ray processes), or a
# head and one Ray node per worker, as KubeRay lays out pods (a worker node that dies is replaced).
LocalLayout = Literal["single-node", "node-per-worker"]
BACKENDS, DELETION_MODES, LOCAL_LAYOUTS = get_args(Backend), get_args(DeletionMode), get_args(LocalLayout)
LOCAL_LAYOUT_ENV = "ADS_RANKING_LOCAL_LAYOUT"
CONTROLLER_TIMEOUT_ENV = "ADS_RANKING_CONTROLLER_TIMEOUT_S"


class SettingsError(ValueError):
    """A bad environment variable: names it, its value and what is valid."""

    def __init__(self, name: str, value: str, valid: str) -> None:
        self.name, self.value, self.valid = name, value, valid
        super().__init__(f"invalid {name}={value!r}; valid: {valid}")


def account_name(environ: Mapping[str, str]) -> str:
    """Who is running this: ``ADS_RANKING_OWNER``, else ``$USER`` / ``$LOGNAME``, else the
    account of this process's user id (a container's shell often sets neither variable), else
    ``uid-<n>`` (a user id the account database does not know, as OpenShift assigns)."""
    for name in ("ADS_RANKING_OWNER", "USER", "LOGNAME"):
        value = (environ.get(name) or "").strip()
        if value:
            return value
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return f"uid-{os.getuid()}" if hasattr(os, "getuid") else "unknown"


def _env(name: str, default: Any = None, **constraints: Any) -> Any:
    return Field(default, validation_alias=name, **constraints)


class Settings(BaseModel):
    """Every setting, by field; :meth:`from_environ` reads them from their variables."""

    model_config = ConfigDict(frozen=True, validate_by_name=True, validate_by_alias=True, extra="ignore")

    home: str                           # storage root URI (local path or s3://, gs://)
    pool_catalog: str | None = _env(CATALOG_ENV)    # override of the shipped pool catalog
    state_dir: str                      # local-backend cluster state files (a local path)
    backend: Backend = _env(BACKEND_ENV, "local")
    default_pool: str | None = _env("ADS_RANKING_DEFAULT_POOL")
    namespace: str = _env("ADS_RANKING_NAMESPACE", "ads-ranking")
    ray_image: str | None = _env("ADS_RANKING_RAY_IMAGE")
    ray_service_account: str | None = _env("ADS_RANKING_RAY_SERVICE_ACCOUNT")
    ray_auth_secret: str | None = _env("ADS_RANKING_RAY_AUTH_SECRET")
    shared_volume_claim: str | None = _env("ADS_RANKING_SHARED_VOLUME_CLAIM")
    rayjob_deletion: DeletionMode = _env("ADS_RANKING_RAYJOB_DELETION", "rules")
    replica_failure_grace_s: float = _env("ADS_RANKING_REPLICA_FAILURE_GRACE_S", 120.0, ge=0, allow_inf_nan=False)
    kube_in_cluster: bool = _env("ADS_RANKING_KUBE_IN_CLUSTER", False)
    kube_context: str | None = _env("ADS_RANKING_KUBE_CONTEXT")
    kube_config_file: str | None = _env("KUBECONFIG")
    dev_working_tree: str | None = _env("ADS_RANKING_DEV_WORKING_TREE")
    owner: str | None = None            # account_name() of the environment
    local_layout: LocalLayout = _env(LOCAL_LAYOUT_ENV, "single-node")
    # a run's Ray jobs stop this long after its process died
    controller_timeout_s: float = _env(CONTROLLER_TIMEOUT_ENV, 60.0, ge=5, allow_inf_nan=False)

    @property
    def local_single_node(self) -> bool:
        """The local backend runs one Ray node for all workers (``ADS_RANKING_LOCAL_LAYOUT``)."""
        return self.local_layout == "single-node"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "Settings":
        """Read every setting (a blank variable is an unset one); :class:`SettingsError` names a bad one."""
        names = {f.validation_alias for f in cls.model_fields.values() if isinstance(f.validation_alias, str)}
        present = {k: v.strip() for k, v in environ.items() if k in names and v.strip()}
        home = environ.get(HOME_ENV) or os.path.abspath(DEFAULT_HOME)
        local_home = home if "://" not in home else os.path.abspath(DEFAULT_HOME)
        try:
            return cls.model_validate({**present, "home": home, "state_dir": os.path.join(local_home, "clusters"),
                                       "owner": account_name(environ)})
        except ValidationError as exc:
            raise _settings_error(exc) from None


def _settings_error(exc: ValidationError) -> SettingsError:
    """The first problem, worded by its variable: the choices, "true or false", or the seconds' bound."""
    err = exc.errors()[0]
    alias = str(err["loc"][0])
    field = next(f for f in Settings.model_fields.values() if f.validation_alias == alias)
    choices = get_args(field.annotation)
    if field.annotation is bool:
        valid = "true or false"
    elif choices and all(isinstance(c, str) for c in choices):
        valid = ", ".join(choices)
    else:
        low = next(m.ge for m in field.metadata if getattr(m, "ge", None) is not None)
        valid = f"a number of seconds >= {low:g}"
    return SettingsError(alias, str(err.get("input")), valid)
