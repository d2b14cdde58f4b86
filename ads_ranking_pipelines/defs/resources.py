"""Dagster resources: storage root, event source, and the shared Ray provisioning resource."""

from __future__ import annotations

import contextlib
import sys
from typing import Any, Literal, Optional

import dagster as dg
from pydantic import Field, PrivateAttr, ValidationError

from ads_ranking_pipelines.backends.base import ClusterSession, RayBackend
from ads_ranking_pipelines.config.cluster import ClusterRequest
from ads_ranking_pipelines.config.errors import format_validation_error
from ads_ranking_pipelines.config.pools import PoolCatalog, UnknownPoolError, load_catalog
from ads_ranking_pipelines.config.source import (
    SYNTHETIC_DENSE,
    SYNTHETIC_LABEL,
    SYNTHETIC_SPARSE,
    SourceConfig,
    SyntheticSpec,
)
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.config.validation import RequestError, validate_request
from ads_ranking_pipelines.storage.layout import StorageLayout

_SYN = SyntheticSpec()


class StorageResource(dg.ConfigurableResource):
    """Everything lives under one root URI (local path, s3://, gs://)."""

    home: str = Field(description="Storage root (ADS_RANKING_HOME).")

    def layout(self) -> StorageLayout:
        return StorageLayout(self.home)


class EventSourceResource(dg.ConfigurableResource):
    """Where impression events live and which columns are label / dense / sparse."""

    kind: Literal["synthetic", "parquet", "criteo_tsv", "avazu_csv"] = "synthetic"
    uri: Optional[str] = Field(None, description="parquet: root holding event_date=YYYY-MM-DD/ folders; "
                               "criteo_tsv/avazu_csv: the file(s), comma separated.")
    label_column: str = SYNTHETIC_LABEL
    dense_columns: list[str] = Field(default_factory=lambda: list(SYNTHETIC_DENSE))
    sparse_columns: list[str] = Field(default_factory=lambda: list(SYNTHETIC_SPARSE))
    synthetic_rows_per_day: int = _SYN.rows_per_day
    synthetic_seed: int = _SYN.seed
    synthetic_num_users: int = _SYN.num_users
    synthetic_num_ads: int = _SYN.num_ads
    completeness: Literal["success_marker", "none"] = "success_marker"
    start_date: Optional[str] = Field(None, description="criteo_tsv/avazu_csv: day of the first rows.")
    rows_per_day: Optional[int] = Field(None, description="criteo_tsv/avazu_csv: rows per day, in file order.")
    events_uri: Optional[str] = Field(None, description="criteo_tsv/avazu_csv: where imported days go.")
    max_bad_rows: int = 0
    features: dict[str, dict[str, int]] = Field(default_factory=dict,
                                                description="Per sparse column: hash_buckets, embedding_dim.")

    @classmethod
    def from_source(cls, source: SourceConfig) -> dict[str, Any]:
        """Resource config (a dict for run config) describing ``source``."""
        return {
            "kind": source.kind, "uri": source.uri, "label_column": source.label_column,
            "dense_columns": list(source.dense_columns), "sparse_columns": list(source.sparse_columns),
            "synthetic_rows_per_day": source.synthetic.rows_per_day,
            "synthetic_seed": source.synthetic.seed,
            "synthetic_num_users": source.synthetic.num_users,
            "synthetic_num_ads": source.synthetic.num_ads,
            **_file_source_fields(source),
        }

    def source_config(self, home: str) -> SourceConfig:
        try:
            source = SourceConfig(
                kind=self.kind, uri=self.uri, label_column=self.label_column,
                dense_columns=tuple(self.dense_columns), sparse_columns=tuple(self.sparse_columns),
                synthetic=SyntheticSpec(rows_per_day=self.synthetic_rows_per_day, seed=self.synthetic_seed,
                                        num_users=self.synthetic_num_users, num_ads=self.synthetic_num_ads),
                completeness=self.completeness, start_date=self.start_date, rows_per_day=self.rows_per_day,
                events_uri=self.events_uri, max_bad_rows=self.max_bad_rows, features=self.features,
            )
        except ValidationError as exc:
            raise dg.Failure(description=format_validation_error(exc, SourceConfig, prefix="source."),
                             allow_retries=False) from None
        return source.with_root(StorageLayout(home).root)


def _file_source_fields(source: SourceConfig) -> dict[str, Any]:
    return {
        "completeness": source.completeness,
        "start_date": source.start_date.isoformat() if source.start_date else None,
        "rows_per_day": source.rows_per_day, "events_uri": source.events_uri,
        "max_bad_rows": source.max_bad_rows,
        "features": {k: v.model_dump(exclude_none=True) for k, v in source.features.items()},
    }


