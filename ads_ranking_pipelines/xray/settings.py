"""What ``ads-ranking xray serve`` runs with: bind address, access token, Dagster UI address,
the KubeRay connection and namespaces, and the local backend's state directory.

Built once from the command's options and the environment mapping it is given (never read at
import).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ads_ranking_pipelines.config.settings import Settings, account_name

DAGSTER_URL_ENV = "ADS_RANKING_DAGSTER_URL"
TOKEN_ENV = "ADS_RANKING_XRAY_TOKEN"
NAMESPACE_ENV = "ADS_RANKING_NAMESPACE"
DEFAULT_DAGSTER_URL = "http://127.0.0.1:3000"
DEFAULT_NAMESPACE = "ads-ranking"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class KubeSettings:
    """How to reach KubeRay; ``enabled`` False when there is nothing to reach."""

    enabled: bool = False
    context: str | None = None
    in_cluster: bool = False
    config_file: str | None = None
    namespaces: tuple[str, ...] = (DEFAULT_NAMESPACE,)
    # List in every namespace (the chart's ClusterRole, xray.crossNamespace); ``namespaces``
    # are still where clusters are created.
    all_namespaces: bool = False


@dataclass(frozen=True)
class XraySettings:
    host: str
    port: int
    token: str | None
    dagster_url: str
    settings: Settings
    default_owner: str
    kube: KubeSettings = field(default_factory=KubeSettings)
    refresh_s: float = 5.0

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    @property
    def notebooks_dir(self) -> Path:
        """Notebook state files and notebook folders, beside the clusters' state files."""
        return Path(self.settings.state_dir).parent / "notebooks"


def kube_settings(environ: Mapping[str, str], *, context: str | None, in_cluster: bool,
                  namespaces: Sequence[str], kuberay: bool | None,
                  all_namespaces: bool = False) -> KubeSettings:
    """KubeRay is on when asked (``kuberay``), or by default when a kubeconfig exists or the
    pod's service account is to be used (``--in-cluster`` or ``ADS_RANKING_KUBE_IN_CLUSTER``,
    which the Helm chart sets for X-Ray's pod)."""
    config_file = environ.get("KUBECONFIG") or None
    in_cluster = in_cluster or Settings.from_environ(environ).kube_in_cluster
    if kuberay is None:
        default_config = Path(environ.get("HOME", "~")).expanduser() / ".kube" / "config"
        kuberay = bool(in_cluster or context or config_file or default_config.is_file())
    names = tuple(dict.fromkeys(namespaces)) or (
        environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE,)
    return KubeSettings(enabled=kuberay, context=context, in_cluster=in_cluster,
                        config_file=config_file, namespaces=names, all_namespaces=all_namespaces)


def make_settings(environ: Mapping[str, str], *, host: str, port: int, token: str | None,
                  dagster_url: str | None, kube: KubeSettings) -> XraySettings:
    return XraySettings(
        host=host, port=port, token=token or environ.get(TOKEN_ENV) or None,
        dagster_url=(dagster_url or environ.get(DAGSTER_URL_ENV) or DEFAULT_DAGSTER_URL).rstrip("/"),
        settings=Settings.from_environ(environ), default_owner=account_name(environ), kube=kube,
    )

