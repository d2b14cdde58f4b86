"""A local cluster that already runs, for the tests whose runs borrow one (``existing_cluster``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.config.cluster import ClusterRequest


@contextlib.contextmanager
def existing_local_cluster(name: str, workers: int, state_dir: Path) -> Iterator[LocalRayCluster]:
    """One node holding ``workers`` 1-CPU workers, as ``cluster create --backend local`` makes
    it, recorded under ``state_dir``; stopped when the block ends."""
    cluster = LocalRayCluster.start(ClusterRequest(name=name, owner="team", workers=workers), state_dir,
                                    single_node=True)
    try:
        yield cluster
    finally:
        cluster.stop(force=True)
