"""Where the test suite's CPU goes: ``make test`` profiled by test and by kind of process.

    python -m benchmarks.suite_cpu                      # make test, then the tables
    python -m benchmarks.suite_cpu --out /tmp/prof -- TEST_WORKERS=2 PYTEST_ARGS="-k kuberay"

Not a benchmark (``make bench`` does not run it, nothing asserts on it): the measurement behind
the suite's time budget (issue 26), in ``DESIGN_MEASUREMENTS.md``. The suite is CPU-bound on a
2-core machine (3 xdist processes keep the cores ~96 % busy), so its time is its CPU seconds /
2, and what has to shrink is found by charging every CPU second to a test.

It runs ``make test`` with this module as a pytest plugin (each test's start and end, per
pytest process, appended to a file) while a thread samples every process of the machine every
``--interval`` seconds with psutil: pid, parent, start time, command line (Ray renames its
workers ``ray::<actor>``) and user + system CPU. Afterwards each process started during the run
is charged to the test that its nearest pytest-process ancestor was running when it started:
a Ray worker to the raylet, to ``ray start``, to the test (or the CLI process, or the Dagster
run process it started). A module-scoped fixture's cluster, or a pool of rank processes kept
for later calls, is charged to the test that started it; the Ray workers such a cluster starts
later to the tests they started under. A process whose parent chain is lost (re-parented to
init before it was first seen) is "unattributed". CPU between a process's last sample and its
exit is lost, so the figures are lower bounds; the machine's busy core-seconds (``/proc/stat``) are printed
beside them.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

TIMELOG_ENV = "SUITE_CPU_TIMELOG"
# (kind, substrings of the command line); first match wins; Ray workers are "ray::<name>"
KINDS = (
    ("ray node: gcs_server", ("gcs_server",)),
    ("ray node: dashboard", ("dashboard/dashboard.py", "ray-dashboard-", "multiprocessing.forkserver",
                             "multiprocessing.resource_tracker")),
    ("ray node: ray start", ("bin/ray start",)),
    ("ray node: log/autoscaler monitor", ("log_monitor.py", "autoscaler/_private/monitor.py")),
    ("ray node: ray client server", ("ray.util.client.server",)),
    ("job driver (ray_jobs)", ("ads_ranking_pipelines.ray_jobs.",)),
    ("ads-ranking CLI process", ("ads_ranking_pipelines.cli.main", "bin/ads-ranking")),
    ("dagster subprocess", ("dagster",)),
    ("chromium", ("chromium", "playwright")),
    ("pytest processes", ("sys.stdin.readline", "pytest")),
    ("multiprocessing children (torch ranks)", ("multiprocessing.spawn",)),
    ("python -c (a test's script)", (" -c ",)),
)


# ---- the pytest plugin (loaded with -p benchmarks.suite_cpu) ------------------------------------
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any):
    t0 = time.time()
    yield
    if (path := os.environ.get(TIMELOG_ENV)):
        with open(path, "a") as f:
            f.write(json.dumps([os.getpid(), item.nodeid, t0, time.time()]) + "\n")


# ---- sampling --------------------------------------------------------------------------------
class Sampler:
    """Every process's parent, start, command lines and CPU, sampled in a thread."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.procs: dict[str, dict[str, Any]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="suite-cpu", daemon=True)

    def __enter__(self) -> "Sampler":
        self.t0 = time.time()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        import psutil

        me = os.getpid()
        while not self._stop.wait(self.interval_s):
            for p in psutil.process_iter(["pid", "ppid", "cmdline", "cpu_times", "create_time"]):
                info = p.info
                if info["pid"] == me or info["cpu_times"] is None or info["create_time"] < self.t0 - 1:
                    continue
                self._record(info)

    def _record(self, info: dict[str, Any]) -> None:
        key = f"{info['pid']}-{info['create_time']}"
        cpu = info["cpu_times"].user + info["cpu_times"].system
        line = " ".join(info["cmdline"] or [])[:240]
        entry = self.procs.setdefault(key, {"pid": info["pid"], "ppid": info["ppid"],
                                            "start": info["create_time"], "cpu": 0.0, "lines": []})
        entry["cpu"] = max(entry["cpu"], cpu)
        if line and line not in entry["lines"] and len(entry["lines"]) < 8:
            entry["lines"].append(line)


