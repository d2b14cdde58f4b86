"""What one local cluster's state file and processes say about it, read once for every view
(the CLI's ``cluster list/get`` and X-Ray's table)."""

from __future__ import annotations

import contextlib
import datetime as dt
from dataclasses import dataclass

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.config.cluster import ClusterRequest


@dataclass(frozen=True)
class LocalSummary:
    request: ClusterRequest
    alive: bool                      # the head process runs
    workers_ready: int | None        # live worker nodes per the dashboard (None: not asked / no answer);
                                     # on a single node, its workers while the node is alive
    created_at: dt.datetime | None

    @property
    def status(self) -> str:
        return "running" if self.alive else "dead"


def summarize(cluster: LocalRayCluster, probe: bool = True) -> LocalSummary:
    """``probe``: ask the cluster's dashboard how many worker nodes are alive."""
    alive = cluster.alive()
    ready = None
    if alive and probe:
        with contextlib.suppress(Exception):
            nodes = cluster.alive_nodes()
            ready = (cluster.request.workers if nodes else 0) if cluster.state.single_node else max(0, nodes - 1)
    created = None
    with contextlib.suppress(ValueError):
        created = dt.datetime.fromisoformat(cluster.state.created_at)
    return LocalSummary(cluster.request, alive, ready, created)
