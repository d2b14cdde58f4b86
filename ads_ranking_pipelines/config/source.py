"""Where a day's impression events live and which columns mean what.

Kinds:

* ``synthetic`` (default): generated days with a known click model.
* ``parquet``: ``uri`` is a root of ``event_date=YYYY-MM-DD/`` folders written by any writer.
* ``criteo_tsv`` / ``avazu_csv``: ``uri`` names one or more public-format files (Criteo
  ``train.txt``, Avazu ``train.csv``). Their rows carry no usable date, so ``start_date`` and
  ``rows_per_day`` lay them onto consecutive daily partitions in file order. They are imported
  once (streaming) into the event-parquet layout under ``events_uri`` (default
  ``<ADS_RANKING_HOME>/events/<kind>-<digest of the import settings>``); from then on they
  are read like a parquet source (:meth:`SourceConfig.events_source`).

Per-feature options (``features: {column: {hash_buckets, embedding_dim}}``) override the
training-wide ``hash_buckets`` / ``embedding_dim`` for one sparse column; nothing in the code is
keyed to a column name.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

SYNTHETIC_LABEL = "clicked"
SYNTHETIC_DENSE = tuple(f"dense_{i}" for i in range(8))
SYNTHETIC_SPARSE = (
    "user_id", "ad_id", "campaign_id", "advertiser_id", "quest_category",
    "placement", "device_type", "country", "hour_of_day",
)

# Criteo Display Advertising Challenge train.txt: label, 13 integer counts, 26 hashed categoricals
CRITEO_LABEL = "label"
CRITEO_DENSE = tuple(f"I{i}" for i in range(1, 14))
CRITEO_SPARSE = tuple(f"C{i}" for i in range(1, 27))

# Avazu CTR train.csv; ``hour`` is YYMMDDHH; the importer adds ``hour_of_day`` (HH) from it
AVAZU_LABEL = "click"
AVAZU_COLUMNS = (
    "id", "click", "hour", "C1", "banner_pos", "site_id", "site_domain", "site_category",
    "app_id", "app_domain", "app_category", "device_id", "device_ip", "device_model",
    "device_type", "device_conn_type", "C14", "C15", "C16", "C17", "C18", "C19", "C20", "C21",
)
AVAZU_HOUR_OF_DAY = "hour_of_day"
AVAZU_SPARSE = (*(c for c in AVAZU_COLUMNS if c not in ("id", "click", "hour")), AVAZU_HOUR_OF_DAY)

FILE_KINDS = ("criteo_tsv", "avazu_csv")
_KIND_COLUMNS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "synthetic": (SYNTHETIC_LABEL, SYNTHETIC_DENSE, SYNTHETIC_SPARSE),
    "criteo_tsv": (CRITEO_LABEL, CRITEO_DENSE, CRITEO_SPARSE),
    "avazu_csv": (AVAZU_LABEL, (), AVAZU_SPARSE),
}
_KIND_ALL_COLUMNS: dict[str, tuple[str, ...]] = {
    "criteo_tsv": (CRITEO_LABEL, *CRITEO_DENSE, *CRITEO_SPARSE),
    "avazu_csv": (*AVAZU_COLUMNS, AVAZU_HOUR_OF_DAY),
}


class SyntheticSpec(BaseModel):
    """Knobs of the synthetic impression generator (ignored for other sources)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rows_per_day: int = Field(50_000, ge=100, le=50_000_000)
    seed: int = Field(7, ge=0, le=2**31 - 1)
    num_users: int = Field(100_000, ge=10, le=10_000_000)
    num_ads: int = Field(20_000, ge=10, le=10_000_000)


