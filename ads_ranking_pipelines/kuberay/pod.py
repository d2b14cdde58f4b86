"""Hardened pod pieces for the Ray head, the Ray workers and the RayJob submitter.

Every pod passes the Kubernetes "restricted" Pod Security Standard: non-root (uid 1000, the
``ray`` user of the rayproject images), no privilege escalation, all capabilities dropped,
the runtime's default seccomp profile, and no host namespaces or host paths. Pods that need
no Kubernetes API access do not mount a service-account token.

Everything here returns plain dicts in the Kubernetes API's field names; nothing talks to a
cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ads_ranking_pipelines.config.pools import GpuPool
from ads_ranking_pipelines.config.quantity import format_cpu, format_memory, parse_memory
from ads_ranking_pipelines.config.validation import ResolvedRequest

RAY_UID = 1000  # user "ray" in rayproject/ray images
RAY_GID = 100  # group "users" in rayproject/ray images
GPU_RESOURCE = "nvidia.com/gpu"

# /dev/shm is a memory-backed emptyDir of this share of the pod's memory. Ray's object store
# defaults to 30% of the node's memory and lives in /dev/shm; the container runtime's default
# 64Mi would make Ray fall back to slow disk spilling (and PyTorch DataLoaders fail).
SHM_FRACTION = 0.30
SHM_VOLUME_NAME = "dshm"
SHM_MOUNT_PATH = "/dev/shm"

HEAD_CONTAINER_NAME = "ray-head"
WORKER_CONTAINER_NAME = "ray-worker"
SUBMITTER_CONTAINER_NAME = "ray-job-submitter"

# The submitter only runs `ray job submit` and follows the logs.
SUBMITTER_CPUS = 0.5
SUBMITTER_MEMORY = "512Mi"

HEAD_PORTS = (
    ("gcs-server", 6379),
    ("dashboard", 8265),
    ("client", 10001),
    ("metrics", 8080),
)
WORKER_PORTS = (("metrics", 8080),)


def seccomp_profile() -> dict[str, str]:
    return {"type": "RuntimeDefault"}


def container_security_context() -> dict[str, Any]:
    """The securityContext every container (and the autoscaler sidecar) gets."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "runAsNonRoot": True,
        "runAsUser": RAY_UID,
        "runAsGroup": RAY_GID,
        "seccompProfile": seccomp_profile(),
    }


def pod_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RAY_UID,
        "runAsGroup": RAY_GID,
        "fsGroup": RAY_GID,
        "seccompProfile": seccomp_profile(),
    }


def resource_requirements(cpus: float, memory: str, gpus: int = 0) -> dict[str, dict[str, str]]:
    """Requests equal to limits (Guaranteed QoS); ``nvidia.com/gpu`` only when ``gpus`` > 0."""
    amounts = {"cpu": format_cpu(cpus), "memory": format_memory(parse_memory(memory))}
    if gpus:
        amounts[GPU_RESOURCE] = str(gpus)
    return {"limits": dict(amounts), "requests": dict(amounts)}


def shm_size(memory: str) -> str:
    """``SHM_FRACTION`` of ``memory``, rounded down to a whole MiB (at least 64Mi)."""
    size = int(parse_memory(memory) * SHM_FRACTION) // 2**20
    return format_memory(max(size, 64) * 2**20)


