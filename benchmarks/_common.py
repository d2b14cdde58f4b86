"""Plumbing shared by the benchmarks (not a benchmark, not a test).

Every benchmark module is run as ``python -m benchmarks.<module>`` in its own process, normally
by :mod:`benchmarks.run_all`. Inside it:

* :func:`bench_main` owns the process: a private short temp dir under /tmp (``BENCH_TMP`` when
  run_all passes one), HOME moved into it (Ray 2.60 writes ``~/.ray/auth_token``), Ray kept on
  loopback, SIGTERM turned into ``SystemExit`` so ``finally`` blocks (``ray.shutdown``, cluster
  session exit) run, and file descriptor 1 pointed at stderr so that library chatter never
  reaches stdout. The benchmark's one JSON line is written to the saved real stdout.
* :func:`local_ray` starts an in-process local Ray (``ray.init``) inside that temp dir, the way
  the training tests' ``local_ray`` fixture does, and always shuts it down.
* :func:`synthetic_source` writes synthetic event days with ``events.layout.ensure_synthetic_days``.

Nothing here writes into the repository.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any

TMP_ENV = "BENCH_TMP"             # run_all passes the temp dir it will clean up afterwards
FAST_ENV = "BENCH_FAST"           # "1": smaller data and fewer epochs (smoke runs, not for results)

_real_stdout: Any = None


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def fast() -> bool:
    return os.environ.get(FAST_ENV, "") not in ("", "0")


# ---- process setup -------------------------------------------------------------------------

def _capture_stdout() -> None:
    """Keep the real stdout for the JSON line; everything else printed to fd 1 goes to stderr."""
    global _real_stdout
    if _real_stdout is not None:
        return
    sys.stdout.flush()
    _real_stdout = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr


def emit(record: dict[str, Any]) -> None:
    """Write the benchmark's single JSON line to the real stdout."""
    out = _real_stdout or sys.__stdout__
    out.write(json.dumps(record, sort_keys=False, default=_json_default) + "\n")
    out.flush()


def _json_default(o: Any) -> Any:
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, (dt.date, dt.datetime)):
        return o.isoformat()
    return str(o)


def _on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(f"benchmark got signal {signum}")


