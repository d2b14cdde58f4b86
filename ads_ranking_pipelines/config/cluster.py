"""A request for one Ray cluster: the handful of parameters the shared template takes.

Catalog-aware validation (does the request fit a node of its pool?) lives in
``config.validation``; this model only checks what it can on its own.
"""

from __future__ import annotations

import re

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
RFC1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|k|M|G|T)?$")

# A worker on a CPU pool that names no size gets this much (GPU pools: a share of the node per
# GPU, see config.validation.default_worker_resources).
CPU_POOL_WORKER_CPUS = 1.0
CPU_POOL_WORKER_MEMORY = "4Gi"


class ClusterRequest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(..., max_length=47, description="RFC 1123 label; KubeRay appends suffixes.")
    owner: str = Field("unknown", max_length=63)
    team: str = Field("ads-ranking", max_length=63)
    gpu_pool: str = "local"
    workers: int = Field(2, ge=0, le=256)
    gpus_per_worker: int = Field(0, ge=0, le=16)
    cpus_per_worker: float | None = Field(
        None, gt=0, le=256,
        description="CPUs per worker pod. Unset: on a GPU pool, the node's CPUs less headroom "
        "divided by its GPUs, times gpus_per_worker; on a CPU pool, 1.")
    memory_per_worker: str | None = Field(
        None, description="Kubernetes quantity, e.g. 64Gi. Unset: on a GPU pool, the node's "
        "memory less headroom divided by its GPUs, times gpus_per_worker; on a CPU pool, 4Gi.")
    head_cpus: float = Field(1.0, gt=0, le=64)
    head_memory: str = "4Gi"
    image: str = "rayproject/ray:2.60.0-py311-cpu"
    namespace: str = "ads-ranking"
    service_account: str = "ray-workloads"
    ray_version: str = "2.60.0"
    ttl_seconds_after_finished: int = Field(600, ge=0, le=7 * 24 * 3600)
    active_deadline_seconds: int = Field(6 * 3600, ge=60, le=7 * 24 * 3600)
    pre_running_deadline_seconds: int = Field(
        1800, ge=60, le=7 * 24 * 3600,
        description="A RayJob not Running this long after it started fails (KubeRay "
        "preRunningDeadlineSeconds): a job whose Dagster process died does not hold its "
        "cluster in Initializing until the active deadline.",
    )
    labels: dict[str, str] = Field(default_factory=dict)
    run_kind: Literal["scheduled", "manual", "backfill", "interactive"] = Field(
        "manual", description="What the cluster is for; on a Kueue pool it picks the pool's "
        "WorkloadPriorityClass (pools.yaml kueue.priority_classes).")
    priority_class: str | None = Field(
        None, description="Kueue WorkloadPriorityClass overriding the pool's for run_kind "
        "(only on a pool with `kueue:`).")
    autoscaling: bool = Field(
        False,
        description="KubeRay in-tree autoscaler: workers scale between 0 and `workers`.",
    )
    shared_volume_claim: str | None = Field(
        None,
        description="PersistentVolumeClaim (ReadWriteMany) mounted at shared_volume_path in the "
        "head and worker pods: the storage root when it is a path rather than s3:// or gs://.",
    )
    shared_volume_path: str | None = Field(
        None, description="Absolute mount path of shared_volume_claim (the storage root).")
    auth_secret_name: str | None = Field(
        None,
        description="Secret (key auth_token) holding the Ray auth token; None lets KubeRay "
        "generate one per cluster. Only the name is ever rendered.",
    )

    def worker_cpus(self) -> float:
        """One worker's CPUs: the request's, else the CPU-pool default (what resolution against
        a CPU pool fills in; a resolved request always names them)."""
        return self.cpus_per_worker if self.cpus_per_worker is not None else CPU_POOL_WORKER_CPUS

    @field_validator("name", "namespace", "service_account")
    @classmethod
    def _rfc1123(cls, v: str) -> str:
        if not RFC1123_LABEL.match(v):
            raise ValueError(
                f"{v!r} is not an RFC 1123 label (lowercase letters, digits and '-', "
                "starting and ending with a letter or digit)"
            )
        return v

    @field_validator("priority_class")
    @classmethod
    def _priority_class_name(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 63 or not RFC1123_SUBDOMAIN.match(v)):
            raise ValueError(f"{v!r} is not a WorkloadPriorityClass name (an RFC 1123 subdomain "
                             "of at most 63 characters, e.g. backfill-low)")
        return v

    @field_validator("shared_volume_claim")
    @classmethod
    def _claim_name(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 253 or not RFC1123_SUBDOMAIN.match(v)):
            raise ValueError(f"{v!r} is not a valid PersistentVolumeClaim name (an RFC 1123 subdomain)")
        return v

    @field_validator("shared_volume_path")
    @classmethod
    def _mount_path(cls, v: str | None) -> str | None:
        if v is not None and (not v.startswith("/") or ".." in v.split("/") or v == "/"):
            raise ValueError(f"{v!r} is not an absolute mount path below / (e.g. /mnt/ads-ranking)")
        return v

    @model_validator(mode="after")
    def _volume_pair(self) -> "ClusterRequest":
        if (self.shared_volume_claim is None) != (self.shared_volume_path is None):
            raise ValueError("shared_volume_claim and shared_volume_path go together: set both "
                             "or neither")
        return self

    @field_validator("auth_secret_name")
    @classmethod
    def _secret_name(cls, v: str | None) -> str | None:
        if v is not None and (len(v) > 253 or not RFC1123_SUBDOMAIN.match(v)):
            raise ValueError(f"{v!r} is not a valid Secret name (an RFC 1123 subdomain)")
        return v

    @field_validator("memory_per_worker", "head_memory")
    @classmethod
    def _quantity(cls, v: str | None) -> str | None:
        if v is not None and not QUANTITY.match(v):
            raise ValueError(f"{v!r} is not a Kubernetes memory quantity such as 512Mi, 16Gi or 1Ti")
        return v
