"""S1: how a daily run's wall time grows with the rows per day, against a bare pipeline.

Sizes: 50k, 200k, 800k and 3.2M synthetic rows per day (BENCH_FAST: 2k-16k;
``BENCH_S1_ROWS=N1,N2,...`` overrides). Params: the defaults, except a 1-day window (so a
size is the rows of the training day), 2 epochs and no early stopping (so every size trains
the same epochs: wall time follows the rows, not when validation stopped improving).

For each size, smallest first, interleaved:

ours  ``cli.pipeline.run_pipeline`` (the real daily run: Dagster ``daily_retraining``,
      in-process executor, local backend, three Ray jobs: train, evaluate, score), fresh
      ADS_RANKING_HOME/DAGSTER_HOME per size, on the same synthetic days (written before, not
      counted), with P5's wide gate tolerances (every gate is still computed; a tiny day's model
      failing one would end the measurement). Figure: the call's wall time.
bare  the same work in this one process, no Ray, no Dagster: read + transform the training
      day, train the same model the same epochs on the same 90 % of its rows with the same
      per-step batch (``_train.run_bare``, 2 torch threads, fused row-wise Adagrad + Adam),
      scoring the held-out 10 % after every epoch as our loop validates; ``save_model_version``;
      ``training.evaluate.evaluate_version`` (the evaluation job's own code: XGBoost baseline,
      logistic regression, correctly specified model, bootstrap intervals) on day D; score day
      D and write the scores as P3's bare path does. Figure: wall time of all of it.

A size is skipped (``skipped_sizes``) when its estimated time (the last size's, scaled by the
rows) would pass ``BENCH_S1_BUDGET_S`` (default 2700 s) since the start, so a slow machine
still gets a line for the sizes that fit. Each side's slope is the least-squares fit of wall seconds on millions of rows per day;
ratio = our slope / the bare slope (1: each extra million rows costs us what it costs the bare
pipeline; the intercepts, fixed costs, are P4's business). ``bare_train_slope_s_per_m`` is the
slope of the bare training alone, for reference. ``step_slopes_s_per_m``: per step of our run
(its Dagster step time), its slope beside the slope of the bare part doing the same work
(training, evaluation, scoring; the data checks have none) and the gap, which splits the slope
gap by step; each point also keeps our training epochs' samples/s.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from typing import Any

from benchmarks import _train
from benchmarks._common import bench_main, fast, loadavg, log
from benchmarks.p5_backfill_overhead import LOOSE_GATES

DAY = dt.date(2026, 3, 10)
SIZES = (50_000, 200_000, 800_000, 3_200_000)
FAST_SIZES = (2_000, 4_000, 8_000, 16_000)


def sizes() -> list[int]:
    raw = os.environ.get("BENCH_S1_ROWS", "")
    if raw.strip():
        return sorted(int(x) for x in raw.split(",") if x.strip())
    return list(FAST_SIZES if fast() else SIZES)


def _params():
    from ads_ranking_pipelines.config.training import TrainingParams

    extra = dict(batch_size=256, hash_buckets=2000, embedding_dim=8) if fast() else {}
    return TrainingParams(dataset_window_days=1, epochs=2, early_stopping_patience=0, **extra)


def _source(rows: int):
    from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec

    return SourceConfig(synthetic=SyntheticSpec(rows_per_day=rows))


def slope(xs: list[float], ys: list[float]) -> tuple[float | None, float | None]:
    """Least-squares (slope, intercept) of ys on xs."""
    n = len(xs)
    if n < 2:
        return None, None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None, None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return b, my - b * mx


def _ours(tmp: str, rows: int, params) -> dict[str, Any]:
    from ads_ranking_pipelines.cli.pipeline import run_pipeline
    from ads_ranking_pipelines.events.layout import ensure_synthetic_days
    from ads_ranking_pipelines.storage.layout import StorageLayout

    home, dagster_home = os.path.join(tmp, f"ours{rows}", "ads_home"), os.path.join(tmp, f"ours{rows}", "dagster_home")
    os.makedirs(home, exist_ok=True)
    os.makedirs(dagster_home, exist_ok=True)
    os.environ.update(ADS_RANKING_HOME=home, DAGSTER_HOME=dagster_home)
    source = _source(rows)
    days = [DAY - dt.timedelta(days=1), DAY]
    ensure_synthetic_days(source.with_root(StorageLayout(home).root), days)
    t0 = time.perf_counter()
    summary = run_pipeline(DAY, params, source, dict(os.environ), verbose=False, evaluation=LOOSE_GATES)
    wall = time.perf_counter() - t0
    if summary.get("error"):
        raise RuntimeError(f"the run at {rows} rows/day failed: {summary['error']}")
    return {"wall_s": round(wall, 2), "auc": summary.get("auc"), "root": StorageLayout(home).root,
            **_ours_steps(summary["run_id"])}


# each step of our run, and the part of the bare pipeline that does the same work
STEP_OF_BARE = {"impressions": None, "trained_model": "train_s", "model_evaluation": "evaluate_s",
                "batch_scores": "score_s"}


def _ours_steps(run_id: str) -> dict[str, Any]:
    """Seconds per step of our run (STEP_START -> STEP_SUCCESS in the Dagster event log) and the
    training epochs' samples/s, so the slope gap can be split by step."""
    import dagster as dg

    from benchmarks._run_events import _events, step_span

    with dg.DagsterInstance.get() as instance:
        events = _events(instance, run_id)
        rates = []
        for rec in instance.get_records_for_run(run_id, limit=1_000_000).records:
            de = rec.event_log_entry.dagster_event
            if de is not None and de.event_type_value == "ASSET_OBSERVATION":
                meta = {k: v.value for k, v in de.event_specific_data.asset_observation.metadata.items()}
                if meta.get("kind") == "epoch" and "samples_per_s" in meta:
                    rates.append(round(float(meta["samples_per_s"]), 1))
    steps = {}
    for step in STEP_OF_BARE:
        start, end = step_span(events, step)
        steps[step] = round(end - start, 2) if start is not None and end is not None else None
    return {"steps_s": steps, "epoch_samples_per_s": rates}


