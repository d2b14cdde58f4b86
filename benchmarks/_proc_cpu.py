"""CPU time of this process and every process it starts, by what each process is (P4).

``ProcessCpu`` samples ``/proc`` every ``interval_s`` while it is entered: for this process and
each descendant (the local cluster's ``ray start`` node, the raylet and GCS under it, every Ray
worker the raylet starts, job drivers under their job supervisor), user + system CPU seconds
and the command line, which Ray sets to ``ray::<actor or task>`` in its workers. A process's
last sample is its figure, so one that exits between samples loses at most ``interval_s`` of
CPU: the totals are lower bounds.

``group_of`` sorts the processes into what they do in a daily run (``GROUPS``, first match
wins). Linux only: without ``/proc`` nothing is sampled and the result says so.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

# (group, substrings of the command line); the first group with a match takes the process
GROUPS = (
    ("ray_train_workers", ("ray::RayTrainWorker",)),
    ("ray_train_actors", ("ray::TrainController", "ray::PlacementGroupCleaner", "ray::SynchronizationActor",
                          "ray::DatasetManager", "ray::_AutoscalingCoordinatorActor", "ray::PreemptionWatcher")),
    ("our_actors", ("ray::DayFeed", "ray::ProgressBox")),      # the range's feed / the run's progress box
    ("job_supervisors", ("ray::JobSupervisor",)),
    ("job_drivers", ("ads_ranking_pipelines.ray_jobs.",)),
    ("ray_system", ("gcs_server", "raylet", "dashboard", "log_monitor", "monitor.py", "runtime_env",
                    "ray start", "ray::DashboardAgent", "ray::RuntimeEnvAgent", "ray::_StatsActor")),
    ("ray_data_and_other_workers", ("ray::", "default_worker.py")),
)
SELF = "this_process"       # the benchmark: Dagster's run, its executor and the resources


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds) of ``pid``, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def group_of(cmdline: str) -> str:
    for name, needles in GROUPS:
        if any(n in cmdline for n in needles):
            return name
    return "other"


class ProcessCpu:
    """``with ProcessCpu() as p: ...`` then ``p.result()`` (see the module docstring)."""

    def __init__(self, interval_s: float = 0.25) -> None:
        self.interval_s = interval_s
        self.root = os.getpid()
        self.cpu: dict[int, float] = {}        # pid -> last CPU seconds seen
        self.start_cpu: dict[int, float] = {}  # pid -> CPU seconds when first seen before the start
        self.label: dict[int, str] = {}        # pid -> the latest command line (Ray renames workers)
        self.done: list[tuple[int, str, float]] = []   # (pid, command line, CPU s) of exited ones
        self._seen: set[int] = set()          # pids looked at once (new ones: is it ours?)
        self._n = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="proc-cpu", daemon=True)
        self.wall_s = 0.0

    def __enter__(self) -> "ProcessCpu":
        self._t0 = time.perf_counter()
        self._sampling = os.path.isdir("/proc")
        if self._sampling:
            self._sample(initial=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._sampling:
            self._thread.join(timeout=5)
            self._sample()
        self.wall_s = time.perf_counter() - self._t0

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def _sample(self, initial: bool = False) -> None:
        """One pass: new pids (their parent, once), then the CPU time of every live descendant.
        Only new pids and the descendants are read, to keep the sampler's own cost small."""
        live = {int(n) for n in os.listdir("/proc") if n.isdigit()}
        self._seen &= live                     # a pid the kernel hands out again is new again
        new = {pid: s for pid in live - self._seen if (s := _stat(pid)) is not None}
        self._seen |= live
        added = True
        while added:                           # a child's pid can be lower than its parent's
            added = False
            for pid, (ppid, cpu) in new.items():
                if pid not in self.cpu and (ppid in self.cpu or pid == self.root):
                    self.cpu[pid] = cpu
                    if initial or pid == self.root:
                        self.start_cpu[pid] = cpu
                    added = True
        for pid in list(self.cpu):
            if pid not in live or (s := _stat(pid)) is None:
                self._finish(pid)
                continue
            self.cpu[pid] = s[1]
            label = self.label.get(pid, "")
            if not label.startswith("ray::") or label.startswith("ray::IDLE") or self._n % 8 == 0:
                if (line := _cmdline(pid)):
                    self.label[pid] = line
        self._n += 1

    def _finish(self, pid: int) -> None:
        """A process that exited: its last figure moves to ``done`` (its pid may come back)."""
        self.done.append((pid, self.label.pop(pid, ""), self.cpu.pop(pid) - self.start_cpu.pop(pid, 0.0)))

    def result(self) -> dict[str, Any]:
        if not self.cpu and not self.done:
            return {"error": "no /proc here: the processes' CPU time is measured on Linux only"}
        by_group: dict[str, float] = {}
        by_label: dict[str, float] = {}
        rows = self.done + [(pid, self.label.get(pid, ""), cpu - self.start_cpu.get(pid, 0.0))
                            for pid, cpu in self.cpu.items()]
        for pid, line, used in rows:
            group = SELF if pid == self.root else group_of(line)
            by_group[group] = by_group.get(group, 0.0) + used
            short = line.split()[0] if line.startswith("ray::") else group
            by_label[short] = by_label.get(short, 0.0) + used
        top = sorted(by_label.items(), key=lambda kv: -kv[1])[:15]
        return {"total_cpu_s": round(sum(by_group.values()), 2), "wall_s": round(self.wall_s, 2),
                "cpus": os.cpu_count(), "sample_interval_s": self.interval_s, "processes": len(rows),
                "by_group_cpu_s": {k: round(v, 2) for k, v in sorted(by_group.items(), key=lambda kv: -kv[1])},
                "top_cpu_s": {k: round(v, 2) for k, v in top}}
