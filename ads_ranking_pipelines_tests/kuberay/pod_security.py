"""A small checker for the Kubernetes "restricted" Pod Security Standard (v1.33 policy).

https://kubernetes.io/docs/concepts/security/pod-security-standards/ — the baseline controls
(host namespaces, privileged, capabilities, hostPath, host ports, sysctls, procMount,
SELinux, seccomp not Unconfined) plus the restricted ones (allowed volume types, no
privilege escalation, non-root, seccomp RuntimeDefault/Localhost, drop ALL capabilities).
Returns every violation instead of stopping at the first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import kubernetes_validate
from kubernetes_validate import utils as kv_utils

RESTRICTED_VOLUME_TYPES = frozenset({
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
})
ALLOWED_ADDED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
ALLOWED_SECCOMP = frozenset({"RuntimeDefault", "Localhost"})
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
})
ALLOWED_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t",
                                   "container_engine_t"})

KUBERNETES_VERSION = "1.33"


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(kind) or ():
            yield f"{kind}[{c.get('name')}]", c


def restricted_violations(pod_spec: Mapping[str, Any]) -> list[str]:
    """Violations of the restricted profile by ``pod_spec`` (empty when it complies)."""
    out: list[str] = []
    psc = pod_spec.get("securityContext") or {}

    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if pod_spec.get(key):
            out.append(f"spec.{key} is true")
    for vol in pod_spec.get("volumes") or ():
        kinds = set(vol) - {"name"}
        if "hostPath" in kinds:
            out.append(f"volume {vol.get('name')} is a hostPath")
        elif not kinds <= RESTRICTED_VOLUME_TYPES:
            out.append(f"volume {vol.get('name')} has a type outside {sorted(RESTRICTED_VOLUME_TYPES)}")
    for sysctl in psc.get("sysctls") or ():
        if sysctl.get("name") not in SAFE_SYSCTLS:
            out.append(f"unsafe sysctl {sysctl.get('name')}")
    if (psc.get("seLinuxOptions") or {}).get("type", "") not in ALLOWED_SELINUX_TYPES:
        out.append("pod seLinuxOptions.type is not allowed")
    if psc.get("runAsUser") == 0:
        out.append("pod runs as uid 0")
    pod_seccomp = (psc.get("seccompProfile") or {}).get("type")
    if pod_seccomp is not None and pod_seccomp not in ALLOWED_SECCOMP:
        out.append(f"pod seccompProfile {pod_seccomp}")

    for where, c in _containers(pod_spec):
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            out.append(f"{where} is privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{where} does not set allowPrivilegeEscalation: false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or ()):
            out.append(f"{where} does not drop ALL capabilities")
        extra = set(caps.get("add") or ()) - ALLOWED_ADDED_CAPABILITIES
        if extra:
            out.append(f"{where} adds capabilities {sorted(extra)}")
        run_as_non_root = sc.get("runAsNonRoot", psc.get("runAsNonRoot"))
        if run_as_non_root is not True:
            out.append(f"{where} does not run as non-root (runAsNonRoot)")
        if sc.get("runAsUser") == 0:
            out.append(f"{where} runs as uid 0")
        seccomp = (sc.get("seccompProfile") or {}).get("type", pod_seccomp)
        if seccomp not in ALLOWED_SECCOMP:
            out.append(f"{where} seccompProfile is {seccomp}, not RuntimeDefault/Localhost")
        if sc.get("procMount", "Default") != "Default":
            out.append(f"{where} sets procMount {sc['procMount']}")
        if (sc.get("seLinuxOptions") or {}).get("type", "") not in ALLOWED_SELINUX_TYPES:
            out.append(f"{where} seLinuxOptions.type is not allowed")
        for port in c.get("ports") or ():
            if port.get("hostPort"):
                out.append(f"{where} uses hostPort {port['hostPort']}")
    return out


def as_pod(template: Mapping[str, Any], name: str, namespace: str = "ads-ranking") -> dict[str, Any]:
    """A PodTemplateSpec wrapped as a v1 Pod, for schema validation."""
    metadata = dict(template.get("metadata") or {})
    metadata.update(name=name, namespace=namespace)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}


def kubernetes_version() -> str:
    """The Kubernetes version pods are validated against: 1.33, or the newest shipped."""
    shipped = {kv_utils.major_minor(v) for v in kv_utils.all_versions()}
    return KUBERNETES_VERSION if KUBERNETES_VERSION in shipped else kv_utils.latest_version()


def validate_pod(pod: Mapping[str, Any]) -> None:
    """Strict Kubernetes schema validation of a Pod (unknown fields are errors)."""
    kubernetes_validate.validate(dict(pod), kubernetes_version(), strict=True)


def pod_templates(manifest: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """(role, PodTemplateSpec) for the head, every worker group and a RayJob's submitter."""
    spec = manifest["spec"]
    cluster = spec["rayClusterSpec"] if manifest["kind"] == "RayJob" else spec
    found = [("head", cluster["headGroupSpec"]["template"])]
    found += [(f"worker-{g['groupName']}", g["template"]) for g in cluster["workerGroupSpecs"]]
    if manifest["kind"] == "RayJob" and spec.get("submitterPodTemplate"):
        found.append(("submitter", spec["submitterPodTemplate"]))
    return found
