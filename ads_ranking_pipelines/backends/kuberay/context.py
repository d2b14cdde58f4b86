"""What every KubeRay operation shares: one client, the pool catalog, the labels stamped on
what we create, and the timing of waits (poll interval, timeouts, grace periods).

The RayJob and RayCluster operations (:mod:`.rayjobs`, :mod:`.clusters`), the session and the
log follower each hold one :class:`KubeRayContext`; none reaches into another's privates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ads_ranking_pipelines.backends.base import BackendError
from ads_ranking_pipelines.backends.kuberay import calls
from ads_ranking_pipelines.backends.kuberay.client import KubeRayClient
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import PoolCatalog
from ads_ranking_pipelines.config.validation import ResolvedRequest, resolve_request

StatusCallback = Callable[[str, Mapping[str, Any]], None]
T = TypeVar("T")


@dataclass
class KubeRayContext:
    """``namespace`` overrides a request's namespace. ``labels``/``run_id``/``code_location``
    go on every object created. ``on_status(name, status)`` is called on every poll while
    waiting (an exception raised there aborts the wait; the caller cleans up).

    ``replica_failure_grace_s``: how long a RayCluster ``ReplicaFailure`` condition may stay
    before the wait fails with its words (KubeRay retries pod creation every reconcile and
    drops the condition once a create succeeds: a quota held by the previous job's Terminating
    pods frees itself). ``unschedulable_grace_s``: how long a Ray pod may stay unschedulable,
    with no node coming for it (cluster-autoscaler ``TriggeredScaleUp``, Karpenter
    ``Nominated``), before the wait fails with the scheduler's words. ``rayjob_deletion``: how the operator cleans up after a RayJob,
    ``rules`` (KubeRay's deletion rules; the ``RayJobDeletionPolicy`` gate, on by default in
    v1.7) or ``shutdown`` (``shutdownAfterJobFinishes``: only the cluster goes; our garbage
    collector removes the RayJob) - see :func:`~ads_ranking_pipelines.kuberay.rayjob.cleanup_fields`.
    ``py_modules``: remote zips (development mode, ``devmode.package_zip``) put first on every
    job's Python path, over the package in the image. ``queue_wait_limit_s``: how long a
    RayJob on a Kueue pool may wait for admission (suspended, QUEUED) before the submit fails
    with Kueue's words and the RayJob is deleted (None: no limit); ``on_queue(text)`` hears
    Kueue's words each time they change (the Dagster run's log).
    """

    client: KubeRayClient
    catalog: PoolCatalog
    namespace: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    run_id: str | None = None
    code_location: str | None = None
    ready_timeout_s: float = 900.0
    poll_interval_s: float = 2.0
    teardown_timeout_s: float = 300.0
    replica_failure_grace_s: float = 120.0
    unschedulable_grace_s: float = 60.0
    rayjob_deletion: str = "rules"
    py_modules: tuple[str, ...] = ()
    on_status: StatusCallback | None = None
    queue_wait_limit_s: float | None = 12 * 3600.0
    on_queue: Callable[[str], None] | None = None
    sleep: Callable[[float], None] = time.sleep

    def resolve(self, request: ClusterRequest | ResolvedRequest) -> ResolvedRequest:
        """``request`` in this backend's namespace, completed and checked against the catalog
        once (an already resolved request is not checked again)."""
        if isinstance(request, ResolvedRequest):
            return request.in_namespace(self.namespace) if self.namespace else request
        if self.namespace and self.namespace != request.namespace:
            request = request.model_copy(update={"namespace": self.namespace})
        return resolve_request(request, self.catalog)

    def notify(self, name: str, status: Mapping[str, Any]) -> None:
        if self.on_status is not None:
            self.on_status(name, status)

    def poll_status(self, plural: str, namespace: str, name: str, timeout_s: float | None,
                    ready: Callable[[dict[str, Any], dict[str, Any]], T | None],
                    late: Callable[[dict[str, Any], float], str]) -> T:
        """Read the object's status every ``poll_interval_s`` (telling ``on_status``) until
        ``ready(obj, status)`` returns a value (it raises on a failure); BackendError with
        ``late(status, timeout_s)`` once ``timeout_s`` (default ``ready_timeout_s``) is over."""
        timeout_s = self.ready_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        while True:
            obj = calls.read_status(self.client, plural, namespace, name,
                                    missing="disappeared while starting")
            status = obj.get("status") or {}
            self.notify(name, status)
            done = ready(obj, status)
            if done is not None:
                return done
            if time.monotonic() >= deadline:
                raise BackendError(late(status, timeout_s))
            self.sleep(self.poll_interval_s)

    def await_deleted(self, plural: str, namespace: str, name: str,
                      what: str | None = None) -> None:
        calls.await_deleted(self.client, plural, namespace, name, what=what,
                            timeout_s=self.teardown_timeout_s,
                            poll_interval_s=self.poll_interval_s)
