"""Managed RayClusters on KubeRay, over the KubeRay backend's public methods (the ones
``ads-ranking cluster`` uses): list per namespace (on a Kueue pool also our queued RayJobs
with no RayCluster yet, ``queued`` with Kueue's words), get with pods, create (optionally with
notebook support), delete, RayJobs on a cluster and their submitter logs, and notebooks
(start / list / stop: ``backends/kuberay/notebooks.py``).

A namespace the user may not read (403) is reported as a note, not an error page. API errors
are caught broadly here on purpose: the client module is being moved, and only its ``status``
attribute (HTTP status) is relied on.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from ads_ranking_pipelines.backends.kuberay import ClusterInfo, KubeRayBackend, job_status_from_rayjob
from ads_ranking_pipelines.backends.kuberay.notebooks import NotebookInfo, StartedNotebook
from ads_ranking_pipelines.kuberay.labels import CLUSTER_NAME_LABEL
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.config.validation import ResolvedRequest
from ads_ranking_pipelines.config.pools import PoolCatalog
from ads_ranking_pipelines.kuberay.labels import LABEL_DAGSTER_RUN_ID, LABEL_TEAM
from ads_ranking_pipelines.kuberay.notebook import has_notebook_support, with_notebook
from ads_ranking_pipelines.kuberay.pod import GPU_RESOURCE
from ads_ranking_pipelines.kuberay.raycluster import build_raycluster

from ads_ranking_pipelines.xray.local_jobs import JobRow
from ads_ranking_pipelines.xray.rows import ClusterRow, Notebook
from ads_ranking_pipelines.xray.settings import KubeSettings


def _gpus_per_worker(spec: Mapping[str, Any]) -> int:
    for group in spec.get("workerGroupSpecs") or []:
        for container in ((group.get("template") or {}).get("spec") or {}).get("containers") or []:
            limits = (container.get("resources") or {}).get("limits") or {}
            if GPU_RESOURCE in limits:
                return int(limits[GPU_RESOURCE])
    return 0


def _conditions(status: Mapping[str, Any]) -> str:
    """KubeRay's conditions, e.g. ``HeadPodReady, RayClusterProvisioned`` (True ones), plus a
    failing reason when one is set."""
    true = [c.get("type", "?") for c in status.get("conditions") or [] if c.get("status") == "True"]
    text = ", ".join(true)
    if status.get("reason"):
        text = f"{text}; {status['reason']}: {status.get('message') or ''}".strip("; ")
    return text


def _time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def api_error(exc: Exception, what: str = "RayClusters") -> str:
    status = getattr(exc, "status", None) or getattr(exc.__cause__, "status", None)
    if status == 403 or "HTTP 403" in str(exc):
        return f"forbidden: you may not list {what} here (HTTP 403)"
    return " ".join(str(exc).split())


class KubeRaySource:
    backend = "kuberay"

    def __init__(self, kube: KubeSettings, settings: Settings, catalog: PoolCatalog) -> None:
        self.kube = kube
        self.settings = settings
        self.catalog = catalog
        self._backend: KubeRayBackend | None = None
        self._lock = threading.Lock()

    @property
    def namespaces(self) -> tuple[str, ...]:
        return self.kube.namespaces

    def client(self) -> KubeRayBackend:
        """The backend, made on first use (a kubeconfig error surfaces on the page)."""
        from ads_ranking_pipelines.backends import factory
        from ads_ranking_pipelines.backends.kuberay.client import RetryPolicy

        with self._lock:
            if self._backend is None:
                self._backend = factory.kuberay_backend(
                    self.settings, self.catalog, context=self.kube.context,
                    in_cluster=self.kube.in_cluster or None, poll_interval_s=0.5,
                    retry=RetryPolicy(max_attempts=2, initial_delay_s=0.2, max_delay_s=1.0))
            return self._backend

    def rows(self) -> tuple[list[ClusterRow], list[str]]:
        """Rows of the configured namespaces, or of every namespace (``all_namespaces``)."""
        scopes: tuple[str | None, ...] = (None,) if self.kube.all_namespaces else self.namespaces
        rows, notes = [], []
        for ns in scopes:
            where = f"KubeRay namespace {ns}" if ns else "KubeRay (all namespaces)"
            try:
                found = [self.row(i) for i in self.client().list_clusters(ns)]
            except Exception as exc:  # noqa: BLE001 - see the module docstring
                hint = ("; --all-namespaces needs list granted cluster-wide (the chart's "
                        "xray.crossNamespace), or list namespaces with -n instead"
                        if ns is None and "HTTP 403" in api_error(exc) else "")
                notes.append(f"{where}: {api_error(exc)}{hint}")
                continue
            rows.extend(found)
            if not any(r.extra.get("notebook_support") for r in found):
                continue
            try:
                notebooks = self.client().list_notebooks(ns)
            except Exception as exc:  # noqa: BLE001 - see the module docstring
                notes.append(f"{where}: notebooks unknown: {api_error(exc, 'Services')}")
                continue
            for row in found:
                if (row.namespace, row.name) in notebooks:
                    self.attach(row, notebooks[(row.namespace, row.name)])
        return rows, notes

    @staticmethod
    def attach(row: ClusterRow, info: NotebookInfo) -> None:
        """The notebook as everyone sees it: owner and address, no token."""
        row.notebook = Notebook(owner=info.owner, url=info.url, state="running",
                                started_at=info.started_at)
        row.extra["notebook_port_forward"] = info.port_forward

    @staticmethod
    def row(info: ClusterInfo) -> ClusterRow:
        """A RayCluster's row - or a queued RayJob's with no RayCluster yet; while Kueue holds
        it, its detail is Kueue's words, position and time queued."""
        obj = info.detail
        labels = (obj.get("metadata") or {}).get("labels") or {}
        spec = obj.get("spec") or {}
        spec = spec.get("rayClusterSpec") or {} if info.kind == "RayJob" else spec
        queue = info.queue
        detail = queue.summary() if queue else _conditions(obj.get("status") or {})
        return ClusterRow(
            name=info.name, backend="kuberay", namespace=info.namespace, owner=info.owner,
            team=labels.get(LABEL_TEAM, "?"), pool=info.pool, gpu_type=info.gpu_type,
            workers_ready=info.workers_ready, workers_desired=info.workers_desired,
            gpus_per_worker=_gpus_per_worker(spec), status=info.status,
            created_at=info.created_at, status_detail=detail,
            dashboard=info.dashboard, dagster_run_id=labels.get(LABEL_DAGSTER_RUN_ID),
            extra={"notebook_support": info.kind == "RayCluster" and has_notebook_support(obj),
                   "kind": info.kind, "queue": queue.to_json() if queue else None},
        )

    def describe(self, namespace: str, name: str) -> tuple[ClusterRow, list[dict[str, Any]]]:
        info, pods = self.client().describe_cluster(namespace, name)
        pod_rows = [{"name": p["metadata"]["name"],
                     "node_type": (p["metadata"].get("labels") or {}).get("ray.io/node-type"),
                     "phase": (p.get("status") or {}).get("phase")} for p in pods]
        return self.row(info), pod_rows

    # ---- jobs ------------------------------------------------------------------------------
    def jobs(self, namespace: str, name: str) -> list[JobRow]:
        rows = []
        for obj in self.client().list_jobs(namespace):
            labels = obj["metadata"].get("labels") or {}
            if labels.get(CLUSTER_NAME_LABEL) != name:
                continue
            status = obj.get("status") or {}
            state = job_status_from_rayjob(status)
            rows.append(JobRow(obj["metadata"]["name"], state.state.value,
                               (obj.get("spec") or {}).get("entrypoint", ""),
                               _time(status.get("startTime")), _time(status.get("endTime")),
                               state.message))
        return sorted(rows, key=lambda r: r.start_time or 0, reverse=True)

    def follow_log(self, namespace: str, job: str) -> Iterator[str]:
        return self.client().job_logs(namespace, job, follow=True)

    # ---- create / delete -------------------------------------------------------------------
    def render(self, resolved: ResolvedRequest, notebook: bool = False) -> dict[str, Any]:
        """The manifest ``create`` sends (``ads-ranking cluster render`` prints the same
        without notebook support)."""
        manifest = build_raycluster(resolved)
        return with_notebook(manifest) if notebook else manifest

    def create(self, resolved: ResolvedRequest, notebook: bool = False) -> ClusterRow:
        return self.row(self.client().create_cluster(resolved, wait=False, notebook=notebook))

    # ---- notebooks -------------------------------------------------------------------------
    def start_notebook(self, namespace: str, name: str, owner: str) -> StartedNotebook:
        return self.client().start_notebook(namespace, name, owner)

    def stop_notebook(self, namespace: str, name: str) -> bool:
        return self.client().stop_notebook(namespace, name)

    def delete(self, namespace: str, name: str) -> bool:
        return self.client().delete_cluster(namespace, name, wait=False)
