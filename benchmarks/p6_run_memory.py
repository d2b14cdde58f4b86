"""P6: peak memory of the whole machine during a daily run (``make run``), Ray included.

Runs what ``make run`` runs, as subprocesses of this benchmark: ``ads-ranking instance
dagster-yaml --out $DAGSTER_HOME/dagster.yaml`` (not measured), then ``ads-ranking pipeline
run`` (yesterday, the defaults: synthetic source, 3-day window, 2 workers x 1 CPU; under
BENCH_FAST a tiny model and data), with ADS_RANKING_HOME and DAGSTER_HOME inside this
benchmark's temp dir.

A sampler thread (``_common.MemorySampler``) measures, while the run goes:

* the machine: used = MemTotal - MemAvailable (/proc/meminfo) every 0.2 s; its idle figure is
  the median over the 3 s before the run starts; ``machine_peak_above_idle_gib`` = peak - idle.
  It counts everything on the machine (Ray's object store in /dev/shm included), so on a
  shared machine other people's work moves it too: ``loadavg`` is beside it.
* the run's processes: every 0.5 s, all processes whose command line or environment names
  this benchmark's temp dir (the CLI and its Dagster executor, the local cluster's head and
  worker nodes: GCS, raylets, dashboard, Ray workers, job drivers, Ray Train workers);
  ``processes_peak_pss_gib`` is the peak of their summed PSS (shared pages, e.g. torch's
  libraries mapped by every Ray worker, split among them), ``processes_peak_rss_gib`` of their
  summed RSS (shared pages counted in each process).

ratio = ``machine_peak_above_idle_gib`` / the 6 GiB goal (at most 1 meets it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks._common import MemorySampler, bench_main, fast, loadavg, log

GOAL_GIB = 6.0


def _cli() -> str:
    exe = Path(sys.executable).with_name("ads-ranking")
    return str(exe) if exe.exists() else "ads-ranking"


def _args() -> list[str]:
    if not fast():
        return []
    return ["--window-days", "2", "--epochs", "2", "--batch-size", "256", "--rows-per-day", "4000",
            "--param", "hash_buckets=2000", "--param", "embedding_dim=8"]


def body(tmp: str) -> dict[str, Any]:
    env = dict(os.environ)
    env["ADS_RANKING_HOME"] = os.path.join(tmp, "ads_home")
    env["DAGSTER_HOME"] = os.path.join(tmp, "dagster_home")
    os.makedirs(env["DAGSTER_HOME"], exist_ok=True)
    subprocess.run([_cli(), "instance", "dagster-yaml", "--out", os.path.join(env["DAGSTER_HOME"], "dagster.yaml")],
                   env=env, check=True, stdout=sys.stderr, stderr=sys.stderr)
    sampler = MemorySampler(tmp.rstrip("/") + "/")
    load_before = loadavg()
    sampler.baseline(3.0)
    log(f"idle used memory {sampler.idle / 1024**3:.2f} GiB; ads-ranking pipeline run {' '.join(_args())}")
    t0 = time.perf_counter()
    with sampler:
        proc = subprocess.run([_cli(), "pipeline", "run", *_args()], env=env, stdout=subprocess.PIPE,
                              stderr=sys.stderr, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"ads-ranking pipeline run exited {proc.returncode}: {proc.stdout[-500:]}")
    mem = sampler.result()
    log(f"memory: {mem}")
    peak = mem["machine_peak_above_idle_gib"]
    return {
        "ratio": round(peak / GOAL_GIB, 3) if peak is not None else None,
        "metric": "peak machine memory above idle during a daily run (make run) / 6 GiB goal",
        "peak_above_idle_gib": peak,
        "processes_peak_pss_gib": mem["processes_peak_pss_gib"],
        "processes_peak_rss_gib": mem["processes_peak_rss_gib"],
        "goal_gib": GOAL_GIB, "goal_met": peak is not None and peak <= GOAL_GIB,
        "memory": mem,
        "run_wall_s": round(wall, 2),
        "summary": proc.stdout.strip().splitlines()[-1][:500] if proc.stdout.strip() else None,
        "config": {"command": f"ads-ranking pipeline run {' '.join(_args())}".strip(), "fast": fast()},
        "loadavg_before": load_before, "loadavg_after": loadavg(),
    }


if __name__ == "__main__":
    bench_main("P6", body)
