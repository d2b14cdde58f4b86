"""Batch inference: score a day's impressions with Ray Data and write versioned parquet."""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ads_ranking_pipelines.storage import fs
from ads_ranking_pipelines.training.data_stats import stage_seconds
from ads_ranking_pipelines.training.parquet_io import footer_readers
from ads_ranking_pipelines.training.reporting import Reporter
from ads_ranking_pipelines.contracts.jobs import InferenceJobSpec

if TYPE_CHECKING:
    from ads_ranking_pipelines.training.export import Predictor

SCORE_COLUMN = "score"
SUCCESS_MARKER = "_SUCCESS"


@functools.lru_cache(maxsize=4)
def _predictor(uri: str) -> Predictor:
    """One predictor per worker process and version, loaded on first use (torch is imported
    here, in the scoring workers: the job's driver only plans the dataset)."""
    from ads_ranking_pipelines.training.export import load_predictor

    return load_predictor(uri)


def score_batch(batch: pd.DataFrame, model_uri: str, model_version: str, keep: tuple[str, ...]) -> pd.DataFrame:
    scores = _predictor(model_uri).score_rows(batch)
    out = pd.DataFrame({c: batch[c].to_numpy() for c in keep})
    out[SCORE_COLUMN] = scores.astype(np.float32)
    out["model_version"] = model_version
    return out


def score_day(spec: InferenceJobSpec, reporter: Reporter, *, max_concurrency: int = 2) -> dict[str, Any]:
    import ray

    from ads_ranking_pipelines.events.layout import part_uris, validate_schema

    if not ray.is_initialized():
        ray.init()
    validate_schema(spec.source, spec.day)
    parts = part_uris(spec.source.uri, spec.day, spec.source.completeness)
    id_cols = tuple(c for c in spec.id_columns)
    read_cols = list(dict.fromkeys([*id_cols, *spec.source.feature_columns]))
    out_uri = fs.normalize(spec.output_uri)
    # Nothing half-written: clear an earlier attempt, write, then the marker last.
    fs.delete_dir(out_uri)

    t0 = time.perf_counter()
    with footer_readers(len(parts)):
        ds = ray.data.read_parquet([fs.normalize(p) for p in parts], columns=read_cols)
        scored = ds.map_batches(score_batch, batch_format="pandas", batch_size=8192,
                                fn_kwargs={"model_uri": spec.model_uri, "model_version": spec.model_version,
                                           "keep": id_cols},
                                num_cpus=1, concurrency=max_concurrency)
        scored.write_parquet(out_uri)
        seconds = time.perf_counter() - t0
        rows = ray.data.read_parquet(out_uri).count()
    stats = {"rows": rows, "seconds": round(seconds, 3), "rows_per_s": round(rows / max(seconds, 1e-9), 1),
             "scores_uri": out_uri, "model_version": spec.model_version, "day": spec.day.isoformat(),
             # task seconds per phase: read, convert (Arrow <-> pandas), map (transform + score), write
             **{f"stage_{k}": v for k, v in stage_seconds(scored).items()}}
    fs.write_json(fs.join(out_uri, SUCCESS_MARKER), stats)
    reporter.log(f"scored {rows} impressions of {spec.day} in {seconds:.1f}s "
                 f"({stats['rows_per_s']:.0f} rows/s) -> {out_uri}")
    reporter.metrics("inference", {k: v for k, v in stats.items() if isinstance(v, (int, float))})
    return stats