def bench_main(name: str, body: Callable[[str], dict[str, Any]]) -> None:
    """Run ``body(tmp_dir)`` and emit its record as ``{"bench": name, ...}`` (or an error record)."""
    _capture_stdout()
    signal.signal(signal.SIGTERM, _on_sigterm)
    given = os.environ.get(TMP_ENV)
    tmp = given or tempfile.mkdtemp(prefix="bn", dir="/tmp")
    os.makedirs(tmp, exist_ok=True)
    home = os.path.join(tmp, "home")
    os.makedirs(home, exist_ok=True)
    os.environ["HOME"] = home
    # Python temp files of every process we start (Ray workers' checkpoint dirs, multiprocessing
    # sockets) land in here too, and go when it goes.
    tmpdir = os.path.join(tmp, "t")
    os.makedirs(tmpdir, exist_ok=True)
    os.environ["TMPDIR"] = tmpdir
    tempfile.tempdir = None
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ["RAY_DATA_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["TQDM_DISABLE"] = "1"
    os.environ.pop("RAY_ADDRESS", None)
    os.environ.pop("ADS_RANKING_BACKEND", None)
    t0 = time.perf_counter()
    code = 0
    try:
        record = body(tmp)
        record = {"bench": name, **record, "bench_wall_s": round(time.perf_counter() - t0, 1)}
    except BaseException as exc:  # noqa: BLE001 - the record must say why, whatever happened
        traceback.print_exc()
        record = {"bench": name, "ratio": None, "error": f"{type(exc).__name__}: {exc}"[:500],
                  "bench_wall_s": round(time.perf_counter() - t0, 1)}
        code = 1
    finally:
        if not given:  # run_all removes the dirs it created, after killing anything left in them
            shutil.rmtree(tmp, ignore_errors=True)
    emit(record)
    sys.exit(code)


# ---- local Ray -----------------------------------------------------------------------------

@contextlib.contextmanager
def local_ray(tmp: str, num_cpus: int) -> Iterator[Any]:
    """``ray.init`` on loopback with its temp dir (short: AF_UNIX paths) inside ``tmp``."""
    import ray

    from ads_ranking_pipelines.ray_jobs.common import quiet_progress_bars

    ray_tmp = os.path.join(tmp, "r")
    os.makedirs(ray_tmp, exist_ok=True)
    # 127.0.0.1 rather than the routable address. Only for this single-node Ray: with it, a
    # multi-node cluster (the local backend, P4) refuses to add worker nodes.
    before = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    t0 = time.perf_counter()
    ray.init(num_cpus=num_cpus, include_dashboard=False, _temp_dir=ray_tmp, log_to_driver=True)
    quiet_progress_bars()
    log(f"ray.init(num_cpus={num_cpus}) took {time.perf_counter() - t0:.1f}s")
    try:
        yield ray
    finally:
        with contextlib.suppress(Exception):
            ray.shutdown()
        if before is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = before


class QuietReporter:
    """A ``training.reporting.Reporter`` that keeps records and logs to stderr."""

    def __init__(self) -> None:
        self.logs: list[str] = []
        self.records: list[tuple[str, dict[str, Any]]] = []

    def log(self, message: str) -> None:
        self.logs.append(message)
        print(f"[reporter] {message}", file=sys.stderr, flush=True)

    def metrics(self, kind: str, values: dict[str, Any]) -> None:
        self.records.append((kind, dict(values)))
        if kind in ("epoch", "dataset", "inference"):
            print(f"[metrics:{kind}] {json.dumps(values, sort_keys=True, default=str)}",
                  file=sys.stderr, flush=True)


# ---- data ----------------------------------------------------------------------------------

def pipeline_homes(ads_home: str, dagster_home: str) -> dict[str, str]:
    """ADS_RANKING_HOME and DAGSTER_HOME for a benchmark's pipeline runs (set in this process),
    the Dagster instance configured as ``make run``'s (shipped settings: telemetry off, run
    monitoring, the per-pool run queue)."""
    from ads_ranking_pipelines.config.dagster_instance import instance_settings, render_yaml
    from ads_ranking_pipelines.config.pools import load_catalog

    os.makedirs(ads_home, exist_ok=True)
    os.makedirs(dagster_home, exist_ok=True)
    with open(os.path.join(dagster_home, "dagster.yaml"), "w") as f:
        f.write(render_yaml(instance_settings(load_catalog(None))))
    os.environ.update(ADS_RANKING_HOME=ads_home, DAGSTER_HOME=dagster_home)
    return dict(os.environ)


def synthetic_source(root: str, days: list[dt.date], rows_per_day: int, **spec: Any):
    """A synthetic ``SourceConfig`` rooted at ``root`` with ``days`` written (idempotent)."""
    from ads_ranking_pipelines.config.source import SourceConfig, SyntheticSpec
    from ads_ranking_pipelines.events.layout import ensure_synthetic_days

    source = SourceConfig(uri=root, synthetic=SyntheticSpec(rows_per_day=rows_per_day, **spec))
    t0 = time.perf_counter()
    written = ensure_synthetic_days(source, days)
    log(f"synthetic events: {len(written)} day(s) x {rows_per_day} rows in {time.perf_counter() - t0:.1f}s")
    return source


# ---- machine -------------------------------------------------------------------------------

def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    ram_gib = None
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    ram_gib = round(int(line.split()[1]) / 1024**2, 1)
                    break
    load = None
    with contextlib.suppress(OSError):
        load = [round(x, 2) for x in os.getloadavg()]
    return {"nproc": os.cpu_count(), "ram_gib": ram_gib, "cpu": cpu, "loadavg": load,
            "python": platform.python_version()}


def loadavg() -> list[float] | None:
    with contextlib.suppress(OSError):
        return [round(x, 2) for x in os.getloadavg()]
    return None


def versions() -> dict[str, str]:
    out = {}
    for mod in ("torch", "ray", "torchrec", "dagster"):
        with contextlib.suppress(Exception):
            out[mod] = __import__(mod).__version__
    return out


def steady(history: list[dict[str, Any]], skip: int = 1) -> dict[str, Any]:
    """Samples-weighted throughput of epochs after the first ``skip`` (all epochs if too few)."""
    kept = history[skip:] if len(history) > skip else history
    samples = sum(float(e["samples"]) for e in kept)
    seconds = sum(float(e["epoch_s"]) for e in kept)
    return {"samples_per_s": round(samples / seconds, 1) if seconds > 0 else None,
            "epochs_used": [int(e["epoch"]) for e in kept], "samples": int(samples),
            "seconds": round(seconds, 3)}


# ---- repeats -------------------------------------------------------------------------------

PAIRS_ENV = "BENCH_PAIRS"         # run_all --pairs N: interleaved (ours, reference) repeats


def pairs() -> int:
    """How many interleaved (ours, reference) pairs a ratio is taken over (default 3, at least 1)."""
    try:
        return max(1, int(os.environ.get(PAIRS_ENV, "3")))
    except ValueError:
        return 3


def spread(values: list[float | None], nd: int = 3) -> dict[str, Any]:
    """Median, min and max of the values that exist (``None`` ones are left out and counted)."""
    import statistics

    xs = [float(v) for v in values if v is not None]
    if not xs:
        return {"median": None, "min": None, "max": None, "n": 0, "missing": len(values)}
    out = {"median": round(statistics.median(xs), nd), "min": round(min(xs), nd), "max": round(max(xs), nd),
           "n": len(xs)}
    if len(xs) < len(values):
        out["missing"] = len(values) - len(xs)
    return out


def fmt_spread(s: dict[str, Any] | None, nd: int = 3) -> str:
    if not s or s.get("median") is None:
        return "?"
    return f"{s['median']:.{nd}g} [{s['min']:.{nd}g}-{s['max']:.{nd}g}]"


def thread_counts() -> dict[str, Any]:
    """Threads this process uses (torch intra/inter-op, threadpoolctl's OpenMP/BLAS pools)."""
    from ads_ranking_pipelines.training.step_profile import thread_counts as counts

    return counts()


# ---- memory --------------------------------------------------------------------------------

def used_memory_bytes() -> int | None:
    """MemTotal - MemAvailable of the whole machine (what ``free`` calls used, page cache excluded)."""
    fields: dict[str, int] = {}
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/meminfo") as f:
            for line in f:
                key, rest = line.split(":", 1)
                fields[key] = int(rest.split()[0]) * 1024
    if "MemTotal" in fields and "MemAvailable" in fields:
        return fields["MemTotal"] - fields["MemAvailable"]
    return None


def process_memory(pid: int) -> tuple[int, int] | None:
    """(RSS, PSS) in bytes of one process, or None if it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            vals = {}
            for line in f:
                parts = line.split()
                if len(parts) >= 2 and parts[0] in ("Rss:", "Pss:"):
                    vals[parts[0]] = int(parts[1]) * 1024
        return vals.get("Rss:", 0), vals.get("Pss:", 0)
    except (OSError, ValueError):
        return None


class MemorySampler:
    """Samples the machine's used memory every ``interval_s`` and, every ``proc_interval_s``,
    the summed RSS and PSS of the processes whose command line or environment names
    ``marker`` (a run's temp dir: its CLI, Dagster, the local Ray cluster's nodes, raylets,
    workers and job drivers all carry it), from a background thread.

    ``baseline(seconds)`` first takes the idle figure (median over that long) before the run
    starts; ``result()`` gives the peaks, the peak above the baseline and how many processes
    were seen.
    """

    def __init__(self, marker: str, interval_s: float = 0.2, proc_interval_s: float = 0.5) -> None:
        import threading

        self.marker = marker
        self.interval_s = interval_s
        self.proc_interval_s = proc_interval_s
        self.idle: int | None = None
        self.peak_used = 0
        self.peak_rss = self.peak_pss = 0
        self.peak_procs = 0
        self.pids_seen: set[int] = set()
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def baseline(self, seconds: float = 3.0) -> None:
        import statistics

        xs = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            v = used_memory_bytes()
            if v is not None:
                xs.append(v)
            time.sleep(self.interval_s)
        self.idle = int(statistics.median(xs)) if xs else None

    def __enter__(self) -> "MemorySampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        from ads_ranking_pipelines.backends.processes import pids_mentioning

        next_procs = 0.0
        while not self._stop.is_set():
            used = used_memory_bytes()
            if used is not None:
                self.peak_used = max(self.peak_used, used)
                self.samples += 1
            now = time.monotonic()
            if now >= next_procs:
                next_procs = now + self.proc_interval_s
                pids = [p for p in pids_mentioning(self.marker) if p != os.getpid()]
                mem = [m for m in (process_memory(p) for p in pids) if m is not None]
                self.pids_seen.update(pids)
                self.peak_rss = max(self.peak_rss, sum(m[0] for m in mem))
                self.peak_pss = max(self.peak_pss, sum(m[1] for m in mem))
                self.peak_procs = max(self.peak_procs, len(mem))
            self._stop.wait(self.interval_s)

    def result(self) -> dict[str, Any]:
        gib = 1024 ** 3
        return {
            "machine_peak_above_idle_gib": round((self.peak_used - self.idle) / gib, 3) if self.idle else None,
            "machine_idle_used_gib": round(self.idle / gib, 3) if self.idle else None,
            "machine_peak_used_gib": round(self.peak_used / gib, 3),
            "processes_peak_pss_gib": round(self.peak_pss / gib, 3),
            "processes_peak_rss_gib": round(self.peak_rss / gib, 3),
            "processes_peak_count": self.peak_procs,
            "processes_seen": len(self.pids_seen),
            "samples": self.samples,
        }
