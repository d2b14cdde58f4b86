"""Turn a batch of event rows into model inputs: dense floats, hashed sparse ids, labels.

Works on any source's column names (from ``SourceConfig``); the same transform serves
training, evaluation, batch inference and the XGBoost baseline, so they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

from ads_ranking_pipelines.config.source import SourceConfig

NULL_TOKEN = "__null__"


@dataclass(frozen=True)
class FeatureSpec:
    """Which columns feed the model and how: all from the source config, nothing per name.

    ``table_overrides`` / ``dim_overrides``: ``(column, value)`` pairs from the source's
    ``features`` (rows of that column's table, its embedding width); other sparse columns use
    ``hash_buckets`` and the training-wide ``embedding_dim``. ``missing_indicators`` adds, per
    dense column, a 0/1 column telling whether the value was missing (a missing count is not 0).
    """

    label_column: str
    dense_columns: tuple[str, ...]
    sparse_columns: tuple[str, ...]
    hash_buckets: int
    table_overrides: tuple[tuple[str, int], ...] = ()
    dim_overrides: tuple[tuple[str, int], ...] = ()
    missing_indicators: bool = False

    @classmethod
    def from_source(cls, source: SourceConfig, hash_buckets: int) -> "FeatureSpec":
        tables = tuple((c, int(o.hash_buckets)) for c, o in sorted(source.features.items()) if o.hash_buckets)
        dims = tuple((c, int(o.embedding_dim)) for c, o in sorted(source.features.items()) if o.embedding_dim)
        return cls(source.label_column, tuple(source.dense_columns), tuple(source.sparse_columns),
                   int(hash_buckets), tables, dims, missing_indicators=True)

    @property
    def num_dense(self) -> int:
        return len(self.dense_columns) * (2 if self.missing_indicators else 1)

    @property
    def table_sizes(self) -> dict[str, int]:
        over = dict(self.table_overrides)
        return {c: over.get(c, self.hash_buckets) for c in self.sparse_columns}

    def embedding_dims(self, default: int) -> dict[str, int]:
        over = dict(self.dim_overrides)
        return {c: over.get(c, default) for c in self.sparse_columns}

    @property
    def read_columns(self) -> list[str]:
        return [self.label_column, *self.dense_columns, *self.sparse_columns]


def _column(batch: Any, name: str) -> np.ndarray:
    if isinstance(batch, pa.Table):
        return batch.column(name).to_numpy(zero_copy_only=False)
    if isinstance(batch, pd.DataFrame):
        return batch[name].to_numpy()
    return np.asarray(batch[name])


def _numeric(values: np.ndarray) -> np.ndarray:
    return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def dense_transform(values: np.ndarray) -> np.ndarray:
    """Signed log1p of a numeric column, nulls as 0: robust to heavy-tailed counts."""
    x = np.nan_to_num(_numeric(values), nan=0.0, posinf=0.0, neginf=0.0)
    return (np.sign(x) * np.log1p(np.abs(x))).astype(np.float32)


def missing_indicator(values: np.ndarray) -> np.ndarray:
    return (~np.isfinite(_numeric(values))).astype(np.float32)


def hash_ids(values: np.ndarray, buckets: int) -> np.ndarray:
    """Stable (process- and machine-independent) hash of categorical values into [0, buckets).

    Integers hash the same whether or not the batch holds nulls (a nullable integer column
    arrives as floats when it does), so one id gets one row on every day.
    """
    s = pd.Series(values)
    if s.dtype.kind == "f":
        finite = s.dropna()
        if (np.isfinite(finite) & (finite == np.round(finite))).all():
            s = s.astype("Int64")
    if s.dtype.kind in "iub" or str(s.dtype) == "Int64":
        hashed = pd.util.hash_array(s.to_numpy(dtype=np.int64, na_value=-1), categorize=False)
        if s.isna().any():
            hashed[s.isna().to_numpy()] = pd.util.hash_array(np.array([NULL_TOKEN], dtype=object))[0]
    else:
        obj = s.astype(object).where(s.notna(), NULL_TOKEN).astype(str).to_numpy(dtype=object)
        hashed = pd.util.hash_array(obj, categorize=True)
    return (hashed % np.uint64(buckets)).astype(np.int64)


def labels(values: np.ndarray) -> np.ndarray:
    y = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    if np.isnan(y).any():
        raise ValueError("label column has missing or non-numeric values")
    bad = ~np.isin(y, (0.0, 1.0))
    if bad.any():
        raise ValueError(f"label column must be 0/1, found e.g. {y[bad][:3].tolist()}")
    return y.astype(np.float32)


def transform(batch: Any, spec: FeatureSpec, with_label: bool = True) -> dict[str, np.ndarray]:
    """``{"dense": float32[n, d], "sparse": int64[n, k], "label": float32[n]}`` from a batch.

    ``batch`` may be a dict of numpy arrays (Ray Data's numpy format), a DataFrame or a Table.
    """
    first = spec.dense_columns[0] if spec.dense_columns else spec.sparse_columns[0]
    n = len(_column(batch, first))
    cols = [dense_transform(_column(batch, c)) for c in spec.dense_columns]
    if spec.missing_indicators:
        cols += [missing_indicator(_column(batch, c)) for c in spec.dense_columns]
    dense = np.stack(cols, axis=1) if cols else np.zeros((n, 0), dtype=np.float32)
    sizes = spec.table_sizes
    sparse = (np.stack([hash_ids(_column(batch, c), sizes[c]) for c in spec.sparse_columns], axis=1)
              if spec.sparse_columns else np.zeros((n, 0), dtype=np.int64))
    out = {"dense": dense, "sparse": sparse}
    if with_label:
        out["label"] = labels(_column(batch, spec.label_column))
    return out


def passthrough_columns(batch: Mapping[str, np.ndarray] | pd.DataFrame, names: list[str]) -> dict[str, np.ndarray]:
    return {n: _column(batch, n) for n in names}
