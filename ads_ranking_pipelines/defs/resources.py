"""Dagster resources: the storage root and the event source (the Ray provisioning resources are
in :mod:`.ray_resources`)."""

from __future__ import annotations

from typing import Any, Literal, Optional

import dagster as dg
from pydantic import Field, ValidationError

from ads_ranking_pipelines.config.errors import format_validation_error
from ads_ranking_pipelines.config.source import (
    SYNTHETIC_DENSE,
    SYNTHETIC_LABEL,
    SYNTHETIC_SPARSE,
    SourceConfig,
    SyntheticSpec,
)
from ads_ranking_pipelines.storage.layout import StorageLayout

_SYN = SyntheticSpec()


class StorageResource(dg.ConfigurableResource):
    """Everything lives under one root URI (local path, s3://, gs://)."""

    home: str = Field(description="Storage root (ADS_RANKING_HOME).")

    def layout(self) -> StorageLayout:
        return StorageLayout(self.home)


class EventSourceResource(dg.ConfigurableResource):
    """Where impression events live and which columns are label / dense / sparse."""

    kind: Literal["synthetic", "parquet"] = "synthetic"
    uri: Optional[str] = Field(None, description="Root holding event_date=YYYY-MM-DD/ folders.")
    label_column: str = SYNTHETIC_LABEL
    dense_columns: list[str] = Field(default_factory=lambda: list(SYNTHETIC_DENSE))
    sparse_columns: list[str] = Field(default_factory=lambda: list(SYNTHETIC_SPARSE))
    synthetic_rows_per_day: int = _SYN.rows_per_day
    synthetic_seed: int = _SYN.seed
    synthetic_num_users: int = _SYN.num_users
    synthetic_num_ads: int = _SYN.num_ads

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
        }

    def source_config(self, home: str) -> SourceConfig:
        try:
            source = SourceConfig(
                kind=self.kind, uri=self.uri, label_column=self.label_column,
                dense_columns=tuple(self.dense_columns), sparse_columns=tuple(self.sparse_columns),
                synthetic=SyntheticSpec(rows_per_day=self.synthetic_rows_per_day, seed=self.synthetic_seed,
                                        num_users=self.synthetic_num_users, num_ads=self.synthetic_num_ads),
            )
        except ValidationError as exc:
            raise dg.Failure(description=format_validation_error(exc, SourceConfig, prefix="source."),
                             allow_retries=False) from None
        return source.with_root(StorageLayout(home).root)
