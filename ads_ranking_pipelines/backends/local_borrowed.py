"""A run on a local Ray cluster it did not create: one of ours by name (``cluster create
--backend local``: its state file has the dashboard and the auth token) or a foreign one by
its dashboard address (``ray start --head``, no token auth).

Pre-flight (:func:`target_problems`): the cluster runs, its Ray nodes hold the run's workers
(CPUs/GPUs per node, from the state API) and, for one of ours, its pool is the run's. The
session submits the run's jobs to it and, when it ends, stops those of its jobs still running
(and waits for them): it never stops the cluster, adds or removes nodes. No watchdog watches
such a run (the local watchdog stops a session's own cluster): if the run's process dies, its
jobs stop themselves through the run's controller lease (``ray_jobs/lease_watch.py``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import requests

from ads_ranking_pipelines.backends.base import JobSpec, RayBackend
from ads_ranking_pipelines.backends.capacity import NodeSize, capacity_problem
from ads_ranking_pipelines.backends.local_cluster import LocalRayCluster
from ads_ranking_pipelines.backends.ray_job_api import ApiSession, RayJobApi
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.validation import RequestError

log = logging.getLogger(__name__)
STOP_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class LocalTarget:
    """Where a borrowed local cluster is: its name (ours) or address (foreign)."""

    name: str
    dashboard_url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    pool: str | None = None          # ours: the pool it was created for; foreign: unknown


def find_target(state_dir: str | Path, name: str | None = None, address: str | None = None) -> LocalTarget:
    """The cluster named ``name`` in ``state_dir`` (running), else the one at ``address``;
    ``RequestError`` naming the running clusters otherwise."""
    if address:
        url = address if "://" in address else f"http://{address}"
        return LocalTarget(name=url, dashboard_url=url.rstrip("/"))
    cluster = LocalRayCluster.find(name or "", state_dir)
    if cluster is None or not cluster.alive():
        running = [c.name for c in LocalRayCluster.list(state_dir) if c.alive()]
        reason = "no such local Ray cluster" if cluster is None else "its head node is not running"
        raise RequestError("existing_cluster", name,
                           f"a running local cluster ({', '.join(running) or 'none'} in {state_dir}), "
                           "or ray_address for a cluster started otherwise", reason)
    return LocalTarget(name=cluster.name, dashboard_url=cluster.state.dashboard_url,
                       headers=cluster.auth_headers(), pool=cluster.request.gpu_pool)


def ray_nodes(target: LocalTarget, timeout_s: float = 10.0) -> list[NodeSize]:
    """The live Ray nodes' CPUs and GPUs (the state API, which asks the GCS)."""
    r = requests.get(f"{target.dashboard_url}/api/v0/nodes", params={"detail": "true", "limit": 10000},
                     headers=target.headers, timeout=timeout_s)
    r.raise_for_status()
    nodes = r.json()["data"]["result"]["result"]
    return [NodeSize(float((n.get("resources_total") or {}).get("CPU", 0.0)),
                     float((n.get("resources_total") or {}).get("GPU", 0.0)))
            for n in nodes if n.get("state") == "ALIVE"]


def target_problems(target: LocalTarget, request: ClusterRequest) -> list[RequestError]:
    """Everything that keeps ``request``'s run off ``target`` (empty: it fits)."""
    where = f"local Ray cluster {target.name}"
    try:
        nodes = ray_nodes(target)
    except (requests.RequestException, KeyError, ValueError) as exc:
        field_name = "ray_address" if target.pool is None else "existing_cluster"
        return [RequestError(field_name, target.name, "the dashboard address of a running Ray cluster "
                             "(http://HOST:8265) without token auth, or one of ours by name",
                             f"its dashboard did not answer ({type(exc).__name__}: {exc})")]
    problems = []
    if target.pool is not None and target.pool != request.gpu_pool:
        problems.append(RequestError("gpu_pool", request.gpu_pool, target.pool,
                                     f"{where} was created for pool {target.pool!r}"))
    problem = capacity_problem(where, nodes, request)
    if problem is not None:
        problems.append(problem)
    return problems


class BorrowedLocalSession(ApiSession):
    """The run's jobs on a cluster it borrowed; :meth:`close` stops those still running."""

    def __init__(self, target: LocalTarget, api: RayJobApi | None = None):
        self.target = target
        self.name = target.name
        self.dashboard_url = target.dashboard_url
        self._api = api or RayJobApi(target.dashboard_url, headers=target.headers)
        self._lock = threading.Lock()
        self.submitted: list[str] = []

    def submit(self, job: JobSpec) -> str:
        with self._lock:   # recorded first: an interrupted submit may still have reached Ray
            self.submitted.append(job.submission_id)
        return self._api.submit(job)

    def close(self, timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
        """Stop this session's jobs that are not over and wait until they are; the ids of
        those that did not end in time (logged)."""
        with self._lock:
            ours = list(self.submitted)
        running = [j for j in ours if not self._terminal(j)]
        for job_id in running:
            self._api.stop(job_id)
        deadline = time.monotonic() + timeout_s
        while running and time.monotonic() < deadline:
            time.sleep(0.2)
            running = [j for j in running if not self._terminal(j)]
        if running:
            log.error("Ray jobs %s on %s did not stop within %.0fs", running, self.name, timeout_s)
        return running

    def _terminal(self, job_id: str) -> bool:
        try:
            return self._api.status(job_id).state.terminal
        except Exception:     # never submitted (Ray: "does not exist"), or the cluster is gone
            return True


class BorrowedLocalBackend(RayBackend):
    """Sessions on one existing local cluster (``target``): nothing is started or stopped but
    the session's own jobs."""

    name = "local"

    def __init__(self, target: LocalTarget):
        self.target = target

    @contextlib.contextmanager
    def session(self, request: ClusterRequest) -> Iterator[BorrowedLocalSession]:
        session = BorrowedLocalSession(self.target)
        try:
            yield session
        finally:
            session.close()
