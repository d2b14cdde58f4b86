"""The GPU pool catalog: which node pools a cluster may ask for, and what one node holds.

The catalog ships with the package (``config/pools.yaml``). A deployment may point at its
own file; callers read ``ADS_RANKING_POOL_CATALOG`` through :func:`catalog_path_from_env`
when they build resources. Nothing here reads the environment at import time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ads_ranking_pipelines.config.quantity import QuantityError, parse_memory

CATALOG_ENV_VAR = "ADS_RANKING_POOL_CATALOG"
DEFAULT_CATALOG_RESOURCE = "pools.yaml"

_POOL_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


@dataclass(frozen=True)
class NodeLabelProvider:
    """The node labels one kind of cluster sets by itself, so a catalog can rely on them.

    ``gpu_label`` is the label a GPU pool selects on and ``gpu_label_field`` the pool field its
    value must equal; ``labels`` are all the keys this provider is known to set (a pool may
    select on any of them, never on another provider's).
    """

    name: str
    description: str
    gpu_label: str | None
    gpu_label_field: str | None
    labels: frozenset[str]


WELL_KNOWN_LABELS = frozenset({
    "kubernetes.io/arch", "kubernetes.io/os", "kubernetes.io/hostname",
    "node.kubernetes.io/instance-type", "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
})  # set by the kubelet / cloud controller manager everywhere

NODE_LABEL_PROVIDERS: dict[str, NodeLabelProvider] = {p.name: p for p in (
    NodeLabelProvider(
        "gke", "Google Kubernetes Engine: GKE labels GPU nodes with their accelerator type "
        "(cloud.google.com/gke-accelerator: nvidia-h100-80gb) and taints GPU node pools "
        "nvidia.com/gpu=present:NoSchedule. No NVIDIA GPU feature discovery labels.",
        "cloud.google.com/gke-accelerator", "gpu_type",
        WELL_KNOWN_LABELS | {"cloud.google.com/gke-accelerator", "cloud.google.com/gke-nodepool",
                             "cloud.google.com/machine-family", "cloud.google.com/gke-spot"}),
    NodeLabelProvider(
        "eks", "Amazon EKS (managed node groups, Karpenter): GPU nodes carry no GPU-model label "
        "unless Karpenter made them, so GPU pools select on the instance type "
        "(node.kubernetes.io/instance-type: p5.48xlarge, = machine_type).",
        "node.kubernetes.io/instance-type", "machine_type",
        WELL_KNOWN_LABELS | {"eks.amazonaws.com/nodegroup", "eks.amazonaws.com/capacityType",
                             "karpenter.sh/nodepool", "karpenter.sh/capacity-type",
                             "karpenter.k8s.aws/instance-gpu-name",
                             "karpenter.k8s.aws/instance-gpu-count",
                             "karpenter.k8s.aws/instance-family"}),
    NodeLabelProvider(
        "gpu-operator", "Any cluster running the NVIDIA GPU operator: its GPU feature "
        "discovery labels each GPU node with the product name "
        "(nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3, = gpu_product).",
        "nvidia.com/gpu.product", "gpu_product",
        WELL_KNOWN_LABELS | {"nvidia.com/gpu.product", "nvidia.com/gpu.count",
                             "nvidia.com/gpu.present", "nvidia.com/gpu.memory",
                             "nvidia.com/gpu.family", "nvidia.com/gpu.machine"}),
    NodeLabelProvider(
        "custom", "Labels your cluster admins put on node pools themselves: not checked.",
        None, None, frozenset()),
)}
# Keys one provider sets and another does not: selecting on them in the wrong catalog leaves
# pods Pending forever ("0/N nodes are available: N node(s) didn't match node selector").
_PROVIDER_ONLY_LABELS = {
    name: p.labels - WELL_KNOWN_LABELS for name, p in NODE_LABEL_PROVIDERS.items()
}


def provider_label_problems(provider: NodeLabelProvider, pool: GpuPool) -> list[str]:
    """Why ``pool``'s node selector would not match nodes of ``provider`` (empty when fine)."""
    if provider.gpu_label is None or pool.local:
        return []
    problems = []
    for key in sorted(pool.node_selector):
        owners = [n for n, keys in _PROVIDER_ONLY_LABELS.items() if key in keys and n != provider.name]
        if owners and key not in provider.labels:
            problems.append(
                f"pool {pool.name!r} selects on {key!r}, a label {' / '.join(owners)} nodes carry "
                f"but {provider.name} nodes do not")
    if pool.has_gpus:
        want = getattr(pool, provider.gpu_label_field or "", None)
        have = pool.node_selector.get(provider.gpu_label)
        if not want or have != want:
            problems.append(
                f"GPU pool {pool.name!r} must select {provider.gpu_label}: "
                f"{want or '<its ' + str(provider.gpu_label_field) + '>'} (the label "
                f"{provider.name} sets on its GPU nodes), got {have!r}")
    return problems


class UnknownPoolError(LookupError):
    """A pool name that is not in the catalog. The message lists the valid names."""

    def __init__(self, name: str, valid: list[str]) -> None:
        self.name = name
        self.valid = sorted(valid)
        super().__init__(f"unknown GPU pool {name!r}; valid pools: {', '.join(self.valid)}")


class CatalogError(ValueError):
    """A catalog file that cannot be read or does not describe valid pools."""


class Toleration(BaseModel):
    """One Kubernetes toleration, in the API's field names."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    operator: Literal["Exists", "Equal"] = "Exists"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = "NoSchedule"

    @model_validator(mode="after")
    def _value_matches_operator(self) -> Toleration:
        if self.operator == "Exists" and self.value is not None:
            raise ValueError("a toleration with operator Exists cannot set a value")
        if self.operator == "Equal" and self.value is None:
            raise ValueError("a toleration with operator Equal needs a value")
        return self

    def to_k8s(self) -> dict[str, str]:
        return self.model_dump(exclude_none=True)


RUN_KINDS = ("scheduled", "manual", "backfill", "interactive")
RunKind = Literal["scheduled", "manual", "backfill", "interactive"]
_K8S_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
_LABEL_VALUE_PATTERN = r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"


class KueuePriorityClasses(BaseModel):
    """The Kueue ``WorkloadPriorityClass`` for each kind of run on a pool (None: Kueue's
    default priority for the queue)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scheduled: str | None = Field(None, pattern=_K8S_NAME_PATTERN)
    manual: str | None = Field(None, pattern=_K8S_NAME_PATTERN)
    backfill: str | None = Field(None, pattern=_K8S_NAME_PATTERN)
    interactive: str | None = Field(None, pattern=_K8S_NAME_PATTERN)


class KueueQueue(BaseModel):
    """A pool shared through Kueue (kubernetes-sigs/kueue): its RayJobs and RayClusters are
    created suspended, labelled ``kueue.x-k8s.io/queue-name: <local_queue>`` (and
    ``kueue.x-k8s.io/priority-class``), and Kueue admits them when the ClusterQueue behind the
    LocalQueue has quota for them. The cluster admins own the LocalQueue and ClusterQueue."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    local_queue: str = Field(..., pattern=_LABEL_VALUE_PATTERN,
                             description="Name of the Kueue LocalQueue in the Ray namespace.")
    priority_classes: KueuePriorityClasses = Field(default_factory=KueuePriorityClasses)

    def priority_class(self, run_kind: str) -> str | None:
        if run_kind not in RUN_KINDS:
            raise ValueError(f"unknown run kind {run_kind!r}; valid: {', '.join(RUN_KINDS)}")
        return getattr(self.priority_classes, run_kind)


class GpuPool(BaseModel):
    """A node pool: the shape of one node and how many workers the pool may hold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(..., pattern=_POOL_NAME_PATTERN)
    description: str = ""
    gpu_type: str | None = Field(
        None, description="Short accelerator name, e.g. nvidia-h100-80gb; None for CPU pools."
    )
    gpu_product: str | None = Field(
        None, description="NVIDIA GPU feature discovery product label, e.g. NVIDIA-H100-80GB-HBM3."
    )
    machine_type: str | None = Field(None, description="Cloud machine type, for humans.")
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: tuple[Toleration, ...] = ()
    gpus_per_node: int = Field(0, ge=0, le=16)
    cpus_per_node: float = Field(..., gt=0)
    memory_per_node: str
    max_workers: int = Field(..., ge=0, le=256)
    max_concurrent_runs: int | None = Field(
        1, ge=1, le=1000, description="Dagster runs on this pool at once; more wait in the run queue "
        "(QueuedRunCoordinator limit on the ads-ranking/gpu-pool tag, generated into dagster.yaml). "
        "None (only on a Kueue pool): no Dagster-side limit, Kueue's quota decides.")
    local: bool = False
    kueue: KueueQueue | None = Field(
        None, description="Share the pool through this Kueue LocalQueue; None: no Kueue.")
    cost_per_gpu_hour: float | None = Field(
        None, ge=0, description="What one GPU-hour on the pool costs (any currency); None: unknown.")
    cost_per_worker_hour: float | None = Field(
        None, ge=0, description="What one worker-hour costs beside its GPUs (its CPUs and memory; the only "
        "cost on a CPU pool); None: unknown.")
    budget_gpu_hours: float | None = Field(
        None, gt=0, description="Most GPU-hours one run (a backfill's whole range) may be estimated to take; "
        "a run over it is refused before any cluster starts. None: no limit.")
    budget_cost: float | None = Field(
        None, gt=0, description="Most cost one run may be estimated to take (needs a cost rate). None: no limit.")

    @field_validator("memory_per_node")
    @classmethod
    def _memory_is_quantity(cls, v: str) -> str:
        try:
            parse_memory(v)
        except QuantityError as exc:
            raise ValueError(str(exc)) from None
        return v

    @model_validator(mode="after")
    def _gpu_fields_agree(self) -> GpuPool:
        if self.gpus_per_node > 0 and not self.gpu_type:
            raise ValueError(f"pool {self.name!r} has GPUs but no gpu_type")
        if self.gpus_per_node == 0 and (self.gpu_type or self.gpu_product):
            raise ValueError(f"pool {self.name!r} names a GPU type but has gpus_per_node 0")
        if self.local and (self.node_selector or self.tolerations):
            raise ValueError(f"local pool {self.name!r} cannot select or tolerate nodes")
        if self.local and self.kueue is not None:
            raise ValueError(f"local pool {self.name!r} cannot use Kueue (no Kubernetes)")
        if self.budget_gpu_hours is not None and not self.has_gpus:
            raise ValueError(f"pool {self.name!r} has no GPUs, so budget_gpu_hours={self.budget_gpu_hours:g} "
                             "never binds; valid: budget_cost with cost_per_worker_hour on a CPU pool")
        if self.budget_cost is not None and self.cost_per_gpu_hour is None and self.cost_per_worker_hour is None:
            raise ValueError(f"pool {self.name!r} has budget_cost={self.budget_cost:g} but no cost rate; "
                             "valid: set cost_per_gpu_hour and/or cost_per_worker_hour")
        if self.max_concurrent_runs is None and self.kueue is None:
            raise ValueError(f"pool {self.name!r} has max_concurrent_runs unset; valid: 1-1000, "
                             "or unset only on a pool with `kueue:` (Kueue's quota limits it)")
        return self

    @property
    def has_gpus(self) -> bool:
        return self.gpus_per_node > 0

    @property
    def memory_per_node_bytes(self) -> int:
        return parse_memory(self.memory_per_node)


class PoolCatalog(BaseModel):
    """The pools a request may name, keyed by name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Literal["gke", "eks", "gpu-operator", "custom"] = Field(
        "gke", description="Whose node labels the pools select on; see NODE_LABEL_PROVIDERS.")
    pools: tuple[GpuPool, ...]
    default_pool: str = "local"

    @model_validator(mode="after")
    def _names_unique_and_default_known(self) -> PoolCatalog:
        names = [p.name for p in self.pools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"duplicate pool names: {', '.join(duplicates)}")
        if self.default_pool not in names:
            raise ValueError(
                f"default_pool {self.default_pool!r} is not a pool; pools: {', '.join(sorted(names))}"
            )
        provider = NODE_LABEL_PROVIDERS[self.provider]
        problems = [m for pool in self.pools for m in provider_label_problems(provider, pool)]
        if problems:
            raise ValueError(
                f"node labels do not match provider {self.provider!r}: " + "; ".join(problems)
                + f"; valid providers: {', '.join(NODE_LABEL_PROVIDERS)} (set `provider:`)")
        return self

    def names(self) -> list[str]:
        return sorted(p.name for p in self.pools)

    def get(self, name: str) -> GpuPool:
        for pool in self.pools:
            if pool.name == name:
                return pool
        raise UnknownPoolError(name, self.names())

    def __contains__(self, name: object) -> bool:
        return any(p.name == name for p in self.pools)

    def __iter__(self) -> Iterator[GpuPool]:  # type: ignore[override]
        return iter(self.pools)

    def __len__(self) -> int:
        return len(self.pools)


def catalog_path_from_env(environ: Mapping[str, str]) -> str | None:
    """The catalog override named by ``ADS_RANKING_POOL_CATALOG`` in ``environ``, if any.

    Takes the mapping explicitly (pass ``os.environ`` or a run's env) so that nothing reads
    the process environment behind the caller's back.
    """
    value = environ.get(CATALOG_ENV_VAR, "").strip()
    return value or None


def load_catalog(path: str | os.PathLike[str] | None = None) -> PoolCatalog:
    """The catalog at ``path``, or the one shipped with the package when ``path`` is None."""
    if path is None:
        source = f"package resource {DEFAULT_CATALOG_RESOURCE}"
        text = resources.files("ads_ranking_pipelines.config").joinpath(
            DEFAULT_CATALOG_RESOURCE
        ).read_text(encoding="utf-8")
    else:
        source = os.fspath(path)
        try:
            with open(source, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise CatalogError(f"cannot read pool catalog {source}: {exc}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CatalogError(f"pool catalog {source} is not valid YAML: {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(f"pool catalog {source} must be a mapping with a 'pools' list")
    try:
        return PoolCatalog.model_validate(data)
    except ValidationError as exc:
        raise CatalogError(f"pool catalog {source} is invalid:\n{exc}") from exc
