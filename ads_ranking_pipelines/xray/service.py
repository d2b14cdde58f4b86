"""The sources behind one interface for the routes: rows from every backend (with notebooks
and Dagster links), one cluster, its jobs and log, create, delete, notebooks.

Everything here blocks (HTTP to Ray dashboards and the API server, process management): the
routes call it in Starlette's thread pool.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ads_ranking_pipelines.config.messages import quoted
from ads_ranking_pipelines.config.validation import ResolvedRequest
from ads_ranking_pipelines.config.pools import load_catalog

from ads_ranking_pipelines.xray import local_jobs
from ads_ranking_pipelines.xray.dagster_links import DagsterLinks
from ads_ranking_pipelines.xray.kuberay_source import KubeRaySource
from ads_ranking_pipelines.xray.local_jobs import JobRow
from ads_ranking_pipelines.xray.local_source import LocalSource
from ads_ranking_pipelines.xray.notebooks import Notebooks, NotebookState
from ads_ranking_pipelines.xray.rows import ClusterRow, Notebook
from ads_ranking_pipelines.xray.settings import XraySettings


class NotFound(LookupError):
    pass


class Ambiguous(LookupError):
    def __init__(self, name: str, rows: list[ClusterRow]) -> None:
        where = ", ".join(f"{r.backend}{'/' + r.namespace if r.namespace else ''}" for r in rows)
        super().__init__(f"several clusters are named {quoted(name)} ({where}); pass backend= "
                         "and namespace=")


@dataclass(frozen=True)
class ClusterRef:
    name: str
    backend: str | None = None
    namespace: str | None = None

    def matches(self, row: ClusterRow) -> bool:
        return (row.name == self.name and (not self.backend or row.backend == self.backend)
                and (not self.namespace or row.namespace == self.namespace))


def _notebook(state: NotebookState) -> Notebook:
    return Notebook(owner=state.owner, url=state.url, state="running", started_at=state.started_at)


@dataclass(frozen=True)
class StartedNotebook:
    """The answer to a start call: the only place a KubeRay notebook's token is shown."""

    backend: str
    owner: str
    url: str
    started_at: str
    pid: int | None = None  # local: the Jupyter process
    local_url: str | None = None  # KubeRay: after `kubectl port-forward`
    port_forward: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class XrayService:
    def __init__(self, settings: XraySettings, environ: Mapping[str, str]) -> None:
        self.settings = settings
        self.catalog = load_catalog(settings.settings.pool_catalog)
        self.local = LocalSource(settings.settings.state_dir, single_node=settings.settings.local_single_node)
        self.kuberay = (KubeRaySource(settings.kube, settings.settings, self.catalog)
                        if settings.kube.enabled else None)
        self.notebooks = Notebooks(settings.notebooks_dir)
        self.links = DagsterLinks(settings.dagster_url, environ)

    @property
    def backends(self) -> tuple[str, ...]:
        return ("local", "kuberay") if self.kuberay else ("local",)

    @property
    def namespaces(self) -> tuple[str, ...]:
        return self.kuberay.namespaces if self.kuberay else ()

    # ---- reading ---------------------------------------------------------------------------
    def rows(self) -> tuple[list[ClusterRow], list[str]]:
        rows = self.local.rows()
        notebooks = self.notebooks.all()
        for row in rows:
            if row.name in notebooks:
                row.notebook = _notebook(notebooks[row.name])
        notes: list[str] = []
        if self.kuberay:
            kube_rows, notes = self.kuberay.rows()
            rows += kube_rows
        for row in rows:
            self.links.annotate(row)
        return rows, notes

    def find(self, ref: ClusterRef) -> ClusterRow:
        found = [r for r in self.rows()[0] if ref.matches(r)]
        if not found:
            raise NotFound(f"no cluster named {quoted(ref.name)}"
                           + (f" on {ref.backend}" if ref.backend else ""))
        if len(found) > 1:
            raise Ambiguous(ref.name, found)
        return found[0]

    def pods(self, row: ClusterRow) -> list[dict[str, Any]]:
        if row.backend != "kuberay" or not self.kuberay:
            return []
        return self.kuberay.describe(row.namespace or "", row.name)[1]

    def jobs(self, row: ClusterRow) -> list[JobRow]:
        if row.backend == "kuberay" and self.kuberay:
            return self.kuberay.jobs(row.namespace or "", row.name)
        cluster = self.local.find(row.name)
        if cluster is None or not cluster.alive():
            return []
        return local_jobs.list_jobs(cluster)

    def has_job(self, row: ClusterRow, job_id: str) -> bool:
        return any(j.job_id == job_id for j in self.jobs(row))

    def kuberay_log(self, row: ClusterRow, job_id: str) -> Iterator[str]:
        assert self.kuberay is not None
        return self.kuberay.follow_log(row.namespace or "", job_id)

    # ---- changing --------------------------------------------------------------------------
    def create(self, backend: str, resolved: ResolvedRequest, notebook: bool = False) -> None:
        if backend == "kuberay" and self.kuberay:
            self.kuberay.create(resolved, notebook=notebook)
        else:
            self.local.create(resolved.request)

    def delete(self, row: ClusterRow) -> bool:
        if row.backend == "kuberay" and self.kuberay:
            return self.kuberay.delete(row.namespace or "", row.name)
        self.notebooks.stop(row.name)
        return self.local.delete(row.name)

    def start_notebook(self, row: ClusterRow, owner: str) -> StartedNotebook:
        if row.backend == "kuberay" and self.kuberay:
            started = self.kuberay.start_notebook(row.namespace or "", row.name, owner)
            return StartedNotebook("kuberay", started.info.owner, started.url,
                                   started.info.started_at, local_url=started.local_url,
                                   port_forward=started.info.port_forward)
        cluster = self.local.find(row.name)
        if cluster is None:
            raise NotFound(f"cluster {row.name!r} is gone")
        state = self.notebooks.start(cluster, owner)
        return StartedNotebook("local", state.owner, state.url, state.started_at, pid=state.pid)

    def stop_notebook(self, row: ClusterRow) -> bool:
        if row.backend == "kuberay" and self.kuberay:
            return self.kuberay.stop_notebook(row.namespace or "", row.name)
        return self.notebooks.stop(row.name)
