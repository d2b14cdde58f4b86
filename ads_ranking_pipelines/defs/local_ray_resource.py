"""The embedded default's provisioning resource: a real Ray cluster on this machine, made for
the run (or a warm one kept for the next runs, or an existing one the run borrows)."""

from __future__ import annotations

import contextlib
import os
from typing import Any, ClassVar, Optional

from pydantic import Field

from ads_ranking_pipelines.backends import factory
from ads_ranking_pipelines.backends.base import RayBackend
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.pools import PoolCatalog
from ads_ranking_pipelines.config.settings import Settings
from ads_ranking_pipelines.config.validation import RequestError, ResolvedRequest
from ads_ranking_pipelines.defs.ray_resources import RayClusterResource


class LocalRayResource(RayClusterResource):
    """A real multi-node Ray cluster on this machine (the embedded default)."""

    state_dir: str = Field(description="Where running local clusters are recorded.")
    start_timeout_s: float = 180.0
    ray_address: Optional[str] = Field(
        None, description="Run on the Ray cluster whose dashboard is here (http://HOST:8265, e.g. "
        "one of `ray start --head`, without token auth) instead of creating one; capacity is "
        "checked, its pool is not known. For a cluster of ours use existing_cluster.")
    keep_warm_s: Optional[float] = Field(
        None, gt=0, description="Keep warm: reuse a running warm cluster made for the same request "
        "(pool, workers, CPUs/GPUs/memory per worker, code version) by a run that kept it warm too, "
        "else make one; when the run ends its cluster keeps running, and the GC stops it once no "
        "run holds it and it has been idle this many seconds. None: the run's own cluster, deleted "
        "when it ends.")

    backend_name: ClassVar[str] = "local"

    def provision_note(self) -> str:
        if not self.keep_warm_s:
            return ""
        return f" (or a matching warm one; kept warm {self.keep_warm_s:g}s idle after the last run)"

    @contextlib.contextmanager
    def open_session(self, backend: RayBackend, resolved: ResolvedRequest) -> Any:
        with backend.session(self.backend_request(resolved)) as session:
            reused = getattr(backend, "reused", None)
            if reused and self._log is not None:
                self._log.info(f"reusing the warm Ray cluster {reused} (a lease of this run holds it; "
                               "the run does not delete it)")
            yield session

    def borrowed(self) -> str | None:
        return self.existing_cluster or self.ray_address

    def awaits_driver_exit(self) -> bool:
        """Not on the run's own cluster: stopping it right after kills the driver with it
        (seconds of the driver's shutdown saved); on a borrowed or warm cluster, yes."""
        return self.borrowed() is not None or bool(self.keep_warm_s)

    def target(self) -> Any:
        from ads_ranking_pipelines.backends.local_borrowed import find_target

        return find_target(self.state_dir, self.existing_cluster, None if self.existing_cluster else self.ray_address)

    def target_problems(self, request: ClusterRequest) -> list[RequestError]:
        from ads_ranking_pipelines.backends.local_borrowed import target_problems

        if self.existing_cluster and self.ray_address:
            return [RequestError("ray_address", self.ray_address, "unset when existing_cluster is set",
                                 f"existing_cluster={self.existing_cluster!r} names the cluster already")]
        if self.keep_warm_s:
            return [RequestError("keep_warm_s", self.keep_warm_s, "unset on a run on an existing cluster",
                                 f"the run does not own {self.borrowed()!r}, so it cannot keep it warm")]
        return target_problems(self.target(), request)

    def make_backend(self, run_id: str | None = None,
                     code_location: str | None = None) -> RayBackend:
        if self.borrowed() is not None:
            from ads_ranking_pipelines.backends.local_borrowed import BorrowedLocalBackend

            return BorrowedLocalBackend(self.target())
        if self.keep_warm_s:
            import uuid

            from ads_ranking_pipelines.version import code_version

            return factory.warm_local_backend(self.settings(), self.keep_warm_s, run_id or str(uuid.uuid4()),
                                              code_version(os.environ), start_timeout_s=self.start_timeout_s,
                                              on_orphan=self.orphan_command(run_id))
        return factory.local_backend(self.settings(), start_timeout_s=self.start_timeout_s,
                                     run_id=run_id, on_orphan=self.orphan_command(run_id))

    def settings(self) -> Settings:
        return Settings(home="", pool_catalog=self.pool_catalog, state_dir=self.state_dir,
                        controller_timeout_s=self.controller_timeout_s)

    def resolve(self, request: ClusterRequest, catalog: PoolCatalog) -> ResolvedRequest:
        return factory.local_request(request, catalog)

    def backend_request(self, resolved: ResolvedRequest) -> Any:
        return resolved.request
