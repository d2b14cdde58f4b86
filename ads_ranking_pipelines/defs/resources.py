"""Dagster resources: the storage root and the event source (the Ray provisioning resources are
in :mod:`.ray_resources`)."""

from __future__ import annotations

from typing import Any, Literal, Optional

import dagster as dg
from pydantic import Field, ValidationError, create_model

from ads_ranking_pipelines.config.errors import format_validation_error
from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
from ads_ranking_pipelines.defs.config import launchpad_fields
from ads_ranking_pipelines.storage.layout import StorageLayout

# The synthetic generator's knobs as a nested config block (``synthetic: {rows_per_day: ...}``).
SyntheticConfig = create_model("SyntheticConfig", __base__=dg.Config, __module__=__name__,
                               **launchpad_fields(SyntheticSpec))


class StorageResource(dg.ConfigurableResource):
    """Everything lives under one root URI (local path, s3://, gs://)."""

    home: str = Field(description="Storage root (ADS_RANKING_HOME).")

    def layout(self) -> StorageLayout:
        return StorageLayout(self.home)


class EventSourceResource(dg.ConfigurableResource):
    """Where impression events live and which columns are label / dense / sparse: the fields of
    :class:`~ads_ranking_pipelines.config.source.SourceConfig`, in its shape (unset: its default,
    e.g. a file kind's fixed columns), validated by it in :meth:`source_config`."""

    kind: Literal["synthetic", "parquet", "criteo_tsv", "avazu_csv"] = "synthetic"
    uri: Optional[str] = Field(None, description="parquet: root holding event_date=YYYY-MM-DD/ folders; "
                               "criteo_tsv/avazu_csv: the file(s), comma separated.")
    label_column: Optional[str] = Field(None, description="Unset: the kind's (synthetic, criteo_tsv, avazu_csv).")
    dense_columns: Optional[list[str]] = Field(None, description="Unset: the kind's.")
    sparse_columns: Optional[list[str]] = Field(None, description="Unset: the kind's.")
    synthetic: SyntheticConfig = Field(default_factory=SyntheticConfig)  # type: ignore[valid-type]
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
        return source.model_dump(mode="json", exclude_none=True)

    def source_config(self, home: str) -> SourceConfig:
        try:
            source = SourceConfig.model_validate(self.model_dump(exclude_none=True))
        except ValidationError as exc:
            raise dg.Failure(description=format_validation_error(exc, SourceConfig, prefix="source."),
                             allow_retries=False) from None
        return source.with_root(StorageLayout(home).root)
