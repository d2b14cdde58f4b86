"""Where a day's impression events live and which columns mean what."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

SYNTHETIC_LABEL = "clicked"
SYNTHETIC_DENSE = tuple(f"dense_{i}" for i in range(8))
SYNTHETIC_SPARSE = (
    "user_id", "ad_id", "campaign_id", "advertiser_id", "quest_category",
    "placement", "device_type", "country", "hour_of_day",
)


class SyntheticSpec(BaseModel):
    """Knobs of the synthetic impression generator (ignored for parquet sources)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rows_per_day: int = Field(50_000, ge=100, le=50_000_000)
    seed: int = Field(7, ge=0, le=2**31 - 1)
    num_users: int = Field(100_000, ge=10, le=10_000_000)
    num_ads: int = Field(20_000, ge=10, le=10_000_000)


class SourceConfig(BaseModel):
    """The event source. ``uri`` is the root holding ``event_date=YYYY-MM-DD/`` folders.

    For ``kind: synthetic`` the column names are fixed by the generator and ``uri`` defaults
    to ``<ADS_RANKING_HOME>/events/synthetic``; for ``kind: parquet`` ``uri`` and the column
    lists are required, and any column names work.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["synthetic", "parquet"] = "synthetic"
    uri: str | None = Field(None, description="Root URI (local path, file://, s3://, gs://).")
    label_column: str = SYNTHETIC_LABEL
    dense_columns: tuple[str, ...] = SYNTHETIC_DENSE
    sparse_columns: tuple[str, ...] = SYNTHETIC_SPARSE
    synthetic: SyntheticSpec = SyntheticSpec()

    @model_validator(mode="after")
    def _check(self) -> "SourceConfig":
        if self.kind == "parquet" and not self.uri:
            raise ValueError("source.uri is required when source.kind is 'parquet'")
        if self.kind == "synthetic" and (
            self.label_column != SYNTHETIC_LABEL
            or tuple(self.dense_columns) != SYNTHETIC_DENSE
            or tuple(self.sparse_columns) != SYNTHETIC_SPARSE
        ):
            raise ValueError(
                "a synthetic source has fixed columns; set kind: parquet to name your own "
                f"(synthetic label={SYNTHETIC_LABEL!r}, dense={list(SYNTHETIC_DENSE)}, "
                f"sparse={list(SYNTHETIC_SPARSE)})"
            )
        if not self.sparse_columns and not self.dense_columns:
            raise ValueError("source needs at least one dense or sparse column")
        names = [self.label_column, *self.dense_columns, *self.sparse_columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"a column may play one role only; repeated: {dupes}")
        return self

    @property
    def feature_columns(self) -> list[str]:
        return [*self.dense_columns, *self.sparse_columns]

    def with_root(self, home_uri: str) -> "SourceConfig":
        """Fill in the default location of synthetic events under the storage root."""
        if self.uri:
            return self
        return self.model_copy(update={"uri": home_uri.rstrip("/") + "/events/synthetic"})
