"""Q1: model quality, network vs its references, on every dataset we have, through the pipeline.

For each dataset it runs what a user runs, ``ads-ranking pipeline run --source FILE.yaml --date D
[--window-days N]`` (a subprocess: Dagster ``daily_retraining`` on a local Ray cluster, default
training settings), with ADS_RANKING_HOME and DAGSTER_HOME in this benchmark's temp dir, and
reads the JSON line it ends with:

=============  ==================================================================  ===========
dataset        source                                                              day, window
=============  ==================================================================  ===========
synthetic      ``kind: synthetic`` defaults (50k rows/day)                          2026-11-30, 3
criteo-sample  ``kind: criteo_tsv``, the shared 10k-row sample, 2,000 rows/day      day 5, 4
avazu-sample   ``kind: avazu_csv``, the shared two-file sample, 2,000 rows/day      day 5, 4
=============  ==================================================================  ===========

The public samples are read from ``../shared/datasets`` (``ADS_RANKING_SHARED_DATASETS``);
a missing one is reported as skipped. Each row of the table: AUC and logloss on the held-out
day, with 95 % bootstrap intervals (200 paired resamples of that day's rows), of the network
(the model version), the XGBoost baseline, logistic regression, and on the synthetic source the
correctly specified model and the oracle; plus the paired interval of the network's AUC lift
over XGBoost. ``ratio`` = the smallest AUC lift (network - XGBoost) over the datasets run (null
if a run failed).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks._common import bench_main, fast, loadavg, log

REPO = Path(__file__).resolve().parent.parent
MODELS = (("network", ""), ("XGBoost", "baseline_"), ("logistic regression", "lr_"),
          ("correctly specified", "specified_"), ("oracle", "oracle_"))


def datasets(shared: Path | None) -> list[dict[str, Any]]:
    start = dt.date(2026, 11, 1)
    out: list[dict[str, Any]] = [{"name": "synthetic", "source": {"kind": "synthetic"},
                                  "date": "2026-11-30", "window": 3}]
    if shared is not None and (shared / "criteo-sample" / "train_head_10k.txt").is_file():
        out.append({"name": "criteo-sample", "date": (start + dt.timedelta(days=4)).isoformat(), "window": 4,
                    "source": {"kind": "criteo_tsv", "uri": str(shared / "criteo-sample" / "train_head_10k.txt"),
                               "start_date": start.isoformat(), "rows_per_day": 2000}})
    avazu = [shared / "avazu-sample" / f for f in ("avazu_part_a.csv", "avazu_part_b.csv")] if shared else []
    if avazu and all(p.is_file() for p in avazu):
        out.append({"name": "avazu-sample", "date": (start + dt.timedelta(days=4)).isoformat(), "window": 4,
                    "source": {"kind": "avazu_csv", "uri": ",".join(map(str, avazu)),
                               "start_date": start.isoformat(), "rows_per_day": 2000}})
    return out


def run_dataset(ds: dict[str, Any], tmp: str) -> dict[str, Any]:
    import yaml

    path = Path(tmp) / f"{ds['name']}.yaml"
    path.write_text(yaml.safe_dump(ds["source"]))
    cmd = [sys.executable, "-m", "ads_ranking_pipelines.cli.main", "pipeline", "run", "--source", str(path),
           "--date", ds["date"], "--window-days", str(ds["window"])]
    if fast() and ds["name"] == "synthetic":
        cmd += ["--rows-per-day", "5000"]
    env = {**os.environ, "ADS_RANKING_HOME": os.path.join(tmp, "ads_home"),
           "DAGSTER_HOME": os.path.join(tmp, "dagster_home")}
    os.makedirs(env["DAGSTER_HOME"], exist_ok=True)
    log(f"{ds['name']}: {' '.join(cmd[2:])}")
    proc = subprocess.run(cmd, cwd=str(REPO), env=env, capture_output=True, text=True, timeout=1500,
                          stdin=subprocess.DEVNULL)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    summary = json.loads(lines[-1]) if lines else {}
    if proc.returncode != 0 or not summary.get("auc"):
        sys.stderr.write(proc.stderr[-4000:])
        raise RuntimeError(f"{ds['name']}: pipeline run exited {proc.returncode}: {summary.get('error')}")
    return {"command": "ads-ranking " + " ".join(cmd[3:]).replace(str(path), f"{ds['name']}.yaml"),
            "source": ds["source"], **summary}


def table(results: dict[str, dict[str, Any]]) -> list[str]:
    """Markdown rows: dataset x model x (AUC [CI], logloss [CI])."""
    rows = ["| dataset | model | AUC [95% CI] | logloss [95% CI] |", "|---|---|---|---|"]
    for name, r in results.items():
        for label, prefix in MODELS:
            auc = r.get(f"{prefix}auc")
            if auc is None:
                continue
            ll = r.get(f"{prefix}logloss")
            rows.append(f"| {name} | {label} | {auc:.4f} {_ci(r, prefix + 'auc')} | "
                        f"{ll:.4f} {_ci(r, prefix + 'logloss')} |")
        lift = r.get("auc_diff_vs_baseline")
        if lift is not None:
            rows.append(f"| {name} | network - XGBoost (paired) | {lift:+.4f} "
                        f"[{r['auc_diff_vs_baseline_ci_low']:+.4f}, {r['auc_diff_vs_baseline_ci_high']:+.4f}] | |")
    return rows


def _ci(r: dict[str, Any], key: str) -> str:
    lo, hi = r.get(f"{key}_ci_low"), r.get(f"{key}_ci_high")
    return f"[{lo:.4f}, {hi:.4f}]" if lo is not None and hi is not None else ""


def body(tmp: str) -> dict[str, Any]:
    from ads_ranking_pipelines.events.importers import shared_datasets_dir

    shared = shared_datasets_dir()
    load_before = loadavg()
    results: dict[str, dict[str, Any]] = {}
    for ds in datasets(shared):
        results[ds["name"]] = run_dataset(ds, tmp)
    lifts = [r["auc"] - r["baseline_auc"] for r in results.values()]
    skipped = [n for n in ("criteo-sample", "avazu-sample") if n not in results]
    return {"ratio": round(min(lifts), 4), "metric": "min over datasets of AUC(network) - AUC(XGBoost)",
            "results": results, "table": table(results), "skipped": skipped,
            "config": {"fast": fast(), "shared_datasets": str(shared) if shared else None},
            "loadavg_before": load_before, "loadavg_after": loadavg()}


if __name__ == "__main__":
    bench_main("Q1", body)
