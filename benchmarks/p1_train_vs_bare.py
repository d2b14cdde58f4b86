"""P1: training samples/s of our Ray Train path vs a bare single-process torch loop, split in two
figures that say which part is Ray's overhead and which is distribution (issue 24):

* **P1a** (``ratio``) = ours with **1 worker** (1 CPU, 1 torch thread) / the bare loop with **1
  thread**: the same work on the same one core, so the gap is what Ray Train, Ray Data feeding,
  TorchRec's DMP wrapper and our loop cost (goal >= 0.95);
* **P1b** (``p1b``) = ours with 2 workers / ours with 1 worker, beside ``machine_limit`` = the bare
  loop with 2 threads / with 1 thread on the same rows: how much a second core buys this model on
  this 2-core machine with no distribution at all (the physical limit P1b can reach here; 2.0
  would be perfect scaling). The collectives that 2 ranks add are timed alone
  (``collective_floor``, below);
* ``ratio_2w_vs_bare`` is the figure P1 reported before 2026-12-04 (ours with 2 workers / the
  faster bare run), kept for the table's history.


ours  ``training.range_trainer.train_range`` over one day (TorchTrainer, 2 workers x 1 CPU x 1 torch thread, TorchRec DMP
      over gloo, each fed by its own materialized Ray Data dataset) on an in-process local Ray, with
      ``profile_steps`` on. Figure: the trainer's own per-epoch ``samples_per_s`` (all workers'
      samples / rank 0's epoch time), samples-weighted over the epochs after the first. An
      epoch's time covers iter_batches from the object store, numpy -> tensors/KJT, forward
      (embedding all-to-all), backward (fused
      row-wise Adagrad, DDP all-reduce), Adam. It excludes the per-epoch validation and
      checkpoint (the checkpoint is reported apart), Ray start, the dataset read and transform,
      the worker-group start and the export.
bare  the same unsharded ``build_model`` in this one process, same transformed rows in the same
      order, batch = our per-worker batch, fused row-wise Adagrad on the tables + Adam on the
      MLPs (see ``_train.run_bare``), with 2 torch threads (= our total) and with 1. Figure: rows
      / time of the epochs after the first (slicing numpy, tensors/KJT, forward, backward, steps).

Interleaved repeats: one Ray is started, then ``--pairs`` N times (default 3): ours with 1 worker,
bare with 1 thread, ours with 2 workers, bare with 2 threads (each bare run: all epochs, unless
45 s have passed after the second); the load average is read before each. Each pair gives P1a,
P1b and its machine limit, and the old ratio ours / the faster of its two bare runs (on a quiet machine that should be the 2-thread run;
on a contended one two OpenMP threads can lose 10-50x, and a reference crippled that way would
flatter ours; ``contended`` counts the pairs where 1 thread won) and ours / bare-2-threads.
``ratio`` is the median over the pairs, with min and max beside it.

Both sides time the same phases (``training.step_profile``; a few clock reads per step on
each side): ``breakdown`` gives, per phase, microseconds per training sample (median over the
pairs; ours: rank 0's time over all ranks' samples, i.e. the wall time per sample of the job;
bare: the pair's reference run, i.e. the faster of its two) and ``gap_us_per_sample`` = ours -
bare per phase, which says where each lost percent went, and each side's ``cpu_share`` of the
phase (process CPU time / wall time: below 1 on our 1-thread ranks is time spent waiting, in a
collective for the peer rank or for a core) (``embedding_forward`` is part of
``forward``, ``grad_allreduce`` part of ``backward``).
``collective_floor``: the gloo collectives one of our steps needs (KJT input distribution,
pooled embeddings forward and backward, DDP all-reduce), timed alone with the step's sizes
(``_floors``): ``us_per_sample`` is what sharding over the workers adds per sample at the least.
Threads: ``threads_ours`` as measured inside each Ray Train worker (torch intra/inter-op,
threadpoolctl pools), ``threads_bare`` in this process.
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks import _floors, _train
from benchmarks._common import bench_main, fast, loadavg, local_ray, log, pairs, spread, synthetic_source

WORKERS = 2
NUM_CPUS = 3      # as the Ray Train test: 2 one-CPU workers + room for the trainer's own actors


def body(tmp: str) -> dict[str, Any]:
    epochs = 2 if fast() else 4
    days = _train.window()
    source = synthetic_source(os.path.join(tmp, "events"), days, _train.rows_per_day())
    p, p1 = _train.params(WORKERS, epochs), _train.params(1, epochs)
    runs: list[dict[str, Any]] = []
    with local_ray(tmp, NUM_CPUS):
        for i in range(pairs()):
            run: dict[str, Any] = {"pair": i + 1, "loadavg_before": loadavg()}
            log(f"pair {i + 1}: our Ray Train path, 1 worker; bare loop, 1 thread")
            run["ours1"] = _train.run_ours(tmp, source, days, p1, f"p1-{i + 1}-w1")
            run["bare1"] = _train.run_bare(source, days, p1, threads=1, max_seconds=45)
            run["loadavg_before_2"] = loadavg()
            log(f"pair {i + 1}: our Ray Train path, {WORKERS} workers; bare loop, {WORKERS} threads")
            run["ours"] = _train.run_ours(tmp, source, days, p, f"p1-{i + 1}")
            run["bare2"] = _train.run_bare(source, days, p, threads=WORKERS * int(p.cpus_per_worker), max_seconds=45)
            runs.append(run)
    out = summarize(runs, p, days)
    out["collective_floor"] = _collective_floor(source, p)
    return out


def _collective_floor(source, p) -> dict[str, Any]:
    """The collectives of one step, timed alone (``_floors``): what sharding adds at the least."""
    from ads_ranking_pipelines.training.features import FeatureSpec
    from ads_ranking_pipelines.training.model import build_model

    log("collective floor: the step's gloo collectives alone")
    shape = _floors.model_shape(build_model(p, FeatureSpec.from_source(source, p.hash_buckets)))
    return {**_floors.collective_floor(p.batch_size, world=WORKERS, **shape), **shape}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


def summarize(runs: list[dict[str, Any]], p, days) -> dict[str, Any]:
    ratios, ratios2, contended = [], [], 0
    for r in runs:
        best = max((r["bare2"], r["bare1"]), key=lambda b: b["samples_per_s"] or 0.0)
        contended += best is r["bare1"]
        r["bare_best_threads"] = best["threads"]
        ratios.append(_ratio(r["ours"]["samples_per_s"], best["samples_per_s"]))
        ratios2.append(_ratio(r["ours"]["samples_per_s"], r["bare2"]["samples_per_s"]))
    p1a = spread([_ratio(r["ours1"]["samples_per_s"], r["bare1"]["samples_per_s"]) for r in runs])
    return {
        "ratio": p1a["median"],
        "ratio_min": p1a["min"], "ratio_max": p1a["max"], "pairs": len(runs),
        "metric": "P1a: training samples/s, steady-state epochs (first epoch excluded), ours 1 worker / bare 1 "
                  "thread, median of interleaved pairs",
        "goal": 0.95,
        "ours_1w_samples_per_s": spread([r["ours1"]["samples_per_s"] for r in runs], 1),
        "bare_1thread_samples_per_s": spread([r["bare1"]["samples_per_s"] for r in runs], 1),
        "p1b": {"ratio": spread([_ratio(r["ours"]["samples_per_s"], r["ours1"]["samples_per_s"]) for r in runs]),
                "metric": "ours 2 workers / ours 1 worker (samples/s)",
                "machine_limit": spread([_ratio(r["bare2"]["samples_per_s"], r["bare1"]["samples_per_s"])
                                         for r in runs]),
                "machine_limit_metric": "bare 2 threads / bare 1 thread on the same rows: what a second core "
                                        "buys this model here without distribution"},
        "ratio_2w_vs_bare": spread(ratios),
        "ours_samples_per_s": spread([r["ours"]["samples_per_s"] for r in runs], 1),
        "bare_samples_per_s": spread([max(r["bare2"]["samples_per_s"] or 0, r["bare1"]["samples_per_s"] or 0)
                                      for r in runs], 1),
        "ratio_vs_bare_2threads": spread(ratios2),
        "contended_pairs": contended,
        "threads_ours": runs[-1]["ours"].get("threads_per_rank"),
        "threads_bare": {"2": runs[-1]["bare2"].get("threads_measured"), "1": runs[-1]["bare1"].get("threads_measured")},
        "loadavg_per_pair": [r["loadavg_before"] for r in runs],
        "breakdown": breakdown([r["ours"]["phases"] for r in runs],
                               [r["bare2" if r["bare_best_threads"] == r["bare2"]["threads"] else "bare1"]["phases"]
                                for r in runs]),
        "breakdown_p1a": breakdown([r["ours1"]["phases"] for r in runs], [r["bare1"]["phases"] for r in runs]),
        "runs": runs,
        "config": {**_train.params_summary(p), "rows": runs[0]["ours"]["rows"], "days": len(days),
                   "total_threads": WORKERS * int(p.cpus_per_worker), "ray_num_cpus": NUM_CPUS,
                   "bare_optimizer": "fused rowwise Adagrad (tables) + Adam (MLPs)",
                   "embedding_optimizer": _train.embedding_optimizer_kwargs(p),
                   "ours_optimizer": "fused rowwise Adagrad (sharded tables) + Adam (DDP MLPs)",
                   "profile_steps": True, "fast": fast()},
        "loadavg_before": runs[0]["loadavg_before"], "loadavg_after": loadavg(),
    }


def breakdown(ours: list[dict[str, Any] | None], bare: list[dict[str, Any] | None]) -> dict[str, Any]:
    """Per phase: median microseconds per sample of ours and of each pair's reference bare run, and the gap."""
    out: dict[str, Any] = {}
    for ph in _train.PHASES + ("epoch",):
        o = spread([(t or {}).get(ph, {}).get("us_per_sample") for t in ours])
        b = spread([(t or {}).get(ph, {}).get("us_per_sample") for t in bare])
        if o["median"] is None and b["median"] is None:
            continue
        out[ph] = {"ours_us_per_sample": o["median"], "bare_us_per_sample": b["median"],
                   "gap_us_per_sample": round((o["median"] or 0.0) - (b["median"] or 0.0), 3)}
        # CPU share of the phase's wall time (rank 0's process; the bare process has 2 threads)
        oc = spread([(t or {}).get(ph, {}).get("cpu_share") for t in ours])
        bc = spread([(t or {}).get(ph, {}).get("cpu_share") for t in bare])
        if oc["median"] is not None:
            out[ph].update(ours_cpu_share=oc["median"], bare_cpu_share=bc["median"])
    return out


if __name__ == "__main__":
    bench_main("P1", body)
