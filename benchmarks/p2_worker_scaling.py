"""P2: our Ray Train path with 2 workers vs 1 worker (weak scaling on 2 cores).

Both runs: ``training.range_trainer.train_range`` (one day) on one in-process local Ray, the same materialized rows,
the same per-worker batch (1024) and 1 CPU / 1 torch thread per worker. With 1 worker there is
one rank holding every table (no all-to-all partner, gloo collectives of a world of 1); with 2
the tables are split and each step moves pooled embeddings between the ranks. Figure: the
trainer's per-epoch ``samples_per_s`` (all workers), samples-weighted over the epochs after the
first (see P1 for what an epoch's time covers). The 1-worker run goes first.

ratio = 2-worker / 1-worker samples/s; 2.0 would be perfect scaling with twice the cores.
"""

from __future__ import annotations

import os
from typing import Any

from benchmarks import _train
from benchmarks._common import bench_main, fast, loadavg, local_ray, log, synthetic_source

NUM_CPUS = 3


def body(tmp: str) -> dict[str, Any]:
    epochs = 2 if fast() else 3
    days = _train.window()
    source = synthetic_source(os.path.join(tmp, "events"), days, _train.rows_per_day())
    load_before = loadavg()
    runs = {}
    with local_ray(tmp, NUM_CPUS):
        for workers in (1, 2):
            log(f"our Ray Train path, {workers} worker(s)")
            runs[workers] = _train.run_ours(tmp, source, days, _train.params(workers, epochs), f"p2-w{workers}")
    one, two = runs[1], runs[2]
    ratio = two["samples_per_s"] / one["samples_per_s"] if one["samples_per_s"] else None
    p = _train.params(2, epochs)
    return {
        "ratio": round(ratio, 3) if ratio is not None else None,
        "metric": "training samples/s, steady-state epochs (first epoch excluded), 2 workers / 1 worker",
        "w2_samples_per_s": two["samples_per_s"],
        "w1_samples_per_s": one["samples_per_s"],
        "scaling_efficiency": round(ratio / 2, 3) if ratio is not None else None,
        "w2": two,
        "w1": one,
        "config": {**{k: v for k, v in _train.params_summary(p).items() if k != "num_workers"},
                   "rows": two["rows"], "days": len(days), "ray_num_cpus": NUM_CPUS, "fast": fast()},
        "loadavg_before": load_before, "loadavg_after": loadavg(),
    }


if __name__ == "__main__":
    bench_main("P2", body)
