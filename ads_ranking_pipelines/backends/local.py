"""The embedded default backend: a real local Ray cluster per session, torn down on exit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ads_ranking_pipelines.backends.base import RayBackend
from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.ray_job_api import ApiSession, RayJobApi
from ads_ranking_pipelines.config.cluster import ClusterRequest


class LocalClusterSession(ApiSession):
    def __init__(self, cluster: LocalRayCluster):
        self.cluster = cluster
        self.name = cluster.name
        self.dashboard_url = cluster.state.dashboard_url
        self._api = RayJobApi(cluster.state.dashboard_url, headers=cluster.auth_headers())


class LocalRayBackend(RayBackend):
    """Starts a local Ray cluster on 127.0.0.1 for each session: one node with the CPUs of
    ``request.workers`` workers (``single_node``, the default), else a head + ``request.workers``
    worker nodes.

    ``state_dir`` holds one JSON file per running cluster so the CLI can find clusters again
    from another process. ``replace_dead_workers`` restarts worker nodes that die. A session's
    cluster records ``run_id`` (the Dagster run) and this process, and is watched by a watchdog
    process of its own (``local_watchdog.py``): if this process dies without tearing it down,
    the watchdog stops the cluster within seconds and runs ``on_orphan`` (an argv; the Dagster
    layer marks the run failed with it). The garbage collector covers a watchdog that died too.
    """

    name = "local"

    def __init__(self, state_dir: str | Path, replace_dead_workers: bool = True,
                 start_timeout_s: float = 120, run_id: str | None = None, single_node: bool = True,
                 on_orphan: list[str] | None = None):
        self.state_dir = Path(state_dir)
        self.single_node = single_node
        self.replace_dead_workers = replace_dead_workers
        self.start_timeout_s = start_timeout_s
        self.run_id = run_id
        self.on_orphan = list(on_orphan or [])

    @contextlib.contextmanager
    def session(self, request: ClusterRequest) -> Iterator[LocalClusterSession]:
        cluster = LocalRayCluster.start(request, self.state_dir, start_timeout_s=self.start_timeout_s,
                                        run_id=self.run_id, session=True, single_node=self.single_node,
                                        on_orphan=self.on_orphan)
        try:
            if self.replace_dead_workers:
                cluster.start_monitor()
            yield LocalClusterSession(cluster)
        finally:
            # The session's jobs are over (or stopped): nothing on the cluster is kept.
            cluster.stop(force=True)
