"""``make bench``: run the benchmarks, each in its own process, and print one JSON line each.

    python -m benchmarks.run_all                       # all of them, JSON lines on stdout
    python -m benchmarks.run_all --only P1,P3          # a subset
    python -m benchmarks.run_all --pairs 5             # ratios over 5 interleaved (ours, bare) pairs
    python -m benchmarks.run_all --record --note "quiet machine"
                                                       # also append the run to benchmarks/RESULTS.md
    python -m benchmarks.run_all --record-from out.txt --note "..."
                                                       # record JSON lines captured earlier
                                                       # (e.g. `make bench | tee out.txt`)
    BENCH_FAST=1 python -m benchmarks.run_all          # smoke run on tiny data: not for results

Benchmarks are not tests: nothing asserts on time. Each line is ``{"bench": "P1", "ratio": ...,
...}`` with ``ratio`` = ours / reference (P4: overhead / total; P6: peak memory / the 6 GiB
goal; S1: our slope / the bare slope), both measured in the same run, and the raw figures
beside it; a benchmark that fails or times out gives ``"ratio": null`` and ``"error"``. P1 and
P3 take their ratio as the median over ``--pairs`` interleaved repeats (ours, bare, ours,
bare, ...; default 3) with ``ratio_min``/``ratio_max``, the threads each side measured and the
load average before each pair. What each figure includes is in the docstring of its module:

    P1  benchmarks/p1_train_vs_bare.py       Ray Train samples/s vs a bare torch loop
    P2  benchmarks/p2_worker_scaling.py      Ray Train 2 workers vs 1 worker
    P3  benchmarks/p3_inference_vs_bare.py   batch inference rows/s vs bare torch
    P4  benchmarks/p4_pipeline_overhead.py   a daily run: overhead / total wall time
    Q1  benchmarks/q1_quality.py             quality table: network vs XGBoost, logistic
                                             regression (and the correctly specified model)
                                             per dataset, AUC/logloss with 95% intervals,
                                             from `ads-ranking pipeline run --source ...`
    P5  benchmarks/p5_backfill_overhead.py   overhead per day: a 7-day backfill (one run) / 7 single-day runs
    P6  benchmarks/p6_run_memory.py          peak machine memory during `make run` (Ray included) / 6 GiB
    S1  benchmarks/s1_scaling.py             daily-run wall time at 50k..3.2M rows/day: slope ours / bare

Each benchmark runs as ``python -m benchmarks.<module>`` (``sys.executable``) in a new process
session with its own temp dir under /tmp (Ray's temp dir, HOME, TMPDIR, ADS_RANKING_HOME and
DAGSTER_HOME inside it), under a timeout: on timeout it gets SIGTERM (its ``finally`` blocks shut
Ray down), then SIGKILL. Afterwards any process still naming that temp dir in its command line
or environment is ours and is killed by PID, and the dir is removed. Logs (stderr of each
benchmark) go to a temp dir that is removed unless a benchmark failed or ``--logs DIR`` is given.
Nothing is written into the repository unless ``--record`` / ``--record-from`` is given.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ads_ranking_pipelines.backends.processes import pids_mentioning, wait_for_exit
from benchmarks._common import FAST_ENV, PAIRS_ENV, TMP_ENV, fmt_spread, machine_info, versions
from benchmarks.interpret import interpret, k_fmt

REPO = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"

# name -> (module, timeout seconds at 3 pairs). Typical times on a quiet 2-core machine: P1
# ~3.5 min (3 pairs), P2 ~2.5 min, P3 ~2 min (3 pairs), P4 ~3.5 min, P5 (8 runs) ~15 min, Q1
# ~10 min, P6 ~2 min, S1 ~20 min; the timeouts leave room for a loaded one (P1 and P3 scale
# theirs with --pairs).
BENCHES: dict[str, tuple[str, int]] = {
    "P1": ("p1_train_vs_bare", 900),
    "P2": ("p2_worker_scaling", 480),
    "P3": ("p3_inference_vs_bare", 600),
    "P4": ("p4_pipeline_overhead", 720),
    "Q1": ("q1_quality", 1800),
    "P5": ("p5_backfill_overhead", 2400),
    "P6": ("p6_run_memory", 600),
    "S1": ("s1_scaling", 3000),
}
PAIRED = ("P1", "P3")
TERM_GRACE_S = 40


def _say(msg: str) -> None:
    print(f"[run_all {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---- processes -----------------------------------------------------------------------------

def _kill_marked(marker: str, wait_s: float = 10.0) -> list[int]:
    """Wait for processes naming ``marker`` to exit; SIGTERM, then SIGKILL, the ones that stay."""
    left = wait_for_exit(marker, wait_s)
    killed = list(left)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        time.sleep(2.0)
        left = pids_mentioning(marker)
        if not left:
            break
    return killed


def _remove_cluster_dirs(tmp: str) -> None:
    """Temp dirs of local-backend clusters recorded under ``tmp`` (they live in /tmp/arp-*)."""
    for state in Path(tmp).rglob("clusters/*.json"):
        with contextlib.suppress(Exception):
            temp_dir = json.loads(state.read_text()).get("temp_dir", "")
            if temp_dir.startswith("/tmp/arp-"):
                for pid in pids_mentioning(temp_dir):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                shutil.rmtree(temp_dir, ignore_errors=True)


def run_one(name: str, log_dir: Path, fast: bool, pairs: int = 3) -> tuple[dict[str, Any], Path]:
    module, timeout_s = BENCHES[name]
    if name in PAIRED:
        timeout_s = int(timeout_s * max(1, pairs) / 3)
    tmp = tempfile.mkdtemp(prefix="bn", dir="/tmp")     # short: Ray's AF_UNIX socket paths
    log_path = log_dir / f"{name}.log"
    env = dict(os.environ)
    env[TMP_ENV] = tmp
    env.pop("RAY_ADDRESS", None)
    if fast:
        env[FAST_ENV] = "1"
    env[PAIRS_ENV] = str(pairs)
    _say(f"{name} ({module}) started, timeout {timeout_s}s, log {log_path}")
    t0 = time.perf_counter()
    record: dict[str, Any] | None = None
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", f"benchmarks.{module}"], cwd=str(REPO), env=env,
                                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=timeout_s)
            error = None if proc.returncode == 0 else f"exit status {proc.returncode}"
        except subprocess.TimeoutExpired:
            error = f"timed out after {timeout_s}s"
            _say(f"{name}: {error}; stopping it")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                out, _ = proc.communicate(timeout=TERM_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            with contextlib.suppress(Exception):
                proc.wait(timeout=TERM_GRACE_S)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            _cleanup(tmp)
            raise
    for line in reversed(out.decode(errors="replace").splitlines()):
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict) and obj.get("bench") == name:
                record = obj
                break
    if record is None:
        record = {"bench": name, "ratio": None, "error": error or "no JSON line on stdout"}
    elif error:
        record["error"] = error + (f"; {record['error']}" if record.get("error") else "")
    if record.get("ratio") is None:
        _keep_cluster_logs(tmp, log_dir / f"{name}-cluster-logs")
    leftover = _cleanup(tmp)
    if leftover:
        _say(f"{name}: killed {len(leftover)} leftover process(es) of its own: {leftover}")
    _say(f"{name} finished in {time.perf_counter() - t0:.0f}s")
    return record, log_path


def _keep_cluster_logs(tmp: str, dest: Path) -> None:
    """Node logs that the local backend kept after a failed cluster start (``clusters/*.logs``)."""
    for kept in Path(tmp).rglob("clusters/*.logs"):
        with contextlib.suppress(OSError):
            shutil.copytree(kept, dest / kept.name, symlinks=True, ignore_dangling_symlinks=True,
                            ignore=shutil.ignore_patterns("*.sock", "sockets"))
            _say(f"node logs of {kept.name} kept in {dest / kept.name}")


def _cleanup(tmp: str) -> list[int]:
    killed = _kill_marked(tmp.rstrip("/") + "/")
    _remove_cluster_dirs(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    return killed


# ---- results file --------------------------------------------------------------------------

HEADER = """# Benchmark results

Written by `python -m benchmarks.run_all --record` (or `--record-from FILE` with lines captured
from `make bench`). Each ratio is ours / a reference measured side by side in the same run
(P4: overhead / total; P6: peak memory above idle / the 6 GiB goal; S1: wall-time slope per
million rows, ours / bare); P1 and P3 (since 2026-12-01) give the median over interleaved
(ours, bare) pairs with [min-max]; the raw figures are in each run's JSON lines, and what every figure
includes is in the docstring of its module (`benchmarks/p*.py`). Benchmarks are not tests: no
figure here is asserted anywhere. One-off measurements behind design choices are in
`DESIGN_MEASUREMENTS.md`. The summary table is rebuilt from the run sections below on
every `--record`.

| run (UTC) | machine | P1 train ours/bare (from 12-04: P1a 1w/bare-1-thread; P1b 2w/1w) | P2 train 2w/1w | P3 infer ours/bare | P4 overhead/total | P5 backfill/singles overhead per day | P6 peak memory / 6 GiB | S1 slope ours/bare | Q1 min AUC lift vs XGBoost | note |
|---|---|---|---|---|---|---|---|---|---|---|
"""
RUN_RE = re.compile(r"^## Run (?P<date>.+?)\n(?P<body>.*?)(?=^## Run |\Z)", re.S | re.M)
META_RE = re.compile(r"<!-- run-meta (?P<json>\{.*?\}) -->")
JSONL_RE = re.compile(r"```jsonl\n(?P<lines>.*?)```", re.S)


def _fmt_ratio(rec: dict[str, Any] | None) -> str:
    if not rec:
        return "-"
    if rec.get("ratio") is None:
        return "failed"
    r = rec["ratio"]
    extra = ""
    if rec.get("ratio_min") is not None:     # a median of interleaved pairs
        extra = f" [{rec['ratio_min']:.3g}-{rec['ratio_max']:.3g}, {rec.get('pairs')} pairs]"
    if rec.get("bench") == "P1" and rec.get("p1b"):     # since 2026-12-04: P1a, with P1b beside it
        return (f"P1a {r:.3g}{extra} ({k_fmt(rec.get('ours_1w_samples_per_s'))} vs "
                f"{k_fmt(rec.get('bare_1thread_samples_per_s'))} samples/s); P1b 2w/1w "
                f"{fmt_spread(rec['p1b']['ratio'])} (machine {fmt_spread(rec['p1b']['machine_limit'])})")
    if rec.get("bench") == "P1":
        extra += f" ({k_fmt(rec.get('ours_samples_per_s'))} vs {k_fmt(rec.get('bare_samples_per_s'))} samples/s)"
    elif rec.get("bench") == "P2":
        extra = f" ({k_fmt(rec.get('w2_samples_per_s'))} vs {k_fmt(rec.get('w1_samples_per_s'))} samples/s)"
    elif rec.get("bench") == "P3":
        extra += f" ({k_fmt(rec.get('ours_rows_per_s'))} vs {k_fmt(rec.get('bare_rows_per_s'))} rows/s"
        extra += f"; warm {fmt_spread(rec['ratio_warm'])})" if isinstance(rec.get("ratio_warm"), dict) else ")"
    elif rec.get("bench") == "P4":
        extra = f" ({rec.get('overhead_s')} of {rec.get('total_s')} s"
        extra += f"; strict {rec['strict_overhead_s']} s)" if rec.get("strict_overhead_s") is not None else ")"
        if (rec.get("warm") or {}).get("overhead_s") is not None:
            extra += f"; P4w warm {rec['warm']['overhead_s']} s overhead"
    elif rec.get("bench") == "Q1":
        return f"{r:+.4f} AUC ({', '.join(rec.get('results', {}))})"
    elif rec.get("bench") == "P5":
        extra = f" ({rec.get('backfill_overhead_per_day_s')} vs {rec.get('singles_overhead_per_day_s')} s/day"
        extra += f"; P5t {rec['p5t']['ratio']})" if (rec.get("p5t") or {}).get("ratio") is not None else ")"
    elif rec.get("bench") == "P6":
        extra = (f" ({rec.get('peak_above_idle_gib')} GiB above idle; processes PSS "
                 f"{rec.get('processes_peak_pss_gib')} GiB)")
    elif rec.get("bench") == "S1":
        extra = f" ({rec.get('ours_slope_s_per_m')} vs {rec.get('bare_slope_s_per_m')} s per M rows/day)"
    return f"{r:.3g}{extra}"


def _short(note: str, limit: int = 60) -> str:
    note = note.replace("|", "/").strip()
    return note if len(note) <= limit else note[:limit].rstrip() + "..."


def record_results(records: dict[str, dict[str, Any]], note: str, fast: bool) -> None:
    machine = machine_info()
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    meta = {"date": now, "machine": machine, "versions": versions(), "note": note, "fast": fast,
            "ratios": {n: r.get("ratio") for n, r in records.items()},
            "summary": {n: _fmt_ratio(r) for n, r in records.items()}}
    loads = {n: r.get("loadavg_before") for n, r in records.items() if r.get("loadavg_before")}
    peaks = [v[0] for r in records.values() for key in ("loadavg_before", "loadavg_after")
             if isinstance(v := r.get(key), list) and v]
    meta["max_load_1min"] = max(peaks) if peaks else None
    lines = [
        f"## Run {now} UTC",
        f"<!-- run-meta {json.dumps(meta, sort_keys=True)} -->",
        "",
        f"- machine: {machine['nproc']} CPUs ({machine['cpu']}), {machine['ram_gib']} GiB RAM, "
        f"Python {machine['python']}; " + ", ".join(f"{k} {v}" for k, v in meta["versions"].items()),
        "- load average (1, 5, 15 min) when each benchmark started: "
        + ("; ".join(f"{n} {v}" for n, v in loads.items()) or "n/a")
        + f" (highest 1-min figure seen before/after a benchmark: {meta['max_load_1min']}; "
        f"this machine has {machine['nproc']} CPUs)",
    ]
    if note:
        lines.append(f"- note: {note}")
    if fast:
        lines.append("- BENCH_FAST=1: tiny data, smoke run only; not comparable")
    q1 = records.get("Q1")
    if q1 and q1.get("table"):
        lines += ["", "Quality (Q1; held-out day, 95% bootstrap intervals; commands in the JSON line):", "",
                  *q1["table"]]
    lines += ["", "```jsonl", *(json.dumps(records[n]) for n in records), "```", "", "Interpretation:", ""]
    lines += [f"- {s}" for s in interpret(records)]
    section = "\n".join(lines) + "\n\n"

    old = RESULTS.read_text() if RESULTS.exists() else ""
    sections = [m.group(0).rstrip() + "\n\n" for m in RUN_RE.finditer(old)]
    sections.append(section)
    rows = []
    for sec in sections:
        m = META_RE.search(sec)
        if not m:
            continue
        with contextlib.suppress(ValueError):
            mm = json.loads(m.group("json"))
            mach = mm.get("machine", {})
            s = mm.get("summary", {})
            load = mm.get("max_load_1min", "?")
            rows.append(f"| {mm.get('date')} | {mach.get('nproc')} CPU, {mach.get('ram_gib')} GiB, "
                        f"max 1-min load {load} | "
                        + " | ".join(s.get(n, "-") for n in ("P1", "P2", "P3", "P4", "P5", "P6", "S1", "Q1"))
                        + f" | {_short(mm.get('note') or '') + (' (fast)' if mm.get('fast') else '')} |")
    RESULTS.write_text(HEADER + "\n".join(rows) + "\n\n" + "".join(sections).rstrip() + "\n")
    _say(f"recorded in {RESULTS}")


def read_lines(path: str) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}
    for line in Path(path).read_text().splitlines():
        with contextlib.suppress(ValueError):
            obj = json.loads(line)
            if isinstance(obj, dict) and obj.get("bench") in BENCHES:
                records[obj["bench"]] = obj
    return dict(sorted(records.items()))


# ---- main ----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run_all", description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated subset, e.g. P1,P3")
    ap.add_argument("--record", action="store_true", help="append this run to benchmarks/RESULTS.md")
    ap.add_argument("--record-from", metavar="FILE",
                    help="record the JSON lines in FILE (e.g. captured `make bench` output) instead of running")
    ap.add_argument("--note", default="", help="a note stored with the recorded run (e.g. machine state)")
    ap.add_argument("--logs", metavar="DIR", help="keep each benchmark's stderr log in DIR")
    ap.add_argument("--pairs", type=int, default=3,
                    help="interleaved (ours, bare) repeats behind each P1/P3 ratio (default 3)")
    args = ap.parse_args(argv)
    fast = os.environ.get(FAST_ENV, "") not in ("", "0")

    if args.record_from:
        records = read_lines(args.record_from)
        if not records:
            _say(f"no benchmark JSON lines in {args.record_from}")
            return 2
        for r in records.values():
            print(json.dumps(r), flush=True)
        record_results(records, args.note, fast=any(r.get("config", {}).get("fast") for r in records.values()))
        return 0

    names = [n.strip().upper() for n in args.only.split(",") if n.strip()] or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        ap.error(f"unknown benchmark(s) {unknown}; choose from {list(BENCHES)}")
    log_dir = Path(args.logs) if args.logs else Path(tempfile.mkdtemp(prefix="bench-logs-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    _say(f"machine: {machine_info()}" + ("; BENCH_FAST=1 (tiny data, smoke only)" if fast else ""))
    records: dict[str, dict[str, Any]] = {}
    t0 = time.perf_counter()
    for name in names:
        record, log_path = run_one(name, log_dir, fast, max(1, args.pairs))
        records[name] = record
        print(json.dumps(record), flush=True)
        if record.get("ratio") is None:
            tail = log_path.read_text(errors="replace").splitlines()[-25:]
            _say(f"{name} failed: {record.get('error')}; last lines of {log_path}:\n  " + "\n  ".join(tail))
    _say(f"all done in {time.perf_counter() - t0:.0f}s")
    failed = [n for n, r in records.items() if r.get("ratio") is None]
    if args.logs or failed:
        _say(f"logs kept in {log_dir}")
    else:
        shutil.rmtree(log_dir, ignore_errors=True)
    if args.record:
        record_results(records, args.note, fast)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
