"""Catalog-aware checks of a :class:`ClusterRequest`: does it fit a node of the pool it names?

``ClusterRequest`` validates what it can alone (types, ranges, name syntax). This module adds
what needs the pool catalog, and raises :class:`RequestError` naming the field, the value and
what would have been valid.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import GpuPool, PoolCatalog, UnknownPoolError
from ads_ranking_pipelines.config.quantity import (
    QuantityError,
    cpu_millis,
    format_memory,
    parse_memory,
)

# A worker may take at most this share of a node's CPU and memory. The rest is left for what
# every node runs besides our pod: kubelet/system reserve and eviction threshold (GKE reserves
# roughly 6-10% of memory and a few percent of CPU on large machines) and DaemonSets (logging,
# metrics, the NVIDIA device plugin and DCGM exporter on GPU nodes).
NODE_HEADROOM_FRACTION = 0.10

# Ray refuses to start a node with less memory than this (object store + raylet + workers).
MIN_POD_MEMORY = "512Mi"

# KubeRay names the RayCluster of a RayJob "<rayjob-name>-<5 chars>" and wants DNS-1035 names.
DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

# rayproject/ray tags ending in -cpu (or -cpu-aarch64) have no CUDA libraries.
CPU_ONLY_IMAGE = re.compile(r":[^/]*-cpu(-aarch64)?$")

# Kubernetes label syntax (k8s.io/apimachinery/pkg/util/validation).
LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

# Label keys the template sets itself, and prefixes owned by Kubernetes or the operator.
MANAGED_LABEL_PREFIX = "ads-ranking.io/"
RESERVED_LABEL_PREFIXES = (MANAGED_LABEL_PREFIX, "ray.io/", "kubernetes.io/", "k8s.io/", "dagster/")


class RequestError(ValueError):
    """A request the catalog or the cluster template cannot honour.

    ``field`` is the ClusterRequest field at fault, ``value`` what it held, ``valid`` a
    human-readable description of what is accepted there.
    """

    def __init__(self, field: str, value: object, valid: object, reason: str = "") -> None:
        self.field = field
        self.value = value
        self.valid = valid
        self.reason = reason
        valid_text = ", ".join(map(str, valid)) if isinstance(valid, (list, tuple)) else str(valid)
        detail = f": {reason}" if reason else ""
        super().__init__(f"invalid {field}={value!r}{detail}; valid: {valid_text}")


def is_qualified_label_key(key: str) -> bool:
    """Kubernetes label key syntax: optional DNS subdomain prefix, then a name of <= 63 chars."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(LABEL_NAME.match(name))


def is_label_value(value: str) -> bool:
    return len(value) <= 63 and bool(LABEL_VALUE.match(value))


def usable_cpus(pool: GpuPool) -> float:
    """CPUs one worker may take on a node of ``pool`` (node CPUs less the headroom)."""
    return round(pool.cpus_per_node * (1 - NODE_HEADROOM_FRACTION), 3)


def usable_memory_bytes(pool: GpuPool) -> int:
    """Bytes one worker may take on a node of ``pool``, rounded down to a whole MiB."""
    usable = int(pool.memory_per_node_bytes * (1 - NODE_HEADROOM_FRACTION))
    return usable - usable % 2**20


def _memory(field: str, value: str) -> int:
    try:
        size = parse_memory(value)
    except QuantityError as exc:
        raise RequestError(
            field, value, "a quantity such as 512Mi, 16Gi or 1Ti (suffixes Ki Mi Gi Ti k M G T)",
            exc.reason,
        ) from None
    minimum = parse_memory(MIN_POD_MEMORY)
    if size < minimum:
        raise RequestError(field, value, f">= {MIN_POD_MEMORY}", "too little memory for a Ray node")
    return size


def _cpus(field: str, value: float) -> int:
    try:
        return cpu_millis(value)
    except QuantityError as exc:
        raise RequestError(field, value, "a positive multiple of 0.001", exc.reason) from None


