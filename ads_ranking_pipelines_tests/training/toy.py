"""Small learnable click data for the training tests (numpy only)."""

from __future__ import annotations

import datetime as dt
import os

import numpy as np
import pandas as pd

from ads_ranking_pipelines.config.source import SYNTHETIC_DENSE, SYNTHETIC_LABEL, SYNTHETIC_SPARSE
from ads_ranking_pipelines.config.training import TrainingParams
from ads_ranking_pipelines.training.features import FeatureSpec

TINY_BUCKETS = 64


def tiny_params(**overrides) -> TrainingParams:
    base = dict(hash_buckets=TINY_BUCKETS, embedding_dim=8, dense_arch=(16,), over_arch=(16,),
                batch_size=64, learning_rate=0.05, epochs=1, num_workers=2, seed=3)
    base.update(overrides)
    return TrainingParams(**base)


def tiny_spec(num_dense: int = 3, num_sparse: int = 4, buckets: int = TINY_BUCKETS) -> FeatureSpec:
    return FeatureSpec("label", tuple(f"d{i}" for i in range(num_dense)),
                       tuple(f"s{i}" for i in range(num_sparse)), buckets)


def toy_arrays(n: int, spec: FeatureSpec, seed: int) -> dict[str, np.ndarray]:
    """Transformed-feature arrays whose label depends on sparse id parity and dense column 0."""
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(n, spec.num_dense)).astype(np.float32)
    sparse = rng.integers(0, spec.hash_buckets, size=(n, len(spec.sparse_columns))).astype(np.int64)
    logit = np.zeros(n)
    if len(spec.sparse_columns):
        logit += np.where(sparse[:, 0] % 2 == 0, 2.0, -2.0)
    if spec.num_dense:
        logit += 1.5 * dense[:, 0]
    label = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    return {"dense": dense, "sparse": sparse, "label": label}


def raw_events(n: int, seed: int) -> pd.DataFrame:
    """Rows in the ``SourceConfig()`` schema (clicked, dense_0..7, 9 sparse ids), learnable."""
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({c: rng.gamma(2.0, 3.0, size=n) for c in SYNTHETIC_DENSE})
    cards = {"user_id": 500, "ad_id": 200, "campaign_id": 50, "advertiser_id": 20,
             "quest_category": 12, "placement": 4, "device_type": 3, "country": 10, "hour_of_day": 24}
    for c in SYNTHETIC_SPARSE:
        df[c] = rng.integers(0, cards[c], size=n)
    logit = (-0.5 + np.where(df["ad_id"] % 3 == 0, 1.8, -0.9)
             + np.where(df["placement"] == 1, 0.8, 0.0)
             + 0.6 * (np.log1p(df["dense_0"]) - 1.8))
    df[SYNTHETIC_LABEL] = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return df


def write_days(root: str, days: list[dt.date], rows_per_day: int, seed: int = 0) -> pd.DataFrame:
    frames = []
    for i, day in enumerate(days):
        df = raw_events(rows_per_day, seed + i)
        folder = os.path.join(root, f"event_date={day.isoformat()}")
        os.makedirs(folder, exist_ok=True)
        df.to_parquet(os.path.join(folder, "part-0.parquet"), index=False)
        open(os.path.join(folder, "_SUCCESS"), "w").close()      # the day is complete
        frames.append(df)
    return pd.concat(frames, ignore_index=True)