class RayClusterResource(dg.ConfigurableResource):
    """The one provisioning resource: a local Ray cluster (default) or KubeRay RayJobs.

    One cluster session serves every step of a run executed in one process; it is torn down
    when the run ends, fails or is cancelled.
    """

    backend: Literal["local", "kuberay"] = "local"
    pool_catalog: Optional[str] = Field(None, description="Pool catalog YAML; default: the shipped one.")
    state_dir: str = Field(description="Local backend: where running clusters are recorded.")
    start_timeout_s: float = 180.0
    job_python: Optional[str] = Field(None, description="Python of the job entrypoint; default: this "
                                      "interpreter (local) or `python` in the image (kuberay).")
    # KubeRay
    namespace: str = "ads-ranking"
    service_account: str = "ray-workloads"
    image: Optional[str] = Field(None, description="Ray image with this package installed; default: "
                                 "rayproject/ray:2.60.0-py311-cpu, or -gpu when workers get GPUs.")
    kube_context: Optional[str] = None
    kube_config_file: Optional[str] = Field(None, description="kubeconfig path; default: $KUBECONFIG or ~/.kube/config.")
    in_cluster: bool = False
    ready_timeout_s: float = 900.0

    _stack: Any = PrivateAttr(default=None)
    _session: Any = PrivateAttr(default=None)
    _request: Any = PrivateAttr(default=None)

    # ---- building blocks -------------------------------------------------------------------
    def catalog(self) -> PoolCatalog:
        return load_catalog(self.pool_catalog)

    def python(self) -> str:
        if self.job_python:
            return self.job_python
        return sys.executable if self.backend == "local" else "python"

    def make_backend(self, run_id: str | None = None, code_location: str | None = None) -> RayBackend:
        if self.backend == "local":
            from ads_ranking_pipelines.backends.local import LocalRayBackend

            return LocalRayBackend(self.state_dir, start_timeout_s=self.start_timeout_s)
        from ads_ranking_pipelines.backends.kuberay import KubeRayBackend

        return KubeRayBackend.from_kube_config(
            self.catalog(), in_cluster=self.in_cluster, context=self.kube_context,
            config_file=self.kube_config_file, namespace=self.namespace,
            ready_timeout_s=self.ready_timeout_s, run_id=run_id, code_location=code_location,
        )

    def cluster_request(self, params: TrainingParams, run_id: str) -> ClusterRequest:
        """The request for a run's cluster, validated against the pool catalog (dg.Failure if not)."""
        catalog = self.catalog()
        try:
            pool = catalog.get(params.gpu_pool)
        except UnknownPoolError as exc:
            raise dg.Failure(description=f"invalid gpu_pool={params.gpu_pool!r}: unknown pool; "
                             f"valid: {', '.join(catalog.names())}", allow_retries=False) from exc
        if self.backend == "local" and (pool.has_gpus or params.gpus_per_worker):
            raise dg.Failure(description=(
                f"invalid gpu_pool={params.gpu_pool!r} / gpus_per_worker={params.gpus_per_worker}: the local "
                "backend has no GPUs; use a CPU pool (e.g. 'local') with gpus_per_worker=0, or backend 'kuberay'"),
                allow_retries=False)
        fields: dict[str, Any] = dict(
            name=f"arp-{run_id[:8]}", owner="dagster", gpu_pool=params.gpu_pool,
            workers=params.num_workers, gpus_per_worker=params.gpus_per_worker,
            cpus_per_worker=params.cpus_per_worker, namespace=self.namespace,
            service_account=self.service_account,
        )
        if self.backend == "kuberay":
            fields["image"] = self.image or (
                f"rayproject/ray:2.60.0-py311-{'gpu' if params.gpus_per_worker else 'cpu'}")
        try:
            request = ClusterRequest(**fields)
            validate_request(request, catalog)
        except ValidationError as exc:
            raise dg.Failure(description=format_validation_error(exc, ClusterRequest, prefix="cluster."),
                             allow_retries=False) from None
        except RequestError as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from None
        return request

    # ---- lifecycle -------------------------------------------------------------------------
    def session(self, request: ClusterRequest, log: Any = None, run_id: str | None = None,
                code_location: str | None = None) -> ClusterSession:
        """The run's cluster session, provisioned on first use and kept for later steps."""
        if self._session is not None:
            if request.workers > self._request.workers:
                raise dg.Failure(description=f"this run's cluster has {self._request.workers} worker(s); "
                                 f"{request.workers} were asked for")
            return self._session
        stack = contextlib.ExitStack()
        if log is not None:
            log.info(f"provisioning Ray cluster {request.name} on backend {self.backend!r}: "
                     f"{request.workers} worker(s) in pool {request.gpu_pool!r}")
        session = stack.enter_context(self.make_backend(run_id, code_location).session(request))
        self._stack, self._session, self._request = stack, session, request
        if log is not None:
            log.info(f"Ray cluster {request.name} ready; dashboard {session.dashboard_url}")
        return session

    def close(self) -> None:
        stack, self._stack, self._session, self._request = self._stack, None, None, None
        if stack is not None:
            stack.close()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        self.close()