def _check_labels(labels: dict[str, str]) -> None:
    for key, value in labels.items():
        if not is_qualified_label_key(key):
            raise RequestError(
                "labels", key, "Kubernetes label keys: [prefix/]name, name <= 63 chars of "
                "[A-Za-z0-9_.-] starting and ending alphanumeric", "not a valid label key",
            )
        if key.startswith(RESERVED_LABEL_PREFIXES):
            raise RequestError(
                "labels", key, f"keys outside the prefixes {', '.join(RESERVED_LABEL_PREFIXES)}",
                "this prefix is set by the template, Kubernetes or the operator",
            )
        if not isinstance(value, str):
            raise RequestError(f"labels[{key}]", value, "a string", "label values are strings")


def _check_name(name: str) -> None:
    if not DNS1035_LABEL.match(name):
        raise RequestError(
            "name", name, "a DNS-1035 label: lowercase letters, digits and '-', starting with a "
            "letter, at most 47 characters", "KubeRay requires RayCluster/RayJob names to be DNS-1035",
        )


def validate_request(request: ClusterRequest, catalog: PoolCatalog) -> None:
    """Raise :class:`RequestError` unless ``request`` fits the pool it names in ``catalog``."""
    _check_name(request.name)
    try:
        pool = catalog.get(request.gpu_pool)
    except UnknownPoolError as exc:
        raise RequestError("gpu_pool", request.gpu_pool, exc.valid, "unknown pool") from None

    worker_memory = _memory("memory_per_worker", request.memory_per_worker)
    _memory("head_memory", request.head_memory)
    worker_millis = _cpus("cpus_per_worker", request.cpus_per_worker)
    _cpus("head_cpus", request.head_cpus)

    if request.workers > pool.max_workers:
        raise RequestError(
            "workers", request.workers, f"0..{pool.max_workers}",
            f"pool {pool.name!r} allows at most {pool.max_workers} workers per cluster",
        )

    if not pool.has_gpus:
        if request.gpus_per_worker != 0:
            raise RequestError(
                "gpus_per_worker", request.gpus_per_worker, [0],
                f"pool {pool.name!r} has no GPUs; pick a GPU pool "
                f"({', '.join(_gpu_pools(catalog)) or 'none in this catalog'})",
            )
    elif not 1 <= request.gpus_per_worker <= pool.gpus_per_node:
        raise RequestError(
            "gpus_per_worker", request.gpus_per_worker, f"1..{pool.gpus_per_node}",
            f"a worker on GPU pool {pool.name!r} takes between 1 GPU and a whole node "
            f"({pool.gpus_per_node} x {pool.gpu_type})",
        )

    if request.gpus_per_worker and CPU_ONLY_IMAGE.search(request.image):
        raise RequestError(
            "image", request.image, "a CUDA image, e.g. rayproject/ray:2.60.0-py311-gpu",
            "the image tag says CPU-only but the workers get GPUs",
        )

    max_cpus = usable_cpus(pool)
    if worker_millis > round(max_cpus * 1000):
        raise RequestError(
            "cpus_per_worker", request.cpus_per_worker, f"<= {max_cpus:g}",
            f"a {pool.name!r} node has {pool.cpus_per_node:g} CPUs and "
            f"{NODE_HEADROOM_FRACTION:.0%} is kept for system pods",
        )
    max_memory = usable_memory_bytes(pool)
    if worker_memory > max_memory:
        raise RequestError(
            "memory_per_worker", request.memory_per_worker, f"<= {format_memory(max_memory)}",
            f"a {pool.name!r} node has {pool.memory_per_node} and "
            f"{NODE_HEADROOM_FRACTION:.0%} is kept for system pods",
        )

    _check_labels(request.labels)


def _gpu_pools(catalog: Iterable[GpuPool]) -> list[str]:
    return sorted(p.name for p in catalog if p.has_gpus)
