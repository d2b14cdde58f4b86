"""Complete and validate a :class:`ClusterRequest` once: does it fit a node of its pool?

``ClusterRequest`` validates what it can alone (types, ranges, name syntax). This module adds
what needs the pool catalog. :func:`resolve_request` is the one place a request is checked
(kubectl-ray's Complete -> Validate, before Run): it returns a :class:`ResolvedRequest` (the
request and its pool) that the manifest builders take without checking it again, or raises
:class:`RequestErrors` listing every problem, each naming the field, the value and what would
have been valid.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ads_ranking_pipelines.config.cluster import (
    CPU_POOL_WORKER_CPUS,
    CPU_POOL_WORKER_MEMORY,
    RFC1123_LABEL,
    ClusterRequest,
)
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
MAX_NAME_LENGTH = 47
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


class RequestErrors(RequestError):
    """Every problem found in one request, reported together.

    ``problems`` holds one :class:`RequestError` per problem (field, value, valid, reason);
    ``field``/``value``/``valid``/``reason`` are those of the first, so code that handles a
    single :class:`RequestError` keeps working. ``str()`` is one problem per line.
    """

    def __init__(self, problems: Sequence[RequestError]) -> None:
        if not problems:
            raise ValueError("RequestErrors needs at least one problem")
        flat: list[RequestError] = []
        for problem in problems:
            flat.extend(problem.problems if isinstance(problem, RequestErrors) else [problem])
        self.problems: tuple[RequestError, ...] = tuple(flat)
        first = self.problems[0]
        self.field, self.value, self.valid, self.reason = (
            first.field, first.value, first.valid, first.reason)
        ValueError.__init__(self, self.describe(str))

    @property
    def fields(self) -> list[str]:
        return [p.field for p in self.problems]

    def describe(self, line: Callable[[RequestError], str]) -> str:
        """The problems formatted by ``line`` (e.g. naming CLI options): the line itself for
        one problem, else a count and one indented line each."""
        if len(self.problems) == 1:
            return line(self.problems[0])
        items = "\n".join(f"  - {line(p)}" for p in self.problems)
        return f"{len(self.problems)} problems in the request:\n{items}"


@dataclass(frozen=True)
class ResolvedRequest:
    """A request that passed :func:`resolve_request`, with its pool.

    Made only by :func:`resolve_request` (or :meth:`renamed`): the manifest builders in
    ``kuberay/`` take one of these and trust it, as kubectl-ray's ``Run`` trusts what
    ``Complete`` and ``Validate`` produced.
    """

    request: ClusterRequest
    pool: GpuPool

    def __post_init__(self) -> None:
        if self.pool.name != self.request.gpu_pool:
            raise ValueError(f"pool {self.pool.name!r} is not the request's {self.request.gpu_pool!r}")

    @property
    def name(self) -> str:
        return self.request.name

    @property
    def namespace(self) -> str:
        return self.request.namespace

    def in_namespace(self, namespace: str) -> ResolvedRequest:
        """The same request in another namespace (a backend's override); only the namespace
        is checked."""
        if namespace == self.request.namespace:
            return self
        if not RFC1123_LABEL.match(namespace or ""):
            raise RequestErrors([RequestError(
                "namespace", namespace, "an RFC 1123 label (lowercase letters, digits and '-')",
                "not a Kubernetes namespace name")])
        return ResolvedRequest(self.request.model_copy(update={"namespace": namespace}), self.pool)

    def renamed(self, name: str) -> ResolvedRequest:
        """The same request under another object name (e.g. one RayJob per submission);
        only the name is checked."""
        problems = name_problems(name)
        if problems:
            raise RequestErrors(problems)
        return ResolvedRequest(self.request.model_copy(update={"name": name}), self.pool)


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


def default_worker_resources(pool: GpuPool, gpus_per_worker: int) -> tuple[float, str]:
    """CPUs and memory a worker gets when its request names none.

    On a GPU pool, a share of the node per GPU: the node's usable CPUs (whole CPUs) and memory
    (whole GiB) after :data:`NODE_HEADROOM_FRACTION`, divided by its GPUs, times
    ``gpus_per_worker`` (clamped to 1..GPUs per node), so that workers sharing a node still fit.
    On a CPU pool: :data:`CPU_POOL_WORKER_CPUS` and :data:`CPU_POOL_WORKER_MEMORY`.
    """
    if not pool.has_gpus:
        return CPU_POOL_WORKER_CPUS, CPU_POOL_WORKER_MEMORY
    gpus = min(max(gpus_per_worker, 1), pool.gpus_per_node)
    cpus_per_gpu = max(1, int(usable_cpus(pool) // pool.gpus_per_node))
    gib_per_gpu = max(1, usable_memory_bytes(pool) // pool.gpus_per_node // 2**30)
    return float(cpus_per_gpu * gpus), format_memory(gib_per_gpu * gpus * 2**30)


def complete_request(request: ClusterRequest, pool: GpuPool) -> ClusterRequest:
    """``request`` with the sizes it leaves unset filled from ``pool``
    (:func:`default_worker_resources`); what it sets is kept."""
    cpus, memory = default_worker_resources(pool, request.gpus_per_worker)
    update: dict[str, object] = {}
    if request.cpus_per_worker is None:
        update["cpus_per_worker"] = cpus
    if request.memory_per_worker is None:
        update["memory_per_worker"] = memory
    return request.model_copy(update=update) if update else request


def _memory(field: str, value: str, problems: list[RequestError]) -> int | None:
    try:
        size = parse_memory(value)
    except QuantityError as exc:
        problems.append(RequestError(
            field, value, "a quantity such as 512Mi, 16Gi or 1Ti (suffixes Ki Mi Gi Ti k M G T)",
            exc.reason,
        ))
        return None
    if size < parse_memory(MIN_POD_MEMORY):
        problems.append(RequestError(field, value, f">= {MIN_POD_MEMORY}",
                                     "too little memory for a Ray node"))
        return None
    return size


def _cpus(field: str, value: float, problems: list[RequestError]) -> int | None:
    try:
        return cpu_millis(value)
    except QuantityError as exc:
        problems.append(RequestError(field, value, "a positive multiple of 0.001", exc.reason))
        return None


def _label_problems(labels: dict[str, str]) -> Iterator[RequestError]:
    for key, value in labels.items():
        if not is_qualified_label_key(key):
            yield RequestError(
                "labels", key, "Kubernetes label keys: [prefix/]name, name <= 63 chars of "
                "[A-Za-z0-9_.-] starting and ending alphanumeric", "not a valid label key",
            )
        elif key.startswith(RESERVED_LABEL_PREFIXES):
            yield RequestError(
                "labels", key, f"keys outside the prefixes {', '.join(RESERVED_LABEL_PREFIXES)}",
                "this prefix is set by the template, Kubernetes or the operator",
            )
        elif not isinstance(value, str):
            yield RequestError(f"labels[{key}]", value, "a string", "label values are strings")


def name_problems(name: str) -> list[RequestError]:
    """The problems of ``name`` as a RayCluster/RayJob name (empty when it is fine)."""
    if isinstance(name, str) and len(name) <= MAX_NAME_LENGTH and DNS1035_LABEL.match(name):
        return []
    return [RequestError(
        "name", name, "a DNS-1035 label: lowercase letters, digits and '-', starting with a "
        f"letter, at most {MAX_NAME_LENGTH} characters",
        "KubeRay requires RayCluster/RayJob names to be DNS-1035",
    )]


def _gpu_problems(request: ClusterRequest, pool: GpuPool, catalog: PoolCatalog
                  ) -> Iterator[RequestError]:
    if request.workers > pool.max_workers:
        yield RequestError(
            "workers", request.workers, f"0..{pool.max_workers}",
            f"pool {pool.name!r} allows at most {pool.max_workers} workers per cluster",
        )
    if not pool.has_gpus:
        if request.gpus_per_worker != 0:
            yield RequestError(
                "gpus_per_worker", request.gpus_per_worker, [0],
                f"pool {pool.name!r} has no GPUs; pick a GPU pool "
                f"({', '.join(_gpu_pools(catalog)) or 'none in this catalog'})",
            )
    elif not 1 <= request.gpus_per_worker <= pool.gpus_per_node:
        yield RequestError(
            "gpus_per_worker", request.gpus_per_worker, f"1..{pool.gpus_per_node}",
            f"a worker on GPU pool {pool.name!r} takes between 1 GPU and a whole node "
            f"({pool.gpus_per_node} x {pool.gpu_type})",
        )
    if request.gpus_per_worker and CPU_ONLY_IMAGE.search(request.image):
        yield RequestError(
            "image", request.image, "a CUDA image, e.g. rayproject/ray:2.60.0-py311-gpu",
            "the image tag says CPU-only but the workers get GPUs",
        )


def _fit_problems(request: ClusterRequest, pool: GpuPool, worker_millis: int | None,
                  worker_memory: int | None) -> Iterator[RequestError]:
    max_cpus = usable_cpus(pool)
    if worker_millis is not None and worker_millis > round(max_cpus * 1000):
        yield RequestError(
            "cpus_per_worker", request.cpus_per_worker, f"<= {max_cpus:g}",
            f"a {pool.name!r} node has {pool.cpus_per_node:g} CPUs and "
            f"{NODE_HEADROOM_FRACTION:.0%} is kept for system pods",
        )
    max_memory = usable_memory_bytes(pool)
    if worker_memory is not None and worker_memory > max_memory:
        yield RequestError(
            "memory_per_worker", request.memory_per_worker, f"<= {format_memory(max_memory)}",
            f"a {pool.name!r} node has {pool.memory_per_node} and "
            f"{NODE_HEADROOM_FRACTION:.0%} is kept for system pods",
        )


def resolve_request(request: ClusterRequest, catalog: PoolCatalog, *,
                    extra_problems: Sequence[RequestError] = ()) -> ResolvedRequest:
    """Complete and validate ``request`` against ``catalog``, once.

    Returns the request, its unset sizes filled from the pool (:func:`complete_request`),
    with its pool; raises :class:`RequestErrors` listing every problem
    found (each naming its field, its value and what is valid), so a user fixes them in one go.
    The manifest builders take the result and do not validate the request again.
    ``extra_problems`` are what the caller's other pre-flight checks found (e.g.
    ``config.images.image_problems`` for KubeRay, the storage root): reported in the same error.
    """
    problems: list[RequestError] = []
    pool: GpuPool | None = None
    try:
        pool = catalog.get(request.gpu_pool)
        request = complete_request(request, pool)
    except UnknownPoolError as exc:
        problems.append(RequestError("gpu_pool", request.gpu_pool, exc.valid, "unknown pool"))
    problems.extend(name_problems(request.name))
    worker_memory = worker_millis = None
    if request.memory_per_worker is not None:
        worker_memory = _memory("memory_per_worker", request.memory_per_worker, problems)
    _memory("head_memory", request.head_memory, problems)
    if request.cpus_per_worker is not None:
        worker_millis = _cpus("cpus_per_worker", request.cpus_per_worker, problems)
    _cpus("head_cpus", request.head_cpus, problems)
    if pool is not None:
        problems.extend(_gpu_problems(request, pool, catalog))
        problems.extend(_fit_problems(request, pool, worker_millis, worker_memory))
        if request.priority_class and pool.kueue is None:
            problems.append(RequestError(
                "priority_class", request.priority_class,
                "unset, or a pool with `kueue:` in the catalog", f"pool {pool.name!r} has no "
                "Kueue queue"))
    problems.extend(_label_problems(request.labels))
    problems.extend(extra_problems)
    if pool is None or problems:
        raise RequestErrors(problems)
    return ResolvedRequest(request, pool)


def _gpu_pools(catalog: Iterable[GpuPool]) -> list[str]:
    return sorted(p.name for p in catalog if p.has_gpus)
