"""Local Ray clusters (the local backend): found through their state files, started in the
background from the create form, stopped by PID through ``LocalRayCluster.stop``.

Clusters this server started are kept in memory so that their node processes (children of
this process) are reaped when they are deleted; others are found again from their state
file, exactly as ``ads-ranking cluster delete`` does.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from dataclasses import dataclass

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.local_summary import summarize
from ads_ranking_pipelines.config.cluster import ClusterRequest

from ads_ranking_pipelines.xray.rows import ClusterRow

log = logging.getLogger(__name__)


@dataclass
class Starting:
    request: ClusterRequest
    started_at: dt.datetime
    error: str | None = None


class LocalSource:
    backend = "local"

    def __init__(self, state_dir: str, start_timeout_s: float = 900.0, single_node: bool = True) -> None:
        # 900 s: the default of `ads-ranking cluster create --timeout`.
        self.state_dir = state_dir
        self.single_node = single_node
        self.start_timeout_s = start_timeout_s
        self._lock = threading.Lock()
        self._started: dict[str, LocalRayCluster] = {}
        self._starting: dict[str, Starting] = {}

    # ---- reading ---------------------------------------------------------------------------
    def clusters(self) -> list[LocalRayCluster]:
        return LocalRayCluster.list(self.state_dir)

    def find(self, name: str) -> LocalRayCluster | None:
        with self._lock:
            if name in self._started:
                return self._started[name]
        return LocalRayCluster.find(name, self.state_dir)

    def rows(self) -> list[ClusterRow]:
        rows = {c.name: self.row(c) for c in self.clusters()}
        with self._lock:
            starting = dict(self._starting)
        for name, s in starting.items():
            if name in rows and s.error is None:
                rows[name].status = "starting"
            elif name not in rows:
                rows[name] = self._starting_row(s)
        return sorted(rows.values(), key=lambda r: r.name)

    def row(self, cluster: LocalRayCluster) -> ClusterRow:
        s = summarize(cluster)
        request, alive = s.request, s.alive
        return ClusterRow(
            name=cluster.name, backend="local", owner=cluster.state.owner, team=request.team,
            pool=request.gpu_pool, gpu_type="none", workers_ready=s.workers_ready,
            workers_desired=request.workers, gpus_per_worker=request.gpus_per_worker,
            status=s.status, created_at=s.created_at,
            status_detail="head process alive" if alive else "head process gone (stale state file)",
            dashboard=cluster.state.dashboard_url,
            dagster_run_id=getattr(cluster.state, "run_id", "") or None,
            extra={"head_pid": cluster.state.head_pid, "worker_pids": cluster.state.worker_pids,
                   "gcs_address": cluster.state.gcs_address,
                   "token_file": str(cluster.token_file)},
        )

    @staticmethod
    def _starting_row(s: Starting) -> ClusterRow:
        r = s.request
        return ClusterRow(
            name=r.name, backend="local", owner=r.owner, team=r.team, pool=r.gpu_pool,
            gpu_type="none", workers_ready=None, workers_desired=r.workers,
            gpus_per_worker=r.gpus_per_worker, status="failed" if s.error else "starting",
            created_at=s.started_at, status_detail=s.error or "starting Ray nodes",
        )

    # ---- create / delete -------------------------------------------------------------------
    def name_taken(self, name: str) -> bool:
        with self._lock:
            if name in self._starting and self._starting[name].error is None:
                return True
        existing = LocalRayCluster.find(name, self.state_dir)
        return existing is not None and existing.alive()

    def create(self, request: ClusterRequest) -> None:
        """Start the cluster in the background (a head and its workers take ~10-40 s)."""
        with self._lock:
            self._starting[request.name] = Starting(request, dt.datetime.now(dt.timezone.utc))
        threading.Thread(target=self._start, args=(request,), daemon=True,
                         name=f"xray-start-{request.name}").start()

    def _start(self, request: ClusterRequest) -> None:
        try:
            cluster = LocalRayCluster.start(request, self.state_dir, start_timeout_s=self.start_timeout_s,
                                            single_node=self.single_node)
        except (BackendError, OSError) as exc:
            log.warning("local cluster %s did not start: %s", request.name, exc)
            with self._lock:
                self._starting[request.name].error = str(exc)
            return
        with self._lock:
            self._started[request.name] = cluster
            self._starting.pop(request.name, None)

    def delete(self, name: str) -> bool:
        """Stop the cluster's processes (by PID) and remove its files; False if unknown."""
        with self._lock:
            self._starting.pop(name, None)
            cluster = self._started.pop(name, None)
        cluster = cluster or LocalRayCluster.find(name, self.state_dir)
        if cluster is None:
            return False
        cluster.stop()
        return True

    def close(self) -> None:
        """Nothing to do: clusters outlive the server, like those of ``cluster create``."""
