"""P3: batch-inference rows/s of our path vs bare torch, end to end (read + score + write).

Setup: one synthetic day (``ensure_synthetic_days`` -> ``events.layout.write_day``) and one
model version written by ``export.save_model_version`` from an untrained ``build_model`` with
the default ``TrainingParams`` (9 tables x 100k x 16; the weights do not change the cost).

ours  ``training.inference.score_day`` with an ``InferenceJobSpec`` (id column impression_id, as
      the pipeline does for synthetic sources) on an in-process local Ray with 2 CPUs: the day's
      file cut into pieces of whole row groups (footers read in the driver), Ray Data
      ``from_items(pieces)`` -> ``map_batches(score_chunks, num_cpus=1, compute=TaskPoolStrategy(size=2))`` (each
      task reads its row groups, transforms, scores and writes its own parquet file). Figure: score_day's own ``seconds`` (read + transform + score + write,
      including each map worker's first model load; excluding the schema check before and the
      re-read that counts rows after). "cold" is the first call on a freshly started Ray (what a
      daily Ray job does); "warm" a second call (workers and their cached predictor reused).
      Breakdown: score_day's ``stage_*_s`` (Ray Data's task seconds per phase: map = read +
      transform + score + write inside the tasks, convert; summed over tasks, so up to 2 x the
      wall time) and ``scheduling_s`` = 2 x wall - task seconds (worker start, scheduling, idle CPUs).
      ``cold_floor``: a fresh scoring worker's imports (CPU-s, ``_floors.import_floor``) plus the
      warm run's wall: less than that a cold run cannot take with NUM_CPUS workers importing side
      by side; ``cold_ratio_ceiling`` is the cold ratio that leaves.
      Threads: a ``num_cpus=1`` probe task on the same Ray (the map tasks' settings) reports
      torch's and threadpoolctl's thread counts.
bare  one process: ``export.load_predictor``, pyarrow ``read_table`` of the same part files and
      columns, ``features.transform`` + ``Predictor.predict`` on the whole table, the same output
      columns written with ``pyarrow.parquet.write_table``; with 2 torch threads (= our 2 one-CPU
      tasks) and with 1. Figure: all of load + read + transform + score + write, in a process
      that has already scored 2048 rows once (imports and first-call costs excluded).

Interleaved repeats, ``--pairs`` N times (default 3): a fresh Ray with ours cold and warm, Ray
shut down, then bare with 2 threads and with 1 thread; the load average before each. Per pair,
ratio = ours cold / the faster bare run (see P1 on why the faster; ``contended_pairs`` counts
the pairs where 1 thread won), ``ratio_warm`` = ours warm / the same. ``ratio`` is the median
over the pairs, with min and max.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from typing import Any

from benchmarks import _floors
from benchmarks._common import (QuietReporter, bench_main, fast, loadavg, local_ray, log, pairs, spread,
                               synthetic_source, thread_counts)

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
    from ads_ranking_pipelines.training.features import transform

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
    x = transform(table, predictor.feature_spec, with_label=False)
    t2b = time.perf_counter()
    scores = predictor.predict(x["dense"], x["sparse"])
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
                            "transform": round(t2b - t2, 3), "score": round(t3 - t2b, 3),
                            "write": round(t4 - t3, 3)},
            "threads": threads, "threads_measured": thread_counts()}


def _probe_threads() -> Any:
    """Thread counts inside a ``num_cpus=1`` Ray task (what a map_batches task of ours gets)."""
    import ray

    from ads_ranking_pipelines.training.step_profile import thread_counts as counts

    return ray.get(ray.remote(num_cpus=1)(counts).remote())


def _ours(tmp: str, source, model_uri: str, params, pair: int) -> dict[str, Any]:
    from ads_ranking_pipelines.contracts.jobs import InferenceJobSpec
    from ads_ranking_pipelines.training.inference import score_day

    ours: dict[str, Any] = {}
    with local_ray(os.path.join(tmp, f"ray{pair}"), NUM_CPUS):
        for label in ("cold", "warm"):
            spec = InferenceJobSpec(source=source, day=DAY, model_uri=model_uri, model_version="bench",
                                    output_uri=os.path.join(tmp, "scores", f"ours-{pair}-{label}"),
                                    hash_buckets=params.hash_buckets, id_columns=ID_COLUMNS)
            t0 = time.perf_counter()
            stats = score_day(spec, QuietReporter())
            call_s = time.perf_counter() - t0
            stages = {k: v for k, v in stats.items() if k.startswith("stage_")}
            ours[label] = {"rows": stats["rows"], "seconds": stats["seconds"], "rows_per_s": stats["rows_per_s"],
                           "score_day_call_s": round(call_s, 3), "stages": stages,
                           "scheduling_s": (round(NUM_CPUS * stats["seconds"] - stages["stage_tasks_s"], 3)
                                            if "stage_tasks_s" in stages else None)}
            log(f"ours {label}: {ours[label]}")
        ours["threads_measured"] = _probe_threads()
    return ours


def body(tmp: str) -> dict[str, Any]:
    rows_per_day = 20_000 if fast() else 500_000
    source = synthetic_source(os.path.join(tmp, "events"), [DAY], rows_per_day)
    model_uri, params = _write_model(tmp, source)
    runs: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    for i in range(pairs()):
        run: dict[str, Any] = {"pair": i + 1, "loadavg_before": loadavg()}
        try:
            run["ours"] = _ours(tmp, source, model_uri, params, i + 1)
        except Exception as exc:  # e.g. Ray did not start on an overloaded machine: the other pairs stand
            log(f"pair {i + 1}: ours failed: {type(exc).__name__}: {exc}")
            failed.append({"pair": i + 1, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        run["loadavg_before_bare"] = loadavg()
        run["bare2"] = _bare(source, model_uri, os.path.join(tmp, "scores", f"bare2-{i}"), threads=NUM_CPUS)
        run["bare1"] = _bare(source, model_uri, os.path.join(tmp, "scores", f"bare1-{i}"), threads=1)
        log(f"pair {i + 1}: bare {run['bare2']}; 1 thread: {run['bare1']}")
        if run["ours"]["cold"]["rows"] != run["bare2"]["rows"]:
            raise RuntimeError(f"row counts differ: ours {run['ours']['cold']['rows']} vs bare {run['bare2']['rows']}")
        runs.append(run)
    if not runs:
        raise RuntimeError(f"no pair ran: {failed}")
    return {**summarize(runs, params), "failed_pairs": failed, "cold_floor": _cold_floor(runs)}


def _cold_floor(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """What a cold run cannot take less than: each scoring worker is a fresh interpreter that
    imports Ray, Ray Data (its map task runs in Ray Data's code) and the export path (torch)
    before it scores a row (``_floors.import_floor``),
    NUM_CPUS of them in parallel, then the warm run's work; and the cold ratio that leaves."""
    log("cold floor: a fresh scoring worker's imports")
    imports = _floors.import_floor("import ray, ray.data; import ads_ranking_pipelines.training.export")
    warm_s = spread([r["ours"]["warm"]["seconds"] for r in runs], 3)["median"]
    bare_s = spread([min(r["bare2"]["seconds"], r["bare1"]["seconds"]) for r in runs], 3)["median"]
    floor_s = imports["cpu_s_min"] + warm_s          # NUM_CPUS workers import side by side
    return {"worker_imports": imports, "ours_warm_s": warm_s, "bare_s": bare_s, "cold_floor_s": round(floor_s, 3),
            "cold_ratio_ceiling": round(bare_s / floor_s, 3)}


def summarize(runs: list[dict[str, Any]], params) -> dict[str, Any]:
    cold, warm, contended = [], [], 0
    for r in runs:
        best = max((r["bare2"], r["bare1"]), key=lambda b: b["rows_per_s"])
        contended += best is r["bare1"]
        cold.append(r["ours"]["cold"]["rows_per_s"] / best["rows_per_s"])
        warm.append(r["ours"]["warm"]["rows_per_s"] / best["rows_per_s"])
    ratio = spread(cold)
    return {
        "ratio": ratio["median"], "ratio_min": ratio["min"], "ratio_max": ratio["max"], "pairs": len(runs),
        "metric": "batch inference rows/s end to end (read + score + write), ours cold / bare, median of interleaved pairs",
        "ours_rows_per_s": spread([r["ours"]["cold"]["rows_per_s"] for r in runs], 1),
        "ours_warm_rows_per_s": spread([r["ours"]["warm"]["rows_per_s"] for r in runs], 1),
        "bare_rows_per_s": spread([max(r["bare2"]["rows_per_s"], r["bare1"]["rows_per_s"]) for r in runs], 1),
        "ratio_warm": spread(warm),
        "contended_pairs": contended,
        "threads_ours": runs[-1]["ours"].get("threads_measured"),
        "threads_bare": {"2": runs[-1]["bare2"]["threads_measured"], "1": runs[-1]["bare1"]["threads_measured"]},
        "loadavg_per_pair": [r["loadavg_before"] for r in runs],
        "breakdown": breakdown(runs),
        "runs": runs,
        "config": {"rows": runs[0]["bare2"]["rows"], "hash_buckets": params.hash_buckets,
                   "embedding_dim": params.embedding_dim, "ray_num_cpus": NUM_CPUS,
                   "map_batches": {"unit": "row-group pieces (training.inference.chunk_rows)", "num_cpus": 1, "concurrency": 2},
                   "bare_threads": [NUM_CPUS, 1], "fast": fast()},
        "loadavg_before": runs[0]["loadavg_before"], "loadavg_after": loadavg(),
    }


def breakdown(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median seconds per phase: ours (task seconds, cold and warm) and bare (2 threads, wall)."""
    out: dict[str, Any] = {}
    for label in ("cold", "warm"):
        keys = sorted({k for r in runs for k in r["ours"][label]["stages"]})
        out[f"ours_{label}"] = {k.removeprefix("stage_"): spread([r["ours"][label]["stages"].get(k) for r in runs])["median"]
                                for k in keys}
        out[f"ours_{label}"]["wall_s"] = spread([r["ours"][label]["seconds"] for r in runs])["median"]
        out[f"ours_{label}"]["scheduling_s"] = spread([r["ours"][label]["scheduling_s"] for r in runs])["median"]
    keys = list(runs[0]["bare2"]["breakdown_s"])
    out["bare"] = {k: spread([r["bare2"]["breakdown_s"][k] for r in runs])["median"] for k in keys}
    out["bare"]["wall_s"] = spread([r["bare2"]["seconds"] for r in runs])["median"]
    return out


if __name__ == "__main__":
    bench_main("P3", body)