def step_slopes(points: list[dict[str, Any]]) -> dict[str, Any]:
    """Per step, the least-squares slope (s per M rows/day) of ours and of the bare part doing
    the same work, and what ours adds: where the slope gap goes."""
    xs = [p["rows_per_day"] / 1e6 for p in points]
    out: dict[str, Any] = {}
    for step, bare_key in STEP_OF_BARE.items():
        ours_y = [(p["ours"].get("steps_s") or {}).get(step) for p in points]
        if any(y is None for y in ours_y):
            continue
        so, _ = slope(xs, ours_y)
        sb = slope(xs, [p["bare"][bare_key] for p in points])[0] if bare_key else 0.0
        if so is not None and sb is not None:
            out[step] = {"ours": round(so, 2), "bare": round(sb, 2), "gap": round(so - sb, 2)}
    return out


def _bare(tmp: str, rows: int, params, root: str) -> dict[str, Any]:
    from ads_ranking_pipelines.contracts.jobs import EvalJobSpec
    from ads_ranking_pipelines.training.evaluate import evaluate_version
    from ads_ranking_pipelines.training.export import save_model_version
    from benchmarks._common import QuietReporter
    from benchmarks.p3_inference_vs_bare import ID_COLUMNS

    source = _source(rows).with_root(root)
    train_day = DAY - dt.timedelta(days=1)
    t0 = time.perf_counter()
    tr = _train.run_bare(source, [train_day], params, threads=2, holdout=params.validation_fraction, keep_model=True)
    t1 = time.perf_counter()
    uri = os.path.join(tmp, f"bare{rows}", "model")
    save_model_version(uri, tr.pop("model").eval(), params, tr.pop("feature_spec"),
                       extra_manifest={"model_version": f"bare-{rows}"})
    m = evaluate_version(EvalJobSpec(params=params, source=source, train_days=(train_day,), eval_day=DAY,
                                     model_uri=uri), QuietReporter())
    t2 = time.perf_counter()
    scored = _score(source, uri, os.path.join(tmp, f"bare{rows}", "scores"), ID_COLUMNS)
    t3 = time.perf_counter()
    return {"wall_s": round(t3 - t0, 2), "train_s": round(t1 - t0, 2), "evaluate_s": round(t2 - t1, 2),
            "score_s": round(t3 - t2, 2), "auc": m.get("auc"), "epochs": tr["epochs_run"], "rows_scored": scored}


