"""Processes on this machine, by PID: alive or not (a zombie counts as dead), which ones belong
to a local cluster (they name its temp dir), and an identity that a reused PID does not share."""

from __future__ import annotations

import os
import time


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child counts as dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def pids_mentioning(marker: str) -> list[int]:
    """PIDs whose command line or environment mentions ``marker`` (our cluster's temp dir)."""
    found = []
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        for name in ("cmdline", "environ"):
            try:
                with open(f"/proc/{entry}/{name}", "rb") as f:
                    if marker.encode() in f.read():
                        found.append(int(entry))
                        break
            except OSError:
                break
    return found


def wait_for_exit(marker: str, timeout_s: float, interval_s: float = 0.5) -> list[int]:
    """Wait until no process mentions ``marker``; returns those still there after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    left = pids_mentioning(marker)
    while left and time.monotonic() < deadline:
        time.sleep(interval_s)
        left = pids_mentioning(marker)
    return left


def process_start(pid: int) -> str:
    """An identity for the process ``pid`` that a reused PID does not share (its start time
    in clock ticks from /proc); "" when it does not exist or /proc is not there."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[19]


def process_alive(pid: int, start: str) -> bool:
    """Whether the process that had ``start`` (:func:`process_start`) as ``pid`` still runs."""
    if pid <= 0:
        return False
    if start:
        return process_start(pid) == start
    return pid_alive(pid)
