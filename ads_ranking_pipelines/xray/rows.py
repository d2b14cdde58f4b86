"""One row of the cluster table, for either backend, with cost so far and the filters.

Cost so far: ``worker-hours = hours since the cluster was created x desired workers`` and
``GPU-hours = worker-hours x GPUs per worker``. Desired (not ready) workers, because that is
what the pool holds for the cluster while it waits for nodes; the head is not counted (it
holds no GPU and, on KubeRay, runs on an ordinary CPU node).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ads_ranking_pipelines.config.messages import age


@dataclass
class Notebook:
    owner: str
    url: str | None
    state: str
    started_at: str


@dataclass
class ClusterRow:
    name: str
    backend: str
    owner: str
    team: str
    pool: str
    gpu_type: str
    workers_ready: int | None
    workers_desired: int
    gpus_per_worker: int
    status: str
    created_at: dt.datetime | None
    namespace: str | None = None
    status_detail: str = ""
    dashboard: str | None = None
    dagster_run_id: str | None = None
    dagster_run_url: str | None = None
    notebook: Notebook | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.backend, self.namespace or "", self.name)

    @property
    def workers(self) -> str:
        ready = "?" if self.workers_ready is None else self.workers_ready
        return f"{ready}/{self.workers_desired}"

    @property
    def gpus(self) -> int:
        return self.workers_desired * self.gpus_per_worker

    def hours(self, now: dt.datetime | None = None) -> float:
        if self.created_at is None:
            return 0.0
        now = now or dt.datetime.now(dt.timezone.utc)
        created = self.created_at if self.created_at.tzinfo else \
            self.created_at.replace(tzinfo=dt.timezone.utc)
        return max(0.0, (now - created).total_seconds() / 3600)

    def worker_hours(self, now: dt.datetime | None = None) -> float:
        return self.hours(now) * self.workers_desired

    def gpu_hours(self, now: dt.datetime | None = None) -> float:
        return self.worker_hours(now) * self.gpus_per_worker

    def age(self, now: dt.datetime | None = None) -> str:
        return age(self.created_at, now)

    def to_json(self, now: dt.datetime | None = None) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k not in ("extra", "created_at")}
        data.update(
            created_at=self.created_at.isoformat() if self.created_at else None,
            age=self.age(now), workers=self.workers, gpus=self.gpus,
            worker_hours=round(self.worker_hours(now), 3), gpu_hours=round(self.gpu_hours(now), 3),
        )
        return data


LOCAL_SCOPE = "local"  # the namespace filter's value for the local backend's clusters


@dataclass(frozen=True)
class Filters:
    owner: str = ""
    pool: str = ""
    status: str = ""
    namespace: str = ""  # a KubeRay namespace, or "local"

    KEYS = ("owner", "pool", "status", "namespace")

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> "Filters":
        return cls(*(str(query.get(k) or "").strip() for k in cls.KEYS))

    def keep(self, row: ClusterRow) -> bool:
        scope = row.namespace if row.backend == "kuberay" else LOCAL_SCOPE
        return ((not self.owner or self.owner.lower() in row.owner.lower())
                and (not self.pool or row.pool == self.pool)
                and (not self.status or row.status == self.status)
                and (not self.namespace or scope == self.namespace))

    def apply(self, rows: Iterable[ClusterRow]) -> list[ClusterRow]:
        return [r for r in rows if self.keep(r)]

    def query(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in self.KEYS if getattr(self, k)}


def scopes(rows: Iterable[ClusterRow], configured: Iterable[str]) -> list[str]:
    """The namespace filter's choices: "local" and every KubeRay namespace seen or configured."""
    seen = {r.namespace for r in rows if r.backend == "kuberay" and r.namespace}
    return [LOCAL_SCOPE, *sorted(seen | set(configured))]