def _score(source, model_uri: str, out_dir: str, id_columns: tuple[str, ...]) -> int:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ads_ranking_pipelines.events.layout import part_uris
    from ads_ranking_pipelines.training.export import load_predictor

    cols = list(dict.fromkeys([*id_columns, *source.feature_columns]))
    table = pq.read_table([p.removeprefix("file://") for p in part_uris(source.uri, DAY)], columns=cols)
    scores = load_predictor(model_uri).score_rows(table)
    out = pd.DataFrame({c: table.column(c).to_numpy() for c in id_columns})
    out["score"] = scores.astype(np.float32)
    os.makedirs(out_dir, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(out, preserve_index=False), os.path.join(out_dir, "part-0.parquet"))
    return table.num_rows


def budget_s() -> float:
    return float(os.environ.get("BENCH_S1_BUDGET_S", "2700"))


def body(tmp: str) -> dict[str, Any]:
    import torch

    params = _params()
    points: list[dict[str, Any]] = []
    skipped: list[int] = []
    started = time.perf_counter()
    for rows in sizes():
        if points and len(points) >= 2:
            last = points[-1]
            # wall time grows about linearly with the rows: this size's estimate from the last one's
            estimate = (last["ours"]["wall_s"] + last["bare"]["wall_s"]) * rows / last["rows_per_day"]
            if time.perf_counter() - started + estimate > budget_s():
                log(f"{rows} rows/day skipped: about {estimate:.0f} s would pass the {budget_s():.0f} s budget")
                skipped.append(rows)
                continue
        load = loadavg()
        log(f"{rows} rows/day: our daily run")
        ours = _ours(tmp, rows, params)
        log(f"{rows} rows/day: ours {ours['wall_s']} s; bare pipeline")
        threads = torch.get_num_threads()
        try:
            bare = _bare(tmp, rows, params, ours.pop("root"))
        finally:
            torch.set_num_threads(threads)
        log(f"{rows} rows/day: bare {bare}")
        points.append({"rows_per_day": rows, "loadavg_before": load, "ours": ours, "bare": bare})
    xs = [p["rows_per_day"] / 1e6 for p in points]
    so, io = slope(xs, [p["ours"]["wall_s"] for p in points])
    sb, ib = slope(xs, [p["bare"]["wall_s"] for p in points])
    st, _ = slope(xs, [p["bare"]["train_s"] for p in points])
    ratio = so / sb if so is not None and sb else None
    return {
        "ratio": round(ratio, 3) if ratio is not None else None,
        "metric": "daily-run wall time slope per million rows/day, ours / bare pipeline (least squares)",
        "ours_slope_s_per_m": round(so, 2) if so is not None else None,
        "bare_slope_s_per_m": round(sb, 2) if sb is not None else None,
        "ours_intercept_s": round(io, 2) if io is not None else None,
        "bare_intercept_s": round(ib, 2) if ib is not None else None,
        "bare_train_slope_s_per_m": round(st, 2) if st is not None else None,
        "step_slopes_s_per_m": step_slopes(points),
        "goal": 1.15, "goal_met": ratio is not None and ratio <= 1.15,
        "points": points,
        "skipped_sizes": skipped,
        "config": {"sizes": sizes(), "budget_s": budget_s(), "params": params.model_dump(mode="json"),
                   "fast": fast()},
        "loadavg_before": points[0]["loadavg_before"] if points else None, "loadavg_after": loadavg(),
    }


if __name__ == "__main__":
    bench_main("S1", body)