def shm_volume(memory: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``/dev/shm`` volume for a pod with ``memory`` and the matching volumeMount."""
    volume = {
        "name": SHM_VOLUME_NAME,
        "emptyDir": {"medium": "Memory", "sizeLimit": shm_size(memory)},
    }
    mount = {"name": SHM_VOLUME_NAME, "mountPath": SHM_MOUNT_PATH}
    return volume, mount


SHARED_VOLUME_NAME = "storage"


def ray_volumes(request: Any, memory: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A Ray pod's volumes and mounts: ``/dev/shm`` and, when the storage root is a shared
    volume, its PersistentVolumeClaim at the same path as everywhere else."""
    volume, mount = shm_volume(memory)
    volumes, mounts = [volume], [mount]
    if request.shared_volume_claim:
        volumes.append({"name": SHARED_VOLUME_NAME, "persistentVolumeClaim": {
            "claimName": request.shared_volume_claim}})
        mounts.append({"name": SHARED_VOLUME_NAME, "mountPath": request.shared_volume_path})
    return volumes, mounts


def node_selector_for(pool: GpuPool) -> dict[str, str]:
    return dict(sorted(pool.node_selector.items()))


def tolerations_for(pool: GpuPool) -> list[dict[str, str]]:
    return [t.to_k8s() for t in pool.tolerations]


def ray_container(
    name: str,
    image: str,
    *,
    cpus: float,
    memory: str,
    gpus: int = 0,
    ports: Sequence[tuple[str, int]] = (),
    volume_mounts: Sequence[Mapping[str, Any]] = (),
    env: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "resources": resource_requirements(cpus, memory, gpus),
        "securityContext": container_security_context(),
    }
    if ports:
        container["ports"] = [{"containerPort": port, "name": pname, "protocol": "TCP"}
                              for pname, port in ports]
    if env:
        container["env"] = [dict(e) for e in env]
    if volume_mounts:
        container["volumeMounts"] = [dict(m) for m in volume_mounts]
    return container


def pod_template(
    *,
    containers: Sequence[Mapping[str, Any]],
    labels: Mapping[str, str],
    service_account: str,
    automount_service_account_token: bool,
    volumes: Sequence[Mapping[str, Any]] = (),
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Mapping[str, Any]] = (),
    restart_policy: str | None = None,
) -> dict[str, Any]:
    """A PodTemplateSpec with the hardened pod-level settings."""
    spec: dict[str, Any] = {
        "automountServiceAccountToken": automount_service_account_token,
        "containers": [dict(c) for c in containers],
        "enableServiceLinks": False,
        "securityContext": pod_security_context(),
        "serviceAccountName": service_account,
    }
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if volumes:
        spec["volumes"] = [dict(v) for v in volumes]
    return {"metadata": {"labels": dict(labels)}, "spec": spec}


def head_pod_template(resolved: ResolvedRequest, labels: Mapping[str, str]) -> dict[str, Any]:
    """The Ray head: no GPU, and no pool selector or GPU tolerations, so that it lands on an
    ordinary CPU node instead of occupying a GPU machine. It mounts a service-account token
    only when the in-tree autoscaler (a sidecar sharing its service account) needs the API.
    """
    request, pool = resolved.request, resolved.pool
    volumes, mounts = ray_volumes(request, request.head_memory)
    container = ray_container(
        HEAD_CONTAINER_NAME, request.image, cpus=request.head_cpus, memory=request.head_memory,
        ports=HEAD_PORTS, volume_mounts=mounts,
    )
    return pod_template(
        containers=[container], labels=labels, service_account=request.service_account,
        automount_service_account_token=request.autoscaling, volumes=volumes,
        node_selector=node_selector_for(pool) if not pool.has_gpus else None,
    )


def worker_pod_template(resolved: ResolvedRequest, labels: Mapping[str, str]) -> dict[str, Any]:
    """A Ray worker on the request's pool: the pool's node selector and tolerations,
    Guaranteed QoS, ``nvidia.com/gpu`` requests == limits, and no service-account token."""
    request, pool = resolved.request, resolved.pool
    volumes, mounts = ray_volumes(request, request.memory_per_worker)
    container = ray_container(
        WORKER_CONTAINER_NAME, request.image, cpus=request.cpus_per_worker,
        memory=request.memory_per_worker, gpus=request.gpus_per_worker, ports=WORKER_PORTS,
        volume_mounts=mounts,
    )
    return pod_template(
        containers=[container], labels=labels, service_account=request.service_account,
        automount_service_account_token=False, volumes=volumes,
        node_selector=node_selector_for(pool), tolerations=tolerations_for(pool),
    )


def submitter_pod_template(*, image: str, service_account: str, labels: Mapping[str, str]
                           ) -> dict[str, Any]:
    """The K8sJobMode submitter. No command: KubeRay fills in ``ray job submit`` (with the
    submission id, runtime env and the auth token from the cluster's Secret) when it sees
    none. It talks to the Ray dashboard only, never to the Kubernetes API."""
    container = ray_container(
        SUBMITTER_CONTAINER_NAME, image, cpus=SUBMITTER_CPUS, memory=SUBMITTER_MEMORY,
    )
    return pod_template(
        containers=[container], labels=labels, service_account=service_account,
        automount_service_account_token=False, restart_policy="Never",
    )