def busy_core_s() -> tuple[float, float]:
    """(busy, idle) core-seconds since boot, from /proc/stat."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    hz = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / hz, idle / hz


# ---- charging processes to tests ---------------------------------------------------------------
def kind_of(lines: list[str]) -> str:
    text = " | ".join(lines)
    names = [(w.split("(")[0].split() or [""])[0] for w in text.split("ray::")[1:]]
    named = [n for n in names if n and n != "IDLE"]
    if names or "default_worker.py" in text:
        return "ray worker: " + (named[0].split(".")[0] if named else "IDLE")
    if "/raylet " in f"{lines[0]} " and "default_worker" not in text:
        return "ray node: raylet"
    for kind, needles in KINDS:
        if any(n in text for n in needles):
            return kind
    return "other: " + " ".join(lines[0].split()[:2])[-60:]


class Charges:
    """Which test each process started under (see the module docstring)."""

    def __init__(self, procs: dict[str, dict[str, Any]], tests: list[list[Any]]) -> None:
        self.runs: dict[int, list[tuple[float, float, str]]] = defaultdict(list)
        for pid, nodeid, t0, t1 in tests:
            self.runs[pid].append((t0, t1, nodeid))
        for spans in self.runs.values():
            spans.sort()
        self.starts = {pid: [s[0] for s in spans] for pid, spans in self.runs.items()}
        self.by_pid: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for entry in procs.values():
            self.by_pid[entry["pid"]].append(entry)

    def _alive(self, pid: int, t: float) -> dict[str, Any] | None:
        """The process that had ``pid`` at time ``t`` (pids are reused)."""
        older = [e for e in self.by_pid.get(pid, []) if e["start"] <= t + 1]
        return max(older, key=lambda e: e["start"]) if older else None

    def test_of(self, entry: dict[str, Any]) -> str:
        cur = entry
        for _ in range(30):
            if cur is None or cur["pid"] in self.runs:
                break
            cur = self._alive(cur["ppid"], entry["start"])
        if cur is None or cur["pid"] not in self.runs:
            return "(unattributed)"
        if cur is entry:
            return "(the pytest processes themselves)"
        spans = self.runs[cur["pid"]]
        i = bisect.bisect_right(self.starts[cur["pid"]], entry["start"]) - 1
        return spans[i][2] if i >= 0 else "(collection, before the first test)"


def tables(procs: dict[str, dict[str, Any]], tests: list[list[Any]]) -> dict[str, Counter]:
    charges = Charges(procs, tests)
    by_kind, by_file, by_test, count = Counter(), Counter(), Counter(), Counter()
    for entry in procs.values():
        kind, test = kind_of(entry["lines"] or [""]), charges.test_of(entry)
        by_kind[kind] += entry["cpu"]
        count[kind] += 1
        by_test[test] += entry["cpu"]
        by_file[test.split("::")[0].rsplit("/", 1)[0] + "/" if "::" in test else test] += entry["cpu"]
    return {"by kind of process (CPU s, processes)": Counter({f"{k} ({count[k]})": v for k, v in by_kind.items()}),
            "by test directory": by_file, "by test": by_test}


def print_tables(result: dict[str, Counter], top: int) -> None:
    for title, counter in result.items():
        print(f"\n== {title}: {sum(counter.values()):.0f} CPU-s")
        for name, cpu in counter.most_common(top):
            print(f"{cpu:8.1f}  {name}")


# ---- the command ---------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="keep the raw samples and test times here")
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("make_args", nargs="*", help="after --: variables for make test")
    args = parser.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="suite-cpu-"))
    out.mkdir(parents=True, exist_ok=True)
    timelog = out / "tests.jsonl"
    timelog.unlink(missing_ok=True)
    env = {**os.environ, TIMELOG_ENV: str(timelog),
           "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} -p benchmarks.suite_cpu".strip()}
    busy0, idle0, t0 = *busy_core_s(), time.monotonic()
    with Sampler(args.interval) as sampler:
        rc = subprocess.call(["make", "test", *args.make_args], env=env)
    busy1, idle1 = busy_core_s()
    (out / "processes.json").write_text(json.dumps(sampler.procs))
    tests = [json.loads(line) for line in timelog.read_text().splitlines()] if timelog.exists() else []
    print(f"\nmake test: rc {rc}, {time.monotonic() - t0:.0f} s wall, {busy1 - busy0:.0f} busy / "
          f"{idle1 - idle0:.0f} idle core-s (/proc/stat); {len(tests)} tests; raw data in {out}")
    print_tables(tables(sampler.procs, tests), args.top)
    return rc


if __name__ == "__main__":
    sys.exit(main())