class FeatureOptions(BaseModel):
    """Per-sparse-column overrides of the training-wide table settings."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hash_buckets: int | None = Field(None, ge=2, le=50_000_000,
                                     description="Rows of this column's embedding table.")
    embedding_dim: int | None = Field(None, ge=4, le=512,
                                      description="Width of this column's embeddings (multiple of 4).")

    @field_validator("embedding_dim")
    @classmethod
    def _multiple_of_four(cls, v: int | None) -> int | None:
        if v is not None and v % 4:
            raise ValueError(f"embedding_dim must be a multiple of 4 (fbgemm kernels), got {v}")
        return v


class SourceConfig(BaseModel):
    """The event source (see the module docstring for the kinds)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["synthetic", "parquet", "criteo_tsv", "avazu_csv"] = "synthetic"
    uri: str | None = Field(None, description="parquet: root URI of event_date= folders; criteo_tsv/"
                            "avazu_csv: the file (or several, comma separated, in time order).")
    label_column: str = SYNTHETIC_LABEL
    dense_columns: tuple[str, ...] = SYNTHETIC_DENSE
    sparse_columns: tuple[str, ...] = SYNTHETIC_SPARSE
    synthetic: SyntheticSpec = SyntheticSpec()
    completeness: Literal["success_marker", "none"] = Field(
        "success_marker", description="success_marker: a day exists once its _SUCCESS file does; "
        "none: any event_date= folder holding part files is a complete day (writers without markers).")
    start_date: dt.date | None = Field(None, description="criteo_tsv/avazu_csv: day of the file's first rows.")
    rows_per_day: int | None = Field(None, ge=1, le=1_000_000_000,
                                     description="criteo_tsv/avazu_csv: rows laid onto each day, in file order.")
    events_uri: str | None = Field(None, description="criteo_tsv/avazu_csv: where the imported days go.")
    max_bad_rows: int = Field(0, ge=0, description="criteo_tsv/avazu_csv: malformed rows skipped (and "
                              "counted in the import record) before the import fails.")
    features: dict[str, FeatureOptions] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _kind_defaults(cls, data: Any) -> Any:
        """File kinds have fixed column names: fill them in when not given."""
        if isinstance(data, dict) and data.get("kind") in FILE_KINDS:
            label, dense, sparse = _KIND_COLUMNS[data["kind"]]
            data = {"label_column": label, "dense_columns": dense, "sparse_columns": sparse, **data}
        return data

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
        if self.kind in FILE_KINDS:
            self._check_file_kind()
        elif self.start_date or self.rows_per_day or self.events_uri:
            raise ValueError(f"start_date, rows_per_day and events_uri belong to the file kinds "
                             f"{list(FILE_KINDS)}, not kind {self.kind!r}")
        if not self.sparse_columns and not self.dense_columns:
            raise ValueError("source needs at least one dense or sparse column")
        names = [self.label_column, *self.dense_columns, *self.sparse_columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"a column may play one role only; repeated: {dupes}")
        unknown = sorted(set(self.features) - set(self.sparse_columns))
        if unknown:
            raise ValueError(f"features {unknown} are not sparse columns of this source; "
                             f"sparse columns: {list(self.sparse_columns)}")
        return self

    def _check_file_kind(self) -> None:
        missing = [n for n in ("uri", "start_date", "rows_per_day") if getattr(self, n) in (None, "")]
        if missing:
            raise ValueError(f"source.kind {self.kind!r} needs {', '.join(missing)} "
                             f"(e.g. uri: /data/train.txt, start_date: 2026-11-01, rows_per_day: 2000)")
        have = _KIND_ALL_COLUMNS[self.kind]
        label, _, _ = _KIND_COLUMNS[self.kind]
        if self.label_column != label:
            raise ValueError(f"the label of kind {self.kind!r} is {label!r}, got {self.label_column!r}")
        bad = [c for c in (*self.dense_columns, *self.sparse_columns) if c not in have or c == label]
        if bad:
            raise ValueError(f"columns {bad} are not feature columns of kind {self.kind!r}; "
                             f"choose from {[c for c in have if c != label]}")

    @property
    def feature_columns(self) -> list[str]:
        return [*self.dense_columns, *self.sparse_columns]

    @property
    def is_file_kind(self) -> bool:
        return self.kind in FILE_KINDS

    @property
    def files(self) -> list[str]:
        """The input files of a file kind, in time order."""
        return [u.strip() for u in (self.uri or "").split(",") if u.strip()]

    def import_digest(self) -> str:
        """What decides the imported days' contents (files, day layout, bad-row policy)."""
        key = {"kind": self.kind, "files": self.files, "start_date": str(self.start_date),
               "rows_per_day": self.rows_per_day, "max_bad_rows": self.max_bad_rows}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]

    def with_root(self, home_uri: str) -> "SourceConfig":
        """Fill in default locations under the storage root (synthetic events, imports)."""
        root = home_uri.rstrip("/") + "/events"
        if self.is_file_kind and not self.events_uri:
            return self.model_copy(update={"events_uri": f"{root}/{self.kind}-{self.import_digest()}"})
        if self.uri or self.is_file_kind:
            return self
        return self.model_copy(update={"uri": f"{root}/synthetic"})

    def events_source(self) -> "SourceConfig":
        """The event-parquet view of this source (itself unless it is a file kind)."""
        if not self.is_file_kind:
            return self
        if not self.events_uri:
            raise ValueError("events_uri is not resolved; call with_root(<storage root>) first")
        return SourceConfig(kind="parquet", uri=self.events_uri, label_column=self.label_column,
                            dense_columns=self.dense_columns, sparse_columns=self.sparse_columns,
                            features=self.features)
