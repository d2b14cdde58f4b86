"""Warm reuse of local clusters across runs (opt-in, ``keep_warm_s``).

A keep-warm run's session first looks, under the warm lock, for a running warm cluster of the
same *match* (pool, workers, CPUs/GPUs/memory per worker, layout, code version) and takes a
lease on it (``local_warm_lease.py``); it then runs as a run on an existing cluster
(``local_borrowed.py``: pre-flight, and only its own jobs are stopped when it ends). A cluster
that fails the pre-flight is left alone and the run makes its own. With none, the run takes a
lease on the cluster it is about to make, starts it as a warm session cluster (``keep_warm_s``
and the match in its state file, a watchdog) and, when it ends, stops its own jobs and releases
its lease, leaving the cluster running.

No run ever stops a warm cluster: the GC does (``backends/gc.py`` ``warm_reason``), once no
live lease holds it and it has been idle for its ``keep_warm_s`` (the one of the run that made
it). The watchdog of a warm cluster stops nothing (``local_watchdog.py``): if the run that made
it dies, the run is reported failed and its lease, no longer live, keeps nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

from ads_ranking_pipelines.backends.base import RayBackend
from ads_ranking_pipelines.backends.local_borrowed import BorrowedLocalSession, find_target, target_problems
from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.local_warm_lease import LeaseHolder, warm_lock
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.validation import RequestError

log = logging.getLogger(__name__)


def warm_match(request: ClusterRequest, single_node: bool, code_version: str) -> dict:
    """What a warm cluster and a run must share for the run to reuse it."""
    return {"gpu_pool": request.gpu_pool, "workers": request.workers,
            "cpus_per_worker": request.worker_cpus(), "gpus_per_worker": request.gpus_per_worker,
            "memory_per_worker": request.memory_per_worker, "single_node": single_node,
            "code_version": code_version}


class WarmLocalBackend(RayBackend):
    """Sessions on a matching warm local cluster, else on a new one that is kept warm."""

    name = "local"

    def __init__(self, state_dir: str | Path, keep_warm_s: float, run_id: str, code_version: str, *,
                 lease_timeout_s: float = 60.0, start_timeout_s: float = 180.0, single_node: bool = True,
                 on_orphan: list[str] | None = None):
        self.state_dir = Path(state_dir)
        self.keep_warm_s, self.run_id, self.code_version = keep_warm_s, run_id, code_version
        self.lease_timeout_s, self.start_timeout_s = lease_timeout_s, start_timeout_s
        self.single_node = single_node
        self.on_orphan = list(on_orphan or [])
        self.reused: str | None = None      # the warm cluster the last session reused, if any

    def _take(self, match: dict, new_name: str, skip: set[str]) -> tuple[LeaseHolder, LocalRayCluster | None]:
        """A lease on a running warm cluster of ``match`` (not in ``skip``), else on ``new_name``."""
        with warm_lock(self.state_dir):
            for cluster in LocalRayCluster.list(self.state_dir):
                if (cluster.state.keep_warm_s and cluster.state.warm_match == match
                        and cluster.name not in skip and cluster.alive()):
                    return LeaseHolder(self.state_dir, cluster.name, self.run_id,
                                       self.lease_timeout_s).take(), cluster
            return LeaseHolder(self.state_dir, new_name, self.run_id, self.lease_timeout_s).take(), None

    def _fits(self, cluster: LocalRayCluster, request: ClusterRequest) -> bool:
        try:
            problems = target_problems(find_target(self.state_dir, cluster.name), request)
        except RequestError as exc:
            problems = [exc]
        for problem in problems:
            log.warning("not reusing warm cluster %s: %s", cluster.name, problem)
        return not problems

    def acquire(self, request: ClusterRequest) -> tuple[LeaseHolder, LocalRayCluster | None]:
        """A lease on a warm cluster that passes the pre-flight, else on ``request.name`` (to make)."""
        match = warm_match(request, self.single_node, self.code_version)
        skip: set[str] = set()
        while True:
            lease, cluster = self._take(match, request.name, skip)
            if cluster is None or self._fits(cluster, request):
                return lease, cluster
            lease.release()
            skip.add(cluster.name)

    @contextlib.contextmanager
    def session(self, request: ClusterRequest) -> Iterator[BorrowedLocalSession]:
        lease, cluster = self.acquire(request)
        self.reused = cluster.name if cluster is not None else None
        try:
            if cluster is None:
                cluster = LocalRayCluster.start(
                    request, self.state_dir, start_timeout_s=self.start_timeout_s, run_id=self.run_id,
                    session=True, single_node=self.single_node, on_orphan=self.on_orphan,
                    keep_warm_s=self.keep_warm_s,
                    warm_match=warm_match(request, self.single_node, self.code_version))
                lease.renew()
            else:
                log.info("reusing warm Ray cluster %s (%d s idle TTL)", cluster.name, cluster.state.keep_warm_s)
            session = BorrowedLocalSession(find_target(self.state_dir, cluster.name))
            try:
                yield session
            finally:
                session.close()     # this run's jobs; the cluster stays for the next run
        finally:
            lease.release()
