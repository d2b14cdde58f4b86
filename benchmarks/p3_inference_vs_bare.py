"""P3: batch-inference rows/s of our path vs bare torch, end to end (read + score + write).

Setup: one synthetic day (``ensure_synthetic_days`` -> ``events.layout.write_day``) and one
model version written by ``export.save_model_version`` from an untrained ``build_model`` with
the default ``TrainingParams`` (9 tables x 100k x 16; the weights do not change the cost).

ours  ``training.inference.score_day`` with an ``InferenceJobSpec`` (id column impression_id, as
      the pipeline does for synthetic sources) on an in-process local Ray with 2 CPUs: Ray Data
      ``read_parquet`` -> ``map_batches(score_batch, batch 8192, num_cpus=1, concurrency=2)`` ->
      ``write_parquet``. Figure: score_day's own ``seconds`` (read + transform + score + write,
      including each map worker's first model load; excluding the schema check before and the
      re-read that counts rows after). "cold" is the first call on fresh Ray workers (what a
      daily Ray job does); "warm" a second call (workers and their cached predictor reused).
bare  one process, 2 torch threads (= our 2 one-CPU tasks): ``export.load_predictor``, pyarrow
      ``read_table`` of the same part files and columns, ``Predictor.score_rows`` on the whole
      table, the same output columns written with ``pyarrow.parquet.write_table``. Figure: all of
      load + read + score + write, in a process that has already scored 2048 rows once (imports
      and first-call costs excluded).

The bare run is done with 2 threads and with 1 thread; the reference is the faster (see P1:
on a contended machine 2 OpenMP threads lose far more than 1; ``contended: true`` says 1 won).

ratio = ours (cold) / bare rows/s; ``ratio_warm`` = ours (warm) / bare.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from typing import Any

from benchmarks._common import QuietReporter, bench_main, fast, loadavg, local_ray, log, synthetic_source

DAY = dt.date(2026, 3, 10)
NUM_CPUS = 2
ID_COLUMNS = ("impression_id",)


def _write_model(tmp: str, source) -> tuple[str, Any]:
    import torch

    from ads_ranking_pipelines.config.training import TrainingParams
    from ads_ranking_pipelines.training.export import save_model_version
    from ads_ranking_pipelines.training.features import FeatureSpec
    from ads_ranking_pipelines.training.model import build_model

    params = TrainingParams()
    feature_spec = FeatureSpec.from_source(source, params.hash_buckets)
    uri = os.path.join(tmp, "models", "bench")
    save_model_version(uri, build_model(params, feature_spec, device=torch.device("cpu")), params,
                       feature_spec, extra_manifest={"model_version": "bench"})
    return uri, params


def _bare(source, model_uri: str, out_dir: str, threads: int) -> dict[str, Any]:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    from ads_ranking_pipelines.events.layout import part_uris
    from ads_ranking_pipelines.training.export import load_predictor

    torch.set_num_threads(threads)
    cols = list(dict.fromkeys([*ID_COLUMNS, *source.feature_columns]))
    parts = [p.removeprefix("file://") for p in part_uris(source.uri, DAY)]
    # warm-up, not timed: first-call costs of this process (lazy imports, first kernels)
    load_predictor(model_uri).score_rows(pq.read_table(parts, columns=cols).slice(0, 2048))
    t0 = time.perf_counter()
    predictor = load_predictor(model_uri)
    t1 = time.perf_counter()
    table = pq.read_table(parts, columns=cols)
    t2 = time.perf_counter()
    scores = predictor.score_rows(table)
    t3 = time.perf_counter()
    out = pd.DataFrame({c: table.column(c).to_numpy() for c in ID_COLUMNS})
    out["score"] = scores.astype(np.float32)
    out["model_version"] = "bench"
    os.makedirs(out_dir, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(out, preserve_index=False), os.path.join(out_dir, "part-0.parquet"))
    t4 = time.perf_counter()
    rows = table.num_rows
    return {"rows": rows, "seconds": round(t4 - t0, 3), "rows_per_s": round(rows / (t4 - t0), 1),
            "score_only_rows_per_s": round(rows / (t3 - t2), 1),
            "breakdown_s": {"load_model": round(t1 - t0, 3), "read": round(t2 - t1, 3),
                            "transform_score": round(t3 - t2, 3), "write": round(t4 - t3, 3)},
            "threads": threads}


def body(tmp: str) -> dict[str, Any]:
    from ads_ranking_pipelines.training.inference import score_day
    from ads_ranking_pipelines.contracts.jobs import InferenceJobSpec

    rows_per_day = 20_000 if fast() else 500_000
    source = synthetic_source(os.path.join(tmp, "events"), [DAY], rows_per_day)
    model_uri, params = _write_model(tmp, source)
    load_before = loadavg()

    log("bare")
    bare = _bare(source, model_uri, os.path.join(tmp, "scores", "bare"), threads=NUM_CPUS)
    bare1 = _bare(source, model_uri, os.path.join(tmp, "scores", "bare1"), threads=1)
    log(f"bare: {bare}; 1 thread: {bare1}")

    ours: dict[str, Any] = {}
    with local_ray(tmp, NUM_CPUS):
        for label in ("cold", "warm"):
            spec = InferenceJobSpec(source=source, day=DAY, model_uri=model_uri, model_version="bench",
                                    output_uri=os.path.join(tmp, "scores", f"ours-{label}"),
                                    hash_buckets=params.hash_buckets, id_columns=ID_COLUMNS)
            t0 = time.perf_counter()
            stats = score_day(spec, QuietReporter())
            call_s = time.perf_counter() - t0
            ours[label] = {"rows": stats["rows"], "seconds": stats["seconds"], "rows_per_s": stats["rows_per_s"],
                           "score_day_call_s": round(call_s, 3)}
            log(f"ours {label}: {ours[label]}")
    if ours["cold"]["rows"] != bare["rows"]:
        raise RuntimeError(f"row counts differ: ours {ours['cold']['rows']} vs bare {bare['rows']}")
    best = max((bare, bare1), key=lambda b: b["rows_per_s"])
    ratio = ours["cold"]["rows_per_s"] / best["rows_per_s"]
    return {
        "ratio": round(ratio, 3),
        "metric": "batch inference rows/s end to end (read + score + write), ours cold / bare",
        "ours_rows_per_s": ours["cold"]["rows_per_s"],
        "bare_rows_per_s": best["rows_per_s"],
        "bare_threads": best["threads"],
        "ratio_warm": round(ours["warm"]["rows_per_s"] / best["rows_per_s"], 3),
        "contended": best is bare1,
        "ours": ours,
        "bare_2threads": bare,
        "bare_1thread": bare1,
        "config": {"rows": bare["rows"], "hash_buckets": params.hash_buckets,
                   "embedding_dim": params.embedding_dim, "ray_num_cpus": NUM_CPUS,
                   "map_batches": {"batch_size": 8192, "num_cpus": 1, "concurrency": 2},
                   "bare_threads": NUM_CPUS, "fast": fast()},
        "loadavg_before": load_before, "loadavg_after": loadavg(),
    }


if __name__ == "__main__":
    bench_main("P3", body)
